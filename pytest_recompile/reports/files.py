"""The files the plugin writes (the JSON report, the Markdown summary, the baseline):
checked writable at start-up, written atomically at the end."""

from __future__ import annotations

import contextlib
import json
import os
import stat
import tempfile

from ..model.errors import InputError


class OutputFileError(InputError):
    """A report or baseline path that cannot be used (a usage error, said at start-up)."""


def write_json_atomic(path: str, data: object, *, rows: bool = False) -> None:
    """Write ``data`` as JSON to ``path`` (see :func:`write_text_atomic`), indented; with
    ``rows``, as :func:`json_rows` lays it out."""
    text = json_rows(data) if rows else json.dumps(data, indent=2, sort_keys=False)
    write_text_atomic(path, text + "\n")


def json_rows(data: object) -> str:
    """A JSON object with each top-level field on a line of its own, and each item of a list
    field (a report's tests, its fixtures) on one line: a diff names the tests that changed,
    and the writing runs in json's C encoder (a 10,000-test report: 0.3 s, not the 6 s of
    ``indent=2``, which only the Python encoder does)."""
    if not isinstance(data, dict):
        return json.dumps(data)
    fields = []
    for key, value in data.items():
        if isinstance(value, list) and value:
            items = ",\n".join(f"    {json.dumps(item)}" for item in value)
            fields.append(f"  {json.dumps(key)}: [\n{items}\n  ]")
        else:
            fields.append(f"  {json.dumps(key)}: {json.dumps(value)}")
    return "{\n" + ",\n".join(fields) + "\n}"


def write_text_atomic(path: str, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary file and a rename, creating missing
    directories as ``--junitxml`` does.

    The file gets the mode an ordinary ``open()`` would give it (the umask's, or the mode of
    the file it replaces), not the temporary file's 0600: artifact uploaders running as
    another user must be able to read it. A failure at any point (an unserialisable value, a
    full disk) leaves the previous file as it was, and no temporary file behind.
    """
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    handle, temporary = tempfile.mkstemp(prefix=".recompile-", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(handle, "w", encoding="utf-8", newline="\n") as out:
            out.write(text)
            out.flush()
            os.fsync(out.fileno())
        os.chmod(temporary, _new_file_mode(path))
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary)
        raise


def _new_file_mode(path: str) -> int:
    """The mode of the file at ``path`` if there is one, else 0666 less the umask."""
    try:
        return stat.S_IMODE(os.stat(path).st_mode)
    except OSError:
        pass
    return 0o666 & ~_umask()


def _umask() -> int:
    """The process's umask: from /proc where Linux gives it, else by setting and restoring
    it (the only portable way, briefly process-wide)."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0)
    os.umask(mask)
    return mask


def check_writable(path: str, where: str) -> None:
    """Fail early for a report or baseline path that cannot be written; missing directories
    are fine (they are created when the file is written) if the nearest existing one is
    writable."""
    if os.path.isdir(path):
        raise OutputFileError(f"{where}: {path} is a directory; give a file path")
    directory = os.path.dirname(os.path.abspath(path))
    while not os.path.exists(directory):
        parent = os.path.dirname(directory)
        if parent == directory:  # a drive or share that does not exist
            raise OutputFileError(f"{where}: cannot create a directory for {path}: no such drive")
        directory = parent
    if not os.path.isdir(directory):
        raise OutputFileError(
            f"{where}: cannot create a directory for {path}: {directory} is a file"
        )
    if not os.access(directory, os.W_OK):
        raise OutputFileError(f"{where}: {directory} is not writable, so {path} cannot be written")
