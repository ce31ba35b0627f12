"""Warm starts (pure): the ``warm_start`` marker's rule, what a fresh child process hands
back about torch's compile caches, and the verdict on a cold run and a warm run.

A marked test is run twice more, alone, each time in a freshly started process, both sharing
one new cache directory (:mod:`pytest_recompile.restarts`). The warm run passes when every
FX graph and AOTAutograd cache lookup hits and at least one lookup took place; a miss is
explained by the key components whose hashes differ from the cold run's event of the same
compile (torch's own labels), a guard miss by torch's stored guard expression, a bypass by
torch's reason, no lookup by why (a backend without a cache, the caches switched off).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Literal, TypedDict

from .budget import BudgetError, WarmStartRule
from .names import WARM_START, WARM_START_FORM, relative
from .results import CacheOutcomes, WarmRunResult, WarmStartResult
from .text import plural

CACHES = ("fx_graph", "aot_autograd")
CACHE_NAMES = {"fx_graph": "FX graph cache", "aot_autograd": "AOTAutograd cache"}
# the environment variables that switch torch's compile caches off, and the value that does
CACHES_OFF_VARIABLES = {
    "TORCHINDUCTOR_FORCE_DISABLE_CACHES": "1",
    "TORCHINDUCTOR_FX_GRAPH_CACHE": "0",
    "TORCHINDUCTOR_AUTOGRAD_CACHE": "0",
}
SHOWN = 8  # misses named one by one in a message; the rest are counted
VALUE_WIDTH = 72  # a component's value, shortened to


def parse_rule(marks: Iterable[Any], where: str) -> WarmStartRule | None:
    """The closest ``warm_start`` mark's rule (every stacked one checked), or None."""
    found: WarmStartRule | None = None
    label = f"@pytest.mark.{WARM_START} on {where}"
    form = f"accepted form is @pytest.mark.{WARM_START_FORM}"
    for mark in marks:
        if mark.args:
            raise BudgetError(f"{label} takes keyword arguments only; {form}")
        unknown = sorted(set(mark.kwargs) - {"allow_bypass", "dynamo"})
        if unknown:
            raise BudgetError(f"{label}: unknown keyword {', '.join(map(repr, unknown))}; {form}")
        for name, value in mark.kwargs.items():
            if not isinstance(value, bool):
                raise BudgetError(f"{label}: {name} must be True or False, got {value!r}; {form}")
        if found is None:
            found = WarmStartRule(**mark.kwargs)
    return found


# -- what a child hands back ------------------------------------------------------------------


class CacheEvent(TypedDict):
    """One lookup of a compile cache, from torch's structured-trace artifact."""

    cache: str  # "fx_graph" or "aot_autograd"
    outcome: str  # "hit", "miss", "bypass"
    status: str | None  # torch's cache_status_detailed: full_miss, guard_miss, hit
    key: str | None
    components: dict[str, list[str]]  # torch's label -> [hash, value]; {}: not named
    reason: str | None  # a bypass's reason
    guard_expr: str | None  # a guard miss: the guards torch stored with the entry
    compile: str  # torch's compile id ("0/0"), "" where unknown
    function: str | None  # the compiled function's qualname
    file: str | None
    line: int | None


class ChildCompile(TypedDict):
    """One frame Dynamo compiled in the child."""

    compile: str
    function: str
    file: str
    line: int
    inductor: bool  # its backend may use inductor (and so the caches)


class ChildRun(TypedDict):
    """What one child process hands back (through a file)."""

    outcome: str  # "passed", "failed", "skipped", "not run", "crashed", "timed out"
    error: str | None  # the child's own error (its longrepr, or its last output lines)
    seconds: float  # the child's wall time, start to exit
    events: list[CacheEvent]
    compiles: list[ChildCompile]
    counters: dict[str, dict[str, int]]  # torch's counters: cache -> outcome -> count
    caches_off: list[str]  # what switched the caches off ("TORCHINDUCTOR_...=1")
    functorch_config: dict[str, str]  # torch._functorch.config, portable part, as text
    components_named: bool  # this torch emitted the key components
    versions: dict[str, str | None]  # torch, triton, python
    problems: list[str]  # the plugin's own, in the child (the capture could not start)


def child_run(outcome: str, error: str | None = None, seconds: float = 0.0) -> ChildRun:
    """A child that handed nothing back (crashed, timed out, never started)."""
    return {
        "outcome": outcome,
        "error": error,
        "seconds": round(seconds, 3),
        "events": [],
        "compiles": [],
        "counters": {},
        "caches_off": [],
        "functorch_config": {},
        "components_named": False,
        "versions": {},
        "problems": [],
    }


# -- the verdict ------------------------------------------------------------------------------


def skipped_result(rule: WarmStartRule, why: str) -> WarmStartResult:
    return _result("skipped", rule, why, [], None, None)


def _result(
    status: Literal["passed", "failed", "error", "skipped"],
    rule: WarmStartRule,
    message: str | None,
    notes: list[str],
    cold: ChildRun | None,
    warm: ChildRun | None,
    at: CacheEvent | ChildCompile | None = None,
) -> WarmStartResult:
    figures = _figures(warm) if warm is not None else None
    lookups = hits = 0
    if figures is not None:
        for cache in CACHES:
            outcomes: CacheOutcomes = figures[cache]  # type: ignore[literal-required]
            lookups += outcomes["hits"] + outcomes["misses"] + outcomes["bypasses"]
            hits += outcomes["hits"]
    versions = (warm or cold or {"versions": {}})["versions"]
    return {
        "status": status,
        "source": rule.source,
        "message": message,
        "notes": notes,
        "cold": _figures(cold) if cold is not None else None,
        "warm": figures,
        "lookups": lookups,
        "hits": hits,
        "function": at["function"] if at else None,
        "file": at["file"] if at else None,
        "line": at["line"] if at else None,
        "torch": versions.get("torch"),
    }


def _figures(run: ChildRun) -> WarmRunResult:
    counts = _counts(run)
    return {
        "seconds": run["seconds"],
        "compiles": len(run["compiles"]),
        "fx_graph": counts["fx_graph"],
        "aot_autograd": counts["aot_autograd"],
        "guard_misses": sum(1 for e in run["events"] if e["status"] == "guard_miss")
        or run["counters"].get("aot_autograd", {}).get("guard_misses", 0),
    }


def _counts(run: ChildRun) -> dict[str, CacheOutcomes]:
    """Each cache's hits, misses and bypasses: from torch's counters, which count every
    lookup (the events may be missing on a torch that emits none)."""
    found: dict[str, CacheOutcomes] = {}
    for cache in CACHES:
        counted = run["counters"].get(cache, {})
        events = [e["outcome"] for e in run["events"] if e["cache"] == cache]
        found[cache] = {
            "hits": max(counted.get("hits", 0), events.count("hit")),
            "misses": max(counted.get("misses", 0), events.count("miss")),
            "bypasses": max(counted.get("bypasses", 0), events.count("bypass")),
        }
    return found


def judge(
    cold: ChildRun, warm: ChildRun, rule: WarmStartRule, root: str | None = None
) -> WarmStartResult:
    """The warm run against the cold one (files shown relative to ``root``)."""
    for name, run in (("cold", cold), ("warm", warm)):
        faults = run.get("problems") or []
        if faults:  # the plugin's own fault there: the check is not made, never failed
            said = f"not checked: {'; '.join(faults)} (the {name} run)"
            return _result("skipped", rule, said, [], cold, warm)
        if run["outcome"] == "skipped":
            last = (run["error"] or "").strip().splitlines()[-1:] or ["no reason"]
            said = f"not checked: the test skipped itself in the {name} run ({last[0]})"
            return _result("skipped", rule, said, [], cold, warm)
        if run["outcome"] != "passed":
            return _result("error", rule, _child_problem(name, run), [], cold, warm)
    problems: list[str] = []
    notes: list[str] = []
    first: CacheEvent | ChildCompile | None = None
    cold_events = _by_compile(cold["events"])
    # each warm miss with its number among its compile's lookups of that cache
    misses = [(e, i) for e, i in _numbered(warm["events"]) if e["outcome"] == "miss"]
    for event, index in misses[:SHOWN]:
        problems.append(_miss(event, index, cold_events, cold, warm, root))
    if len(misses) > SHOWN:
        problems.append(f"and {plural(len(misses) - SHOWN, 'more miss', 'more misses')}")
    first = misses[0][0] if misses else None
    bypasses = [e for e in warm["events"] if e["outcome"] == "bypass"]
    for event in bypasses:
        reason = " ".join((event["reason"] or "torch gave no reason").split())
        said = f"{_where(event, root)}: bypassed: {reason}"
        if rule.allow_bypass:
            notes.append(f"{said} (allowed by {rule.source}: every start compiles it again)")
        else:
            problems.append(f"{said}; every start compiles it again")
            first = first or event
    counts = _counts(warm)
    counted_misses = sum(counts[c]["misses"] for c in CACHES)
    if counted_misses > len(misses):  # no artifact for them
        problems.append(
            f"{_unsaid(counted_misses - len(misses), bool(misses), 'cache miss', 'es')} "
            "(an entry whose compiled graph was missing from the cache, or a torch that "
            f"describes none: torch {warm['versions'].get('torch')})"
        )
        first = first or next(iter(warm["compiles"]), None)
    counted_bypasses = sum(counts[c]["bypasses"] for c in CACHES)
    if counted_bypasses > len(bypasses):  # torch 2.13 counts a failed save so, unsaid
        said = (
            f"{_unsaid(counted_bypasses - len(bypasses), bool(bypasses), 'bypass', 'es')} "
            "(an entry torch could not save)"
        )
        if rule.allow_bypass:
            notes.append(f"{said} (allowed by {rule.source})")
        else:
            problems.append(f"{said}; every start compiles it again")
            first = first or next(iter(warm["compiles"]), None)
    if counted_misses and not warm["components_named"]:
        notes.append(
            f"torch {warm['versions'].get('torch')} does not name the key's components: "
            "the verdict is from its counters"
        )
    if rule.dynamo and warm["compiles"]:
        traced = warm["compiles"]
        names = ", ".join(sorted({_where(c, root) for c in traced}))
        problems.append(
            f"Dynamo traced {plural(len(traced), 'frame')} in the warm run ({names}): "
            f"{rule.source} requires a warm start that loads precompiled code and traces "
            "nothing (torch.compiler.load_compiled_function)"
        )
        first = first or traced[0]
    lookups = sum(counts[c]["hits"] + counts[c]["misses"] + counts[c]["bypasses"] for c in CACHES)
    precompiled = rule.dynamo and not warm["compiles"] and bool(cold["compiles"])
    if not lookups and not precompiled:
        problems.append(_no_lookup(cold, warm))
        first = first or next(iter(warm["compiles"]), None)
    if not problems:
        return _result("passed", rule, None, notes, cold, warm)
    head = f"the warm start of this test compiled again ({rule.source}):"
    body = "\n".join(f"  {p}" for p in problems)
    return _result("failed", rule, f"{head}\n{body}", notes, cold, warm, first)


def _unsaid(count: int, more: bool, noun: str, ending: str) -> str:
    """``2 more cache misses torch counted without describing them``."""
    many = count != 1
    return (
        f"{count} {'more ' if more else ''}{noun}{ending if many else ''} torch counted "
        f"without describing {'them' if many else 'it'}"
    )


def _child_problem(name: str, run: ChildRun) -> str:
    outcome = run["outcome"]
    what = {
        "failed": "the test failed",
        "skipped": "the test was skipped",
        "not run": "the test did not run",
        "crashed": "the process crashed",
        "timed out": "the process ran past the time limit",
    }.get(outcome, outcome)
    error = (run["error"] or "").strip()
    shown = "\n".join(f"    {line}" for line in error.splitlines()[-15:])
    return (
        f"the {name} run of the warm-start check ({what}, in a fresh process) gave no cache "
        f"verdict" + (f":\n{shown}" if shown else "")
    )


def _where(event: CacheEvent | ChildCompile, root: str | None) -> str:
    function = event["function"] or "a compiled function"
    file = relative(event["file"], root) if event["file"] else None
    place = f" ({file}:{event['line']})" if file else ""
    cache = CACHE_NAMES.get(str(event.get("cache")), "")
    return f"{cache} of {function}{place}" if cache else f"{function}{place}"


def _numbered(events: list[CacheEvent]) -> list[tuple[CacheEvent, int]]:
    """Each event with its number among its compile's lookups of its cache."""
    seen: dict[tuple[str, str], int] = {}
    found = []
    for event in events:
        index = seen.get((event["compile"], event["cache"]), 0)
        seen[(event["compile"], event["cache"])] = index + 1
        found.append((event, index))
    return found


def _by_compile(events: list[CacheEvent]) -> dict[tuple[str, str, int], CacheEvent]:
    """Each event by (compile id, cache, its number among that compile's lookups there):
    the cold run's event of the same compile as a warm one."""
    return {(e["compile"], e["cache"], i): e for e, i in _numbered(events)}


def _miss(
    event: CacheEvent,
    index: int,
    cold_events: Mapping[tuple[str, str, int], CacheEvent],
    cold: ChildRun,
    warm: ChildRun,
    root: str | None,
) -> str:
    head = f"{_where(event, root)}: miss"
    if event["status"] == "guard_miss":
        expr = event["guard_expr"] or "not stored"
        return f"{head}: an entry with this key exists but its guards failed: {expr}"
    before = cold_events.get((event["compile"], event["cache"], index))
    if before is None:
        return f"{head}: the cold run made no such compile, so no entry could be saved for it"
    if event["key"] is not None and before["key"] == event["key"]:
        aot = cold["counters"].get("aot_autograd", {})
        unsaved = aot.get("saved", 0) < aot.get("misses", 0)
        if event["cache"] == "aot_autograd" and before["outcome"] == "miss" and unsaved:
            return (
                f"{head}: the same key as the cold run, which saved no entry for it: a forward "
                "compiled in grad mode whose backward never ran (AOTAutograd saves the entry "
                "once the backward is compiled); for inference, call it under torch.no_grad() "
                "or torch.inference_mode()"
            )
        return f"{head}: the same key as the cold run, but its entry was not found (not saved)"
    moved = _moved(before, event, cold, warm)
    if not moved:
        if not event["components"] or not before["components"]:
            return (
                f"{head}: the key changed ({before['key']} -> {event['key']}); this torch "
                "does not name the key's components"
            )
        return f"{head}: the key changed ({before['key']} -> {event['key']}), no component did"
    return f"{head}: the key changed: " + "; ".join(moved)


def _moved(before: CacheEvent, event: CacheEvent, cold: ChildRun, warm: ChildRun) -> list[str]:
    """Each component whose hash differs, by torch's label, with both values shortened."""
    found = []
    one, other = before["components"], event["components"]
    for label in list(one) + [label for label in other if label not in one]:
        was, now = one.get(label), other.get(label)
        if was is not None and now is not None and was[0] == now[0]:
            continue
        if was is None or now is None:
            found.append(f"{label} only in the {'warm' if was is None else 'cold'} run")
        elif label == "gm":
            found.append(f"gm (the graph): {_first_difference(was[1], now[1])}")
        elif label == "autograd_config":
            found.append(f"autograd_config: {_options(cold, warm)}")
        else:
            found.append(f"{label}: {_pair(was[1], now[1])}")
    return found


def _first_difference(one: str, other: str) -> str:
    a, b = one.splitlines(), other.splitlines()
    for left, right in zip(a, b, strict=False):
        if left != right:
            return _pair(left, right)
    return f"{len(a)} lines -> {len(b)} lines"


def _options(cold: ChildRun, warm: ChildRun) -> str:
    """The torch._functorch.config options that differ between the two processes."""
    one, other = cold["functorch_config"], warm["functorch_config"]
    moved = [
        f"torch._functorch.config.{name}: {_short(one.get(name, '-'))} -> "
        f"{_short(other.get(name, '-'))}"
        for name in sorted(set(one) | set(other))
        if one.get(name) != other.get(name)
    ]
    return "; ".join(moved) or "a functorch option (not named: the two snapshots agree)"


def _pair(one: str, other: str) -> str:
    """Two values side by side, each cut to the same window around where they first differ
    (two long values that share their first words still read apart)."""
    a, b = " ".join(one.split()), " ".join(other.split())
    if len(a) <= VALUE_WIDTH and len(b) <= VALUE_WIDTH:
        return f"{a} -> {b}"
    start = next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), 0)
    low = max(0, start - VALUE_WIDTH // 3)

    def cut(text: str) -> str:
        shown = text[low : low + VALUE_WIDTH]
        return ("..." if low else "") + shown + ("..." if low + VALUE_WIDTH < len(text) else "")

    return f"{cut(a)} -> {cut(b)}"


def _short(text: str) -> str:
    flat = " ".join(str(text).split())
    return flat if len(flat) <= VALUE_WIDTH else flat[: VALUE_WIDTH - 3] + "..."


def _no_lookup(cold: ChildRun, warm: ChildRun) -> str:
    """Why the warm run asked no cache: never a silent pass."""
    if warm["caches_off"]:
        return (
            f"no cache lookup at all: the caches are switched off ({', '.join(warm['caches_off'])})"
            "; a restart compiles everything again"
        )
    if not warm["compiles"] and not cold["compiles"]:
        return "no cache lookup at all: the test compiled nothing in either run"
    if warm["compiles"] and not any(c["inductor"] for c in warm["compiles"]):
        names = ", ".join(sorted({c["function"] for c in warm["compiles"]}))
        return (
            f"no cache lookup at all: {names} compiled with a backend that has no cache "
            "(eager, aot_eager, a custom backend): nothing is saved for a restart; the "
            "inductor backend is what the caches serve"
        )
    return "no cache lookup at all, though Dynamo compiled: nothing was saved for a restart"


def worded(result: WarmStartResult) -> str:
    """One line for the terminal block: the two runs and the saving."""
    cold, warm = result["cold"], result["warm"]
    if result["status"] == "skipped" or cold is None or warm is None:
        return result["message"] or result["status"]
    return (
        f"cold {cold['seconds']:.1f} s, warm {warm['seconds']:.1f} s; warm lookups "
        f"{result['lookups']}, hits {result['hits']}"
    )
