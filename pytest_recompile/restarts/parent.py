"""The parent's side of a warm-start check: two fresh children, one cache directory, a verdict.

Each child is a new interpreter (``subprocess``, never a fork: a fork inherits what was fixed
at import or start, the pid, unseeded randomness, ``id()``, which is what a restart changes),
started in the directory pytest was started in, with the parent's environment less the
plugin's own contract with a gated test's children (the spool, the start-up hook), plus
``TORCHINDUCTOR_CACHE_DIR`` and ``TRITON_CACHE_DIR`` in a new, empty directory of the test's
own, removed afterwards. It runs that test alone with the parent's option values (handed over
as pytest-xdist hands them to its workers, less the ones that select tests, distribute them,
write reports or stop at a failure), the parent's torch thread count and, with them,
pytest-randomly's seed. ``PYTHONHASHSEED`` is whatever the parent's environment says: a
restart does not fix it either.
"""

from __future__ import annotations

import json
import os
import pickle
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from typing import Any

from ..children.parent import STARTUP
from ..model.budget import WarmStartRule
from ..model.names import SHADOWED_ENV, SPOOL_ENV, WARM_CHILD_ENV, WARM_START_DIR_ENV
from ..model.results import WarmStartResult
from ..model.warm_start import ChildRun, child_run, judge

# option values a child never takes from the parent, and what it takes instead
_OVERRIDES: dict[str, Any] = {
    # one test, in this process: no distribution (pytest-xdist), no loop on failure
    "dist": "no",
    "tx": [],
    "numprocesses": None,
    "maxprocesses": None,
    "looponfail": False,
    # no selection of its own: the test is named
    "keyword": "",
    "markexpr": "",
    "deselect": [],
    "lf": False,
    "failedfirst": False,
    "newfirst": False,
    "stepwise": False,
    "stepwise_skip": False,
    "last_failed_no_failures": "all",
    "collectonly": False,
    "exitfirst": False,
    "maxfail": 0,
    # no reports of its own, no debugger
    "xmlpath": None,
    "report_log": None,
    "htmlpath": None,
    "json_report": False,
    "usepdb": False,
    "trace": False,
    "pastebin": None,
    "durations": None,
    "cacheclear": False,
    "cacheshow": None,
    "showfixtures": False,
    "show_fixtures_per_test": False,
    "setuponly": False,
    "setupshow": False,
    "setupplan": False,
    "markers": False,
    "help": False,
    "version": False,
    "reruns": 0,  # pytest-rerunfailures: a warm run that failed once is not a warm start
    "forked": False,  # pytest-forked: the test would run in a grandchild, unseen
    "splits": None,  # pytest-split: the named test is the whole run
    "group": None,
    "benchmark_json": None,  # pytest-benchmark's files are the parent's
    "benchmark_save": None,
    "benchmark_autosave": False,
    # the plugin's own outputs are the parent's; a child runs no warm-start check itself
    "recompile_report": None,
    "recompile_report_md": None,
    "recompile_github": "off",
    "recompile_durations": None,
    "recompile_trace": None,
    "recompile_baseline_update": False,
    "recompile_baseline_prune": False,
    "recompile_warm_start": "off",
    # a fresh process's verdict on the caches, not on recompiles: the parent gated those
    "recompile_mode": "report-only",
}
# ini options a child must not read from the user's ini file (an option left unset there
# falls back to its ini twin): the plugin's outputs, pytest's log file; and addopts, whose
# values arrive with the parent's option values already
_INI_OFF = (
    "addopts=",
    "recompile_report=",
    "recompile_report_md=",
    "recompile_trace=",
    "recompile_durations=",
    "recompile_github=off",
    "recompile_warm_start=off",
    "recompile_mode=report-only",
)
# options that shape the start-up (plugins, ini file, conftests): given on the command line
_EARLY = {
    "inifilename": "-c",
    "rootdir": "--rootdir",
    "confcutdir": "--confcutdir",
    "importmode": "--import-mode",
}
_LEAVE = {"file_or_dir", "plugins", "override_ini", "basetemp", "noconftest", *_EARLY}


class Restarts:
    """The session's warm-start checks: each marked test's two children, one at a time.

    Given plain values (no pytest): the parent's option values (``vars(config.option)``),
    the directory pytest was started in, the root paths are shown from, the limit."""

    def __init__(self, options: dict[str, Any], started_in: str, root: str, timeout: float) -> None:
        self.started_in = started_in
        self.root = root
        self.timeout = timeout
        self._options = _taken(options)
        self._args = _arguments(options)

    def check(self, path: str, nodeid: str, rule: WarmStartRule) -> WarmStartResult:
        """Run the test (its file, its node id) cold, then warm, each in a fresh process;
        judge the warm run."""
        folder = tempfile.mkdtemp(prefix="pytest-recompile-warm-")
        try:
            options = os.path.join(folder, "options.pickle")
            with open(options, "wb") as f:
                f.write(self._options)
            environ = self.environment(os.path.join(folder, "cache"))
            _, _, rest = nodeid.partition("::")
            target = f"{path}::{rest}" if rest else path  # absolute: any rootdir
            cold = self._run("cold", target, folder, options, environ)
            if cold["outcome"] != "passed":
                warm = child_run("not run", "the cold run gave nothing to start warm from")
            else:
                warm = self._run("warm", target, folder, options, environ)
            return judge(cold, warm, rule, self.root)
        finally:
            shutil.rmtree(folder, ignore_errors=True)

    @staticmethod
    def environment(cache: str) -> dict[str, str]:
        """The parent's environment, less the gate's contract with its test's children,
        pytest-xdist's worker variables and ``PYTEST_ADDOPTS`` (its values arrive with the
        parent's option values), with the test's own cache directory."""
        environ = dict(os.environ)
        for name in (SPOOL_ENV, SHADOWED_ENV, "PYTEST_CURRENT_TEST", "PYTEST_ADDOPTS"):
            environ.pop(name, None)
        for name in [n for n in environ if n.startswith("PYTEST_XDIST_")]:
            environ.pop(name)
        paths = [p for p in environ.get("PYTHONPATH", "").split(os.pathsep) if p and p != STARTUP]
        if paths:
            environ["PYTHONPATH"] = os.pathsep.join(paths)
        else:
            environ.pop("PYTHONPATH", None)
        environ["TORCHINDUCTOR_CACHE_DIR"] = os.path.join(cache, "inductor")
        environ["TRITON_CACHE_DIR"] = os.path.join(cache, "triton")
        shared = os.path.join(cache, "shared")
        os.makedirs(shared, exist_ok=True)
        environ[WARM_START_DIR_ENV] = shared
        return environ

    def _run(
        self, name: str, target: str, folder: str, options: str, environ: dict[str, str]
    ) -> ChildRun:
        result = os.path.join(folder, f"{name}.json")
        output = os.path.join(folder, f"{name}.out")
        basetemp = os.path.join(folder, f"{name}-tmp")
        spec = {"options": options, "result": result, "threads": _threads()}
        spec_path = os.path.join(folder, f"{name}.spec.json")
        with open(spec_path, "w", encoding="utf-8") as f:
            json.dump(spec, f)
        command = [sys.executable, "-m", "pytest", "-p", "pytest_recompile.restarts.child"]
        command += [*self._args, "-q", f"--basetemp={basetemp}", target]
        started = time.perf_counter()
        with open(output, "wb") as out:
            process = subprocess.Popen(
                command,
                cwd=self.started_in,
                env={**environ, WARM_CHILD_ENV: spec_path},
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=hasattr(os, "setsid"),  # its own children are stopped too
            )
            try:
                code = process.wait(timeout=self.timeout)
            except subprocess.TimeoutExpired:
                _stop(process)
                return child_run(
                    "timed out",
                    f"stopped after {self.timeout:g} s (--recompile-warm-start-timeout)\n"
                    + _tail(output),
                    time.perf_counter() - started,
                )
            except BaseException:  # interrupted (Ctrl-C, a per-test timeout): no orphan
                _stop(process)
                raise
        seconds = time.perf_counter() - started
        try:
            with open(result, encoding="utf-8") as f:
                run: ChildRun = json.load(f)
        except (OSError, ValueError):
            return child_run("crashed", f"exit code {code}\n{_tail(output)}", seconds)
        run["seconds"] = round(seconds, 3)
        if run["outcome"] != "passed" and not run["error"]:
            run["error"] = _tail(output)
        return run


def _taken(options: dict[str, Any]) -> bytes:
    """The parent's option values a child takes, pickled (each value that does not pickle
    is left to the child's own default)."""
    taken: dict[str, Any] = {}
    for name, value in options.items():
        if name in _LEAVE or name in _OVERRIDES:
            continue
        try:
            pickle.dumps(value)
        except Exception:
            continue
        taken[name] = value
    taken.update({k: v for k, v in _OVERRIDES.items() if k in options})
    return pickle.dumps(taken)


def _arguments(options: dict[str, Any]) -> list[str]:
    """What shapes the child pytest's start-up, given on its command line: the parent's
    plugins, ini file, root, conftest handling and ini overrides."""
    args = []
    for plugin in options.get("plugins") or []:
        args += ["-p", str(plugin)]
    args += ["-p", "no:cacheprovider"]  # never the user's last-failed state
    for name, flag in _EARLY.items():
        value = options.get(name)
        if value:
            args += [flag, str(value)]
    if options.get("noconftest"):
        args.append("--noconftest")
    for override in options.get("override_ini") or []:
        args += ["-o", str(override)]
    off = [*_INI_OFF, *(["log_file="] if "log_file" in options else [])]
    for override in off:  # after the user's: the last one given wins
        args += ["-o", override]
    return args


def _threads() -> int | None:
    """The parent's torch thread count (torch imported: a marked test ran)."""
    torch = sys.modules.get("torch")
    return int(torch.get_num_threads()) if torch is not None else None


def _stop(process: subprocess.Popen[bytes]) -> None:
    try:
        if hasattr(os, "killpg"):
            os.killpg(process.pid, signal.SIGKILL)
        else:  # pragma: no cover
            process.kill()
    except OSError:
        pass
    process.wait()


def _tail(path: str, lines: int = 30) -> str:
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return "".join(f.readlines()[-lines:])
    except OSError:
        return ""
