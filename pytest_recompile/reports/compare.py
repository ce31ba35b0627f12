"""``pytest-recompile compare BASE.json HEAD.json``: what changed between two JSON reports
(a torch upgrade, a branch against main), per test and per function (pure: reports in, text
out; no torch, no pytest).

What is compared, per test and per function: recompiles, cache entries, guards (the largest
entry's count, new guard kinds, new guards on Python values), graph breaks and their sites,
``recompile_limit`` hits, and compile seconds past a threshold (they are noisy; counted as
the test pays them alone, so reuse lost across xdist workers or shards is no change). A change is
*worse* where HEAD has more; ``--fail-on`` names the measures whose worsening fails (exit 1).
Both reports are read into the results model (``json_report.load_report``), as every output
reads a run; the command line is in ``cli.py``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from ..model.messages import reason_label
from ..model.results import (
    ENVIRONMENT_FIELDS,
    FunctionWorkResult,
    GraphBreakResult,
    ProcessResult,
    TestResult,
)
from ..model.run import RunResults
from ..model.text import plural
from .markdown import md_cell, md_code

DEFAULT_SECONDS = 1.0  # a change in compile seconds smaller than this is not shown
# A guard check is shown slower (or faster) past this factor and by at least a microsecond:
# it is measured, so it is noisy (a torch upgrade that triples it is what this is for).
GUARD_CHECK_FACTOR = 1.5
ENVIRONMENT = (*ENVIRONMENT_FIELDS, "devices")
COMPARE_SCHEMA = "pytest-recompile/compare"


# -- what one test measured -----------------------------------------------------------------


@dataclass
class FunctionFigures:
    recompiles: int = 0
    cache_entries: int = 0
    guards: int | None = None  # the largest entry's count (None: never read)
    kinds: set[str] = field(default_factory=set)  # installed guard kinds
    values: set[str] = field(default_factory=set)  # guards on the user's Python values
    limit_hits: int = 0
    failed: list[str] = field(default_factory=list)  # the failing guards' kinds
    uncovered: int = 0  # points of certified domains that would compile again (or undecided)
    check_us: float | None = None  # the slowest entry's measured guard check
    check_range: tuple[float, float] | None = None  # its fastest and slowest of 31 checks
    # counted compile work (model/work.py); None: a run whose torch does not record it
    graphs: int | None = None
    graph_ops: int | None = None
    kernels: int | None = None
    restarts: int | None = None
    unique_subgraphs: int | None = None
    worked: bool = False  # a process's work was added (a None since then: unknown)


@dataclass
class TestFigures:
    outcome: str
    recompiles: int
    compile_seconds: float
    breaks: dict[str, str]  # site -> torch's reason
    limit_hits: int
    functions: dict[str, FunctionFigures]
    warm_misses: int | None = None  # a warm_start test's warm lookups that did not hit


def _site(found: GraphBreakResult) -> str:
    """A graph break's site, comparable across checkouts: its file's last two parts."""
    tail = "/".join(found["file"].replace("\\", "/").split("/")[-2:])
    return f"{tail}:{found['line']} in {found['function']}"


def _processes(test: TestResult) -> Iterator[TestResult | ProcessResult]:
    """The test's own process, then its children's (same fields where they matter)."""
    yield test
    yield from test["processes"]


def figures(outcome: str, test: TestResult) -> TestFigures:
    functions: dict[str, FunctionFigures] = {}
    breaks: dict[str, str] = {}
    for process in _processes(test):
        for fn in process["functions"]:
            mine = functions.setdefault(fn["qualname"], FunctionFigures())
            recompiles = fn["recompiles"]
            mine.recompiles += len(recompiles)
            mine.cache_entries += fn["cache_entries"]
            mine.limit_hits += fn["limit_hits"]
            for entry in fn["entries"]:
                if entry["guards"] is not None:
                    mine.guards = max(mine.guards or 0, entry["guards"])
                mine.kinds.update(entry["kinds"])
                mine.values.update(entry["values"])
                measured = entry.get("guard_check_us")
                if measured is not None and measured >= (mine.check_us or 0.0):
                    mine.check_us = measured
                    spread = entry.get("guard_check_range_us")
                    mine.check_range = (spread[0], spread[1]) if spread else None
            _add_work(mine, fn.get("work"))
            for recompile in recompiles:
                for reason in recompile["reasons"][:1]:
                    label = reason_label(reason)
                    site = reason["own_site"] or reason["site"]
                    if site is not None:
                        label += f" from {site['file']}:{site['line']}"
                    if label not in mine.failed:
                        mine.failed.append(label)
        for found in process["graph_breaks"]:
            breaks.setdefault(_site(found), found["reason"])
    for violation in test["violations"]:
        certificate = violation.get("certificate")
        if certificate is not None:
            mine = functions.setdefault(certificate["function"], FunctionFigures())
            mine.uncovered += certificate["uncovered"] + certificate["undecided"]
    return TestFigures(
        outcome,
        test["recompiles"],
        # What the test pays alone: a first compile an earlier test's answered (reuse, lost
        # where the two ran in other xdist workers or shards) counted at what it took then.
        test["compile_seconds"] + test["saved_seconds"],
        breaks,
        sum(f.limit_hits for f in functions.values()),
        functions,
        _warm_misses(test),
    )


# Each compile-work measure compare shows: its FunctionFigures field, and the work's key.
WORK_MEASURES = (
    ("graphs", "graphs", "graphs"),
    ("graph-ops", "graph_ops", "ops"),
    ("kernels", "kernels", "kernels"),
    ("restarts", "restarts", "restarts"),
    ("unique-subgraphs", "unique_subgraphs", "subgraphs"),
)


def _add_work(mine: FunctionFigures, work: FunctionWorkResult | None) -> None:
    """A process's work of the function added to its figures: a count this torch does not
    record, or a report without work, makes the figure unknown (None: never compared, and
    never a partial sum); distinct subgraphs are the most one graph calls."""
    first = not mine.worked
    mine.worked = True
    for _, name, key in WORK_MEASURES:
        value = work[key] if work is not None else None  # type: ignore[literal-required]
        old = getattr(mine, name)
        if value is None or (old is None and not first):
            setattr(mine, name, None)
        elif name == "unique_subgraphs":
            setattr(mine, name, max(old or 0, int(value)))
        else:
            setattr(mine, name, (old or 0) + int(value))


def _warm_misses(test: TestResult) -> int | None:
    """The warm run's lookups that missed or bypassed (None: no verdict on the caches)."""
    warm = test.get("warm_start")
    if warm is None or warm["status"] not in ("passed", "failed") or warm["warm"] is None:
        return None
    return warm["lookups"] - warm["hits"]


# -- what changed ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Change:
    """One measure of a test (or of one of its functions) that differs."""

    measure: str  # a name of MEASURES
    function: str | None
    base: float
    head: float
    detail: str = ""  # new kinds, new values, the sites of graph breaks

    moved: bool = False  # graph breaks at other lines, as many and for the same reasons
    new: bool = False  # graph breaks at sites BASE did not have, guards of new kinds or values
    noise: str = ""  # a timed measure within its own noise: why (shown, never in the verdict)

    @property
    def worse(self) -> bool:
        """HEAD has more, or something new (a guard kind, a graph break's site); a timed
        measure within its noise is neither worse nor better."""
        return (self.head > self.base or self.new) and not self.noise

    @property
    def better(self) -> bool:
        return self.head < self.base and not self.worse and not self.noise

    def text(self) -> str:
        """``recompiles 0 -> 1 (+1; failing guards: TENSOR_MATCH(size))``."""
        said = MEASURES[self.measure].text(self)
        return f"{said} (within noise: {self.noise})" if self.noise else said

    def to_dict(self) -> dict[str, Any]:
        return {
            "measure": self.measure,
            "function": self.function,
            "base": self.base,
            "head": self.head,
            "detail": self.detail,
            "worse": self.worse,
            "moved": self.moved,
            "noise": self.noise or None,
        }


def _counted(change: Change) -> str:
    """How most changes read: ``cache entries 1 -> 2 (+1; detail)``."""
    delta = int(change.head - change.base)
    said = [f"{delta:+d}"] if delta else []
    said += [change.detail] if change.detail else []
    tail = f" ({'; '.join(said)})" if said else ""
    return f"{change.measure.replace('-', ' ')} {int(change.base)} -> {int(change.head)}{tail}"


def _break_text(change: Change) -> str:
    if change.moved:
        return f"graph {'break' if change.head == 1 else 'breaks'} {change.detail}"
    return _counted(change)


def _recompiles(name: str, base: FunctionFigures, head: FunctionFigures) -> list[Change]:
    if head.recompiles == base.recompiles:
        return []
    more = head.recompiles > base.recompiles
    failed = f"failing guards: {', '.join(head.failed)}" if more else ""
    return [Change("recompiles", name, base.recompiles, head.recompiles, failed)]


def _counter(measure: str) -> Callable[[str, FunctionFigures, FunctionFigures], list[Change]]:
    """A function's measure that is one count (the :class:`FunctionFigures` field of its
    name, ``cache-entries``: ``cache_entries``): a change where both runs counted it and the
    counts differ (a compile-work count a torch does not record is None: compared with
    nothing)."""
    field_name = measure.replace("-", "_")

    def changes(name: str, base: FunctionFigures, head: FunctionFigures) -> list[Change]:
        old, new = getattr(base, field_name), getattr(head, field_name)
        if old is None or new is None or old == new:
            return []
        return [Change(measure, name, old, new)]

    return changes


def _guards(name: str, base: FunctionFigures, head: FunctionFigures) -> list[Change]:
    """The largest entry's count, and guards of new kinds or on new values (worse, though
    not more)."""
    new = []
    if base.kinds and head.kinds - base.kinds:
        new.append(f"new guard kinds: {', '.join(sorted(head.kinds - base.kinds))}")
    if head.values - base.values:
        new.append(f"new guards on values: {', '.join(sorted(head.values - base.values))}")
    counted = base.guards is not None and head.guards is not None and head.guards != base.guards
    if not (counted or new):
        return []
    return [
        Change("guards", name, base.guards or 0, head.guards or 0, "; ".join(new), new=bool(new))
    ]


def _guard_check(name: str, base: FunctionFigures, head: FunctionFigures) -> list[Change]:
    """Measured, so noisy: shown past :data:`GUARD_CHECK_FACTOR` and a microsecond; in the
    verdict only where the two runs' repetitions do not overlap (every one of the 31 timed
    checks of the slower run slower than every one of the faster's)."""
    if base.check_us is None or head.check_us is None:
        return []
    low, high = sorted((base.check_us, head.check_us))
    if not (high >= low * GUARD_CHECK_FACTOR and high - low >= 1.0):
        return []
    return [Change("guard-check", name, base.check_us, head.check_us, noise=_overlap(base, head))]


def _overlap(base: FunctionFigures, head: FunctionFigures) -> str:
    """Why a guard check's change is within noise ("" where it is not)."""
    if base.check_range is None or head.check_range is None:
        return "a run without the spread of its repeated checks"
    (base_low, base_high), (head_low, head_high) = base.check_range, head.check_range
    if head_low > base_high or base_low > head_high:
        return ""
    return (
        f"the 31 checks spread {base_low:.3g}-{base_high:.3g} us against "
        f"{head_low:.3g}-{head_high:.3g} us"
    )


def _test_recompiles(base: TestFigures, head: TestFigures, seconds: float) -> list[Change]:
    if head.recompiles == base.recompiles:
        return []
    return [Change("recompiles", None, base.recompiles, head.recompiles)]


def _break_changes(base: TestFigures, head: TestFigures, seconds: float) -> list[Change]:
    """New and gone graph breaks, by site; a break whose site changed but whose reason did
    not (code above it moved) is a move, neither better nor worse."""
    before, after = base.breaks, head.breaks
    new = [site for site in after if site not in before]
    gone = [site for site in before if site not in after]
    moves = []
    for site in list(new):
        match = next((old for old in gone if before[old] == after[site]), None)
        if match is not None:
            moves.append(f"moved from {match} to {site}: {after[site]}")
            new.remove(site)
            gone.remove(match)
    found = []
    if moves:
        found.append(Change("graph-breaks", None, len(moves), len(moves), "; ".join(moves), True))
    if new or gone:
        said = [f"new at {s}: {after[s]}" for s in new] + [f"gone at {s}" for s in gone]
        found.append(
            Change("graph-breaks", None, len(before) - len(moves), len(after) - len(moves),
                   "; ".join(said), new=bool(new))
        )  # fmt: skip
    return found


def _warm_start_misses(base: TestFigures, head: TestFigures, seconds: float) -> list[Change]:
    if base.warm_misses is None or head.warm_misses is None:
        return []
    if base.warm_misses == head.warm_misses:
        return []
    return [Change("warm-start-misses", None, base.warm_misses, head.warm_misses)]


COMPILE_SECONDS_NOISE = "each compile is timed once: the counted work decides"


def _compile_seconds(base: TestFigures, head: TestFigures, seconds: float) -> list[Change]:
    """Noisy: shown only where they changed by ``seconds`` or more, and never in the verdict:
    each compile runs once, so no repetition says what is noise (the counted work does)."""
    if abs(head.compile_seconds - base.compile_seconds) < seconds:
        return []
    return [
        Change(
            "compile-seconds",
            None,
            base.compile_seconds,
            head.compile_seconds,
            noise=COMPILE_SECONDS_NOISE,
        )
    ]


@dataclass(frozen=True)
class Measure:
    """One row of what ``compare`` measures: how a change of it is found (per function, per
    test), worded (:meth:`Change.text`) and summed up in the verdict; whether ``--fail-on``
    names it by default. A new measure is one row of :data:`MEASURES`."""

    one: str  # the verdict's noun: "2 more recompiles"
    many: str
    default: bool = False  # in --fail-on's default
    of_function: Callable[[str, FunctionFigures, FunctionFigures], list[Change]] | None = None
    of_test: Callable[[TestFigures, TestFigures, float], list[Change]] | None = None
    text: Callable[[Change], str] = _counted
    amount: Callable[[float, bool], str] | None = None  # the verdict's words, where not counted

    def total(self, amount: float, more: bool) -> str:
        """``2 more recompiles``; ``new guards`` (new kinds, not more); the row's own."""
        if self.amount is not None:
            return self.amount(amount, more)
        if not amount:
            return f"new {self.many}"
        return (
            f"{int(amount)} {'more' if more else 'fewer'} {self.one if amount == 1 else self.many}"
        )


# The measures, as --fail-on names them, in the order a test's changes are shown.
MEASURES: dict[str, Measure] = {
    "recompiles": Measure(
        "recompile", "recompiles", default=True, of_function=_recompiles, of_test=_test_recompiles
    ),
    "cache-entries": Measure("cache entry", "cache entries", of_function=_counter("cache-entries")),
    "guards": Measure("guard", "guards", of_function=_guards),
    "graph-breaks": Measure(
        "graph break", "graph breaks", default=True, of_test=_break_changes, text=_break_text
    ),
    "limit-hits": Measure(
        "recompile_limit hit",
        "recompile_limit hits",
        default=True,
        of_function=_counter("limit-hits"),
    ),
    "uncovered": Measure(
        "uncovered point",
        "uncovered points",
        default=True,
        of_function=_counter("uncovered"),
    ),
    "warm-start-misses": Measure(
        "warm-start miss",
        "warm-start misses",
        default=True,
        of_test=_warm_start_misses,
    ),
    "graphs": Measure("graph", "graphs", default=True, of_function=_counter("graphs")),
    "graph-ops": Measure("FX op", "FX ops", of_function=_counter("graph-ops")),
    "kernels": Measure("Inductor kernel", "Inductor kernels", of_function=_counter("kernels")),
    "restarts": Measure("Dynamo restart", "Dynamo restarts", of_function=_counter("restarts")),
    "unique-subgraphs": Measure(
        "distinct subgraph",
        "distinct subgraphs",
        default=True,
        of_function=_counter("unique-subgraphs"),
    ),
    "guard-check": Measure(
        "guard check",
        "guard checks",
        of_function=_guard_check,
        text=lambda c: f"guard check {c.base:.3g} us -> {c.head:.3g} us per call",
        amount=lambda _, more: f"{'slower' if more else 'faster'} guard checks",
    ),
    "compile-seconds": Measure(
        "compile second",
        "compile seconds",
        of_test=_compile_seconds,
        text=lambda c: f"compile seconds {c.base:.2f} s -> {c.head:.2f} s",
        amount=lambda s, more: f"{s:.2f} s {'more' if more else 'less'} compiling",
    ),
}
DEFAULT_FAIL_ON = tuple(name for name, row in MEASURES.items() if row.default)
_ORDER = {name: index for index, name in enumerate(MEASURES)}


def function_changes(name: str, base: FunctionFigures, head: FunctionFigures) -> list[Change]:
    """What differs between two runs of one function, in :data:`MEASURES`' order."""
    return [
        change
        for row in MEASURES.values()
        if row.of_function is not None
        for change in row.of_function(name, base, head)
    ]


def test_changes(base: TestFigures, head: TestFigures, seconds: float) -> list[Change]:
    """What differs between a test's two runs, worst measures first."""
    found: list[Change] = []
    for row in MEASURES.values():
        if row.of_test is not None:
            found += row.of_test(base, head, seconds)
    for name in sorted(set(base.functions) | set(head.functions)):
        found += function_changes(
            name,
            base.functions.get(name, FunctionFigures()),
            head.functions.get(name, FunctionFigures()),
        )
    return sorted(found, key=lambda c: (_ORDER[c.measure], c.function or ""))


@dataclass
class Comparison:
    """Two reports compared: the environment's changes, each test's, the tests in one run."""

    base_path: str
    head_path: str
    environment: list[tuple[str, Any, Any]]
    changed: dict[str, list[Change]]  # nodeid -> its changes (only tests with some)
    outcomes: dict[str, tuple[str, str]]  # nodeid -> (base, head) where the outcome changed
    only_base: list[str]
    only_head: list[str]
    fail_on: tuple[str, ...]
    incomplete: list[tuple[str, str]] = field(default_factory=list)  # (path, why) per side

    def totals(self, worse: bool) -> dict[str, tuple[float, int]]:
        """Per measure: the summed change (HEAD's more where ``worse``, else its less) and how
        many tests it is in. Recompiles are counted per function, so that one moved from
        ``f`` to ``g`` is one more (in ``g``) and one fewer (in ``f``); the test's own line
        counts where no function line does."""
        found: dict[str, tuple[float, int]] = {}
        for changes in self.changed.values():
            mine: dict[str, float] = {}
            per_function = any(
                c.function is not None and c.measure == "recompiles" for c in changes
            )
            for change in changes:
                if not (change.worse if worse else change.better):
                    continue
                if change.measure == "recompiles" and per_function == (change.function is None):
                    continue
                mine[change.measure] = mine.get(change.measure, 0.0) + abs(
                    change.head - change.base
                )
            for measure, amount in mine.items():
                total, tests = found.get(measure, (0.0, 0))
                found[measure] = (total + amount, tests + 1)
        return found

    @property
    def failed(self) -> list[str]:
        """The measures named by --fail-on on which HEAD is worse."""
        worse = self.totals(worse=True)
        return [m for m in self.fail_on if m in worse]

    def moved(self) -> int:
        """Tests whose graph breaks moved (other lines, the same reasons)."""
        return sum(1 for changes in self.changed.values() if any(c.moved for c in changes))

    def verdict(self) -> str:
        worse, better = self.totals(worse=True), self.totals(worse=False)
        only = len(self.only_base) + len(self.only_head)
        tail = f"; {plural(only, 'test')} in one run only" if only else ""
        moved = self.moved()
        if moved:
            tail = f"; graph breaks moved to other lines ({plural(moved, 'test')})" + tail
        if self.incomplete:
            partial = " and ".join(path for path, _ in self.incomplete)
            tail += f"; {partial} covers only the tests that ran (incomplete)"
        if not worse and not better:
            return f"no change{tail}" if not moved else f"no better, no worse{tail}"
        parts = []
        if worse:
            word = "HEAD is worse" if self.failed else "HEAD is worse where --fail-on does not look"
            parts.append(f"{word}: {_amounts(worse, 'more')}")
        if better:
            word = "better" if worse else "HEAD is better"
            parts.append(f"{word}: {_amounts(better, 'fewer')}")
        return "; ".join(parts) + tail


def _amounts(totals: dict[str, tuple[float, int]], word: str) -> str:
    """``2 more recompiles (1 test), new guards (1 test)``."""
    return ", ".join(
        f"{row.total(totals[name][0], word == 'more')} ({plural(totals[name][1], 'test')})"
        for name, row in MEASURES.items()
        if name in totals
    )


def _shown(value: Any) -> Any:
    """An environment value as the comparison prints it (a list of devices joined)."""
    return ", ".join(map(str, value)) if isinstance(value, list) else value


def compare(
    base: RunResults,
    head: RunResults,
    *,
    base_path: str = "BASE",
    head_path: str = "HEAD",
    fail_on: Iterable[str] = DEFAULT_FAIL_ON,
    seconds: float = DEFAULT_SECONDS,
) -> Comparison:
    base_env: dict[str, Any] = dict(base.environment)
    head_env: dict[str, Any] = dict(head.environment)
    environment = [
        (key, _shown(base_env.get(key)), _shown(head_env.get(key)))
        for key in ENVIRONMENT
        if base_env.get(key) != head_env.get(key)
    ]
    before, after = base.tests, head.tests
    changed: dict[str, list[Change]] = {}
    outcomes: dict[str, tuple[str, str]] = {}
    for nodeid in sorted(set(before) & set(after)):
        old, new = figures(*before[nodeid]), figures(*after[nodeid])
        changes = test_changes(old, new, seconds)
        if changes:
            changed[nodeid] = changes
        if old.outcome != new.outcome:
            outcomes[nodeid] = (old.outcome, new.outcome)
    return Comparison(
        base_path,
        head_path,
        environment,
        changed,
        outcomes,
        sorted(set(before) - set(after)),
        sorted(set(after) - set(before)),
        tuple(fail_on),
        [
            (path, run.incomplete)
            for path, run in ((base_path, base), (head_path, head))
            if run.incomplete is not None
        ],
    )


# -- renderers ------------------------------------------------------------------------------


def _tests(comparison: Comparison) -> Iterator[tuple[str, list[str]]]:
    """Each test that changed, with its lines: the outcome, the test's own changes, then one
    line per function that changed."""
    for nodeid in sorted(set(comparison.changed) | set(comparison.outcomes)):
        lines = []
        if nodeid in comparison.outcomes:
            old, new = comparison.outcomes[nodeid]
            lines.append(f"outcome {old} -> {new}")
        changes = comparison.changed.get(nodeid, [])
        lines += [c.text() for c in changes if c.function is None]
        functions: dict[str, list[str]] = {}
        for change in changes:
            if change.function is not None:
                functions.setdefault(change.function, []).append(change.text())
        lines += [f"{name}: {', '.join(texts)}" for name, texts in functions.items()]
        yield nodeid, lines


def text(comparison: Comparison) -> str:
    lines = [f"pytest-recompile compare: {comparison.base_path} -> {comparison.head_path}"]
    for key, old, new in comparison.environment:
        lines.append(f"environment: {key} {old} -> {new}")
    lines += [f"incomplete: {path}: {why}" for path, why in comparison.incomplete]
    for nodeid, shown in _tests(comparison):
        lines.append(nodeid)
        lines += [f"  {line}" for line in shown]
    lines += [f"only in {comparison.base_path}: {n}" for n in comparison.only_base]
    lines += [f"only in {comparison.head_path}: {n}" for n in comparison.only_head]
    lines.append(f"verdict: {comparison.verdict()}")
    return "\n".join(lines) + "\n"


def markdown(comparison: Comparison) -> str:
    lines = [
        "## torch.compile recompiles: "
        f"{md_code(comparison.base_path)} -> {md_code(comparison.head_path)}",
        "",
        f"**{comparison.verdict()}**",
        "",
    ]
    for path, why in comparison.incomplete:
        lines += [f"> **Warning:** {md_code(path)} is incomplete: {md_cell(why)}", ""]
    if comparison.environment:
        lines += ["| Environment | Base | Head |", "|---|---|---|"]
        lines += [
            f"| {key} | {md_code(str(old))} | {md_code(str(new))} |"
            for key, old, new in comparison.environment
        ]
        lines.append("")
    tests = list(_tests(comparison))
    if tests:
        lines += ["| Test | What changed |", "|---|---|"]
        lines += [
            f"| {md_code(nodeid)} | {'<br>'.join(map(md_cell, shown))} |" for nodeid, shown in tests
        ]
        lines.append("")
    for path, nodeids in (
        (comparison.base_path, comparison.only_base),
        (comparison.head_path, comparison.only_head),
    ):
        if nodeids:
            lines.append(f"Only in {md_code(path)}: " + ", ".join(md_code(n) for n in nodeids))
            lines.append("")
    return "\n".join(lines)


def as_json(comparison: Comparison) -> str:
    document = {
        "schema": COMPARE_SCHEMA,
        "version": 1,
        "base": comparison.base_path,
        "head": comparison.head_path,
        "environment": [
            {"field": key, "base": old, "head": new} for key, old, new in comparison.environment
        ],
        "tests": [
            {
                "nodeid": nodeid,
                "outcome": comparison.outcomes.get(nodeid),
                "changes": [c.to_dict() for c in comparison.changed.get(nodeid, [])],
            }
            for nodeid in sorted(set(comparison.changed) | set(comparison.outcomes))
        ],
        "incomplete": [{"report": path, "why": why} for path, why in comparison.incomplete],
        "only_base": comparison.only_base,
        "only_head": comparison.only_head,
        "fail_on": list(comparison.fail_on),
        "failed": comparison.failed,
        "verdict": comparison.verdict(),
    }
    return json.dumps(document, indent=2) + "\n"


RENDERERS = {"text": text, "markdown": markdown, "json": as_json}
