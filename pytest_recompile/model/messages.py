"""The wording of broken rules and their evidence: one rendering of each broken rule,
function block, recompile line, failing guard, line of code and graph break, which every
output that shows them reuses (failure messages, summaries, the JSON report, CI outputs).

A broken rule is worded once, when its result is frozen (:func:`violation_result`); every
other text is rendered from the frozen result (the JSON-ready values of :mod:`.results`), so
the failure message, a child's failure and the summaries read the same facts. Pure: imports
neither pytest nor torch (recording and child processes use it).

Other wording lives with what says it: usage errors in ``settings.py`` (and the markers' in
``model/markers.py``), fix hints in ``model/guards.py``, each output's own lines in its module
of ``reports/`` (the header and totals in ``terminal.py``, the ``recompile_limit`` line in
``recompile_limit.py``, the caches' state in ``durations.py``), a warm block's refusal in
``recording/errors.py``, a budget's rules in words in ``Budget.describe``, the run's verdicts
and merge conflicts in ``model/run.py``, and the text primitives (a plural, a ``file:line``)
in ``model/text.py``.
"""

from __future__ import annotations

import re
from typing import Any

from .guards import GUARDS_FIX, LIMIT_FIX, OWN_LIMIT_FIX, hint_for, label_for
from .judge import Violation
from .names import PREFIX
from .records import FunctionRecord
from .results import (
    EntryGuardsResult,
    FunctionResult,
    GraphBreakResult,
    ProcessResult,
    ReasonResult,
    RecompileResult,
    SourceLineResult,
    ViolationKind,
    ViolationResult,
    WorkResult,
    diverging,
)
from .text import location, plural

STOPPED = "stopped here, before compiling"


EAGER_FALLBACK = "fell back to eager"
DIVERGE = "ranks diverge"  # a divergence's first words


LIMIT_RAISED = (
    "torch refused to compile it and raised FailOnRecompileLimitHit "
    "(fail_on_recompile_limit_hit or fullgraph)"
)


def compile_name_said(fn: FunctionResult) -> str:
    """`` (torch.compile name='my_region')`` where the call gave one and torch kept it."""
    name = fn.get("compile_name")
    return f" (torch.compile name={name!r})" if name else ""


def limit_outcome(fn: FunctionResult) -> str:
    """What torch did when the function hit recompile_limit: raised, or ran it uncompiled."""
    return LIMIT_RAISED if fn["limit_raised"] else EAGER_FALLBACK


def limit_fix(limit: str) -> str:
    """The fix for a hit of ``limit`` (as :mod:`.._torch.events` names it)."""
    return OWN_LIMIT_FIX if limit.startswith("torch.compile(") else LIMIT_FIX


def _unknown_function(v: Violation) -> str:
    import difflib

    close = difflib.get_close_matches(v.wanted, list(v.compiled), n=1)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    compiled = ", ".join(v.compiled) or "none"
    return f"{v.source} names no function this test compiled (compiled: {compiled}){hint}"


def _work_message(v: Violation) -> str:
    """``'Model.forward' made 4 distinct nested_compile_region subgraphs, budget 1
    (@max_unique_subgraphs(1)) at model.py:12``; the baseline's: from what to what."""
    from .budget import CAPPED, WORK_WORDS
    from .work import FIXES

    one, many = WORK_WORDS[v.measure]
    if v.baseline is None:  # a marker's: its own words
        many = CAPPED[v.measure]
        one = many.removesuffix("s")
    words = one if v.used == 1 else many
    record = v.function
    who = f"'{record.qualname}'" if record is not None else "this test"
    at = f" ({location(record.filename, record.lineno)})" if record is not None else ""
    if v.used < 0:
        from .work import FIELDS

        return (
            f"{v.source}: this torch does not record {words} ({FIELDS[v.measure]}), so the "
            "rule cannot be judged; run it on a torch that does (docs/compile-work.md)"
        )
    if v.baseline is not None:
        return (
            f"{who} compiled {v.used} {words}{at}, the baseline {v.baseline} ({v.source}: at most "
            f"{v.allowed}); {FIXES[v.measure]}, or accept it with --recompile-baseline-update"
        )
    said = f"{who} compiled {v.used} {words}{at}, budget {v.allowed} ({v.source})"
    return f"{said}; {FIXES[v.measure]}"


def violation_message(v: Violation) -> str:
    """The one wording of a broken rule, without the ``pytest-recompile:`` prefix: the JSON
    report, the summaries and the CI outputs carry it (:func:`violation_result`), the failure
    message prints it after the prefix."""
    fn = v.function.qualname if v.function is not None else "?"
    if v.kind == "limit":
        if v.function is not None and v.function.limit_raised:
            return f"'{fn}' hit {v.source}: {LIMIT_RAISED}; remove the cause of its recompiles"
        return f"'{fn}' hit {v.source} and {EAGER_FALLBACK}: {limit_fix(v.source)}"
    if v.kind == "function":
        first = f" ({_first_guard_of(v.function)})" if v.function is not None else ""
        return f"'{fn}' recompiled {plural(v.used, 'time')}{first}, budget {v.allowed} ({v.source})"
    if v.kind == "unexpected":
        # with the detail where the marker named details (expect_guards('TENSOR_MATCH(size)'))
        detailed = "(" in v.source.partition("(")[2]
        kinds = ", ".join(sorted({r.label if detailed else r.kind for r in v.reasons}))
        return (
            f"'{fn}' recompiled because of {kinds}, not a kind this test expects "
            f"({v.source}): {v.reasons[0].text}"
        )
    if v.kind == "forbidden":
        kinds = ", ".join(sorted({g.kind for g in v.guards}))
        return (
            f"'{fn}' installed {plural(v.used, 'forbidden guard')} of kind {kinds} "
            f"({v.source}): {v.guards[0].text}"
        )
    if v.kind == "guards" and v.entry is not None:
        accept = (
            "; or accept them with --recompile-baseline-update" if v.source == "baseline" else ""
        )
        return (
            f"'{fn}' cache entry [{v.entry.entry}] checks {v.used} guards on every call, "
            f"budget {v.allowed} ({v.source}): {kinds_text(v.entry.to_dict())}{accept}"
        )
    if v.kind == "new_guards":
        return (
            f"'{fn}' has {plural(v.used, 'guard')} on a Python value the baseline does not have: "
            f"{', '.join(v.values)}; a value newly baked into the graph recompiles when it "
            "changes: pass it as a tensor, or accept it with --recompile-baseline-update"
        )
    if v.kind == "graph_breaks":
        return f"{plural(v.used, 'graph break')}, budget {v.allowed} ({v.source})"
    if v.kind == "cudagraph_rerecords":
        return (
            f"{plural(v.used, 'CUDA-graph re-record')}, budget {v.allowed} ({v.source}): "
            "not recompiles, but each re-record costs a capture; keep input shapes and "
            "addresses stable"
        )
    if v.kind == "unknown_function":
        return _unknown_function(v)
    if v.kind == "fullgraph":
        return f"graph break under fullgraph ({v.source}): {v.breaks[0].reason}"
    if v.kind == "work":
        return _work_message(v)
    if v.kind == "uncovered" and v.certificate is not None:
        return f"{v.certificate.message()} ({v.source})"
    return f"{plural(v.used, 'recompile')}{_worst_text(v)}, budget {v.allowed} ({v.source})"


def violation_result(v: Violation) -> ViolationResult:
    """A broken rule, frozen: its wording and the evidence the failure message shows."""
    certificate = v.certificate
    function = v.function.qualname if v.function is not None else None
    found: ViolationResult = {
        "kind": v.kind,
        "source": v.source,
        "message": violation_message(v),
        "function": certificate.function if certificate is not None else function,
        "reasons": [r.to_dict() for r in v.reasons],
        "guards": [g.to_dict() for g in v.guards],
        "breaks": [b.to_dict() for b in v.breaks],
    }
    if certificate is not None:
        found["certificate"] = certificate.to_dict()
    return found


def told(kind: ViolationKind, source: str, message: str) -> ViolationResult:
    """A broken rule worded where it was found (a warm block, ranks that diverged)."""
    return {
        "kind": kind,
        "source": source,
        "message": message,
        "function": None,
        "reasons": [],
        "guards": [],
        "breaks": [],
    }


def first_reason(fn: FunctionResult) -> ReasonResult | None:
    """The first reason of the function's first recompile that has one: the one to fix first."""
    for recompile in fn["recompiles"]:
        if recompile["reasons"]:
            return recompile["reasons"][0]
    return None


def first_guard(fn: FunctionResult, *, actual: bool = False) -> str | None:
    """``KIND(detail): guard`` of the function's first recompile that has a reason (the one
    to fix first); with ``actual``, the value the call passed to an ``==`` guard."""
    reason = first_reason(fn)
    return reason_text(reason, actual=actual) if reason is not None else None


def line_to_change(reason: ReasonResult) -> SourceLineResult | None:
    """The user's own line that read a failing guard's value (where torch named one)."""
    return reason["own_site"] or reason["site"]


def source_location(site: SourceLineResult, root: str | None = None) -> str:
    """``file:line`` of a source line, as :func:`.names.relative` shows every path."""
    return location(site["file"], site["line"], root)


def site_text(reason: ReasonResult, root: str | None = None) -> str:
    """``file:line`` of the line that read the guard's value, and the user's own line after
    it where that one is library code; "" where torch named none."""
    site, own = reason["site"], reason["own_site"]
    if site is None:
        return ""
    text = source_location(site, root)
    return text + (f" (your code: {source_location(own, root)})" if own else "")


def _first_guard_of(record: FunctionRecord) -> str:
    return first_guard(record.to_dict()) or "torch gave no reason"


def reason_text(reason: ReasonResult, *, actual: bool = True) -> str:
    """A failing guard: ``KIND(detail): guard (this call: value)``."""
    return guard_text(
        reason["kind"], reason["detail"], reason["text"], reason["actual"] if actual else None
    )


def reason_label(reason: ReasonResult) -> str:
    return label_for(reason["kind"], reason["detail"])


def reason_hint(reason: ReasonResult) -> str:
    return hint_for(reason["kind"], reason["detail"], reason["source"], reason["text"])


def _worst_text(v: Violation) -> str:
    """Which function the recompiles of a total were, so one line is enough to act on:
    `` of f (KIND: guard)``, or `` in 3 functions, most of f (2; KIND: guard)``."""
    if not v.counted:
        return ""
    worst = max(
        v.counted, key=lambda r: (r.recompile_count, any(rc.stopped for rc in r.recompiles))
    )
    if len(v.counted) == 1:
        return f" of {worst.qualname} ({_first_guard_of(worst)})"
    return (
        f" in {len(v.counted)} functions, most of {worst.qualname} "
        f"({worst.recompile_count}; {_first_guard_of(worst)})"
    )


def guard_text(kind: str, detail: str | None, text: str, actual: str | None = None) -> str:
    """``KIND(detail): guard``, and `` (this call: 1)`` when ``actual`` gives the value a call
    passed where an ``==`` guard expected another."""
    passed = f" (this call: {actual})" if kind == "EQUALS_MATCH" and actual else ""
    return f"{label_for(kind, detail)}: {text}{passed}"


_RESUME = re.compile(r"torch_dynamo_resume_in_(\w+?)_at_(\d+)")


def function_name(name: str, qualname: str | None = None) -> str:
    """A function as users know it: torch names the code after a graph break
    ``torch_dynamo_resume_in_forward_at_42``; this says ``BreakNet.forward (after its graph
    break at line 42)``, with ``qualname``, the compiled function's, where it is that one."""
    found = _RESUME.fullmatch(name)
    if found is None:
        return name
    parent, line = found.groups()
    if qualname is not None and qualname.rpartition(".")[2] == parent:
        parent = qualname
    return f"{parent} (after its graph break at line {line})"


def site_lines(
    reason: ReasonResult,
    root: str | None = None,
    indent: str = "      ",
    qualname: str | None = None,
) -> list[str]:
    """Where torch says the failing guard's value was read: ``guard from file:line in f:
    code``, and the user's own line where that one is library code; none where torch gave no
    location (older releases, tensors, global state). ``qualname``: the compiled function's,
    which names the part of it after a graph break (see :func:`function_name`)."""
    lines = []
    for word, site in (("guard from", reason["site"]), ("in your code", reason["own_site"])):
        if site is not None:
            code = f": {site['code']}" if site["code"] else ""
            where = source_location(site, root)
            named = function_name(site["function"], qualname)
            lines.append(f"{indent}{word} {where} in {named}{code}")
    return lines


def recompile_line(
    index: int, recompile: RecompileResult, root: str | None = None, qualname: str | None = None
) -> list[str]:
    entry = f" [{recompile['compile_id']}]"
    resume = " (graph-break resume frame)" if recompile["resume"] else ""
    tail = f"   <- {STOPPED}" if recompile["stopped"] else ""
    if not recompile["reasons"]:
        return [f"    recompile {index}{entry}{resume}: (torch gave no reason){tail}"]
    first, *others = recompile["reasons"]
    lines = [f"    recompile {index}{entry}{resume} {reason_text(first)}{tail}"]
    lines += site_lines(first, root, qualname=qualname)
    if others:
        older = others[0]
        more = f" and {len(others) - 1} more" if len(others) > 1 else ""
        lines.append(
            f"      also rejected by {older['entry'] or '?'} {reason_label(older)}: "
            f"{older['text']}{more}"
        )
    return lines


COMPILE_ID_NOTE = (
    "[frame/attempt] is torch's compile id, numbered across the whole process (earlier "
    "tests' compiles count too), not this test's cache entries"
)


def _attempt(compile_id: str) -> int:
    """The attempt of a compile id ("6/3" -> 3); 0 when it has none."""
    attempt = compile_id.rpartition("/")[2]
    return int(attempt) if attempt.isdigit() else 0


def fix_lines(pairs: list[tuple[str, str]], indent: str = "    ") -> list[str]:
    """One ``fix`` line per distinct (kind label, hint)."""
    return [f"{indent}fix {label}: {hint}" for label, hint in dict.fromkeys(pairs)]


def function_block(
    fn: FunctionResult, violations: list[ViolationResult], root: str | None = None
) -> list[str]:
    seconds = fn["recompile_seconds"]
    cost = f", {seconds:.3f} s spent recompiling" if seconds else ""
    lines = [
        f"  {fn['qualname']}{compile_name_said(fn)}  {location(fn['file'], fn['line'], root)}",
        f"    cache entries: {fn['cache_entries']}, compiles: {fn['compiles']}, "
        f"recompiles: {len(fn['recompiles'])}{cost}",
    ]
    fixes: list[tuple[str, str]] = []
    for index, recompile in enumerate(fn["recompiles"], 1):
        lines += recompile_line(index, recompile, root, fn["qualname"])
        fixes += [(reason_label(r), reason_hint(r)) for r in recompile["reasons"][:1]]
    if any(_attempt(r["compile_id"]) > fn["cache_entries"] for r in fn["recompiles"]):
        lines.append(f"    {COMPILE_ID_NOTE}")
    own = [v for v in violations if v["function"] == fn["qualname"]]
    for v in own:
        if v["kind"] == "unexpected":
            fixes += [(reason_label(r), reason_hint(r)) for r in v["reasons"]]
        if v["kind"] == "forbidden":
            for guard in v["guards"]:
                lines.append(
                    f"    forbidden guard [{guard['entry']}] {guard['kind']} on "
                    f"{guard['source']}: {guard['text']}"
                )
                hint = hint_for(guard["kind"], None, guard["source"], guard["text"])
                fixes.append((guard["kind"], hint))
    if fn["dynamic_sources"]:
        sources = ",".join(fn["dynamic_sources"])
        fixes.append(
            (
                "TENSOR_MATCH(size)",
                f'or compile them dynamic from the start: TORCH_COMPILE_DYNAMIC_SOURCES="{sources}"'
                " (torch's automatic-dynamic state after these recompiles)",
            )
        )
    lines += [f"    guards {entry_line(e)}" for e in fn["entries"]]
    if any(v["kind"] == "guards" for v in own):
        fixes.append(("too many guards", GUARDS_FIX))
    work = fn.get("work")
    worked = (v["kind"] == "work" and v["function"] in (None, fn["qualname"]) for v in violations)
    if work is not None and any(worked):
        lines.append(f"    compile work: {work_text(work)}")
        lines += [f"    restarted: {reason}" for reason in work["restart_reasons"]]
    if fn["recompile_limit"]:
        lines.append(
            f"    hit {fn['recompile_limit']} {plural(fn['limit_hits'], 'time')}: "
            f"{limit_outcome(fn)}"
        )
    return lines + fix_lines(fixes)


def work_text(work: WorkResult, torch: str | None = None) -> str:
    """``2 graphs, 21 FX ops (25 nodes, 5 inputs), 6 Inductor kernels, 1 distinct
    subgraph called 4 times, 0 restarts`` (3 of them reused); a figure this torch does not
    record is said so, never 0."""
    lacking = f"not recorded by torch {torch}" if torch else "not recorded by this torch"

    def count(value: int | None, one: str, many: str | None = None) -> str:
        if value is None:
            return f"{many or one + 's'} {lacking}"
        return plural(value, one, many)

    parts = [plural(work["graphs"], "graph")]
    ops = count(work["ops"], "FX op")
    if work["ops"] is not None and work["nodes"] is not None and work["inputs"] is not None:
        ops += f" ({plural(work['nodes'], 'node')}, {plural(work['inputs'], 'input')})"
    parts.append(ops)
    parts.append(count(work["kernels"], "Inductor kernel"))
    if work["subgraphs"] is None:
        parts.append(f"subgraphs {lacking}")
    elif work["subgraphs"]:
        calls = work["subgraph_calls"] or 0
        parts.append(
            f"{plural(work['subgraphs'], 'distinct subgraph')} called {plural(calls, 'time')}"
        )
    parts.append(count(work["restarts"], "restart"))
    compiles = plural(work["compiles"], "compile")
    reused = f" ({work['reused']} of {compiles} reused)" if work["reused"] else ""
    return ", ".join(parts) + reused


def break_lines(breaks: list[GraphBreakResult], root: str | None = None) -> list[str]:
    lines = []
    for index, found in enumerate(breaks, 1):
        lines.append(
            f"  graph break {index} at {location(found['file'], found['line'], root)} "
            f"in {found['function']}: {found['reason']}"
        )
        if found["code"]:
            lines.append(f"      {found['code']}")
        if found["hint"]:
            lines.append(f"    fix: {found['hint']}")
    return lines


def worst_first(
    functions: list[FunctionResult], named: frozenset[str] = frozenset()
) -> list[FunctionResult]:
    """The functions that recompiled, hit recompile_limit or are ``named`` (by a broken
    rule), worst first: a limit hit, then the most recompiles."""
    bad = [
        f for f in functions if f["recompiles"] or f["recompile_limit"] or f["qualname"] in named
    ]
    return sorted(bad, key=lambda f: (not f["recompile_limit"], -len(f["recompiles"])))


def failure_message(
    functions: list[FunctionResult],
    violations: list[ViolationResult],
    *,
    stopped: bool = False,
    site: str | None = None,
    root: str | None = None,
) -> str:
    """The failure message of a test (or a process, or a block): its broken rules, then each
    offending function's block and each broken rule's graph breaks."""
    return "\n".join(message_lines(functions, violations, stopped=stopped, site=site, root=root))


def message_lines(
    functions: list[FunctionResult],
    violations: list[ViolationResult],
    *,
    stopped: bool = False,
    site: str | None = None,
    root: str | None = None,
) -> list[str]:
    """:func:`failure_message`'s lines: each broken rule's first (``PREFIX`` and its
    message), then the evidence, indented."""
    lines = [f"{PREFIX} {v['message']}" for v in violations]
    named = frozenset(v["function"] for v in violations if v["function"] is not None)
    if any(v["kind"] == "work" and v["function"] is None for v in violations):
        named |= {fn["qualname"] for fn in functions if fn.get("work")}  # the test's work
    for fn in worst_first(functions, named):
        lines += function_block(fn, violations, root)
    for v in violations:
        lines += break_lines(v["breaks"], root)
    if stopped:
        at = f" at {site}" if site else ""
        lines.append(f"  fail-fast: stopped{at}, before that recompile ran")
    return lines


def kinds_text(entry: EntryGuardsResult, shown: int = 3) -> str:
    """``88 TYPE_MATCH, 81 TENSOR_MATCH, 81 DIMENSION_DYNAMIC_MARKING_GUARD`` (the kinds
    that make up most of it) and how many sit on parameters."""
    if entry["guards"] is None:
        return "kinds unknown: the entry was gone (a reset) before its guard tree was read"
    kinds = list(entry["kinds"].items())
    parts = [f"{n} {kind}" for kind, n in kinds[:shown]]
    rest = sum(n for _, n in kinds[shown:])
    if rest:
        parts.append(f"{rest} other")
    text = ", ".join(parts)
    if entry["on_parameters"]:
        text += f"; {entry['on_parameters']} on module parameters and buffers"
    return text


def entry_line(entry: EntryGuardsResult) -> str:
    """One entry's guards in a line: ``[0/0] 340 guards (88 TYPE_MATCH, ...); torch:
    guard_count 505, estimated 131 us per check`` (torch's count is of its guard list
    before the tree is built; its latency, one noisy measurement at compile time)."""
    guards, torch_count, latency = (
        entry["guards"],
        entry["torch_guard_count"],
        entry["guard_latency_us"],
    )
    if guards is not None:
        counted = f"{guards} guards ({kinds_text(entry)})"
    else:
        counted = f"{torch_count or 0} guards by torch's count ({kinds_text(entry)})"
    torch = []
    if guards is not None and torch_count is not None:
        torch.append(f"guard_count {torch_count}")
    if latency is not None:
        torch.append(f"estimated {latency:g} us per check")
    measured = entry.get("guard_check_us")
    said = f"; torch: {', '.join(torch)}" if torch else ""
    if measured is not None:  # the median of repeated checks on the call that made it
        said += f"; measured {measured:.3g} us per check"
    return f"[{entry['entry']}] {counted}{said}"


def other_torch(note: str) -> str:
    """``baseline from torch A; this run B``, and what to do about it."""
    return (
        f"{note}: torch's change may be the cause; once it is understood, "
        "update the baseline with --recompile-baseline-update"
    )


def who(process: ProcessResult) -> str:
    """``rank 1 (pid 4242)``, or ``pid 4242 (python -c ...)`` for a child without a rank."""
    if process["rank"] is not None:
        return f"rank {process['rank']} (pid {process['pid']})"
    return f"pid {process['pid']} ({process['command']})"


def failure_lines(processes: list[ProcessResult]) -> list[str]:
    """The children's broken rules, each child's message under its rank and pid."""
    lines = []
    for process in processes:
        if not process["violations"]:
            continue
        first, *rest = message_lines(
            process["functions"], process["violations"], stopped=process["stopped"]
        )
        lines.append(f"{PREFIX} {who(process)}: {first.removeprefix(PREFIX).strip()}")
        lines += [f"  {line}" for line in rest]
    return lines


def notes(processes: list[ProcessResult]) -> list[str]:
    """Children that ended without a complete record."""
    return [
        f"{who(p)} ended without a complete record ({p['problem']}): its compiles up to its "
        "last complete record are counted"
        for p in processes
        if not p["complete"]
    ]


def _times(count: int) -> str:
    return "once" if count == 1 else "twice" if count == 2 else f"{count} times"


def failed_kinds(function: FunctionResult | dict[str, Any]) -> str:
    """The guard kinds a function's recompiles failed on, first reason of each:
    ``TENSOR_MATCH(size), GLOBAL_STATE(grad_mode)`` ("" where torch gave none)."""
    labels = [reason_label(r) for rc in function["recompiles"] for r in rc["reasons"][:1]]
    return ", ".join(dict.fromkeys(labels))


def _why(function: dict[str, Any]) -> str:
    return failed_kinds(function) or "no reason given"


def divergence(processes: list[ProcessResult]) -> str | None:
    """``ranks diverge: rank 0 recompiled `forward` once (TENSOR_MATCH(size)), rank 1 did
    not``: the wording of :func:`~.results.diverging` (None: the ranks agree, or fewer than
    two ranks)."""
    parts = []
    for name, seen in diverging(processes).items():
        words = [
            f"rank {rank} recompiled `{name}` {_times(len(fn['recompiles']))} ({_why(fn)})"
            if fn["recompiles"]
            else f"rank {rank} did not"
            for rank, fn in sorted(seen.items())
        ]
        parts.append(", ".join(words))
    return f"{DIVERGE}: {'; '.join(parts)}" if parts else None
