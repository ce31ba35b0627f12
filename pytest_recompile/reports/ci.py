"""Outputs for CI (pure: the run's results in, text out): the Markdown summary (GitHub's job
summary, ``--recompile-report-md``) and GitHub Actions error annotations.

Both read the JSON-ready per-test results the controller collected from the reports, so they
are the same under pytest-xdist; only the controller writes them.
"""

from __future__ import annotations

import linecache
from collections.abc import Iterator, Mapping
from typing import NamedTuple

from ..model.guard_cost import entry_count, largest_result
from ..model.messages import (
    failed_kinds,
    first_guard,
    first_reason,
    fix_lines,
    limit_outcome,
    line_to_change,
    reason_hint,
    reason_label,
    reason_text,
    site_text,
    who,
    work_text,
    worst_first,
)
from ..model.names import relative
from ..model.results import (
    FunctionResult,
    TestResult,
    below_baseline,
    functions_of,
    per_process,
)
from ..model.run import Attempt, RunResults
from ..model.text import plural
from .markdown import md_cell, md_code
from .terminal import INCOMPLETE, switched_off_line, totals_line

# GitHub shows about 10 error annotations per step, and takes at most 1 MiB of job summary
# per step (docs.github.com: "Adding a job summary").
MAX_ANNOTATIONS = 10
SUMMARY_LIMIT = 1024 * 1024
TOP_FUNCTIONS = 10
TITLE = "torch.compile recompile gate"

Results = Mapping[str, Attempt]  # nodeid -> its attempt


# -- Markdown -------------------------------------------------------------------------------


class CompiledFunction(NamedTuple):
    """A function of the test's own process (``where`` empty) or of a child process
    (``where``: `` in rank 1 (pid 4242)``)."""

    fn: FunctionResult
    where: str = ""


def _functions(data: TestResult) -> list[CompiledFunction]:
    """The test's functions, then its child processes'."""
    return [CompiledFunction(fn, f" in {who(p)}" if p else "") for p, fn in functions_of(data)]


def _offenders(data: TestResult) -> list[CompiledFunction]:
    """The test's functions (its children's too) that recompiled or hit recompile_limit,
    worst first (:func:`~..model.messages.worst_first`)."""
    found = _functions(data)
    worst = worst_first([o.fn for o in found])
    where = {id(o.fn): o.where for o in found}
    return [CompiledFunction(fn, where[id(fn)]) for fn in worst]


def _rules(data: TestResult) -> str:
    return data["rules"] or "none"


def _broken(results: Results) -> Iterator[tuple[str, TestResult, list[CompiledFunction]]]:
    """Each test that broke the gate, by node id, with its offending functions."""
    for nodeid, (_, data) in sorted(results.items()):
        if data["violations"]:
            yield nodeid, data, _offenders(data)


def _broken_rows(results: Results, root: str) -> list[str]:
    rows = []
    for nodeid, data, offenders in _broken(results):
        for fn, where in offenders:
            limit = " (hit recompile_limit)" if fn["recompile_limit"] else ""
            rows.append(
                f"| {md_code(nodeid)} | {md_code(fn['qualname'])}{where} "
                f"{md_code(relative(fn['file'], root) + ':' + str(fn['line']))} | "
                f"{len(fn['recompiles'])}{limit} | {md_cell(_rules(data))} | "
                f"{md_cell(failed_kinds(fn))} | {md_code(first_guard(fn, actual=True) or '')} | "
                f"{md_code(_guard_site(fn, root))} | {fn['recompile_seconds']:.2f} |"
            )
        # a warm block, graph breaks, CUDA-graph re-records: no function; too many guards
        for v in data["violations"]:
            if not offenders or v["kind"] in ("guards", "new_guards", "uncovered", "warm_start"):
                rows.append(
                    f"| {md_code(nodeid)} | — | {data['recompiles']} | {md_cell(_rules(data))} | "
                    f"{md_cell(v['kind'])} | {md_cell(v['message'])} | — | "
                    f"{data['recompile_seconds']:.2f} |"
                )
    return rows


def _guard_site(fn: FunctionResult, root: str) -> str:
    reason = first_reason(fn)
    return site_text(reason, root) if reason is not None else ""


def _guard_rows(results: Results, root: str) -> list[str]:
    """Functions by the most guards one of their entries checks, over all gated tests."""
    most: dict[tuple[str, str, int], tuple[int, str, str]] = {}
    for nodeid, (_, data) in results.items():
        for fn, where in _functions(data):
            found = largest_result([fn])
            if found is None:
                continue
            count = entry_count(found[1])
            latency = found[1]["guard_latency_us"]
            key = (fn["qualname"] + where, fn["file"], fn["line"])
            if key not in most or count > most[key][0]:
                most[key] = (count, "" if latency is None else f"{latency:g}", nodeid)
    ranked = sorted(most.items(), key=lambda item: (-item[1][0], item[0]))
    return [
        f"| {md_code(name)} | {md_code(relative(file, root) + ':' + str(line))} | {count} | "
        f"{latency} | {md_code(nodeid)} |"
        for (name, file, line), (count, latency, nodeid) in ranked[:TOP_FUNCTIONS]
    ]


def _function_rows(results: Results, root: str) -> list[str]:
    """Functions by the seconds their recompiles cost, over all gated tests."""
    totals: dict[tuple[str, str, int], list[float]] = {}
    for _, data in results.values():
        for fn, _ in _functions(data):
            if fn["recompiles"]:
                key = (fn["qualname"], fn["file"], fn["line"])
                seconds, count, tests = totals.get(key, [0.0, 0, 0])
                totals[key] = [
                    seconds + fn["recompile_seconds"],
                    count + len(fn["recompiles"]),
                    tests + 1,
                ]
    ranked = sorted(totals.items(), key=lambda item: (-item[1][0], -item[1][1], item[0]))
    return [
        f"| {md_code(name)} | {md_code(relative(file, root) + ':' + str(line))} | {int(count)} | "
        f"{int(tests)} | {seconds:.2f} |"
        for (name, file, line), (seconds, count, tests) in ranked[:TOP_FUNCTIONS]
    ]


def _tighten_rows(results: Results) -> list[str]:
    return [
        f"- {md_code(nodeid)}: {plural(per_process(data), 'recompile')}, "
        f"baseline {data['baseline']}"
        for nodeid, (_, data) in sorted(results.items())
        if below_baseline(data)
    ]


def _work_rows(results: Results) -> list[str]:
    """Each compile-work rule a test broke: the function (or the test's compiles), the rule
    and the function's work, counted."""
    rows = []
    for nodeid, (_, data) in sorted(results.items()):
        works = {fn["qualname"]: fn.get("work") for fn in data["functions"]}
        for v in data["violations"]:
            if v["kind"] != "work":
                continue
            work = works.get(v["function"] or "") if v["function"] else data.get("work")
            rows.append(
                f"| {md_code(nodeid)} | {md_code(v['function'] or 'all')} | "
                f"{md_cell(v['message'].split('; ')[0])} | "
                f"{md_cell(work_text(work) if work else '')} |"
            )
    return rows


def markdown_summary(run: RunResults, *, root: str, limit: int = SUMMARY_LIMIT) -> str:
    """The run as Markdown: totals, the tests that broke the gate, the costliest functions,
    the baseline entries to tighten. At most ``limit`` bytes (UTF-8): rows past it are left
    out, with a line saying how many. In report-only mode tests "would have broken" the
    gate."""
    results, incomplete, enforced = run.tests, run.incomplete, run.enforced
    totals = totals_line(run)
    head = [f"## {TITLE}", "", f"**{md_cell(totals)}**", ""]
    off = switched_off_line(run)
    if off is not None:
        head += [f"> **{'Error' if off[1] else 'Warning'}:** {md_cell(off[0])}.", ""]
    if incomplete is not None:
        head += [f"> **Warning:** {INCOMPLETE}: {md_cell(incomplete[:300])}.", ""]
    broke = "broke" if enforced else "would have broken"
    sections = [
        (
            f"### Tests that {broke} the gate",
            "| Test | Function | Recompiles | Rules | Kinds | First guard | Guard from "
            "| Recompile s |\n|---|---|--:|---|---|---|---|--:|",
            _broken_rows(results, root),
        ),
        (
            "### Functions by recompile time",
            "| Function | Defined at | Recompiles | Tests | Recompile s |\n|---|---|--:|--:|--:|",
            _function_rows(results, root),
        ),
        (
            "### Guards per call: the largest cache entries",
            "| Function | Defined at | Guards | torch's estimate, us | Test |\n"
            "|---|---|--:|--:|---|",
            _guard_rows(results, root),
        ),
        (
            "### Compile work over its rule (counted, not timed)",
            "| Test | Function | Rule | Work |\n|---|---|---|---|",
            _work_rows(results),
        ),
        (
            "### Below their baseline: tighten with `--recompile-baseline-update`",
            "",
            _tighten_rows(results),
        ),
    ]
    text = _fit([*head], sections, limit)
    if len(text.encode()) > limit:  # only a head longer than the limit itself gets here
        text = text.encode()[:limit].decode("utf-8", errors="ignore")
    return text


def _fit(head: list[str], sections: list[tuple[str, str, list[str]]], limit: int) -> str:
    """Join head and sections, leaving out the last rows that do not fit in ``limit``."""
    total_rows = sum(len(rows) for _, _, rows in sections)
    # Room for the line that says what was left out, whatever its number.
    room = limit - len("\n".join(head).encode()) - 200
    out = list(head)
    shown = 0
    for title, table_head, rows in sections:
        if not rows:
            continue
        block = [title, ""] + ([table_head] if table_head else [])
        cost = len("\n".join(block).encode()) + 2
        if cost > room:
            break
        room -= cost
        out += block
        for row in rows:
            size = len(row.encode()) + 1
            if size > room:
                break
            room -= size
            out.append(row)
            shown += 1
        out.append("")
    left = total_rows - shown
    if left:
        out.append(
            f"_{plural(left, 'row')} left out to stay under GitHub's job-summary limit; "
            "the JSON report (`--recompile-report`) has every test._"
        )
        out.append("")
    return "\n".join(out)


# -- GitHub Actions annotations -------------------------------------------------------------


def escape_data(text: str) -> str:
    """A workflow command's message: ``%``, CR and LF escaped."""
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(text: str) -> str:
    """A workflow command's property value: as data, and ``:`` and ``,`` too."""
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")


def def_line(filename: str, lineno: int) -> int:
    """The ``def`` line of a function whose code starts at ``lineno`` (its first decorator,
    for a decorated one: ``@torch.compile``), so the annotation sits on the function itself;
    ``lineno`` when the source cannot be read."""
    for offset in range(_DECORATOR_LINES):
        text = linecache.getline(filename, lineno + offset).lstrip()
        if text.startswith(("def ", "async def ")):
            return lineno + offset
        if not text:
            break
    return lineno


_DECORATOR_LINES = 30  # how far a decorated function's def may sit below its first decorator


class Annotation(NamedTuple):
    file: str
    line: int
    title: str
    message: str
    rank: tuple[int, int, float]  # worst first: limit hit, recompiles, seconds

    def command(self, level: str = "error") -> str:
        return (
            f"::{level} file={escape_property(self.file)},line={self.line},"
            f"title={escape_property(self.title)}::{escape_data(self.message)}"
        )


def _function_annotation(
    nodeid: str, data: TestResult, function: CompiledFunction, root: str
) -> Annotation:
    fn = function.fn
    count = len(fn["recompiles"])
    title = (
        f"{nodeid}: {plural(count, 'recompile')} of {fn['qualname']}{function.where}; "
        f"budget {_rules(data)}"
    )
    lines = []
    fixes: list[tuple[str, str]] = []
    for index, recompile in enumerate(fn["recompiles"], 1):
        reason = recompile["reasons"][0] if recompile["reasons"] else None
        if reason is None:
            lines.append(f"recompile {index}: torch gave no reason")
            continue
        lines.append(f"recompile {index} {reason_text(reason)}")
        fixes.append((reason_label(reason), reason_hint(reason)))
    if fn["recompile_limit"]:
        title += f"; hit {fn['recompile_limit']}: " + (
            "torch raised" if fn["limit_raised"] else "runs uncompiled"
        )
        lines.append(f"hit {fn['recompile_limit']}: {limit_outcome(fn)}")
    return Annotation(
        relative(fn["file"], root),
        def_line(fn["file"], fn["line"]),
        title,
        "\n".join(lines + fix_lines(fixes, indent="")),
        (1 if fn["recompile_limit"] else 0, count, fn["recompile_seconds"]),
    )


def _line_annotation(
    nodeid: str, function: CompiledFunction, root: str, rank: tuple[int, int, float]
) -> Annotation | None:
    """On the user's line that read the first failing guard's value: the line to change."""
    reason = first_reason(function.fn)
    line = line_to_change(reason) if reason is not None else None
    if reason is None or line is None:
        return None
    code = [line["code"]] if line["code"] else []
    fix = fix_lines([(reason_label(reason), reason_hint(reason))], indent="")
    return Annotation(
        relative(line["file"], root),
        line["line"],
        f"{nodeid}: this line installed the guard that failed in "
        f"{function.fn['qualname']}{function.where}",
        "\n".join([reason_text(reason), *code, *fix]),
        rank,
    )


def _certificate_annotations(nodeid: str, data: TestResult, root: str) -> list[Annotation]:
    """One per certificate that broke: at the line of the first rejecting guard where torch
    names it, else at the function's definition."""
    found = []
    for v in data["violations"]:
        certificate = v.get("certificate")
        if certificate is None:
            continue
        site = next((g["site"] for g in certificate["groups"] if g["site"] is not None), None)
        at = site or certificate
        file, line = at["file"], at["line"]
        points = certificate["uncovered"] + certificate["undecided"]
        found.append(
            Annotation(
                relative(file, root),
                line,
                f"{nodeid}: '{certificate['function']}' would compile again on "
                f"{points} of {certificate['points']} points",
                v["message"],
                (0, points, 0.0),
            )
        )
    return found


def _warm_start_annotations(nodeid: str, data: TestResult, root: str) -> list[Annotation]:
    """At the function whose warm start compiled again (else at nothing: the message says
    why, in the test's own failure)."""
    warm = data.get("warm_start")
    if warm is None or warm["status"] not in ("failed", "error") or warm["file"] is None:
        return []
    line = warm["line"] or 1
    return [
        Annotation(
            relative(warm["file"], root),
            def_line(warm["file"], line),
            f"{nodeid}: a restart compiles {warm['function']} again",
            warm["message"] or "",
            (0, warm["lookups"] - warm["hits"], 0.0),
        )
    ]


def _annotations(results: Results, root: str) -> list[Annotation]:
    found = []
    for nodeid, data, offenders in _broken(results):
        for offender in offenders:
            annotation = _function_annotation(nodeid, data, offender, root)
            line = _line_annotation(nodeid, offender, root, annotation.rank)
            found += [annotation] if line is None else [annotation, line]
        worst = max((len(o.fn["recompiles"]) for o in offenders), default=0)
        stopped = data["stopped_at"]
        if stopped is not None:
            found.append(
                Annotation(
                    relative(stopped["file"], root),
                    stopped["line"],
                    f"{nodeid}: the gate stopped this call before it compiled",
                    "\n".join(v["message"] for v in data["violations"]),
                    (0, worst, data["recompile_seconds"]),
                )
            )
        found += _certificate_annotations(nodeid, data, root)
        found += _warm_start_annotations(nodeid, data, root)
        if not offenders:
            for brk in data["graph_breaks"][:1]:
                found.append(
                    Annotation(
                        relative(brk["file"], root),
                        brk["line"],
                        f"{nodeid}: graph break in {brk['function']}",
                        "\n".join([v["message"] for v in data["violations"]] + [brk["reason"]]),
                        (0, 0, 0.0),
                    )
                )
    return sorted(found, key=lambda a: (-a.rank[0], -a.rank[1], -a.rank[2], a.file, a.line))


def annotation_lines(run: RunResults, root: str, limit: int = MAX_ANNOTATIONS) -> list[str]:
    """``::error`` workflow commands (``::warning`` in report-only mode), worst offenders
    first, at most ``limit``; then a ``::notice`` saying how many more the job summary
    holds."""
    found = _annotations(run.tests, root)
    lines = [a.command("error" if run.enforced else "warning") for a in found[:limit]]
    if len(found) > limit:
        more = len(found) - limit
        lines.append(
            f"::notice title={escape_property(TITLE)}::"
            + escape_data(
                f"{plural(more, 'more recompile annotation')} not shown (GitHub shows about "
                f"{limit} per step): the job summary lists every test the gate reported."
            )
        )
    return lines
