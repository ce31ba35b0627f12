"""Which torch this is, and what it has: every version check and feature probe, decided once.

The gate needs the compile hook's layout (:func:`check_torch`): torch missing or too old is a
usage error at start (read from its metadata), and a torch without that layout stops the session
as a usage error at the first gated test, before any test is judged. Optional features
(keeping single cache entries, fullgraph blocks, graph-break records, compile callbacks,
compile metrics) are probed here; a torch without one degrades that feature, told in one
summary line (:func:`degraded_lines`). A torch newer than the newest release the matrix ran is
accepted, with one header line (:func:`untested_lines`): the probes, not the version, decide
what works.
"""

from __future__ import annotations

import functools
import inspect
import re

# The oldest torch this release is tested on, and the newest minor release the matrix ran
# (.ci/torch-matrix; CI runs 2.13 and the newest). 2.9+ call pre-compile hooks; 2.7 and 2.8 are
# reached through the limit check (see hooks._register).
MIN_TORCH = (2, 7)
MIN_TORCH_TEXT = ".".join(map(str, MIN_TORCH))
NEWEST_TESTED = (2, 15)
NEWEST_TESTED_TEXT = ".".join(map(str, NEWEST_TESTED))

# Locals of torch._dynamo.convert_frame._compile that the hook reads (as in 2.13 to 2.15).
_COMPILE_LOCALS = ("code", "frame", "cache_size", "compile_id")
# Before 2.9 the limit check of convert_frame._compile is the interception point; it runs once
# per frame compile, after the guard-failure reasons are computed.
LIMIT_CHECK = "exceeds_recompile_limit"
HOOK_LIST = "register_hook_for_recompile_user_context"


class TorchUnsupported(RuntimeError):
    """torch is missing, too old, or lacks an internal the gate needs."""


class InternalError(RuntimeError):
    """torch's compile path no longer looks the way this module expects."""


def torch_version() -> str | None:
    """The installed torch version, without importing torch."""
    from importlib import metadata

    try:
        return metadata.version("torch")
    except metadata.PackageNotFoundError:
        return None


_BUILT_FOR = re.compile(r"^(?P<name>cuda|hip|xpu)\b[^=]*=\s*(?P<value>.+?)\s*$", re.MULTILINE)


def torch_build() -> str | None:
    """What the installed torch was built for: "cpu", "cuda 12.8", "rocm 6.2", "xpu 20250101";
    None where torch is not installed. Read from torch/version.py as a text file: the same in
    every process (an xdist controller imports no torch), and nothing is imported."""
    from importlib import metadata

    try:
        path = metadata.distribution("torch").locate_file("torch/version.py")
        with open(str(path), encoding="utf-8") as handle:
            text = handle.read()
    except (metadata.PackageNotFoundError, OSError, ValueError):
        return None
    return built_for(text)


def built_for(text: str) -> str:
    """The build torch/version.py's text names (its ``cuda``, ``hip``, ``xpu``), else "cpu"."""
    for found in _BUILT_FOR.finditer(text):
        value = found["value"].strip("'\"")
        if value and value != "None":
            return f"{'rocm' if found['name'] == 'hip' else found['name']} {value}"
    return "cpu"


def version_tuple(text: str) -> tuple[int, ...]:
    parts: list[int] = []
    for piece in text.split("+")[0].split(".")[:2]:
        digits = "".join(ch for ch in piece if ch.isdigit())
        parts.append(int(digits) if digits else 0)
    return tuple(parts)


def check_version() -> str:
    """Check the installed torch version without importing torch; raise TorchUnsupported."""
    version = torch_version()
    if version is None:
        raise TorchUnsupported(
            "pytest-recompile: torch is not installed, but the recompile gate was asked for. "
            f"Install torch >= {MIN_TORCH_TEXT} (pip install 'torch>={MIN_TORCH_TEXT}'), "
            "or drop --recompile-budget / recompile_budget and the max_recompiles markers."
        )
    if version_tuple(version) < MIN_TORCH:
        raise TorchUnsupported(
            f"pytest-recompile: torch {version} is too old for the recompile gate; "
            f"it needs torch >= {MIN_TORCH_TEXT}, the oldest release it is tested on "
            f"(pip install -U 'torch>={MIN_TORCH_TEXT}')."
        )
    return version


@functools.cache
def check_torch() -> str:
    """Import torch and check that it has what the gate reads; return its version."""
    version = check_version()
    import torch._dynamo.cache_size as cache_size
    import torch._dynamo.convert_frame as convert_frame

    missing = []
    if not has_hook_list() and not hasattr(convert_frame, LIMIT_CHECK):
        missing.append(f"{HOOK_LIST} or convert_frame.{LIMIT_CHECK}")
    missing += [] if hasattr(cache_size, LIMIT_CHECK) else [f"cache_size.{LIMIT_CHECK}"]
    missing += [] if hasattr(cache_size, "is_recompilation") else ["cache_size.is_recompilation"]
    names = convert_frame._compile.__code__.co_varnames
    missing += [f"_compile local {n!r}" for n in _COMPILE_LOCALS if n not in names]
    if missing:
        raise TorchUnsupported(
            f"pytest-recompile: torch {version} lacks what the gate reads: {', '.join(missing)}. "
            "Please report this with your torch version."
        )
    return version


def untested_lines() -> list[str]:
    """One header line when the installed torch is newer than any the matrix ran (read from
    the installed metadata: no torch import)."""
    version = torch_version()
    if version is None or version_tuple(version) <= NEWEST_TESTED:
        return []
    return [
        f"recompile gate: torch {version} is newer than the newest release tested "
        f"({NEWEST_TESTED_TEXT}); features this torch lacks are named in the summary"
    ]


# -- feature probes (each decided once per process) -----------------------------------------


@functools.cache
def has_hook_list() -> bool:
    """torch's list of pre-compile hooks (2.9+); before, the limit check is wrapped."""
    import torch._dynamo.utils as dynamo_utils

    return hasattr(dynamo_utils, HOOK_LIST)


@functools.cache
def has_guards_built_hook() -> bool:
    """The hook torch calls once per compile with the new entry's guard manager and the call's
    own arguments, right after it built and checked them (``guards.
    guard_manager_testing_hook_fn``: two arguments on 2.7, three from 2.9 on): an entry's guard
    check is timed there. Without it, it is timed later, where the call's objects still live."""
    import torch._dynamo.guards as guards

    return hasattr(guards, "guard_manager_testing_hook_fn")


@functools.cache
def can_keep_entries() -> bool:
    """Whether this torch lets single cache entries be kept while the rest are dropped."""
    import torch._C._dynamo.eval_frame as eval_frame
    from torch._dynamo import cache_size, guards

    reason = getattr(guards, "get_guard_fail_reason", None)
    needed = (
        hasattr(eval_frame, "reset_code"),
        hasattr(eval_frame, "_load_precompile_entry"),
        hasattr(eval_frame, "_debug_get_precompile_entries"),
        hasattr(eval_frame, "_reset_precompile_entries"),
        reason is not None and "skip_logging" in inspect.signature(reason).parameters,
        hasattr(cache_size, "_has_same_id_matched_objs"),
        all(
            name in getattr(cache_size.CacheSizeRelevantForFrame, "__dataclass_fields__", {})
            for name in _CACHE_SIZE_FIELDS
        ),
    )
    return all(needed)


_CACHE_SIZE_FIELDS = ("num_cache_entries", "num_cache_entries_with_same_id_matched_objs")


@functools.cache
def can_reuse_compiles() -> bool:
    """Whether an entry an earlier test's first compile made can answer a later test's first
    call: kept entries, an epilogue guard on them, torch's automatic-dynamic state per code
    object, and config hashes."""
    if not can_keep_entries():
        return False
    import torch._C._dynamo.guards as guards
    import torch._dynamo.config as config
    import torch._dynamo.pgo as pgo

    return (
        hasattr(guards.RootGuardManager, "add_epilogue_lambda_guard")
        and hasattr(pgo, "_CODE_STATE")
        and hasattr(pgo, "CodeState")
        and callable(getattr(config, "get_hash", None))
    )


@functools.cache
def epilogue_guard_arguments() -> int:
    """How many arguments ``RootGuardManager.add_epilogue_lambda_guard`` takes after self:
    3 on 2.13 (the guard, its verbose code parts, a user stack), 2 on 2.9.1 (no stack). Read
    from the pybind signature in its docstring (``arg0: object, ...``); 3 where it is unread."""
    import torch._C._dynamo.guards as guards

    method = getattr(guards.RootGuardManager, "add_epilogue_lambda_guard", None)
    signature = (getattr(method, "__doc__", None) or "").split(")", 1)[0]
    found = len(re.findall(r"\barg\d+:", signature))
    return found or 3


@functools.cache
def cache_entry_has_backend() -> bool:
    """torch's CacheEntry shows the backend it was compiled for (2.13 and 2.15 do; 2.9.1 does
    not, comparing it in C++ only): a kept entry's backend is then read from it, else noted
    at the compile (:func:`.entries.note_backend`)."""
    import torch._C._dynamo.eval_frame as eval_frame

    return hasattr(getattr(eval_frame, "_CacheEntry", None), "backend")


@functools.cache
def reuses_where_it_keeps() -> bool:
    """No reuse to miss: this torch reuses, or keeps no single entries at all (its full reset
    is told by the isolation line)."""
    return can_reuse_compiles() or not can_keep_entries()


@functools.cache
def precompile_entry_takes_region() -> bool:
    """Newer torch (main after 2.15.0; 2.15.0 itself takes three arguments) files precompile
    entries per ``isolate_recompiles`` region:
    ``_load_precompile_entry(code, guard_manager, dynamo_code, region[, owner])``.
    Decided by the signature (pybind's docstring), not the name, which both have."""
    import torch._C._dynamo.eval_frame as eval_frame

    load = getattr(eval_frame, "_load_precompile_entry", None)
    doc = (getattr(load, "__doc__", None) or "").split("\n", 1)[0]
    head, _, rest = doc.partition("(")
    params = [p for p in rest.partition(")")[0].split(",") if p.strip()]
    required = [p for p in params if "=" not in p]
    return bool(head) and len(required) >= 4


@functools.cache
def can_error_on_graph_break() -> bool:
    """torch.compile's fullgraph switch for a block (2.9+)."""
    import torch._dynamo

    return hasattr(torch._dynamo, "error_on_graph_break")


@functools.cache
def can_certify() -> bool:
    """What the shape certificate reads: a code object's cache entries, and each entry's guard
    tree evaluated on a dict of arguments (``GuardManagerWrapper.check``; 2.7+)."""
    import torch._C._dynamo.eval_frame as eval_frame
    import torch._C._dynamo.guards as guards

    wrapper = getattr(guards, "GuardManager", None) or getattr(guards, "RootGuardManager", None)
    return hasattr(eval_frame, "_debug_get_cache_entry_list") and wrapper is not None


@functools.cache
def has_graph_break_records() -> bool:
    """torch's list of the graph breaks it made (``utils.graph_break_reasons``)."""
    import torch._dynamo.utils as dynamo_utils

    return isinstance(getattr(dynamo_utils, "graph_break_reasons", None), list)


@functools.cache
def has_compile_callbacks() -> bool:
    """torch's compile start/end callbacks, which announce CUDA-graph recordings (2.7+)."""
    try:
        from torch._dynamo.callback import callback_handler
    except ImportError:
        return False
    return hasattr(callback_handler, "register_start_callback")


@functools.cache
def can_count_cudagraph_recordings() -> bool:
    """Compile callbacks that say which compile is a CUDA-graph recording (2.8+)."""
    import torch._dynamo.callback as callback

    trigger = getattr(callback, "CallbackTrigger", None)
    return has_compile_callbacks() and hasattr(trigger, "CUDAGRAPH_RECORDING")


@functools.cache
def has_compile_metrics() -> bool:
    """torch's per-compile metrics, where compile seconds are read."""
    import torch._dynamo.utils as dynamo_utils

    return hasattr(dynamo_utils, "_compilation_metrics") and hasattr(
        dynamo_utils, "set_compilation_metrics_limit"
    )


@functools.cache
def has_lazy_backward_callbacks() -> bool:
    """torch announces a backward compiled at its first backward call to the compile
    callbacks, with its forward's compile id (``CallbackTrigger.LAZY_BACKWARD`` with
    ``CallbackArgs``, 2.8+): its kernels count with the compile."""
    import torch._dynamo.callback as callback_module

    trigger = getattr(callback_module, "CallbackTrigger", None)
    return hasattr(trigger, "LAZY_BACKWARD") and hasattr(callback_module, "CallbackArgs")


@functools.cache
def compile_metric_fields() -> frozenset[str]:
    """The fields of torch's per-compile metrics (``CompilationMetrics``): a count of
    compile work this torch does not record there is absent, never 0 (docs/compile-work.md)."""
    import dataclasses

    import torch._dynamo.utils as dynamo_utils

    metrics = getattr(dynamo_utils, "CompilationMetrics", None)
    if metrics is None or not dataclasses.is_dataclass(metrics):
        return frozenset()
    return frozenset(f.name for f in dataclasses.fields(metrics))


@functools.cache
def reads_dict_guards() -> bool:
    """A dict torch iterated keeps its key and value guards apart in the guard tree
    (``DictGuardManager.get_key_value_managers``): the guard walk reads them there."""
    try:
        from torch._C._dynamo.guards import DictGuardManager
    except ImportError:
        return False
    return hasattr(DictGuardManager, "get_key_value_managers")


# What each optional feature's absence costs, in the words of the summary line.
DEGRADED = (
    (
        reads_dict_guards,
        "guard counts: this torch's guard trees do not list the guards under a dict it "
        "iterated (DictGuardManager.get_key_value_managers); a ModuleList's layers are left "
        "out of max_guards counts and forbid_guards",
    ),
    (
        can_certify,
        "certificates: this torch lists no cache entries or guard trees to evaluate; "
        "recompiles.covers() raises",
    ),
    (
        can_error_on_graph_break,
        "fullgraph: this torch cannot stop a compile at a graph break (torch._dynamo."
        "error_on_graph_break); fullgraph rules are judged when each test ends",
    ),
    (
        has_graph_break_records,
        "graph breaks: this torch keeps no list of them (torch._dynamo.utils."
        "graph_break_reasons); they are not reported, and fullgraph and max_graph_breaks "
        "rules see none",
    ),
    (
        can_count_cudagraph_recordings,
        "CUDA graphs: this torch's compile callbacks do not say which compile is a CUDA-graph "
        "recording (torch._dynamo.callback.CallbackTrigger); re-records are not counted",
    ),
    (
        reuses_where_it_keeps,
        "reuse: this torch cannot let a later test use an earlier test's first compile "
        "(epilogue guards, torch._dynamo.pgo state, config hashes); each test compiles its "
        "first calls afresh",
    ),
    (
        has_compile_metrics,
        "compile seconds: this torch has no compile metrics (torch._dynamo.utils."
        "_compilation_metrics); times read 0",
    ),
)


@functools.cache
def caches_config_reads() -> bool:
    """Whether torch's config modules cache the dict of their values (2.6+)."""
    import inspect

    import torch._dynamo.config as config

    read = getattr(config, "_get_dict", None)
    try:
        return read is not None and "readonly_values" in inspect.signature(read).parameters
    except (TypeError, ValueError):
        return False


# Every cached probe, for tests that fake a missing API.
PROBES = (
    check_torch,
    has_hook_list,
    has_guards_built_hook,
    can_keep_entries,
    can_reuse_compiles,
    precompile_entry_takes_region,
    cache_entry_has_backend,
    has_compile_callbacks,
    caches_config_reads,
    *(probe for probe, _ in DEGRADED),
)


def degraded_lines() -> list[str]:
    """One summary line per optional feature this torch lacks (single-entry keeping is told
    by the isolation line)."""
    return [f"degraded: {line}" for probe, line in DEGRADED if not probe()]
