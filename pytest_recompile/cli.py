"""``pytest-recompile`` (and ``python -m pytest_recompile``): the commands beside the plugin,
each reading JSON reports (``--recompile-report=PATH``) into the one results model, which
decides; this module only parses, loads, calls and prints.

- ``compare BASE.json HEAD.json``: what changed between two runs (docs/compare.md);
- ``combine -o OUT.json SHARD.json...``: shards' reports merged into one run's (docs/shards.md);
- ``report REPORT.json...``: the summary of a report (combined or one run's) as text,
  Markdown or GitHub annotations, with the gate's exit status;
- ``baseline BASELINE.json REPORT.json...``: a baseline updated from reports (shards').

Exit status: :data:`OK` (0) fine, :data:`FAILED` (1) the gate or the comparison failed,
:data:`BAD_INPUT` (2) unreadable or unfit input (every :class:`InputError`, caught once).
"""

from __future__ import annotations

import argparse
import gc
import sys
from collections.abc import Sequence

from .model.errors import InputError
from .model.run import RunResults
from .reports import compare
from .reports.json_report import ReportError, load_report

PROG = "pytest-recompile"
OK, FAILED, BAD_INPUT = 0, 1, 2
# How ``report`` renders a run (``compare`` renders a comparison: ``compare.RENDERERS``).
REPORT_FORMATS = ("text", "markdown", "github")


def _measures(text: str) -> tuple[str, ...]:
    """``--fail-on``: comma-separated names of ``compare.MEASURES``."""
    names = tuple(part.strip() for part in text.split(",") if part.strip())
    unknown = [name for name in names if name not in compare.MEASURES]
    if unknown or not names:
        raise argparse.ArgumentTypeError(
            f"unknown measure {', '.join(map(repr, unknown)) or repr(text)}; "
            f"accepted: {', '.join(compare.MEASURES)} (comma-separated)"
        )
    return names


def _seconds(text: str) -> float:
    """``--seconds``: a number of seconds >= 0."""
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value >= 0:  # NaN too
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds >= 0")
    return value


def _count(text: str) -> int:
    """``--durations``: a whole number, 0 for all (the plugin's own rule)."""
    from .model.budget import count_value

    value = count_value(text)
    if value is None:
        raise argparse.ArgumentTypeError(f"expected a whole number (0 for all), got {text!r}")
    return value


def parser() -> argparse.ArgumentParser:
    """The commands and their options; each option's type checks its value and says what is
    accepted."""
    top = argparse.ArgumentParser(prog=PROG, description="Commands of the pytest-recompile plugin.")
    commands = top.add_subparsers(dest="command", required=True, metavar="COMMAND")
    compare_parser = commands.add_parser(
        "compare",
        help="what changed between two JSON reports (--recompile-report=PATH)",
        description=(
            "Compare two JSON reports of pytest-recompile (a torch upgrade, a branch against "
            "main), per test and per function. Exit status 1 where HEAD is worse on a measure "
            "--fail-on names, 2 on unreadable input. Shards: combine each side first."
        ),
    )
    compare_parser.add_argument("base", metavar="BASE.json", help="the report to compare against")
    compare_parser.add_argument("head", metavar="HEAD.json", help="the report of the change")
    compare_parser.add_argument(
        "more", nargs="*", metavar="", help=argparse.SUPPRESS
    )  # named only to say: combine first
    compare_parser.add_argument(
        "--format",
        choices=tuple(compare.RENDERERS),
        default="text",
        help="output format (default: text)",
    )
    compare_parser.add_argument(
        "--fail-on",
        type=_measures,
        default=compare.DEFAULT_FAIL_ON,
        metavar="MEASURES",
        help=f"comma-separated measures on which a worse HEAD exits 1 (default: "
        f"{','.join(compare.DEFAULT_FAIL_ON)}; also: "
        f"{', '.join(m for m in compare.MEASURES if m not in compare.DEFAULT_FAIL_ON)})",
    )
    compare_parser.add_argument(
        "--seconds",
        type=_seconds,
        default=compare.DEFAULT_SECONDS,
        metavar="S",
        help=f"show a test's compile seconds only where they changed by S or more "
        f"(default: {compare.DEFAULT_SECONDS:g}; they are noisy)",
    )
    combine_parser = commands.add_parser(
        "combine",
        help="merge shards' JSON reports into the report of one run of the whole suite",
        description=(
            "Merge the JSON reports of a suite's shards (CI machines, -k or directory splits, "
            "pytest-split groups, reruns) into the report one run of the whole suite would "
            "have written: every test once, the recompile_limit and durations over all "
            "shards. Exit status 2 where the inputs are not shards of one run."
        ),
    )
    combine_parser.add_argument(
        "inputs", nargs="+", metavar="SHARD.json", help="the shards' reports"
    )
    combine_parser.add_argument(
        "-o", "--output", required=True, metavar="OUT.json", help="where the report goes"
    )
    report_parser = commands.add_parser(
        "report",
        help="the summary of a JSON report (one run's or combined), with the gate's status",
        description=(
            "Print the summary of a JSON report as the plugin prints it at the end of a run "
            "(text), as the Markdown job summary, or as GitHub annotations. Several reports "
            "are combined first. Exit status 1 where a test broke the gate or a shard stopped "
            "early, 2 on unreadable input."
        ),
    )
    report_parser.add_argument("inputs", nargs="+", metavar="REPORT.json", help="the report(s)")
    report_parser.add_argument(
        "--format", choices=REPORT_FORMATS, default="text", help="(default: text)"
    )
    report_parser.add_argument(
        "--durations",
        type=_count,
        default=None,
        metavar="N",
        help="also list the N tests and functions that spent the most seconds compiling "
        "(text only; 0 for all)",
    )
    report_parser.add_argument(
        "--root", default=".", help="what paths are shown relative to (default: .)"
    )
    baseline_parser = commands.add_parser(
        "baseline",
        help="update a baseline file from JSON reports (shards' or one run's)",
        description=(
            "Update BASELINE.json from the reports of an update run (--recompile-baseline-"
            "update --recompile-report=PATH on each shard): the entries of the tests the "
            "reports hold are replaced, every other entry is kept (--prune: dropped; give "
            "every shard's report). Exit status 1 where a broken rule no baseline absorbs "
            "remains, 2 on unreadable input or reports whose counts are partial."
        ),
    )
    baseline_parser.add_argument("baseline", metavar="BASELINE.json", help="created if missing")
    baseline_parser.add_argument("inputs", nargs="+", metavar="REPORT.json", help="the report(s)")
    baseline_parser.add_argument(
        "--prune",
        action="store_true",
        help="drop the entries of tests the reports do not hold (deleted tests)",
    )
    return top


def main(argv: Sequence[str] | None = None) -> int:
    """The command line; see :func:`parser`. The cyclic garbage collector is paused while a
    command runs: reports are millions of objects without a cycle among them, and its
    collections took a third of a large report's time (benchmarks/shards.py)."""
    args = parser().parse_args(argv)
    enabled = gc.isenabled()
    gc.disable()
    try:
        return _run(args)
    finally:
        if enabled:
            gc.enable()


def _run(args: argparse.Namespace) -> int:
    """Run the command; bad input (:class:`InputError`) or an unwritable output: one line on
    stderr and :data:`BAD_INPUT`."""
    command = args.command
    try:
        if command == "compare":
            if args.more:
                raise ReportError(
                    "compare takes one report a side; combine each side's shards first: "
                    f"{PROG} combine -o base.json BASE-SHARDS... (and the same for head)"
                )
            return _compare(args, *(_load_comparable(path) for path in (args.base, args.head)))
        if command == "combine":
            return _combine(args)
        run = _combined(args.inputs)
        if command == "report":
            return _report(args, run)
        return _baseline(args, run)
    except InputError as exc:
        print(f"{PROG} {command}: {exc}", file=sys.stderr)
        return BAD_INPUT
    except OSError as exc:
        print(f"{PROG} {command}: cannot write: {exc}", file=sys.stderr)
        return BAD_INPUT


def _load_comparable(path: str) -> RunResults:
    """A report to compare: one whose torch.compile ran (eager code measures nothing)."""
    run = load_report(path)
    off = list(run.disabled)
    if off:
        raise ReportError(
            f"{path}: torch.compile was switched off in that run ({'; '.join(off)}): its "
            "counts measure eager code; compare runs that compiled"
        )
    return run


def _loaded(paths: list[str]) -> list[tuple[str, RunResults]]:
    """Each report, loaded and checked, with its path."""
    return [(path, load_report(path)) for path in paths]


def _combined(paths: list[str]) -> RunResults:
    """The run the reports make: one report as it is, several combined."""
    from .reports.combine import combine

    runs = _loaded(paths)
    return runs[0][1] if len(runs) == 1 else combine(runs)


def _combine(args: argparse.Namespace) -> int:
    """``combine``: write the combined report, and say what was combined."""
    import os

    from .model.text import plural
    from .reports.combine import combine, named, overlaps
    from .reports.files import write_json_atomic
    from .reports.json_report import report_document

    output = os.path.realpath(args.output)
    for path in args.inputs:
        if os.path.realpath(path) == output:
            raise ReportError(
                f"-o {args.output} is one of the inputs: combine would overwrite that "
                "shard's report; write the combined report to a file of its own"
            )
    runs = _loaded(args.inputs)
    run = combine(runs)  # one input too: a lone shard's tests split off are lost
    write_json_atomic(args.output, report_document(run), rows=True)
    print(
        f"{PROG} combine: {plural(len(runs), 'report')}, {plural(len(run.tests), 'test')} -> "
        f"{args.output}"
    )
    twice = overlaps(runs)
    if twice:
        print(
            f"{PROG} combine: {plural(len(twice), 'test')} ran in more than one input "
            f"({named(twice)}): shards that overlap, or a rerun"
        )
    if run.incomplete is not None:
        print(f"{PROG} combine: incomplete: {run.incomplete}")
    return OK


def _compare(args: argparse.Namespace, base: RunResults, head: RunResults) -> int:
    """``compare``: print the comparison; :data:`FAILED` where HEAD is worse on a measure
    ``--fail-on`` names."""
    found = compare.compare(
        base,
        head,
        base_path=args.base,
        head_path=args.head,
        fail_on=args.fail_on,
        seconds=args.seconds,
    )
    sys.stdout.write(compare.RENDERERS[args.format](found))
    return FAILED if found.failed else OK


def _report(args: argparse.Namespace, run: RunResults) -> int:
    """``report``: print the run's summary; :data:`FAILED` where the run fails the gate
    (:meth:`RunResults.gate_failures`)."""
    from .reports.ci import annotation_lines, markdown_summary
    from .reports.terminal import run_lines

    if args.format == "markdown":
        sys.stdout.write(markdown_summary(run, root=args.root))
    elif args.format == "github":
        sys.stdout.writelines(line + "\n" for line in annotation_lines(run, args.root))
    else:
        sys.stdout.writelines(line + "\n" for line, _ in run_lines(run))
        if args.durations is not None:
            from .reports.durations import duration_lines, title

            print(title(args.durations))
            for line in duration_lines(run, args.durations, root=args.root):
                print(line)
    return FAILED if run.gate_failures() else OK


def _baseline(args: argparse.Namespace, run: RunResults) -> int:
    """``baseline``: update the baseline from the run, unless the run refuses it
    (:meth:`RunResults.baseline_refusal`); :data:`FAILED` where a broken rule remains that no
    baseline absorbs."""
    import os

    from .reports.baseline import read_baseline_document, unabsorbed, update_baseline
    from .reports.files import write_json_atomic

    why = run.baseline_refusal()
    if why is not None:
        raise ReportError(f"baseline {args.baseline} NOT updated: {why}")
    old = None
    if os.path.exists(args.baseline):
        old = read_baseline_document(args.baseline, args.baseline)
    update = update_baseline(old, run, prune=args.prune)
    write_json_atomic(args.baseline, update.document)
    print(f"{PROG} baseline: {update.line(args.baseline)}")
    beyond = unabsorbed(run)
    for line in beyond:
        print(line, file=sys.stderr)
    return FAILED if beyond else OK
