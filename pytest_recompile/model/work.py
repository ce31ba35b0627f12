"""Compile work, counted (pure): what each compile made (graphs, FX ops and nodes, graph
inputs, Dynamo restarts, Inductor kernels, nested_compile_region subgraphs), summed per
function and per test, the tolerance a baseline allows it to grow by, and the checks of the
``max_graphs``, ``max_graph_ops`` and ``max_unique_subgraphs`` markers' figures.

torch records these per compile (its compile metrics, its kernel counter, the graph): they are
deterministic, so they gate where seconds cannot (docs/compile-work.md). A figure a torch
release does not record is None, never 0, all the way to the reports.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from .budget import RATCHETED, BudgetError
from .results import CompileWorkResult, WorkResult


@dataclass(frozen=True)
class CompileWork:
    """One compile's work. ``graph``: it made a graph (a frame that returns its input, or a
    compile that failed, makes none: its counts are 0). Each count is None where this torch
    does not record it."""

    graph: bool
    ops: int | None  # FX call nodes (torch's graph_op_count)
    nodes: int | None  # FX nodes (graph_node_count)
    inputs: int | None  # graph inputs (graph_input_count)
    restarts: tuple[str, ...] | None  # why Dynamo started the frame over (restart_reasons)
    kernels: int | None  # Inductor kernels generated (generated_kernel_count's growth)
    subgraphs: int | None  # distinct nested_compile_region subgraphs its graph calls
    subgraph_calls: int | None  # invoke_subgraph calls in its graph
    cache_hits: int | None  # Inductor FX graph cache hits of the compile
    cache_misses: int | None

    def to_dict(self, compile_id: str, reused: bool) -> CompileWorkResult:
        return {
            "compile_id": compile_id,
            "reused": reused,
            "graph": self.graph,
            "ops": self.ops,
            "nodes": self.nodes,
            "inputs": self.inputs,
            "restarts": list(self.restarts) if self.restarts is not None else None,
            "kernels": self.kernels,
            "subgraphs": self.subgraphs,
            "subgraph_calls": self.subgraph_calls,
            "cache_hits": self.cache_hits,
            "cache_misses": self.cache_misses,
        }


SUMMED = (
    "ops",
    "nodes",
    "inputs",
    "restarts",
    "kernels",
    "subgraph_calls",
    "cache_hits",
    "cache_misses",
)


def _folded(values: Iterable[int | None], fold: Callable[[list[int]], int]) -> int | None:
    """``fold`` of the counts (``sum``; ``max`` for distinct subgraphs: those of the one graph
    that calls the most, since two graphs that each call a block once are not two distinct
    subgraphs of a layer stack); None where one is None, or where there is none."""
    found = list(values)
    if not found or any(v is None for v in found):
        return None
    return fold([v for v in found if v is not None])


def _one(work: CompileWork, reused: bool) -> WorkResult:
    """One compile's work as a sum of one."""
    return {
        "compiles": 1,
        "reused": int(reused),
        "graphs": int(work.graph),
        "ops": work.ops,
        "nodes": work.nodes,
        "inputs": work.inputs,
        "restarts": len(work.restarts) if work.restarts is not None else None,
        "restart_reasons": list(work.restarts or ()),
        "kernels": work.kernels,
        "subgraphs": work.subgraphs,
        "subgraph_calls": work.subgraph_calls,
        "cache_hits": work.cache_hits,
        "cache_misses": work.cache_misses,
    }


def _combined(found: list[WorkResult]) -> WorkResult:
    """Several works as one: counts summed (distinct subgraphs: the most), reasons once each
    in order; with none, no compile and every count None."""
    reasons: list[str] = []
    for part in found:
        reasons += [r for r in part["restart_reasons"] if r not in reasons]
    result: WorkResult = {
        "compiles": sum(p["compiles"] for p in found),
        "reused": sum(p["reused"] for p in found),
        "graphs": sum(p["graphs"] for p in found),
        "ops": None,
        "nodes": None,
        "inputs": None,
        "restarts": None,
        "restart_reasons": reasons,
        "kernels": None,
        "subgraphs": _folded((p["subgraphs"] for p in found), max),
        "subgraph_calls": None,
        "cache_hits": None,
        "cache_misses": None,
    }
    for name in SUMMED:
        result[name] = _folded((p[name] for p in found), sum)  # type: ignore[literal-required]
    return result


def summed(compiles: Iterable[tuple[CompileWork, bool]]) -> WorkResult:
    """The work of these compiles (each with whether it was reused), summed."""
    return _combined([_one(work, reused) for work, reused in compiles])


def added(parts: Iterable[WorkResult]) -> WorkResult | None:
    """Several functions' work, summed (a test's); None where there is none."""
    found = list(parts)
    return _combined(found) if found else None


# -- what a baseline ratchets, and by how much ------------------------------------------------

DEFAULT_TOLERANCE: Mapping[str, int] = {
    "graphs": 0,
    "ops": 5,
    "kernels": 5,
    "restarts": 0,
    "subgraphs": 0,
}
TOLERANCE_FORM = "MEASURE=PERCENT[,MEASURE=PERCENT...], e.g. ops=5,kernels=10,graphs=0"


def parse_tolerance(text: str, where: str) -> dict[str, int]:
    """``ops=5,kernels=10`` (a trailing ``%`` allowed) over the defaults; BudgetError on a
    measure it does not know or a value that is not a non-negative integer."""
    found = dict(DEFAULT_TOLERANCE)
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        measure, equals, value = (s.strip() for s in part.partition("="))
        number = value.removesuffix("%").strip()
        if not equals or measure not in RATCHETED:
            raise BudgetError(
                f"{where}: unknown measure in {part!r}; expected {TOLERANCE_FORM} with MEASURE "
                f"one of {', '.join(RATCHETED)}"
            )
        if not (number.isascii() and number.isdigit()):
            raise BudgetError(
                f"{where}: {measure}={value!r} is not a percent; expected a non-negative "
                f"integer such as {measure}=5 ({TOLERANCE_FORM})"
            )
        found[measure] = int(number)
    return found


def allowed(baseline: int, percent: int) -> int:
    """The most a count may be against its baseline's ``baseline`` (rounded down: a
    5% tolerance on 17 ops allows 17)."""
    return baseline + baseline * percent // 100


def ratchet_figures(work: WorkResult) -> dict[str, int]:
    """What a baseline keeps of a function's work: the ratcheted counts this torch records."""
    return {m: int(work[m]) for m in RATCHETED if work[m] is not None}  # type: ignore[literal-required]


# Where torch records each measure (what a torch without it lacks).
FIELDS = {
    "graphs": "CompilationMetrics.graph_op_count",
    "ops": "CompilationMetrics.graph_op_count",
    "kernels": "torch._inductor.metrics.generated_kernel_count",
    "restarts": "CompilationMetrics.restart_reasons",
    "subgraphs": "the Dynamo graph when torch builds its guards",
}
# The usual fix when a measure grew.
FIXES = {
    "graphs": "a graph break or a recompile adds a graph: see the graph breaks and recompiles "
    "above (TORCH_LOGS=graph_breaks names each)",
    "ops": "the graph grew: an op added to forward, a loop unrolled further, a block no longer "
    "reused (torch.compiler.nested_compile_region), or a torch upgrade that traces more",
    "kernels": "Inductor generated more kernels: fewer fusions, or a graph that grew",
    "restarts": "Dynamo started the frame over: the reasons are in the report "
    "(restart_reasons); a graph break inside a nested call or a data-dependent branch",
    "subgraphs": "a repeated block traced more than once: its calls differ (other input "
    "shapes, strides, dtypes or requires_grad, or a Python value that changes per layer); "
    "make every layer's call alike so that torch.compiler.nested_compile_region reuses one",
}
