"""The result model: what a run found, as JSON-ready typed dicts that mirror
``report.schema.json`` (imports nothing of the plugin's, and no torch).

Per-test results travel on pytest's reports, so under pytest-xdist they cross from a worker to
the controller as plain JSON values: plain dicts, typed here, are what survives the trip. The
terminal summary, the JSON report, JUnit properties, the GitHub annotations, the Markdown
summary and the baseline all read these; none re-derives them from text.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Literal, TypedDict

RuleKind = Literal[
    "total",
    "function",
    "limit",
    "unexpected",
    "forbidden",
    "guards",
    "new_guards",
    "graph_breaks",
    "fullgraph",
    "cudagraph_rerecords",
    "unknown_function",
    "uncovered",
    "work",
]
"""The rule a judged block broke (a :class:`~pytest_recompile.model.judge.Violation`'s kind)."""

ViolationKind = Literal[RuleKind, "warm", "divergence", "warm_start"]
"""A result's violation: a broken rule, a compile refused in a warm block, or ranks that
diverged under ``same_compiles_across_ranks``."""


class SourceLineResult(TypedDict):
    """A line of code torch names for a guard (``#/$defs/source_line``)."""

    file: str
    line: int
    function: str
    code: str


class ReasonResult(TypedDict):
    """Why one cache entry rejected a call (``#/$defs/reason``)."""

    kind: str
    detail: str | None
    source: str | None
    expected: str | None
    actual: str | None
    text: str
    entry: str | None
    raw: str
    site: SourceLineResult | None
    own_site: SourceLineResult | None


class GuardResult(TypedDict):
    """One installed leaf guard (``#/$defs/guard``)."""

    kind: str
    torch_kind: str
    source: str
    text: str
    entry: str
    framework: bool


class _Timed(TypedDict, total=False):
    guard_check_us: float | None  # measured on the call that made it (not in old reports)
    guard_check_range_us: list[float] | None  # the fastest and slowest of those 31 checks


class EntryGuardsResult(_Timed):
    """The guards one cache entry checks on every call that reaches it
    (``#/$defs/entry_guards``)."""

    entry: str
    guards: int | None  # leaf guards in its tree (null: the entry was gone before it was read)
    kinds: dict[str, int]
    on_parameters: int
    values: list[str]  # "EQUALS_MATCH G['step']": guards on the user's Python values
    torch_guard_count: int | None  # torch's compile metric guard_count
    guard_latency_us: float | None  # torch's estimate: noisy, never gated


class RecompileResult(TypedDict):
    """One recompile of a function (``#/$defs/recompile``)."""

    compile_id: str
    reasons: list[ReasonResult]
    resume: bool
    stopped: bool
    seconds: float | None


class CompileWorkResult(TypedDict):
    """One compile's work (``#/$defs/compile_work``)."""

    compile_id: str
    reused: bool  # an earlier test's same compile answered it: counted, not paid again
    graph: bool
    ops: int | None
    nodes: int | None
    inputs: int | None
    restarts: list[str] | None
    kernels: int | None
    subgraphs: int | None
    subgraph_calls: int | None
    cache_hits: int | None
    cache_misses: int | None


class WorkResult(TypedDict):
    """The work of a function's or a test's compiles, summed (``#/$defs/work``): each count
    None where this torch does not record it."""

    compiles: int  # compiles counted (reused ones included)
    reused: int  # of which an earlier test's same compile answered
    graphs: int
    ops: int | None
    nodes: int | None
    inputs: int | None
    restarts: int | None
    restart_reasons: list[str]
    kernels: int | None
    subgraphs: int | None
    subgraph_calls: int | None
    cache_hits: int | None
    cache_misses: int | None


class FunctionWorkResult(WorkResult):
    """A function's work, and each compile's (``#/$defs/function_work``)."""

    per_compile: list[CompileWorkResult]


class _Worked(TypedDict, total=False):
    work: FunctionWorkResult  # its compiles' counted work (not in old reports)


class _Named(_Worked, total=False):
    compile_name: (
        str | None
    )  # torch.compile(..., name=...) where torch kept it (not in old reports)


class FunctionResult(_Named):
    """One compiled function and its recompiles (``#/$defs/function``)."""

    name: str
    qualname: str
    file: str
    line: int
    compiles: int
    recompiles: list[RecompileResult]
    cache_entries: int
    code_entries: int  # the most one of its code objects held: what recompile_limit caps
    compile_seconds: float
    first_compile_seconds: float  # compile_seconds less recompile_seconds
    again_seconds: float
    again_reasons: list[str]  # why the compiles behind again_seconds were not reused
    reused: int  # first compiles an earlier test's same compile answered
    saved_seconds: float  # what those took when they ran
    recompile_seconds: float
    recompile_limit: str | None
    limit_hits: int  # calls that found it at recompile_limit
    limit_raised: bool  # torch raised FailOnRecompileLimitHit there instead of running eagerly
    guards: list[GuardResult] | None
    entries: list[EntryGuardsResult]  # the guards of each entry the block compiled
    dynamic_sources: list[str]  # what torch's automatic dynamic made dynamic after a resize


class GraphBreakResult(TypedDict):
    """One graph break, by site (``#/$defs/graph_break``)."""

    reason: str
    file: str
    line: int
    function: str
    code: str
    hint: str | None


class CertificateGroupResult(TypedDict):
    """Points of a certified domain that one guard rejects, or that one cause leaves
    undecided, as ranges (``#/$defs/certificate_group``)."""

    where: str  # x.size(0) in {0, 1}
    points: int
    undecided: bool
    guard: str  # the rejecting guard (kind, torch's text, entry), or why it is undecided
    site: SourceLineResult | None  # the line that installed it, where torch names one
    fix: str


class CertificateResult(TypedDict):
    """Which points of a declared domain would compile again (``#/$defs/certificate``)."""

    function: str
    file: str
    line: int
    domain: str
    points: int
    entries: int  # the cache entries the points were checked against
    uncovered: int
    undecided: int
    groups: list[CertificateGroupResult]
    seconds: float


class _Certified(TypedDict, total=False):
    certificate: CertificateResult  # uncovered: the certificate that broke (not in old reports)


class ViolationResult(_Certified):
    """One broken rule: ``message`` is its wording without the ``pytest-recompile:`` prefix,
    built once; every output reads it. The evidence beside it is what the failure message
    shows: the function it concerns (its qualname), the reasons of recompiles of a kind not
    expected, the forbidden guards installed, the graph breaks."""

    kind: ViolationKind
    source: str
    message: str
    function: str | None
    reasons: list[ReasonResult]
    guards: list[GuardResult]
    breaks: list[GraphBreakResult]


class SiteResult(TypedDict):
    """Where fail-fast stopped a call."""

    file: str
    line: int
    function: str


class CacheOutcomes(TypedDict):
    """How often one of torch's compile caches answered (``#/$defs/cache``)."""

    hits: int
    misses: int
    bypasses: int


class CachesResult(TypedDict):
    """Inductor's FX graph cache and AOTAutograd's cache, over a test's own phases: all 0
    where neither was asked (the eager backend)."""

    fx_graph: CacheOutcomes
    aot_autograd: CacheOutcomes


class WarmRunResult(TypedDict):
    """One of the two runs of a warm-start check, in figures (``#/$defs/warm_run``)."""

    seconds: float
    compiles: int  # frames Dynamo traced
    fx_graph: CacheOutcomes
    aot_autograd: CacheOutcomes
    guard_misses: int


class WarmStartResult(TypedDict):
    """A marked test's warm start (``#/$defs/warm_start``)."""

    status: Literal["passed", "failed", "error", "skipped"]
    source: str
    message: str | None  # what failed or went wrong, worded once (no prefix); None: passed
    notes: list[str]  # told beside a pass (bypasses allowed, components not named)
    cold: WarmRunResult | None
    warm: WarmRunResult | None
    lookups: int  # the warm run's
    hits: int
    function: str | None  # the first function named in the message
    file: str | None
    line: int | None
    torch: str | None


class _WarmStarted(TypedDict, total=False):
    warm_start: WarmStartResult  # a warm_start test's check (not in old reports)
    work: WorkResult | None  # its functions' counted work (not in old reports; None: none)


class ProcessResult(TypedDict):
    """A child process's compiles for one test or fixture (``#/$defs/process``)."""

    pid: int
    rank: int | None
    command: str
    ended: str  # "exited" (its exit handlers ran), "running", "no exit record"
    complete: bool
    problem: str | None
    recompiles: int
    compile_seconds: float
    recompile_seconds: float
    violations: list[ViolationResult]
    limit_hit: list[str]
    functions: list[FunctionResult]
    graph_breaks: list[GraphBreakResult]
    stopped: bool  # fail-fast refused a compile in it (its message is worded where shown)


class TestResult(_WarmStarted):
    """One test's results (``#/$defs/test`` less ``nodeid`` and ``outcome``): they travel on
    its reports to the terminal summary, the JSON report and the baseline."""

    budget: int | None  # the total cap (None: no total, only other rules)
    budget_source: str | None  # where the total came from
    rules: str | None  # every rule of the test, in words
    baseline: int | None
    recompiles: int
    recompile_seconds: float
    compile_seconds: float
    first_compile_seconds: float  # compile_seconds less recompile_seconds
    caches: CachesResult  # whether torch's compile caches answered (cold or warm)
    again_seconds: float  # compiling again what isolation dropped for earlier tests
    reused: int  # first compiles answered by an earlier test's same compile
    saved_seconds: float
    isolation: str  # "entries" (kept what live wider fixtures compiled), "reset", "off"
    violations: list[ViolationResult]
    limit_hit: list[str]
    worst: str | None
    device: str | None
    functions: list[FunctionResult]
    graph_breaks: list[GraphBreakResult]
    cudagraph_recordings: int
    cudagraph_rerecords: int
    stopped_at: SiteResult | None  # the call fail-fast stopped
    processes: list[ProcessResult]  # one entry per child process that compiled for the test
    divergence: str | None  # ranks that compiled a shared function differently
    trace: str | None  # the folder its structured trace was kept in (--recompile-trace)


class OutlivedResult(TypedDict):
    """Compiles on a thread after the test or fixture that started it had ended."""

    started_by: str  # the test's node id, "fixture ...", or "no test (...)"
    function: str
    during: str  # the test that was running, or "between tests"
    compiles: int


class FixtureResult(TypedDict):
    """A wider fixture's compiles while it was set up (``#/$defs/fixture``)."""

    fixture: str  # in words: module fixture 'warmed', setUpClass of TestModel
    name: str
    scope: str
    node: str  # the node it was set up for
    compiles: int
    recompiles: int  # its children's included
    recompile_seconds: float
    compile_seconds: float
    first_compile_seconds: float
    limit_hit: list[str]
    functions: list[FunctionResult]
    graph_breaks: list[GraphBreakResult]
    processes: list[ProcessResult]


class Carried(TypedDict, total=False):
    """What one of a test's reports carries (``report.recompile``, under pytest-xdist from a
    worker to the controller): the test's result on its teardown report (or on the report of
    the phase that failed), the wider fixtures' compiles on its set-up's, and what the gate
    tells once. Only the keys with something to tell: pytest keeps every report for the
    session, and the garbage collector walks whatever they hold."""

    result: TestResult | None  # the test's figures (a gated test)
    gated: bool  # a gated test's teardown: it ran, with or without figures
    fixtures: list[FixtureResult]  # wider fixtures that compiled while set up for it
    degraded: list[str]  # features this torch lacks (once per process)
    disabled: list[str]  # how torch.compile was switched off in a gated test (once each)
    faults: list[str]  # contained internal errors (each once)
    threads: list[OutlivedResult]  # compiles on threads that outlived their starter
    trace: str | None  # the folder the test's trace was kept in (its result's ``trace``)


class ReportedTest(TestResult):
    """One test in the JSON report (``#/$defs/test``)."""

    nodeid: str
    outcome: str


class Environment(TypedDict):
    """What a run ran on (``#/$defs/environment``); the baseline records it too."""

    pytest_recompile: str
    pytest: str
    torch: str | None
    torch_build: str | None  # "cpu", "cuda 12.8", "rocm 6.2"; None: torch not installed
    python: str
    platform: str


# An environment's fields in the order outputs name them: two runs are shards of one run only
# where all agree (``combine``), and ``compare`` shows those that differ, the devices too.
ENVIRONMENT_FIELDS = ("torch", "torch_build", "python", "pytest", "pytest_recompile", "platform")


class ReportEnvironment(Environment):
    devices: list[str]


class ReportedEnvironment(ReportEnvironment):
    """The JSON report's: with how torch.compile was switched off (empty: it compiled),
    which :class:`~.run.RunResults` holds as ``disabled``."""

    compile_disabled: list[str]


class ReportSettings(TypedDict):
    default_budget: int | None
    mode: str
    keep_caches: bool
    fullgraph: bool
    baseline: str | None
    max_guards: int | None
    if_disabled: str  # --recompile-if-disabled: fail, or warn


class ReportTotals(TypedDict):
    gated_tests: int
    recompiles: int
    broke_the_gate: int
    recompile_limit_hits: int
    recompile_seconds: float
    compile_seconds: float
    first_compile_seconds: float
    again_seconds: float
    reused: int
    saved_seconds: float
    graph_breaks: int
    cudagraph_rerecords: int


class LimitNeed(TypedDict):
    """The most cache entries one function held, and where (``#/$defs/limit_need``)."""

    qualname: str
    file: str
    line: int
    most_entries: int
    where: str  # the test's node id, a child process of it, or a wider fixture


class LimitResult(TypedDict):
    """The ``recompile_limit`` a run needs (``#/properties/recompile_limit``)."""

    suggested: int  # holds every function's most entries with 2x headroom
    functions: list[LimitNeed]  # most entries first
    hit: list[str]  # functions that hit the limit: their need is above it
    partial: bool  # fail-fast stopped recompiles: the entries they would have made are missing


class CollectionResult(TypedDict):
    """What a run collected, and what it ran of it (``#/$defs/collection``): what lets
    ``combine`` find a test that no shard ran. Node ids, sorted."""

    selected: list[str]  # the tests the run was to run
    split_off: list[str]  # deselected by a plugin (pytest-split): another shard's to run
    excluded: list[str]  # deselected by pytest's own selection (-m, -k, --deselect, --lf)


class ReportDocument(TypedDict):
    """The JSON report (``report.schema.json``)."""

    schema: str
    version: int
    created: str
    complete: bool
    incomplete: str | None
    environment: ReportedEnvironment
    settings: ReportSettings
    summary: ReportTotals
    tests: list[ReportedTest]
    fixtures: list[FixtureResult]
    faults: list[str]
    recompile_limit: LimitResult
    collection: CollectionResult | None  # None: not recorded (reports older than 0.x lack it)


class _BaselineWork(TypedDict, total=False):
    work: dict[str, dict[str, int]]  # each function's compile work (not in old baselines)


class BaselineTest(_BaselineWork):
    """A test's entry in the baseline file: the most recompiles one of its processes made,
    and each function's most in one process."""

    recompiles: int
    functions: dict[str, int]
    guards: dict[str, int]  # each function's largest entry
    values: dict[str, list[str]]  # each function's guards on the user's values


class BaselineDocument(TypedDict):
    """The baseline file (``--recompile-baseline``)."""

    schema: str
    version: int
    environment: ReportEnvironment
    tests: dict[str, BaselineTest]


# What differs between two runs of the same test without any difference in what it compiled:
# timings, pids, traces, isolation's reuse (what ran before it), and torch's numbering of
# frames and compiles ("2/1"), which counts from the process's first compiled frame.
TIMINGS = frozenset(
    {
        "compile_seconds",
        "recompile_seconds",
        "first_compile_seconds",
        "again_seconds",
        "saved_seconds",
        "seconds",
        "guard_latency_us",
        "guard_check_us",
        "guard_check_range_us",
        "cache_hits",  # how warm torch's caches were: the work is the same
        "cache_misses",
        "trace",
        "pid",
        "command",
        "reused",  # first compiles an earlier test's identical entry answered: what ran before
        "again_reasons",
        "compile_id",
        "entry",
        "raw",
    }
)


def without_timings(value: Any) -> Any:
    """``value`` (a result, a fixture's) without what two runs of the same code differ in
    (:data:`TIMINGS`): what is left is what was compiled, and why."""
    if isinstance(value, dict):
        return {k: without_timings(v) for k, v in value.items() if k not in TIMINGS}
    if isinstance(value, list):
        return [without_timings(item) for item in value]
    return value


def first_difference(one: Any, other: Any, where: str = "") -> str | None:
    """Where two values (results, timings already left out) first differ, and both values:
    ``functions[0].file: 'a.py' against 'b.py'``; None where they are equal."""
    if isinstance(one, dict) and isinstance(other, dict):
        for key in sorted({*one, *other}, key=str):
            inner = f"{where}.{key}" if where else str(key)
            if key not in one or key not in other:
                return f"{inner}: {_said(one, key)} against {_said(other, key)}"
            found = first_difference(one[key], other[key], inner)
            if found is not None:
                return found
        return None
    if isinstance(one, list) and isinstance(other, list):
        for index, (mine, theirs) in enumerate(zip(one, other, strict=False)):
            found = first_difference(mine, theirs, f"{where}[{index}]")
            if found is not None:
                return found
        if len(one) != len(other):
            return f"{where}: {len(one)} items against {len(other)}"
        return None
    return None if one == other else f"{where}: {one!r} against {other!r}"


def _said(value: dict[Any, Any], key: Any) -> str:
    return repr(value[key]) if key in value else "absent"


def functions_of(data: TestResult) -> Iterator[tuple[ProcessResult | None, FunctionResult]]:
    """The test's functions, then each child process's, with the process (None: the test's
    own)."""
    for fn in data["functions"]:
        yield None, fn
    for process in data.get("processes") or ():
        for fn in process["functions"]:
            yield process, fn


def per_process(data: TestResult) -> int:
    """The most recompiles one process of the test made (the test's own or a child's): what
    a budget, applied to each process, and so a baseline, caps."""
    return int(max([data["recompiles"], *(p["recompiles"] for p in data.get("processes") or ())]))


def child_recompiles(data: TestResult) -> int:
    return sum(p["recompiles"] for p in data.get("processes") or ())


def below_baseline(data: TestResult) -> bool:
    """The test recompiled less than its baseline allows: the baseline can be tightened."""
    return data["baseline"] is not None and per_process(data) < data["baseline"]


def diverging(processes: list[ProcessResult]) -> dict[str, dict[int, dict[str, Any]]]:
    """The shared functions that ranks compiled differently: by function, each rank's
    recompiles of it (``{"recompiles": [...]}``, empty where it did not recompile), where
    the ranks' counts or first failing guard kinds differ. Empty where fewer than two ranks
    ran, or they agree."""
    by_rank: dict[int, dict[str, dict[str, Any]]] = {}
    for process in processes:
        if process["rank"] is None:
            continue
        functions = by_rank.setdefault(process["rank"], {})
        for fn in process["functions"]:
            functions.setdefault(fn["qualname"], {"recompiles": []})["recompiles"] += fn[
                "recompiles"
            ]
    if len(by_rank) < 2:
        return {}
    found = {}
    for name in sorted({name for functions in by_rank.values() for name in functions}):
        seen = {
            rank: functions.get(name, {"recompiles": []}) for rank, functions in by_rank.items()
        }
        shapes = {(len(fn["recompiles"]), _first_kinds(fn)) for fn in seen.values()}
        if len(shapes) > 1:
            found[name] = seen
    return found


def _first_kinds(function: dict[str, Any]) -> tuple[tuple[str, str | None], ...]:
    """The kind and detail of each recompile's first failing guard, once each, in order."""
    kinds = [(r["kind"], r["detail"]) for rc in function["recompiles"] for r in rc["reasons"][:1]]
    return tuple(dict.fromkeys(kinds))
