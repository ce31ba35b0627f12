"""torch's structured trace (what ``TORCH_TRACE`` writes and tlparse reads), captured into a
file of the plugin's own while a block runs.

torch writes a structured record (``dynamo_start``, guards, graphs, ``compilation_metrics``...)
only while its trace logger has a handler: ``trace_structured`` checks ``trace_log.handlers``,
and logs at DEBUG on a logger that never propagates. A capture adds one handler, formatted as
torch's own ``TORCH_TRACE`` handler formats, with the logger at DEBUG and not propagating, and
puts back the handlers, level and propagation it found when it stops (torch's own lazy
``TORCH_TRACE`` handler removes itself at the first record when no trace directory is set: it
is put back too, as it was found).
"""

from __future__ import annotations

import functools
import logging
import os
from dataclasses import dataclass
from typing import Any

_TRACE_LOGGER = "torch.__trace"


@functools.cache
def missing() -> str | None:
    """What this torch lacks for a capture (None: it has all of it), decided once."""
    try:
        from torch._logging import _internal, structured
    except ImportError as exc:
        return f"torch._logging ({exc})"
    needed = {
        "torch._logging._internal.trace_log": getattr(_internal, "trace_log", None),
        "torch._logging._internal.TorchLogsFormatter": getattr(
            _internal, "TorchLogsFormatter", None
        ),
        "torch._logging.structured.INTERN_TABLE": getattr(structured, "INTERN_TABLE", None),
    }
    lacking = [name for name, value in needed.items() if value is None]
    if lacking:
        return ", ".join(lacking)
    try:
        _internal.TorchLogsFormatter(trace=True)
    except TypeError as exc:  # a formatter without the trace form
        return f"TorchLogsFormatter(trace=True) ({exc})"
    return None


class _OwnProcessHandler(logging.FileHandler):
    """A file handler that writes only in the process that opened it: a forked child of the
    test inherits the logger, and its records would interleave with the parent's."""

    def __init__(self, path: str) -> None:
        super().__init__(path, mode="w", encoding="utf-8", delay=True)
        self.pid = os.getpid()

    def emit(self, record: logging.LogRecord) -> None:
        if os.getpid() == self.pid:
            super().emit(record)


@dataclass
class Capture:
    """One capture: the file it writes, and the logger's state it found."""

    path: str
    handler: logging.Handler
    handlers: list[logging.Handler]
    level: int
    propagate: bool

    @property
    def wrote(self) -> bool:
        """Whether torch wrote a record (the file is created at the first one)."""
        return os.path.exists(self.path)

    def stop(self) -> None:
        """Detach the handler, close the file and put the logger back as it was found."""
        logger = logging.getLogger(_TRACE_LOGGER)
        try:
            self.handler.close()
        finally:
            added = [h for h in logger.handlers if h not in self.handlers and h is not self.handler]
            logger.handlers = [*self.handlers, *added]  # what the block added itself stays
            logger.setLevel(self.level)
            logger.propagate = self.propagate


def start(path: str) -> Capture:
    """Capture torch's structured trace into ``path`` until :meth:`Capture.stop`."""
    from torch._logging import _internal

    logger = _internal.trace_log
    handler = _OwnProcessHandler(path)
    handler.setFormatter(_internal.TorchLogsFormatter(trace=True))
    capture = Capture(path, handler, list(logger.handlers), logger.level, logger.propagate)
    logger.setLevel(logging.DEBUG)  # torch's own level for it; a user may have changed it
    logger.propagate = False  # never into the root logger's handlers (pytest's capture)
    logger.addHandler(handler)
    return capture


def header() -> str:
    """The records a trace file starts with that torch writes once per process: its string
    table (file names in stacks are numbers into it). A kept capture starts with them, so
    tlparse resolves every number, whichever test interned the string first."""
    from torch._logging import _internal, structured

    formatter: logging.Formatter = _internal.TorchLogsFormatter(trace=True)
    lines = [
        formatter.format(_record({"str": [text, number]}, structured.__file__))
        for text, number in list(structured.INTERN_TABLE.items())
    ]
    return "".join(f"{line}\n" for line in lines)


def _record(metadata: dict[str, Any], pathname: str) -> logging.LogRecord:
    return logging.makeLogRecord(
        {
            "name": _TRACE_LOGGER,
            "levelno": logging.DEBUG,
            "levelname": "DEBUG",
            "pathname": pathname,
            "lineno": 0,
            "msg": "",
            "args": (),
            "metadata": metadata,
            "payload": None,
        }
    )
