"""pytest hooks only: options, markers, the fixture, and when to switch the gate on.

Importing this module imports neither torch nor the tracker. The per-test hooks live in
:class:`pytest_recompile.gate.Gate`, imported and registered only when
``--recompile-budget`` / ``recompile_budget`` is set or, after collection, when some test
carries one of the markers or uses the ``recompiles`` fixture, and never on an xdist
controller, which runs no test; otherwise the plugin costs one pass over the collected items.
Every pytest run with the plugin installed reads this module, so what only such a run needs
(the gate's registration, the fixture's work, the wording of the warning for a conftest's
``pytestmark``) lives in the modules it imports then.
"""

from __future__ import annotations

import os
from collections.abc import Generator, Iterable, Iterator
from typing import TYPE_CHECKING

import pytest

from .model.names import (
    GITHUB_MODES,
    IF_DISABLED,
    MARKER_LINES,
    MARKERS,
    MODES,
    PROCESS_MODES,
)
from .settings import (
    SETTINGS_KEY,
    Settings,
    add_budget_ini,
    add_choice_option,
    add_count_option,
    add_path_option,
    durations_option,
    max_guards_option,
    warm_start_timeout_option,
)

if TYPE_CHECKING:
    from .recording.tracker import RecompileTracker


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("recompile", "torch.compile recompiles (pytest-recompile)")
    group.addoption(
        "--recompile-budget",
        nargs="?",
        const="0",
        default=None,
        dest="recompile_budget",
        metavar="N",
        help="gate every test: at most N torch.compile recompiles (bare flag: 0; a word after "
        "it that is not an integer is a test path, as after any flag).",
    )
    add_budget_ini(parser)
    add_count_option(
        group,
        parser,
        "max_guards",
        max_guards_option,
        "gate every test: each cache entry it compiles may check at most N guards "
        "(what torch runs on every call that reaches the entry). Markers: max_guards(n).",
    )
    add_choice_option(
        group,
        parser,
        "mode",
        MODES,
        "fail-fast (default): fail at the call that goes over budget, before compiling; "
        "at-end: run each test to the end, then judge it; report-only: never fail, only report.",
    )
    group.addoption(
        "--recompile-keep-caches",
        action="store_true",
        default=None,
        dest="recompile_keep_caches",
        help="keep every torch.compile cache entry across tests instead of starting each test "
        "from its wider fixtures' entries: recompiles are then judged against the whole "
        "process state, and verdicts depend on test order.",
    )
    parser.addini(
        "recompile_keep_caches", "like --recompile-keep-caches", type="bool", default=False
    )
    group.addoption(
        "--recompile-fullgraph",
        action="store_true",
        default=None,
        dest="recompile_fullgraph",
        help="fullgraph semantics for every gated test: a graph break fails the test at the "
        "break, without editing its torch.compile calls.",
    )
    parser.addini("recompile_fullgraph", "like --recompile-fullgraph", type="bool", default=False)
    add_choice_option(
        group,
        parser,
        "processes",
        PROCESS_MODES,
        "on (default): compiles in the Python child processes a gated test starts "
        "(spawn, fork, subprocess, torchrun ranks) are recorded and judged per process; "
        "off: only the test's own process is gated.",
    )
    add_choice_option(
        group,
        parser,
        "certify_marks",
        PROCESS_MODES,
        "on (default): a gated test certifies each domain its calls declare to torch "
        "(mark_dynamic(x, dim, min=..., max=...)) against the entries of the function that "
        "received it, as recompiles.covers() would; off: only covers() certifies.",
    )
    add_choice_option(
        group,
        parser,
        "if_disabled",
        IF_DISABLED,
        "where torch.compile is switched off (TORCH_COMPILE_DISABLE=1, "
        "torch._dynamo.config.disable, a force_eager stance), gated tests run eagerly and "
        "their 0 recompiles measure nothing: fail (default) fails the run, saying so; warn "
        "only says so (an eager CPU lane that means it).",
    )
    add_choice_option(
        group,
        parser,
        "warm_start",
        PROCESS_MODES,
        "on (default): each @pytest.mark.warm_start test is run alone twice more, in two "
        "fresh processes sharing a new cache directory, and the second must hit every FX "
        "graph and AOTAutograd cache lookup; off: skip that check (the summary says so).",
    )
    add_count_option(
        group,
        parser,
        "warm_start_timeout",
        warm_start_timeout_option,
        "seconds each warm-start child process may run before it is stopped (default 900).",
    )
    add_path_option(
        group,
        parser,
        "report",
        "write a JSON report of every gated test to PATH (schema: report.schema.json).",
    )
    add_path_option(
        group,
        parser,
        "report_md",
        "write the run's recompile summary as Markdown to PATH (for CI systems and PR bots; "
        "GitHub Actions gets it as the job summary).",
    )
    add_choice_option(
        group,
        parser,
        "github",
        GITHUB_MODES,
        "GitHub Actions output: an error annotation at each offending function and "
        "fail-fast call, and a Markdown job summary in $GITHUB_STEP_SUMMARY. auto (default): "
        "on when GITHUB_ACTIONS=true.",
    )
    add_count_option(
        group,
        parser,
        "durations",
        durations_option,
        "list the N gated tests (and wider fixtures) and the N functions that spent the "
        "most seconds compiling, first compiles and recompiles apart, and whether torch's "
        "compile caches answered (N=0 for all; as --durations).",
    )
    add_path_option(
        group,
        parser,
        "baseline",
        "compare each test with its recorded recompiles, guards and compile work in PATH: "
        "more fails (compile work past --recompile-work-tolerance), fewer recompiles are "
        "reported.",
    )
    group.addoption(
        "--recompile-work-tolerance",
        default=None,
        dest="recompile_work_tolerance",
        metavar="SPEC",
        help="how far each test's compile work may grow past its baseline before it fails, "
        "in percent per measure: graphs, ops, kernels, restarts, subgraphs (default "
        "graphs=0,ops=5,kernels=5,restarts=0,subgraphs=0; those named override).",
    )
    parser.addini("recompile_work_tolerance", "like --recompile-work-tolerance=SPEC", default="")
    add_path_option(
        group,
        parser,
        "trace",
        "keep torch's structured trace (what TORCH_TRACE writes, what tlparse reads) of each "
        "gated test that breaks the gate, in DIR/<test>/, named in its failure message; "
        "with tlparse on PATH, its HTML report beside it. Tests that pass leave nothing.",
        metavar="DIR",
    )
    group.addoption(
        "--recompile-baseline-update",
        action="store_true",
        default=False,
        dest="recompile_baseline_update",
        help="run every test in report-only mode and update the baseline file from the counts "
        "(only if the run passes): the entries of the tests that ran are replaced, every "
        "other entry is kept.",
    )
    group.addoption(
        "--recompile-baseline-prune",
        action="store_true",
        default=False,
        dest="recompile_baseline_prune",
        help="with --recompile-baseline-update on a run of the whole suite: also drop the "
        "entries of tests that did not run (deleted tests).",
    )


@pytest.hookimpl(tryfirst=True)  # before pytest's own, which finds the initial conftests
def pytest_load_initial_conftests(
    early_config: pytest.Config, parser: pytest.Parser, args: list[str]
) -> None:
    """A bare ``--recompile-budget`` before a test path is the flag, then the path: the
    arguments are rewritten, and the early parse (which names the paths whose conftests
    load first) is made again from them."""
    if "--recompile-budget" not in args:
        return
    from .model.budget import bare_budget_flags

    fixed = bare_budget_flags(args)
    if fixed == args:
        return
    args[:] = fixed
    import copy

    early = early_config.known_args_namespace  # confcutdir and the rest kept; paths and the
    early_config.known_args_namespace = parser.parse_known_args(  # budget parsed again
        args, namespace=copy.copy(early)
    )


def pytest_configure(config: pytest.Config) -> None:
    for line in MARKER_LINES:
        config.addinivalue_line("markers", line)
    settings = config.stash[SETTINGS_KEY] = Settings.from_config(config)
    worker = hasattr(config, "workerinput")
    controller = not worker and xdist_controller(config)
    if settings.report is not None:  # what ran of what was collected, for combine
        from .selection import register_collection

        register_collection(config, controller)
    if controller:
        from .session import register_controller

        register_controller(config, settings)
    elif settings.gates_every_test:
        gate_on(config, settings)
    elif not worker and (settings.writes_files or settings.durations is not None):
        # No default budget: the gate waits for collection to find a marked test
        # (pytest_collection_modifyitems); the summary is needed from the start where files
        # are written or durations listed. xdist workers never write files.
        from .session import register_summary

        register_summary(config, settings)


def gate_on(config: pytest.Config, settings: Settings) -> None:
    """The per-test hooks (:func:`.gate.register_gate`) and, where the session is controlled
    in this process (not an xdist worker), its results and summary."""
    from .gate import register_gate

    register_gate(config, settings)
    if not hasattr(config, "workerinput"):
        from .session import register_summary

        register_summary(config, settings)


def xdist_controller(config: pytest.Config) -> bool:
    """Whether pytest-xdist runs this session's tests in workers: its own rule for
    registering its controller's session (every 3.x release), read after its
    ``pytest_cmdline_main`` has turned ``-n`` into ``--dist`` and ``--tx``. Such a process
    collects and runs no test: :func:`.session.register_controller`."""
    option = config.option
    return (
        getattr(option, "dist", "no") != "no"
        and bool(getattr(option, "tx", None))
        and not option.collectonly
    )


@pytest.fixture
def recompiles(request: pytest.FixtureRequest) -> Iterator[RecompileTracker]:
    """This test's compiles: ``count()``, ``records``, ``record(name)``, ``reasons()``,
    ``kinds()``, ``installed_guards()``, ``scoped(n)`` (a budget for a block), ``warm()``
    (a block in which any compile fails) and ``covers(fn, args, domain)`` (which shapes of a
    domain would compile again). In a gated test it is the gate's own tracker;
    otherwise it records (report-only) from the moment the fixture is set up."""
    from .gate import recompiles_fixture

    yield from recompiles_fixture(request)


_NAMES = frozenset(MARKERS)


def marked(nodes: Iterable[object]) -> Iterator[pytest.Item]:
    """The items among ``nodes`` that carry one of the plugin's markers, their own or a
    parent's (class, module, package). Each parent's markers are read once, not once per
    item: this runs over every collected test, asked for or not, so the common case (no
    marker anywhere) costs two dict lookups a test and no generator."""
    inherited: dict[int, bool] = {}
    for node in nodes:
        parent = getattr(node, "parent", None)
        found = inherited.get(id(parent))
        if found is None:
            found = inherited[id(parent)] = parent is not None and not _NAMES.isdisjoint(
                mark.name for mark in parent.iter_markers()
            )
        own = getattr(node, "own_markers", None)
        if (found or (own and not _NAMES.isdisjoint(mark.name for mark in own))) and isinstance(
            node, pytest.Item
        ):
            yield node


# The marker hooks below are this module's own, not an object registered at configure: a
# plugin registered costs pytest a scan of its attributes for hooks and fixtures (about 3 M
# instructions each, benchmark `startup`), paid by every run with the plugin installed.


@pytest.hookimpl(wrapper=True)
def pytest_make_collect_report(
    collector: pytest.Collector,
) -> Generator[None, pytest.CollectReport, pytest.CollectReport]:
    """A malformed marker is a collection error of its module, as a bad import is: reported
    the moment the module is collected, before any test runs or torch is set up."""
    report = yield
    items = list(marked(report.result)) if report.passed else []
    if items:
        from .budgets import marker_errors

        errors = marker_errors(items, collector.config.stash[SETTINGS_KEY])
        if errors:
            report.outcome = "failed"
            report.longrepr = "\n".join(errors)
            report.result = []
    return report


def pytest_collection_finish(session: pytest.Session) -> None:
    """pytest reads ``pytestmark`` in test modules only: one in a conftest.py gates
    nothing. Say so once per file (:func:`.warning_types.warn_conftest_marks`)."""
    for plugin in session.config.pluginmanager.get_plugins():
        path = str(getattr(plugin, "__file__", None) or "")
        if os.path.basename(path) != "conftest.py":
            continue
        found = getattr(plugin, "pytestmark", ())  # one mark (a decorator) or a list of them
        marks = [
            getattr(m, "mark", m) for m in (found if isinstance(found, (list, tuple)) else [found])
        ]
        names = sorted({m.name for m in marks if isinstance(m, pytest.Mark)} & _NAMES)
        if names:
            from .warning_types import warn_conftest_marks

            warn_conftest_marks(names, path, str(session.config.rootpath))


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Without a default budget: gate only if, after collection, some test has a marker (one
    that another plugin's hook added included: this hook runs last)."""
    settings = config.stash[SETTINGS_KEY]
    if settings.gates_every_test:
        return  # the gate is on since configure
    uses = False
    for item in items:  # a loop, not any(genexpr): this runs over every collected test
        if "recompiles" in getattr(item, "fixturenames", ()):
            uses = True
            break
    if gated(items, uses, settings) or uses:
        gate_on(config, settings)
        return
    given = settings.acting_on_gated_tests()
    worker = getattr(config, "workerinput", None)
    if given and (worker is None or worker.get("workerid") == "gw0"):  # said once, not per worker
        from .warning_types import warn_unused_options

        warn_unused_options(given)


def gated(items: list[pytest.Item], uses: bool, settings: Settings) -> bool:
    """Whether some test is gated. Every test's budget is stashed on it (once) whenever the
    gate may run, so that one a plugin removed a marker from since is not gated."""
    if next(marked(items), None) is None and not (
        settings.baseline_counts or settings.baseline_guards or settings.baseline_work or uses
    ):
        return False
    from .budgets import assign_budgets

    return assign_budgets(items, settings)
