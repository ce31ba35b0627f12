"""Settings: the command-line and ini options of one run, declared (each ``--recompile-*``
flag with its ini twin, for ``pytest_addoption``), read and checked once; and the stash keys
that carry per-run and per-test state (no torch import).

Declared and read in one module: every pytest run with the plugin installed imports the
modules of its start-up, and pytest loads an installed plugin's modules through its
assertion-rewriting hook, which reads a module's cached bytecode with ``marshal.load`` from
the open file, ten times the cost of Python's own loader: about 0.8 M instructions a module
and 0.15 M a kilobyte of bytecode (benchmark `startup`). What only a run that asks for something
runs (the files' checks, the bare flag's rewriting) lives in the modules that run imports."""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

import pytest

from .model.names import GITHUB_MODES, IF_DISABLED, MODES, PREFIX, PROCESS_MODES

# The budget module is imported where a count is given, the report and baseline writers where a file
# is asked for: a run that asks for nothing never loads them.
if TYPE_CHECKING:
    from .model.budget import Budget, GuardBaseline, Rule
    from .testrun import TestRun

SETTINGS_KEY: pytest.StashKey[Settings] = pytest.StashKey()
BUDGET_KEY: pytest.StashKey[Budget | None] = pytest.StashKey()
RUN_KEY: pytest.StashKey[TestRun] = pytest.StashKey()  # the gate's, per test it follows

WARM_START_TIMEOUT = 900  # seconds: a cold Inductor compile of a real model takes minutes

BARE_FLAG_HINT = (
    "a bare --recompile-budget is a budget of 0, and a word after it that is not an integer is "
    "a test path; write --recompile-budget=N for another budget"
)


class Settings:
    """One run's options, read and checked once. Frozen: ``replace`` makes a changed copy.

    A plain class rather than a dataclass: every pytest run with the plugin installed builds
    this class, asked for or not, and building a frozen dataclass of these fields costs about
    8 M instructions, a third of the plugin's whole start-up cost (benchmark `startup`). The class
    attributes are the defaults; an instance holds what differs."""

    default: Rule[int] | None = None  # every test's budget; None: only marked tests are gated
    mode: str = "fail-fast"
    keep_caches: bool = False
    fullgraph: str | None = None  # "--recompile-fullgraph" when every gated test gets fullgraph
    report: str | None = None  # where the JSON report goes
    report_md: str | None = None  # where the Markdown summary goes
    github: bool = False  # GitHub Actions annotations and job summary
    baseline: str | None = None  # the baseline file
    baseline_counts: Mapping[str, int] = MappingProxyType({})  # nodeid -> recompiles
    # nodeid -> function -> its most guards and its guards on the user's values
    baseline_guards: Mapping[str, Mapping[str, GuardBaseline]] = MappingProxyType({})
    # nodeid -> function -> its compile work's ratcheted counts (model/work.py)
    baseline_work: Mapping[str, Mapping[str, Mapping[str, int]]] = MappingProxyType({})
    # percent each count of compile work may grow past the baseline's, by measure (None: the
    # defaults, model/work.py's DEFAULT_TOLERANCE)
    work_tolerance: Mapping[str, int] | None = None
    baseline_update: bool = False  # write the baseline from this run instead of comparing
    baseline_prune: bool = False  # the update drops the entries of tests that did not run
    # "baseline from torch 2.14.1; this run 2.15.0" when the baseline was taken on another torch
    baseline_note: str | None = None
    processes: bool = True  # record and judge compiles in the test's child processes
    if_disabled: str = "fail"  # a gate whose torch.compile was switched off: fail, or warn
    max_guards: Rule[int] | None = None  # every gated test's guards per cache entry
    durations: int | None = None  # --recompile-durations=N: list the N slowest (0: all)
    trace: str | None = None  # where the structured traces of tests that broke the gate go
    certify_marks: bool = True  # certify the domains tests declare with mark_dynamic(min, max)
    warm_start: bool = True  # run warm_start tests cold, then warm, in fresh processes
    warm_start_timeout: int = WARM_START_TIMEOUT  # seconds each of those processes may take

    def __init__(self, **values: Any) -> None:
        unknown = set(values) - set(Settings.__annotations__)
        if unknown:
            raise TypeError(f"Settings has no {', '.join(sorted(unknown))}")
        self.__dict__.update(values)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"Settings are frozen: use replace(), not .{name} = ...")

    def replace(self, **changes: Any) -> Settings:
        """A copy with ``changes`` (as ``dataclasses.replace``)."""
        return Settings(**{**self.__dict__, **changes})

    def __repr__(self) -> str:
        shown = ", ".join(f"{name}={getattr(self, name)!r}" for name in Settings.__annotations__)
        return f"Settings({shown})"

    @classmethod
    def from_config(cls, config: pytest.Config) -> Settings:
        default = _default_budget(config)
        mode = _choice(config, "recompile_mode", MODES)
        keep = bool(
            config.getoption("recompile_keep_caches") or config.getini("recompile_keep_caches")
        )
        fullgraph = None
        if config.getoption("recompile_fullgraph"):
            fullgraph = "--recompile-fullgraph"
        elif config.getini("recompile_fullgraph"):
            fullgraph = "recompile_fullgraph (ini)"
        settings = cls(
            default=default,
            max_guards=_max_guards(config),
            processes=_choice(config, "recompile_processes", PROCESS_MODES) == "on",
            if_disabled=_choice(config, "recompile_if_disabled", IF_DISABLED),
            mode=mode,
            keep_caches=keep,
            fullgraph=fullgraph,
            github=_github(config),
            durations=_durations(config),
            certify_marks=_choice(config, "recompile_certify_marks", PROCESS_MODES) == "on",
            warm_start=_choice(config, "recompile_warm_start", PROCESS_MODES) == "on",
            warm_start_timeout=_warm_start_timeout(config),
            work_tolerance=_work_tolerance(config),
        )
        return _with_files(config, settings.replace(trace=_trace_dir(config)))

    @property
    def gates_every_test(self) -> bool:
        """An option gates every test (not only marked ones): a default budget, a most
        guards per entry, fullgraph."""
        return self.default is not None or self.max_guards is not None or bool(self.fullgraph)

    def acting_on_gated_tests(self) -> list[str]:
        """The options given that change only how gated tests are run or shown (each as
        given), so that a run that gates no test says they did nothing."""
        given = []
        if self.mode != Settings.mode:
            given.append(f"--recompile-mode={self.mode}")
        if self.keep_caches:
            given.append("--recompile-keep-caches")
        if not self.processes:
            given.append("--recompile-processes=off")
        if self.if_disabled != Settings.if_disabled:
            given.append(f"--recompile-if-disabled={self.if_disabled}")
        if self.durations is not None:
            given.append(f"--recompile-durations={self.durations}")
        if self.trace is not None:
            given.append("--recompile-trace")
        if not self.certify_marks:
            given.append("--recompile-certify-marks=off")
        if not self.warm_start:
            given.append("--recompile-warm-start=off")
        return given

    @property
    def enforced(self) -> bool:
        """Broken rules fail tests (every mode but report-only)."""
        return self.mode != "report-only"

    @property
    def writes_files(self) -> bool:
        return self.report is not None or self.baseline is not None or self.report_md is not None

    def header(self) -> str:
        from .reports.terminal import gate_header  # only once gated: start-up stays light

        return gate_header(
            self.default,
            self.max_guards,
            self.mode,
            self.keep_caches,
            bool(self.fullgraph),
            self.processes,
        )


def require_torch() -> None:
    """The gate is asked for: torch missing or too old is a usage error now, before any test
    runs (read from its metadata; torch is not imported)."""
    from ._torch import versions

    try:
        versions.check_version()
    except versions.TorchUnsupported as exc:
        raise pytest.UsageError(str(exc)) from None


def _default_budget(config: pytest.Config) -> Rule[int] | None:
    """--recompile-budget=N, else the ini option recompile_budget, else None."""
    return _count_option(config, "budget")


def _warm_start_timeout(config: pytest.Config) -> int:
    """--recompile-warm-start-timeout=SECONDS, else its ini twin, else the default."""
    found = _count_option(config, "warm_start_timeout")
    if found is None:
        return WARM_START_TIMEOUT
    if found.value < 1:
        raise pytest.UsageError(
            f"{PREFIX} {found.source.replace('=0', '')}: expected a whole number of seconds, "
            "1 or more, that each warm-start child process may run; got 0"
        )
    return found.value


def warm_start_timeout_option(text: str) -> int:
    """argparse ``type=`` of --recompile-warm-start-timeout."""
    from .model.budget import count_value

    value = count_value(text)
    if value is None or value < 1:
        raise argparse.ArgumentTypeError(
            f"{PREFIX} --recompile-warm-start-timeout: expected a whole number of seconds, "
            f"1 or more, that each warm-start child process may run; got {text!r}"
        )
    return value


def _work_tolerance(config: pytest.Config) -> Mapping[str, int] | None:
    """--recompile-work-tolerance=SPEC, else its ini twin, over the defaults; a bad SPEC is a
    usage error naming what is accepted."""
    text = config.getoption("recompile_work_tolerance")
    where = "--recompile-work-tolerance"
    if text is None:
        text = str(config.getini("recompile_work_tolerance") or "")
        where = "ini option recompile_work_tolerance"
    if not text.strip():
        return None
    from .model.budget import BudgetError
    from .model.work import parse_tolerance

    try:
        return MappingProxyType(parse_tolerance(text, f"{PREFIX} {where}"))
    except BudgetError as exc:
        raise pytest.UsageError(str(exc)) from None


def _max_guards(config: pytest.Config) -> Rule[int] | None:
    """--recompile-max-guards=N, else the ini option recompile_max_guards, else None."""
    return _count_option(config, "max_guards")


def _count_option(config: pytest.Config, name: str) -> Rule[int] | None:
    """--recompile-NAME=N (argparse checked it), else its ini twin recompile_NAME, an int or a
    string (see :func:`add_int_ini`), checked here; else None."""
    ini_name, flag = f"recompile_{name}", f"--recompile-{name.replace('_', '-')}"
    value: int | str | None = config.getoption(ini_name)
    if isinstance(value, str):  # --recompile-budget: checked here, see bare_budget_flags
        try:
            value = budget_option(value)
        except argparse.ArgumentTypeError as exc:
            raise pytest.UsageError(str(exc)) from None
    if value is not None:
        from .model.budget import Rule

        return Rule(value, f"{flag}={value}")
    try:
        raw: object = config.getini(ini_name)
    except (pytest.UsageError, TypeError, ValueError) as exc:  # not an int nor a string
        upgrade = (
            ""
            if pytest.version_tuple >= (9, 2)
            else f'; this pytest reads it as a string only: write {ini_name} = "1", '
            "or use pytest 9.2 or newer"
        )
        raise pytest.UsageError(f"{PREFIX} ini option {ini_name}: {exc}{upgrade}") from None
    ini = str(raw if raw is not None else "").strip()  # an int from [tool.pytest] too, 0 included
    if ini == "":
        return None  # nothing asked: the budget module is not loaded
    from .model.budget import BudgetError, Rule, parse_count_text

    try:
        value = parse_count_text(ini, f"{PREFIX} ini option {ini_name}")
    except BudgetError as exc:
        raise pytest.UsageError(str(exc)) from None
    return Rule(value, f"{ini_name}={value} (ini)")


DURATIONS_EXPECTED = "expected a whole number of entries to list, 0 for all (as --durations)"


def _durations(config: pytest.Config) -> int | None:
    """--recompile-durations=N, else the ini option recompile_durations, else None (off)."""
    value: int | None = config.getoption("recompile_durations")
    if value is not None:
        return value
    try:
        raw: object = config.getini("recompile_durations")
    except (pytest.UsageError, TypeError, ValueError) as exc:  # not an int nor a string
        raise pytest.UsageError(f"{PREFIX} ini option recompile_durations: {exc}") from None
    ini = str(raw if raw is not None else "").strip()
    if ini == "":
        return None
    from .model.budget import count_value

    value = count_value(ini)
    if value is None:
        raise pytest.UsageError(
            f"{PREFIX} ini option recompile_durations: {DURATIONS_EXPECTED}, got {ini!r}"
        )
    return value


def durations_option(text: str) -> int:
    """argparse ``type=`` of --recompile-durations."""
    from .model.budget import count_value

    value = count_value(text)
    if value is None:
        raise argparse.ArgumentTypeError(
            f"{PREFIX} --recompile-durations: {DURATIONS_EXPECTED}, got {text!r}"
        )
    return value


def _choice(config: pytest.Config, name: str, choices: tuple[str, ...]) -> str:
    """The option ``name`` (argparse checked its choices), else its ini twin, checked here."""
    value = str(config.getoption(name) or str(config.getini(name)).strip())
    if value not in choices:
        raise pytest.UsageError(
            f"{PREFIX} ini option {name}: expected one of {', '.join(choices)}, got {value!r}"
        )
    return value


def _github(config: pytest.Config) -> bool:
    """--recompile-github / recompile_github: on, off, or auto (on under GitHub Actions)."""
    value = _choice(config, "recompile_github", GITHUB_MODES)
    if value == "auto":
        return os.environ.get("GITHUB_ACTIONS") == "true"
    return value == "on"


def _with_files(config: pytest.Config, settings: Settings) -> Settings:
    """The report and baseline files: checked writable, the baseline read or to be written
    (:func:`pytest_recompile.reports.baseline.file_settings`)."""
    report = _path_option(config, "report")
    report_md = _path_option(config, "report_md")
    baseline = _path_option(config, "baseline")
    update = bool(config.getoption("recompile_baseline_update"))
    prune = bool(config.getoption("recompile_baseline_prune"))
    if prune and not update:
        raise pytest.UsageError(
            f"{PREFIX} --recompile-baseline-prune drops entries while a baseline is updated: "
            "add --recompile-baseline-update, on a run of the whole suite"
        )
    if report[0] is None and report_md[0] is None and baseline[0] is None and not update:
        return settings
    from .reports.baseline import file_settings
    from .reports.files import OutputFileError

    try:
        changes = file_settings(report, report_md, baseline, update, prune, settings.default)
    except OutputFileError as exc:  # a BaselineError too
        raise pytest.UsageError(str(exc)) from None
    return settings.replace(**changes)


def _trace_dir(config: pytest.Config) -> str | None:
    """--recompile-trace=DIR / recompile_trace: a directory (created when a test breaks the
    gate), absolute, so that a test that changes the working directory does not move it."""
    folder, source = _path_option(config, "trace")
    if folder is None:
        return None
    if os.path.exists(folder) and not os.path.isdir(folder):
        raise pytest.UsageError(
            f"{PREFIX} {source}: {folder} is a file; expected a directory (created if "
            "missing) to keep the structured traces of the tests that break the gate in"
        )
    return os.path.abspath(folder)


def _path_option(config: pytest.Config, name: str) -> tuple[str | None, str]:
    """A path from --recompile-NAME or, failing that, the ini option recompile_NAME."""
    value = config.getoption(f"recompile_{name}")
    if value:
        return str(value), f"--recompile-{name.replace('_', '-')}={value}"
    ini = str(config.getini(f"recompile_{name}") or "").strip()
    if ini:
        return os.path.join(str(config.rootpath), ini), f"ini option recompile_{name}={ini}"
    return None, ""


def max_guards_option(text: str) -> int:
    """argparse ``type=`` of --recompile-max-guards."""
    from .model.budget import BudgetError, parse_count_text

    try:
        return parse_count_text(text, f"{PREFIX} --recompile-max-guards")
    except BudgetError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def budget_option(text: str) -> int:
    """The value of --recompile-budget, checked."""
    from .model.budget import BudgetError, parse_count_text

    try:
        return parse_count_text(text, f"{PREFIX} --recompile-budget")
    except BudgetError as exc:
        raise argparse.ArgumentTypeError(f"{exc}; {BARE_FLAG_HINT}") from None


# -- declared: each flag with its ini twin, as the readers above read them -----------------


def add_count_option(
    group: pytest.OptionGroup,
    parser: pytest.Parser,
    name: str,
    type: Callable[[str], int],
    help: str,
) -> None:
    """``--recompile-NAME=N`` and its ini twin ``recompile_NAME`` (an int or a string, see
    :func:`add_int_ini`), as :func:`_count_option` and :func:`_durations` read them."""
    flag = f"--recompile-{name.replace('_', '-')}"
    group.addoption(flag, default=None, type=type, dest=f"recompile_{name}", metavar="N", help=help)
    add_int_ini(parser, f"recompile_{name}", f"like {flag}=N (empty: off)")


def add_path_option(
    group: pytest.OptionGroup,
    parser: pytest.Parser,
    name: str,
    help: str,
    metavar: str = "PATH",
) -> None:
    """``--recompile-NAME=PATH`` and its ini twin ``recompile_NAME`` (relative to rootdir),
    as :func:`_path_option` reads them."""
    flag = f"--recompile-{name.replace('_', '-')}"
    group.addoption(flag, default=None, dest=f"recompile_{name}", metavar=metavar, help=help)
    parser.addini(f"recompile_{name}", f"like {flag} (relative to rootdir)", default="")


def add_budget_ini(parser: pytest.Parser) -> None:
    """``recompile_budget``: an int or a string (see :func:`add_int_ini`)."""
    help = "default recompile budget of every test, like --recompile-budget=N (empty: off)"
    add_int_ini(parser, "recompile_budget", help)


def add_int_ini(parser: pytest.Parser, name: str, help: str) -> None:
    """An ini option that is a number: an int or a string. pytest 9.2 added union types, so
    that ``name = 1`` in its native ``[tool.pytest]`` table is read; older pytest reads a
    string (ini files are strings anyway)."""
    if pytest.version_tuple >= (9, 2):
        parser.addini(name, help, type=int | str, default="")
    else:
        parser.addini(name, help, default="")


def add_choice_option(
    group: pytest.OptionGroup,
    parser: pytest.Parser,
    name: str,
    choices: tuple[str, ...],
    help: str,
) -> None:
    """``--recompile-NAME=CHOICE`` and its ini twin ``recompile_NAME`` (default: the first
    choice), as :func:`pytest_recompile.settings._choice` reads them."""
    flag = f"--recompile-{name.replace('_', '-')}"
    group.addoption(flag, choices=choices, default=None, dest=f"recompile_{name}", help=help)
    parser.addini(f"recompile_{name}", f"like {flag}", default=choices[0])
