"""Side-by-side benchmarks of pytest-recompile.

    python benchmarks/run.py               # the full run: about 50 minutes on 2 cores
    python benchmarks/run.py --quick       # one small repetition of each, to check that it runs
    python benchmarks/run.py --list        # each benchmark's name, what it measures, its targets
    python benchmarks/run.py --only NAME   # one benchmark alone
    python benchmarks/run.py --json PATH   # and its results as JSON (a full run: results/)

Each benchmark runs a variant A (the plugin off, or not asked for) and a variant B (the plugin
on) in the same session, interleaved (A B B A A B ...), each in a fresh pytest process, and
reports the median and the spread of each, the ratio of the medians B/A and its interval.
Absolute times depend on the machine; the ratios are what the targets are about. Each row's
verdict comes from the 95% interval of B/A (``harness.ratio_interval``): met where its upper
bound is within the target, NO where its lower bound is beyond, inconclusive otherwise.

The benchmarks are the modules ``benchmarks/bench_*.py``, each described by its docstring (the
first line is what ``--list`` prints), with its ``NAME`` (what ``--only`` takes), ``TITLE``,
``TARGETS`` and ``run(options)``, which returns its rows. A full run writes its results, with
the machine, torch's version and the commit, to ``benchmarks/results/<date>_<commit>.json``.
"""

from __future__ import annotations

import argparse
import datetime
import importlib
import os
import platform
import statistics
import sys
import tempfile
from pathlib import Path
from types import ModuleType

from harness import Options, Result, record, spread, write_json

HERE = Path(__file__).resolve().parent
# The order a full run takes them in; a module not named here runs after these.
ORDER = ("startup", "gated", "hot", "kept", "certificate", "failfast", "isolation", "children",
         "trace", "guards", "fast", "warm_start")  # fmt: skip


def benchmarks() -> list[ModuleType]:
    """Every ``bench_*.py`` module, in the order of a full run."""
    found = [importlib.import_module(path.stem) for path in sorted(HERE.glob("bench_*.py"))]
    return sorted(found, key=lambda m: ORDER.index(m.NAME) if m.NAME in ORDER else len(ORDER))


def names(module: ModuleType) -> list[str]:
    """What ``--only`` takes for ``module``: its name, and others for rows it also gives."""
    return [module.NAME, *getattr(module, "ALIASES", ())]


def listing(found: list[ModuleType]) -> list[str]:
    """``--list``: each benchmark's names and the first line of its docstring, then its targets,
    one a line."""
    lines = []
    for module in found:
        lines.append(f"{', '.join(names(module)):<14} {(module.__doc__ or '').splitlines()[0]}")
        lines += [f"{'':<16}<= {target:<5} {row}" for row, target in module.TARGETS.items()]
    return lines


def main() -> int:
    found = benchmarks()
    by_name = {name: module for module in found for name in names(module)}
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--list", action="store_true", help="list the benchmarks and exit")
    parser.add_argument("--quick", action="store_true", help="one small repetition of each")
    parser.add_argument("--reps", type=int, default=None, help="repetitions per variant")
    parser.add_argument(
        "--only",
        choices=list(by_name),
        default=None,
        metavar="NAME",
        help=f"run one benchmark alone: {', '.join(by_name)} (--list says what each measures)",
    )
    parser.add_argument(
        "--base",
        default=None,
        metavar="REV",
        help="the git revision the guards benchmark compares with, checked out beside",
    )
    parser.add_argument(
        "--json",
        default=None,
        type=Path,
        metavar="PATH",
        help="write the results there as JSON (a full run: benchmarks/results/DATE_COMMIT.json)",
    )
    args = parser.parse_args()
    if args.list:
        print("\n".join(listing(found)))
        return 0
    if args.only is not None:
        chosen = [by_name[args.only]]
    else:  # guards compares with another revision: only when one is given
        chosen = [m for m in found if not getattr(m, "NEEDS_BASE", False) or args.base]
    results: list[Result] = []
    with tempfile.TemporaryDirectory(prefix="recompile-bench-") as tmp:
        options = Options(quick=args.quick, reps_given=args.reps, base=args.base, root=Path(tmp))
        for index, module in enumerate(chosen, 1):
            print(f"{index}/{len(chosen)} {module.TITLE} (--only {module.NAME})", file=sys.stderr)
            results += module.run(options)
    import torch  # only for its version string

    print_table(results, options.reps, args.quick, torch.__version__)
    run = record(results, sys.argv, torch.__version__)
    path = args.json
    if path is None and args.only is None and not args.quick:
        commit = str(run["commit"])[:7] or "unknown"
        path = HERE / "results" / f"{datetime.date.today().isoformat()}_{commit}.json"
    if path is not None:
        write_json(path, run)
        print(f"results written to {path}", file=sys.stderr)
    short = [r.name for r in results if not r.met]
    if short and not args.quick:
        print(f"\nnot met by the interval (NO or inconclusive): {'; '.join(short)}")
    return 0 if args.quick or not short else 1


def print_table(results: list[Result], reps: int, quick: bool, torch_version: str) -> None:
    cores = os.cpu_count()
    print(
        f"pytest-recompile benchmarks, {datetime.date.today().isoformat()}: "
        f"{platform.system()} {platform.machine()}, {cores} cores, Python "
        f"{platform.python_version()}, torch {torch_version}; {reps} interleaved "
        f"repetitions per variant unless a row says otherwise (reps: its repetitions or "
        f"blocks); verdict from the interval: met where its upper bound is within the target"
        + (" (QUICK: sizes reduced, ratios not meaningful)" if quick else "")
    )
    print()
    print(
        "| benchmark | A | B | reps | A median (spread) | B median (spread) | B/A "
        "| 95% interval | target | verdict |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in results:
        a, b = statistics.median(r.a), statistics.median(r.b)
        low, high = r.interval
        target = "-" if r.target == float("inf") else f"<= {r.target}"
        print(
            f"| {r.name} | {r.a_label} | {r.b_label} | {r.reps} "
            f"| {a:.3f} {r.unit} (±{spread(r.a):.1%}) | {b:.3f} {r.unit} (±{spread(r.b):.1%}) "
            f"| {r.ratio:.3f} | {low:.3f}-{high:.3f} | {target} | {r.verdict} |"
        )
    for r in results:
        if r.notes:
            print()
            print("\n".join(r.notes))


if __name__ == "__main__":
    sys.exit(main())
