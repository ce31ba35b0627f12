"""``--recompile-durations=N``: the tests, wider fixtures and functions that spent the most
seconds compiling, first compiles and recompiles apart, and whether torch's compile caches
answered (cold or warm). Made from the results the reports carried (so under pytest-xdist
too); pure."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..model.names import PREFIX
from ..model.results import CachesResult, FixtureResult, FunctionResult, TestResult
from ..model.run import RunResults
from ..model.text import location, plural

# As pytest's --durations-min: shorter entries are hidden unless -vv.
SHORTEST_SHOWN = 0.005

NO_GATED_TEST = (
    "no gated test ran: compile seconds are recorded for gated tests "
    "(--recompile-budget, the ini option recompile_budget, or a marker)"
)


TESTS_HEADING = "tests and wider fixtures, by seconds compiling in their own phases:"
FUNCTIONS_HEADING = "functions, over every test and wider fixture that compiled them:"


def job_id_line(job_id: str) -> str:
    """The header's warning where ``torch.compiler.config.job_id`` is set."""
    return (
        f"{PREFIX} warning: torch.compiler.config.job_id is set ({job_id!r}): torch loads "
        "saved dynamic-shape profiles from disk, so first compiles can start dynamic and "
        "compile and recompile counts can differ between cold and warm runners"
    )


def title(count: int) -> str:
    """The section's title, as pytest's ``--durations`` words its own."""
    return f"slowest {count} compile durations" if count > 0 else "slowest compile durations"


@dataclass
class Spent:
    """Seconds compiling of one test, wider fixture or function."""

    name: str
    seconds: float = 0.0
    first: float = 0.0
    recompiles: float = 0.0
    caches: str = ""  # cold or warm, in words ("" where no cache was asked)
    owners: set[str] = field(default_factory=set)  # tests and "fixture ..." that compiled it
    check_us: float | None = None  # a function's slowest entry's measured guard check

    def line(self) -> str:
        split = f"{self.first:.2f}s first + {self.recompiles:.2f}s recompiles"
        fixtures = sum(1 for owner in self.owners if owner.startswith("fixture "))
        tests = len(self.owners) - fixtures
        counted = [plural(tests, "test"), plural(fixtures, "fixture")]
        where = ", ".join(c for c in counted if not c.startswith("0 "))
        more = f", in {where}" if len(self.owners) > 1 else ""
        caches = f"  [{self.caches}]" if self.caches else ""
        if self.check_us is not None:  # what each call pays before an entry answers
            caches += f"  [guard check {self.check_us:.3g} us]"
        return f"{self.seconds:.2f}s = {split}  {self.name}{more}{caches}"


def spenders(results: list[tuple[str, TestResult]], fixtures: list[FixtureResult]) -> list[Spent]:
    """Each test's and wider fixture's seconds compiling (its own process's)."""
    found = [
        Spent(
            nodeid,
            data["compile_seconds"],
            data.get("first_compile_seconds", data["compile_seconds"] - data["recompile_seconds"]),
            data["recompile_seconds"],
            cache_text(data.get("caches")),
        )
        for nodeid, data in results
    ]
    found += [
        Spent(
            f"{f['fixture']} (set up for {f['node']})",
            f["compile_seconds"],
            f["compile_seconds"] - f["recompile_seconds"],
            f["recompile_seconds"],
        )
        for f in fixtures
    ]
    return found


def functions(
    results: list[tuple[str, TestResult]], fixtures: list[FixtureResult], root: str
) -> list[Spent]:
    """Each compiled function's seconds, summed over the tests and wider fixtures that
    compiled it (by qualname and place)."""
    by_function: dict[tuple[str, str, int], Spent] = {}
    owned: list[tuple[str, list[FunctionResult]]] = [
        (nodeid, data["functions"]) for nodeid, data in results
    ]
    owned += [(f"fixture {f['fixture']} {f['node']}", f["functions"]) for f in fixtures]
    for owner, records in owned:
        for fn in records:
            key = (fn["qualname"], fn["file"], fn["line"])
            name = f"{fn['qualname']} ({location(fn['file'], fn['line'], root)})"
            spent = by_function.setdefault(key, Spent(name))
            spent.seconds += fn["compile_seconds"]
            spent.recompiles += fn["recompile_seconds"]
            spent.first += fn["compile_seconds"] - fn["recompile_seconds"]
            if fn["compile_seconds"] > 0:  # compiled there, not reused
                spent.owners.add(owner)
            for entry in fn.get("entries", ()):
                measured = entry.get("guard_check_us")
                if measured is not None:
                    spent.check_us = max(spent.check_us or 0.0, measured)
    return list(by_function.values())


def duration_lines(run: RunResults, count: int, *, root: str, verbose: bool = False) -> list[str]:
    """The section's lines: the ``count`` tests (and wider fixtures) and the ``count``
    functions that spent the most seconds compiling (0: all); entries under
    :data:`SHORTEST_SHOWN` hidden unless ``verbose`` (``-vv``), as pytest's ``--durations``
    hides them."""
    results, fixtures = run.results(), run.fixtures
    if not results and not fixtures:
        return [NO_GATED_TEST]
    lines: list[str] = []
    hidden = 0
    sections = (
        (TESTS_HEADING, spenders(results, fixtures)),
        (FUNCTIONS_HEADING, functions(results, fixtures, root)),
    )
    for heading, found in sections:
        ranked = sorted(found, key=lambda s: (-s.seconds, s.name))
        ranked = ranked[:count] if count > 0 else ranked
        shown = [s for s in ranked if verbose or s.seconds >= SHORTEST_SHOWN]
        hidden += len(ranked) - len(shown)
        if shown:
            lines += [heading, *(f"  {s.line()}" for s in shown)]
    if hidden:
        lines.append(
            f"({plural(hidden, 'duration')} < {SHORTEST_SHOWN}s hidden.  Use -vv to show "
            "these durations.)"
        )
    return lines


def cache_state(caches: CachesResult | None) -> str | None:
    """``warm`` (every lookup of torch's compile caches hit), ``cold`` (none did),
    ``partly warm``, or None (no cache was asked: the eager backend)."""
    if caches is None:
        return None
    both = (caches["fx_graph"], caches["aot_autograd"])
    hits = sum(c["hits"] for c in both)
    other = sum(c["misses"] + c["bypasses"] for c in both)
    if not hits and not other:
        return None
    return "warm" if not other else "cold" if not hits else "partly warm"


def cache_text(caches: CachesResult | None) -> str:
    """``cold: fx_graph 0 hits, 2 misses; aot_autograd 0 hits, 2 misses`` ("" where no
    cache was asked)."""
    state = cache_state(caches)
    if caches is None or state is None:
        return ""
    parts = []
    for name, found in (("fx_graph", caches["fx_graph"]), ("aot_autograd", caches["aot_autograd"])):
        bypassed = f", {found['bypasses']} bypassed" if found["bypasses"] else ""
        parts.append(
            f"{name} {plural(found['hits'], 'hit')}, "
            f"{plural(found['misses'], 'miss', 'misses')}{bypassed}"
        )
    return f"{state}: {'; '.join(parts)}"
