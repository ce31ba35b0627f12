"""The harness of the benchmarks: each variant's runs in fresh processes, interleaved, their
medians, spreads and the 95% interval of B/A, and the callgrind counts of start-up."""

from __future__ import annotations

import datetime
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

LAUNCHER = """
import json, os, resource, sys
import pytest

class Durations:  # each test's set-up, call and teardown, in the order the tests ran
    def __init__(self):
        self.seconds = {}

    def pytest_runtest_logreport(self, report):
        self.seconds[report.nodeid] = self.seconds.get(report.nodeid, 0.0) + report.duration

durations = Durations()
timed = [durations] if os.environ.get("BENCH_DURATIONS") else []
rc = pytest.main(sys.argv[1:], plugins=timed)
usage = resource.getrusage(resource.RUSAGE_SELF)
found = list(durations.seconds.values())
print("BENCH " + json.dumps({"rc": int(rc), "maxrss_kb": usage.ru_maxrss, "durations": found}))
"""

ROOT = Path(__file__).resolve().parent.parent  # this checkout

# Instruction counts (callgrind) repeat exactly for one hash seed; from seed to seed they vary
# by about 0.1% (dict and set layouts): each variant runs once under each of these seeds, the
# same seeds for both, and the median is compared.
HASH_SEEDS = ("0", "1", "2")

# The plugin's own test tools (hypothesis, pytest-randomly) stay out of both variants.
QUIET = ["-q", "-W", "ignore"] + [
    arg
    for name in ("cacheprovider", "randomly", "hypothesispytest")
    for arg in ("-p", f"no:{name}")
]


@dataclass
class Run:
    seconds: float  # what the benchmark times (wall of the process, or a time read inside)
    maxrss_kb: int
    rc: int
    durations: list[float] = field(default_factory=list)  # each test's seconds (BENCH_DURATIONS=1)
    output: str = ""  # what pytest printed (the fail-fast check reads why a run failed)


@dataclass
class Result:
    name: str
    a_label: str
    b_label: str
    a: list[float]
    b: list[float]
    target: float
    unit: str = "s"
    notes: list[str] = field(default_factory=list)  # lines printed after the table

    @property
    def ratio(self) -> float:
        return statistics.median(self.b) / statistics.median(self.a)

    @property
    def interval(self) -> tuple[float, float]:
        """The 95% interval of B/A (:func:`ratio_interval`)."""
        return ratio_interval(self.a, self.b)

    @property
    def verdict(self) -> str:
        """``met`` where the whole interval is within the target, ``NO`` where all of it is
        beyond, ``inconclusive`` where the target lies inside it; ``-``: no target."""
        if self.target == float("inf"):
            return "-"
        low, high = self.interval
        return "met" if high <= self.target else "NO" if low > self.target else "inconclusive"

    @property
    def met(self) -> bool:
        return self.verdict in ("met", "-")

    @property
    def reps(self) -> str:
        """The repetitions (or blocks) each side was measured over."""
        return str(len(self.a)) if len(self.a) == len(self.b) else f"{len(self.a)}/{len(self.b)}"


BOOTSTRAP_ROUNDS = 2000


def ratio_interval(
    a: list[float], b: list[float], rounds: int = BOOTSTRAP_ROUNDS, seed: int = 0
) -> tuple[float, float]:
    """The 95% percentile-bootstrap interval of median(B) / median(A). Where both sides have
    as many measurements, they were taken in pairs (interleaved: a round's A beside its B), and
    rounds are resampled as pairs, which keeps what drifted in both; otherwise each side apart.
    A fixed seed: the same measurements give the same interval."""
    import random

    rng = random.Random(seed)
    n, m = len(a), len(b)
    ratios = []
    for _ in range(rounds):
        if n == m:
            picks = [rng.randrange(n) for _ in range(n)]
            ra, rb = [a[i] for i in picks], [b[i] for i in picks]
        else:
            ra, rb = rng.choices(a, k=n), rng.choices(b, k=m)
        ratios.append(statistics.median(rb) / statistics.median(ra))
    ratios.sort()
    return ratios[int(0.025 * rounds)], ratios[int(0.975 * rounds) - 1]


def spread(values: list[float]) -> float:
    """Half the range, relative to the median: a plain, honest measure of the noise."""
    return (max(values) - min(values)) / 2 / statistics.median(values)


def run_pytest(
    workdir: Path,
    args: list[str],
    *,
    timer: Callable[[], float] | None = None,
    env: dict[str, str] | None = None,
    instructions: bool = False,
) -> Run:
    """One pytest process; its wall time, or the time ``timer`` reads from what the run
    wrote, or (``instructions``) the instructions it executed, counted by callgrind."""
    # Bytecode caching on, as Python does by default (this sandbox sets it off): what a
    # user's pytest pays at start-up, for both variants alike.
    base = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    prefix = []
    if instructions:
        prefix = ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null"]
    begin = time.perf_counter()
    proc = subprocess.run(
        [*prefix, sys.executable, str(workdir / "launcher.py"), *args],
        cwd=workdir,
        env={**base, **(env or {})},
        capture_output=True,
        text=True,
        check=False,
    )
    wall = time.perf_counter() - begin
    if instructions:
        counted = re.search(r"Collected : (\d+)", proc.stderr)
        if counted is None:
            raise SystemExit(f"callgrind gave no count:\n{proc.stderr[-2000:]}")
        wall = float(counted.group(1))
    line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("BENCH ")), None)
    if line is None:
        raise SystemExit(
            f"benchmark run failed: {args}\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
        )
    data = json.loads(line[6:])
    seconds = timer() if timer else wall
    return Run(seconds, data["maxrss_kb"], data["rc"], data["durations"], proc.stdout)


def interleaved(
    reps: int, a: Callable[[], Run], b: Callable[[], Run]
) -> tuple[list[Run], list[Run]]:
    """A B, B A, A B, ...: neither variant always runs first."""
    runs_a, runs_b = [], []
    for rep in range(reps):
        order = [(a, runs_a), (b, runs_b)]
        for fn, into in order if rep % 2 == 0 else reversed(order):
            into.append(fn())
    return runs_a, runs_b


def child_instructions(env: dict[str, str]) -> float:
    """Instructions one ``python -c pass`` child executes, counted by callgrind."""
    base = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    proc = subprocess.run(
        ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", sys.executable, "-c",
         "pass"],
        env={**base, **env}, capture_output=True, text=True, check=True,
    )  # fmt: skip
    counted = re.search(r"Collected : (\d+)", proc.stderr)
    if counted is None:
        raise SystemExit(f"callgrind gave no count:\n{proc.stderr[-2000:]}")
    return float(counted.group(1))


def noisy_reps(reps: int, quick: bool) -> int:
    """Repetitions of a benchmark whose runs vary by more than its target on a shared machine:
    three times the suites'. A block of 2 compiling children lasts about 4 s and varies by
    5-8% (medians of 3 to 7 blocks read 0.96 to 1.06 from run to run); the fast suite under
    ``-n 2`` varies by up to 6% against a 3% target (medians of 7 runs of the same code read
    1.026 and 1.055 an hour apart)."""
    return 1 if quick else 3 * reps


def junit_seconds(path: Path) -> float:
    case = next(ET.parse(path).getroot().iter("testcase"))
    return float(case.get("time", "nan"))


@dataclass(frozen=True)
class Options:
    """What every benchmark reads: the run's options and the sizes of the suites. Each
    benchmark writes its suites in a folder of its own under ``root``."""

    quick: bool
    reps_given: int | None  # --reps
    base: str | None  # --base: the revision the guards benchmark compares with
    root: Path

    def reps_or(self, default: int) -> int:
        """``--reps`` where given; else one (``--quick``) or ``default``."""
        return self.reps_given or (1 if self.quick else default)

    @property
    def reps(self) -> int:
        """The repetitions per variant of a suite, 7 by default."""
        return self.reps_or(7)

    @property
    def backend(self) -> str:
        return "eager" if self.quick else "inductor"

    @property
    def gated_tests(self) -> int:
        return 10 if self.quick else 100

    @property
    def calls(self) -> int:
        """Calls of its compiled function per test of the gated suite."""
        return 5 if self.quick else 50

    @property
    def hot_calls(self) -> int:
        return 2000 if self.quick else 20000

    def suite(self, name: str, write: Callable[[Path], None]) -> Path:
        """A new folder ``name`` with the launcher, and the suite ``write`` puts there."""
        where = self.root / name
        where.mkdir()
        (where / "launcher.py").write_text(LAUNCHER)
        write(where)
        return where


def record(results: list[Result], argv: list[str], torch_version: str) -> dict[str, object]:
    """A run's results as JSON: where and on what it ran, and each row's figures."""
    commit = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=False
    ).stdout.strip()
    changed = subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=no"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    ).stdout
    rows = []
    for r in results:
        low, high = r.interval
        rows.append(
            {
                "name": r.name,
                "a_label": r.a_label,
                "b_label": r.b_label,
                "unit": r.unit,
                "reps": r.reps,
                "a": r.a,
                "b": r.b,
                "a_median": statistics.median(r.a),
                "b_median": statistics.median(r.b),
                "a_spread": spread(r.a),
                "b_spread": spread(r.b),
                "ratio": r.ratio,
                "interval": [low, high],
                "target": None if r.target == float("inf") else r.target,
                "verdict": r.verdict,
                "notes": r.notes,
            }
        )
    return {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "commit": commit,
        "uncommitted_changes": bool(changed.strip()),
        "command": argv,
        "machine": {
            "system": platform.system(),
            "machine": platform.machine(),
            "cores": os.cpu_count(),
            "python": platform.python_version(),
            "torch": torch_version,
        },
        "rows": rows,
    }


def write_json(path: Path, run: dict[str, object]) -> None:
    """``run`` (:func:`record`) as JSON, one row a line: a file to read and to diff."""
    rows = run["rows"]
    assert isinstance(rows, list)
    head = json.dumps({k: v for k, v in run.items() if k != "rows"}, indent=1)
    lines = ",\n".join(f"  {json.dumps(row, ensure_ascii=False)}" for row in rows)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f'{head[:-2]},\n "rows": [\n{lines}\n ]\n}}\n')
