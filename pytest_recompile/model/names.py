"""Names, forms and messages shared by every layer of the plugin: plain strings, cheap to import,
and :func:`relative`, the one way every layer shows a path."""

from __future__ import annotations

import os
import sys

PREFIX = "pytest-recompile:"  # every message of the plugin starts so

MAX_RECOMPILES = "max_recompiles"
ALLOW_RECOMPILES = "allow_recompiles"
EXPECT_GUARDS = "expect_guards"
FORBID_GUARDS = "forbid_guards"
FULLGRAPH = "fullgraph"
MAX_GRAPH_BREAKS = "max_graph_breaks"
MAX_CUDAGRAPH_RERECORDS = "max_cudagraph_rerecords"
SAME_ACROSS_RANKS = "same_compiles_across_ranks"
MAX_GUARDS = "max_guards"
WARM_START = "warm_start"
MAX_GRAPHS = "max_graphs"
MAX_GRAPH_OPS = "max_graph_ops"
MAX_UNIQUE_SUBGRAPHS = "max_unique_subgraphs"
MARKERS = (
    MAX_RECOMPILES,
    ALLOW_RECOMPILES,
    EXPECT_GUARDS,
    FORBID_GUARDS,
    FULLGRAPH,
    MAX_GRAPH_BREAKS,
    MAX_CUDAGRAPH_RERECORDS,
    SAME_ACROSS_RANKS,
    MAX_GUARDS,
    WARM_START,
    MAX_GRAPHS,
    MAX_GRAPH_OPS,
    MAX_UNIQUE_SUBGRAPHS,
)

MAX_RECOMPILES_FORM = "max_recompiles(n: int >= 0, *, function: str | None = None)"
EXPECT_GUARDS_FORM = "expect_guards(*kinds: str)"
FORBID_GUARDS_FORM = "forbid_guards(*kinds: str)"
MAX_GRAPH_BREAKS_FORM = "max_graph_breaks(n: int >= 0)"
MAX_CUDAGRAPH_RERECORDS_FORM = "max_cudagraph_rerecords(n: int >= 0)"
MAX_GUARDS_FORM = "max_guards(n: int >= 0, *, function: str | None = None)"
ALLOW_RECOMPILES_FORM = "allow_recompiles(*, eager_fallback: bool = False)"
WARM_START_FORM = "warm_start(*, allow_bypass: bool = False, dynamo: bool = False)"
MAX_GRAPHS_FORM = "max_graphs(n: int >= 0, *, function: str | None = None)"
MAX_GRAPH_OPS_FORM = "max_graph_ops(n: int >= 0, *, function: str | None = None)"
MAX_UNIQUE_SUBGRAPHS_FORM = "max_unique_subgraphs(n: int >= 0, *, function: str | None = None)"
MARKER_LINES = (
    f"{MAX_RECOMPILES_FORM}: this test may recompile at most n times in total; with "
    "function=, the torch.compile'd function of that name or qualname may recompile at most "
    "n times. Stackable; always enforced, with or without --recompile-budget.",
    f"{ALLOW_RECOMPILES_FORM}: opt this test out of the default budget of --recompile-budget / "
    "recompile_budget (max_recompiles markers on it still apply); a function that hits "
    "recompile_limit still fails it, unless eager_fallback=True.",
    f"{EXPECT_GUARDS_FORM}: every recompile of this test must be triggered by failing guards of "
    "these kinds (TENSOR_MATCH, EQUALS_MATCH, GLOBAL_STATE, ...); another kind fails the test.",
    f"{FORBID_GUARDS_FORM}: compiled code in this test may not install guards of these kinds on "
    "the test's own values (e.g. EQUALS_MATCH on a Python int argument), recompile or not.",
    f"{FULLGRAPH}: fullgraph semantics for this test without editing its torch.compile calls: "
    "a graph break fails the test at the break, with its reason.",
    f"{MAX_GRAPH_BREAKS_FORM}: this test's compiled code may have at most n distinct graph breaks.",
    f"{MAX_CUDAGRAPH_RERECORDS_FORM}: CUDA graphs (mode='reduce-overhead') of this test may be "
    "recorded again at most n times. Re-records are not recompiles: without this marker they "
    "are only reported.",
    f"{SAME_ACROSS_RANKS}: the ranks (child processes with a rank) this test starts must "
    "compile each shared function alike: as many recompiles, for the same guard kinds. "
    "Without this marker a divergence is only reported.",
    f"{MAX_GUARDS_FORM}: each cache entry this test compiles may check at most n guards "
    "(what torch runs on every call that reaches it); with function=, only that function's. "
    "Stackable; judged at the end of each phase.",
    f"{WARM_START_FORM}: run this test alone twice more, each in a freshly started process, "
    "sharing one new cache directory: the second (warm) run must hit every FX graph and "
    "AOTAutograd cache lookup, and a miss names the key component that changed. "
    "allow_bypass=True: a cache bypass passes (and is shown); dynamo=True: the warm run must "
    "also trace nothing with Dynamo (precompiled code loaded).",
    f"{MAX_GRAPHS_FORM}: this test's compiles may make at most n graphs (Dynamo frames that "
    "made one, resume functions included; with function=, that function's). Counted from "
    "torch's compile metrics, judged at the end of each phase of the test.",
    f"{MAX_GRAPH_OPS_FORM}: this test's graphs (with function=, that function's) may hold at "
    "most n FX ops (call nodes; torch's graph_op_count).",
    f"{MAX_UNIQUE_SUBGRAPHS_FORM}: any one graph of this test (with function=, of that "
    "function) may call at most n distinct torch.compiler.nested_compile_region subgraphs: a "
    "repeated block that stopped being reused traces one per layer.",
)

MODES = ("fail-fast", "at-end", "report-only")
GITHUB_MODES = ("auto", "on", "off")
PROCESS_MODES = ("on", "off")
IF_DISABLED = ("fail", "warn")  # --recompile-if-disabled: a gate whose compile was off

# The contract with child processes (see children/parent.py): the spool directory a child writes its
# records to, and the file in it that names the test (or wider fixture) running in the parent.
SPOOL_ENV = "PYTEST_RECOMPILE_SPOOL"
SPOOL_OWNER = "owner"
SHADOWED_ENV = "PYTEST_RECOMPILE_SITECUSTOMIZE"  # "sys.prefix|file" of the session's own
WARM_CHILD_ENV = "PYTEST_RECOMPILE_WARM_CHILD"  # a warm-start child's spec (restarts/child.py)
# set in both warm-start children only: a folder of the test's own that the two share (where a
# test saves precompiled code for the warm run), removed afterwards
WARM_START_DIR_ENV = "PYTEST_RECOMPILE_WARM_START_DIR"

HEADROOM = 2  # the suggested recompile_limit: this many times the most entries seen


def relative(path: str, root: str | None = None) -> str:
    """``path`` as every output shows it and every report stores it, the same from any
    checkout path: an installed package's file from its package folder on
    (``torch/nn/modules/module.py``), a file under ``root`` (default: the working directory)
    relative to it, other code by its importable path (relative to the ``sys.path`` folder
    that holds it), with ``/`` separators; anything else as given. A relative path is taken
    as already shown so (a report's), and returned as it is."""
    shown = path.replace("\\", "/")
    if not os.path.isabs(path):
        return shown
    for folder in LIBRARY_FOLDERS:
        if f"/{folder}/" in shown:
            return shown.rpartition(f"/{folder}/")[2]
    base = root or os.getcwd()
    inside = _inside(path, base)
    if inside is not None:
        return inside
    # The longest sys.path folder that holds it and is not above the root (the standard
    # library's folder, a path a test suite added).
    folders = sorted(
        (entry for entry in sys.path if os.path.isabs(entry) and _inside(base, entry) is None),
        key=len,
        reverse=True,
    )
    return next((found for f in folders if (found := _inside(path, f)) is not None), path)


LIBRARY_FOLDERS = ("site-packages", "dist-packages")  # where installed packages live


def _inside(path: str, folder: str) -> str | None:
    """``path`` relative to ``folder`` (``/`` separators) when inside it, else None."""
    try:
        rel = os.path.relpath(path, folder)
    except ValueError:  # another drive on Windows
        return None
    if rel == os.pardir or rel.startswith(os.pardir + os.sep):
        return None
    return rel.replace(os.sep, "/")


BETWEEN = "between tests"  # when a thread's compile ran with no test running
