"""torch's own instruments, read for a block: graph breaks and fullgraph blocks, CUDA-graph
recordings and compile callbacks, compile seconds and counted compile work, the stance and
Dynamo's config, the structured-trace logger, and the devices."""

from __future__ import annotations

import contextlib
import contextvars
import functools
import os
import sys
import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from . import events, versions

if TYPE_CHECKING:
    from ..model.records import GraphBreak
    from ..model.work import CompileWork

# Metric capacity while a tracker is active (torch keeps 64 by default).
METRICS_CAPACITY = 4096


@contextmanager
def error_on_graph_break(value: bool = True) -> Iterator[None]:
    """Fullgraph semantics for compiles inside the block (``value=False``: none, inside a
    block that has them), without touching the compile calls.

    torch.compile calls that pass error_on_graph_break= themselves keep their own setting.
    """
    import torch._dynamo

    with torch._dynamo.error_on_graph_break(value):
        yield


def graph_break_count() -> int:
    import torch._dynamo.utils as dynamo_utils

    return len(dynamo_utils.graph_break_reasons) if versions.has_graph_break_records() else 0


def graph_breaks_since(mark: int) -> list[GraphBreak]:
    """GraphBreaks recorded by torch since ``graph_break_count()`` returned ``mark``."""
    import torch._dynamo.utils as dynamo_utils

    from ..model.records import graph_break

    if not versions.has_graph_break_records():
        return []
    reasons = dynamo_utils.graph_break_reasons
    found = reasons[mark:] if len(reasons) >= mark else reasons  # a reset() cleared the list
    result = []
    for compile_reason in found:
        frame = compile_reason.user_stack[-1] if compile_reason.user_stack else None
        result.append(
            graph_break(
                compile_reason.reason,
                frame.filename if frame else "?",
                (frame.lineno or 0) if frame else 0,
                frame.name if frame else "?",
                (frame.line or "") if frame else "",
            )
        )
    return result


def graph_break_error(exc: BaseException) -> GraphBreak | None:
    """The GraphBreak behind a fullgraph error torch raised at a break, else None."""
    from torch._dynamo.exc import Unsupported

    from ..model.records import graph_break

    if not isinstance(exc, Unsupported):
        return None
    stack = getattr(exc, "real_stack", None) or []
    frame = stack[-1] if stack else None
    text = getattr(exc, "msg", None) or str(exc)
    return graph_break(
        text,
        frame.filename if frame else "?",
        (frame.lineno or 0) if frame else 0,
        frame.name if frame else "?",
        (frame.line or "") if frame else "",
    )


@dataclass(eq=False)
class CompileCallbacks:
    """One block's compile callbacks (see :func:`block_callbacks`): what they collect, and
    how to put them back after a reset."""

    on_end: Callable[[], None]  # called after each compile in the process
    recordings: list[str] = field(default_factory=list)  # compile id of each CUDA-graph recording

    def rearm(self) -> None:
        """Register again what ``torch._dynamo.reset()`` dropped."""
        _register()

    def close(self) -> None:
        """The block ends: its callbacks hear nothing more (and torch's are removed with the
        last block, unless the session holds them)."""
        if self in BLOCKS:
            BLOCKS.remove(self)
        _release()


# The open blocks, each told of every compile by one pair of torch callbacks, registered
# while a block is open or the session holds them (:func:`hold_callbacks`): a block opened per
# test costs a list append, not two registrations with torch.
BLOCKS: list[CompileCallbacks] = []
_HELD = [0]  # holds of the session (the gate), beside the open blocks


def block_callbacks(on_end: Callable[[], None]) -> CompileCallbacks:
    """torch's compile callbacks for a block: count CUDA-graph recordings, and call
    ``on_end`` after each compile; :meth:`CompileCallbacks.close` ends it.

    A re-record is not a Dynamo recompile: no cache entry, no guard. torch announces each
    recording to compile start callbacks with the CUDAGRAPH_RECORDING trigger (2.7+).
    ``torch._dynamo.reset()`` drops compile callbacks: call ``rearm`` after one (the tracker
    does at each compile).
    """
    block = CompileCallbacks(on_end)
    if versions.has_compile_callbacks():
        BLOCKS.append(block)
        _register()
    return block


def hold_callbacks() -> Callable[[], None]:
    """Keep torch's compile callbacks registered until the returned release is called (the
    gate, for its session: a test's block then opens and closes without touching torch)."""
    if not versions.has_compile_callbacks():
        return lambda: None
    _HELD[0] += 1
    _register()
    released = [False]

    def release() -> None:
        if not released[0]:
            released[0] = True
            _HELD[0] -= 1
            _release()

    return release


def _trigger(name: str = "CUDAGRAPH_RECORDING") -> Any:
    """torch's CUDAGRAPH_RECORDING trigger, or another by name (looked up at each compile
    start: a test may fake a torch without it)."""
    import torch._dynamo.callback as callback_module

    return getattr(getattr(callback_module, "CallbackTrigger", None), name, 0)


def _on_start(*args: Any) -> None:  # CallbackArgs (2.8+); no argument before
    trigger = getattr(args[0], "callback_trigger", None) if args else None
    if trigger is None:
        return
    if BLOCKS and trigger == _trigger():
        compile_id = str(args[0].compile_id)
        for block in list(BLOCKS):
            block.recordings.append(compile_id)
    elif trigger == _trigger("LAZY_BACKWARD"):
        with contextlib.suppress(Exception):  # a kernel figure gives way, never the backward
            backward_began(str(args[0].compile_id))


def _on_finish(*args: Any) -> None:
    with contextlib.suppress(Exception):
        backward_ended()
    for block in list(BLOCKS):
        block.on_end()


def _register() -> None:
    from torch._dynamo.callback import callback_handler

    if _on_start not in callback_handler.start_callbacks:
        callback_handler.register_start_callback(_on_start)
    ends = hasattr(callback_handler, "register_end_callback")
    if ends and _on_finish not in callback_handler.end_callbacks:
        callback_handler.register_end_callback(_on_finish)


def _release() -> None:
    if BLOCKS or _HELD[0]:
        return
    forget_callbacks()


def forget_callbacks() -> None:
    """Remove the plugin's compile callbacks from torch (the last block ended; or a forked
    child, where the parent's blocks live on in the parent)."""
    BLOCKS.clear()
    _HELD[0] = 0
    if not versions.has_compile_callbacks() or "torch._dynamo.callback" not in sys.modules:
        return
    from torch._dynamo.callback import callback_handler

    if _on_start in callback_handler.start_callbacks:
        callback_handler.remove_start_callback(_on_start)
    if _on_finish in getattr(callback_handler, "end_callbacks", ()):
        callback_handler.remove_end_callback(_on_finish)


@dataclass(frozen=True)
class CompileState:
    """What a test can change and forget to change back: the stance and Dynamo's config."""

    stance: Any
    config: dict[str, Any]


def compile_state() -> CompileState:
    import torch._dynamo.eval_frame as eval_frame

    return CompileState(eval_frame._stance, config_values())


def config_values() -> dict[str, Any]:
    """Dynamo's config as it is now, to keep: each value, containers copied one level (a
    test that adds to ``reorderable_logging_functions`` changed it). torch caches the dict it
    reads for this (2.6+), so a gated test's snapshot costs about 15 microseconds, not the
    deep copy of every value ``get_config_copy`` makes."""
    return _config_now(copy=True)


def _config_now(copy: bool = False) -> dict[str, Any]:
    """Dynamo's config as it is now; its containers copied one level where ``copy`` (to keep),
    else as they are (to compare with a snapshot).

    torch's cached read holds a deep copy of each container taken when the key was last
    set, so a container changed in place (``config.reorderable_logging_functions.add(f)``)
    is read from the config itself, as torch's own attribute read gives it."""
    import torch._dynamo.config as config

    if not versions.caches_config_reads():
        return dict(config.get_config_copy())  # a deep copy of every value already
    found: dict[str, Any] = getattr(config, "_get_dict")(readonly_values=True)  # noqa: B009
    unset = _unset()
    for key, override in _containers(found, getattr(config, "_config", {})):
        value = found.get(key)
        if isinstance(value, (list, dict, set)):
            live = value if override is None else override.get()
            if live is unset:  # never set nor read as a container to change: the cached read
                live = value
            found[key] = live.copy() if copy else live
    return found


# The number of keys -> each key that holds a container, with its override (below).
_CONTAINERS: dict[int, tuple[tuple[str, Any], ...]] = {}


def _containers(found: dict[str, Any], entries: dict[str, Any]) -> tuple[tuple[str, Any], ...]:
    """The keys of Dynamo's config that hold a list, dict or set (a dozen of some 300), each
    with torch's override of it (a ``ContextVar`` made with the key): what a read gives where
    the user set the key or read the container to change it, as :func:`_config_now` reads it;
    None where a read gives the cached value (the environment forces the key, or this torch
    keeps the value itself, not a variable). Found once: a config module's keys are fixed when
    it is imported (setting an unknown key raises), a key's value keeps its kind, and its
    variable and environment are fixed with it."""
    keys = _CONTAINERS.get(len(found))
    if keys is None:
        unset = _unset()
        pairs = []
        for key, value in found.items():
            if isinstance(value, (list, dict, set)):
                entry = entries.get(key)
                override = getattr(entry, "user_override", None)
                forced = getattr(entry, "env_value_force", unset) is not unset
                if unset is None or not isinstance(override, contextvars.ContextVar) or forced:
                    override = None  # the value itself (older torch), or none: the cached read
                pairs.append((key, override))
        keys = _CONTAINERS[len(found)] = tuple(pairs)
    return keys


@functools.cache
def _unset() -> object:
    """torch's marker of a config key the user never set (None where it has none)."""
    from torch.utils import _config_module

    return getattr(_config_module, "_UNSET_SENTINEL", None)


def rebased(saved: CompileState, before: CompileState, after: CompileState) -> CompileState:
    """``saved`` with what changed from ``before`` to ``after`` taken in: a wider fixture's
    set-up or teardown ran meanwhile, and what it changed is its own, not the test's."""
    config = dict(saved.config)
    config.update({k: v for k, v in after.config.items() if before.config.get(k) != v})
    stance = after.stance if after.stance != before.stance else saved.stance
    return CompileState(stance, config)


FORCE_EAGER = 'torch.compiler.set_stance("force_eager")'


def compile_switched_off() -> str | None:
    """How torch.compile is switched off in this process now, as the user wrote it
    (``TORCH_COMPILE_DISABLE=1``, ``torch._dynamo.config.disable = True``, a ``force_eager``
    stance); None where it compiles. Where torch is not imported yet, only the environment
    is read (torch reads ``TORCH_COMPILE_DISABLE`` into ``config.disable`` at import). Read
    twice per gated test: attribute look-ups only, no import statement."""
    dynamo = sys.modules.get("torch._dynamo")
    if dynamo is not None and not getattr(dynamo.config, "disable", False):  # it compiles
        stance = getattr(getattr(dynamo.eval_frame, "_stance", None), "stance", "default")
        return FORCE_EAGER if stance == "force_eager" else None
    if os.environ.get("TORCH_COMPILE_DISABLE") == "1":  # off, or before torch's import
        return "TORCH_COMPILE_DISABLE=1"
    return None if dynamo is None else "torch._dynamo.config.disable = True"


def default_stance() -> bool:
    """Whether torch.compile runs under its default stance (no ``fail_on_recompile``,
    ``eager_then_compile``, ... set by the user)."""
    import torch._dynamo.eval_frame as eval_frame

    return bool(getattr(eval_frame._stance, "stance", "default") == "default")


def restore_compile_state(saved: CompileState) -> list[str]:
    """Put back what changed since ``saved``; return what that was, in words."""
    import torch._dynamo.config as config
    import torch._dynamo.eval_frame as eval_frame

    changed = []
    if eval_frame._stance != saved.stance:
        changed.append(f"stance {eval_frame._stance.stance!r}")
        eval_frame._set_stance(saved.stance)
    now = _config_now()
    if now == saved.config:  # the usual case, compared at C speed
        return changed
    differing = {k: v for k, v in saved.config.items() if now.get(k) != v}
    if differing:
        changed += [f"torch._dynamo.config.{k}={now.get(k)!r}" for k in sorted(differing)]
        config.load_config(differing)
    return changed


class CompileSeconds:
    """``entire_frame_compile_time_s`` of the compiles made in a block, by
    :func:`.events.compile_key`: :meth:`start` marks torch's newest metric, :meth:`stop` reads
    those newer than it.

    torch keeps 64 metrics by default: :meth:`widen` (at the block's first compile) raises
    the capacity so that none of the block's is dropped before :meth:`stop`, which puts it
    back. A block that compiles nothing touches neither the capacity nor the list.
    """

    def __init__(self) -> None:
        self._last: Any = None
        self._capacity: int | None = None  # the capacity to put back (widened)

    def start(self) -> None:
        if versions.has_compile_metrics():
            import torch._dynamo.utils as dynamo_utils

            metrics = dynamo_utils._compilation_metrics
            self._last = metrics[-1] if metrics else None  # the newest metric before the block

    def widen(self) -> None:
        if self._capacity is not None or not versions.has_compile_metrics():
            return
        import torch._dynamo.utils as dynamo_utils

        old = dynamo_utils._compilation_metrics.maxlen or 64
        self._capacity = old
        if old < METRICS_CAPACITY:
            dynamo_utils.set_compilation_metrics_limit(METRICS_CAPACITY)

    def stop(self) -> dict[events.CompileKey, float]:
        if not versions.has_compile_metrics():
            return {}
        import torch._dynamo.utils as dynamo_utils

        metrics = dynamo_utils._compilation_metrics
        found: dict[events.CompileKey, float] = {}
        if metrics and metrics[-1] is not self._last:
            found = seconds_by_compile(after=self._last)
        self._last = None  # a metric holds tens of kilobytes: never kept past the block
        if self._capacity is not None:
            if self._capacity < METRICS_CAPACITY:
                dynamo_utils.set_compilation_metrics_limit(self._capacity)
            self._capacity = None
        return found


def _newest_metrics(keys: Iterable[events.CompileKey]) -> dict[events.CompileKey, Any]:
    """The newest compile metric of each of these compiles (torch numbers compiles again
    after a reset), read from the newest back until all are found."""
    if not versions.has_compile_metrics():
        return {}
    import torch._dynamo.utils as dynamo_utils

    wanted, found = set(keys), {}
    for metric in reversed(list(dynamo_utils._compilation_metrics)):
        if not wanted:
            break
        key = _metric_key(metric)
        if key in wanted:
            found[key] = metric
            wanted.discard(key)
    return found


GuardMetrics = tuple[int | None, float | None]  # torch's guard_count, guard_latency_us


def guard_metrics(keys: Iterable[events.CompileKey]) -> dict[events.CompileKey, GuardMetrics]:
    """torch's ``guard_count`` and ``guard_latency_us`` of these compiles (either None where
    this torch's metrics lack it): its estimate, measured once per compile."""
    return {key: _guard_metrics(metric) for key, metric in _newest_metrics(keys).items()}


def newest_figures(
    keys: list[events.CompileKey],
) -> dict[events.CompileKey, tuple[float | None, GuardMetrics, CompileWork]]:
    """The seconds, guard metrics and counted work of these compiles, each its newest
    metric's, read in one pass (a compile another test may reuse: the test that takes it is
    told all three)."""
    found = {}
    for key, metric in _newest_metrics(keys).items():
        seconds = metric.entire_frame_compile_time_s
        found[key] = (
            float(seconds) if seconds is not None else None,
            _guard_metrics(metric),
            work_of(metric, key),
        )
    return found


def _guard_metrics(metric: Any) -> GuardMetrics:
    count = getattr(metric, "guard_count", None)
    latency = getattr(metric, "guard_latency_us", None)
    return (
        int(count) if count is not None else None,
        float(latency) if latency is not None else None,
    )


# Each metric's key, by the metric's id (with a weak reference telling a reused id apart):
# a reused entry's guard metrics are looked for in every test that takes it, through a list
# that does not hold them, and each key costs four attribute reads and conversions.
_KEYS: dict[int, tuple[weakref.ref[Any], events.CompileKey | None]] = {}


def _metric_key(metric: Any) -> events.CompileKey | None:
    known = _KEYS.get(id(metric))
    if known is not None and known[0]() is metric:
        return known[1]
    key = _key_of(metric)
    try:
        ref = weakref.ref(metric)
    except TypeError:  # a metric that takes no weak reference: read each time
        return key
    if len(_KEYS) > 2 * METRICS_CAPACITY:  # torch dropped most of them long ago
        for stale in [k for k, (r, _) in _KEYS.items() if r() is None]:
            del _KEYS[stale]
    _KEYS[id(metric)] = (ref, key)
    return key


def _key_of(metric: Any) -> events.CompileKey | None:
    if metric.compile_id is None or metric.is_forward is False:
        return None
    return (
        str(metric.co_filename),
        int(metric.co_firstlineno or 0),
        str(metric.co_name),
        str(metric.compile_id),
    )


def seconds_by_compile(after: Any = None) -> dict[events.CompileKey, float]:
    """``entire_frame_compile_time_s`` per compile, of the metrics torch holds that are newer
    than the metric ``after`` (all of them if it is None or gone: the list holds only newer
    ones then; lazy backward compiles left out). Read from the newest back, so a block that
    compiled nothing costs nothing however many metrics the session holds. torch numbers
    compiles again after a reset: the seconds of a key add up."""
    if not versions.has_compile_metrics():
        return {}
    import torch._dynamo.utils as dynamo_utils

    result: dict[events.CompileKey, float] = {}
    for metric in reversed(list(dynamo_utils._compilation_metrics)):  # (copied at C speed)
        if metric is after:
            break
        key = _metric_key(metric)
        seconds = metric.entire_frame_compile_time_s
        if key is not None and seconds is not None:
            result[key] = result.get(key, 0.0) + float(seconds)
    return result


def newest_work(keys: Iterable[events.CompileKey]) -> dict[events.CompileKey, CompileWork]:
    """The counted work (:func:`work_of`) of these compiles, each its newest metric's."""
    return {key: work_of(metric, key) for key, metric in _newest_metrics(keys).items()}


# -- counted compile work ----------------------------------------------------------------------

# What each compile's graph held, read when torch built its guards (the graph is gone once
# the compile returns): Inductor kernels generated, distinct nested_compile_region subgraphs
# and their calls, by compile key. Plain counts only, nothing of the user's; the newest kept.
GraphFigures = tuple[int | None, int | None, int | None]
_GRAPHS: OrderedDict[events.CompileKey, GraphFigures] = OrderedDict()
_KEYS_BY_ID: dict[str, events.CompileKey] = {}  # the compile behind a lazy backward's id
_BACKWARD: dict[int, tuple[str, int | None]] = {}  # by thread: a lazy backward, kernels then
# by thread: the compile that began last, the kernel count and AOTAutograd cache hits then
_STARTED: dict[int, tuple[events.CompileKey, int | None, int]] = {}


def kernel_count() -> int | None:
    """Inductor's running count of the kernels it generated (0 before Inductor is imported:
    none yet); None where this torch keeps no count."""
    metrics = sys.modules.get("torch._inductor.metrics")
    if metrics is None:
        return 0
    count = getattr(metrics, "generated_kernel_count", None)
    return int(count) if isinstance(count, int) else None


def _autograd_cache_hits() -> int:
    """AOTAutograd's cache hits so far (0 before it is imported)."""
    utils = sys.modules.get("torch._dynamo.utils")
    counters = getattr(utils, "counters", None)
    return int(counters["aot_autograd"]["autograd_cache_hit"]) if counters is not None else 0


def compile_began(key: events.CompileKey) -> None:
    """A frame compile begins (the compile hook): the kernel count it starts from. torch
    numbers compiles again after a reset: what an earlier compile of the key left is dropped."""
    _GRAPHS.pop(key, None)
    _KEYS_BY_ID[key[3]] = key
    if len(_KEYS_BY_ID) > METRICS_CAPACITY:
        del _KEYS_BY_ID[next(iter(_KEYS_BY_ID))]
    _STARTED[threading.get_ident()] = (key, kernel_count(), _autograd_cache_hits())


def backward_began(compile_id: str) -> None:
    """Inductor compiles a graph's backward at its first backward call (torch's
    LAZY_BACKWARD callbacks, 2.8+): the kernel count it starts from."""
    _BACKWARD[threading.get_ident()] = (compile_id, kernel_count())


def backward_ended() -> None:
    """A lazy backward compiled: its kernels are its forward compile's (as a compile that
    loads both from AOTAutograd's cache counts them), where that compile was counted."""
    began = _BACKWARD.pop(threading.get_ident(), None)
    if began is None:
        return
    compile_id, kernels_then = began
    key = _KEYS_BY_ID.get(compile_id)
    if key is None:
        return
    found = _GRAPHS.get(key)
    now = kernel_count()
    if found is None or found[0] is None or now is None or kernels_then is None:
        return
    _GRAPHS[key] = (found[0] + now - kernels_then, found[1], found[2])


def graph_built(frame: Any) -> None:
    """torch built the guards of the compile that began last on this thread (the
    guards-built hook; ``frame`` is the hook's caller): count what its graph holds."""
    began = _STARTED.pop(threading.get_ident(), None)
    if began is None:
        return
    key, kernels_then, hits_then = began
    now = kernel_count()
    kernels = now - kernels_then if now is not None and kernels_then is not None else None
    if _autograd_cache_hits() != hits_then and not versions.has_lazy_backward_callbacks():
        # A graph with a backward loaded from AOTAutograd's cache brings the backward's
        # kernels with the forward's; compiled cold, the backward comes at the first backward
        # call, which this torch does not announce: the two do not compare, neither counts.
        kernels = None
    subgraphs, calls = _subgraphs(frame)
    _GRAPHS[key] = (kernels, subgraphs, calls)
    _GRAPHS.move_to_end(key)
    while len(_GRAPHS) > METRICS_CAPACITY:
        _GRAPHS.popitem(last=False)


def _subgraphs(frame: Any) -> tuple[int | None, int | None]:
    """(distinct subgraphs, calls) of the ``invoke_subgraph`` nodes (nested_compile_region)
    of the graph being guarded: the Dynamo output graph a caller of the hook holds; (None,
    None) where none of the nearest callers holds one (a torch that builds guards
    elsewhere)."""
    for _ in range(4):
        if frame is None:
            break
        output = frame.f_locals.get("output_graph")
        nodes = getattr(getattr(output, "graph", None), "nodes", None)
        if nodes is not None:
            targets = [
                getattr(node.args[0], "target", None)
                for node in nodes
                if node.op == "call_function"
                and getattr(node.target, "_name", None) == "invoke_subgraph"
                and node.args
            ]
            return len(set(targets)), len(targets)
        frame = frame.f_back
    return None, None


def _metric_count(metric: Any, *names: str) -> int | None:
    """The sum of these fields of a metric (a field torch left unset counts 0); None where
    this torch's metrics lack one of them."""
    fields = versions.compile_metric_fields()
    if any(name not in fields for name in names):
        return None
    return sum(int(getattr(metric, name, None) or 0) for name in names)


def _headline(reason: object) -> str:
    lines = [line.strip() for line in str(reason).strip().splitlines() if line.strip()]
    return lines[0] if lines else "?"


def work_of(metric: Any, key: events.CompileKey) -> CompileWork:
    """One compile's counted work: its metric's counts and what its graph held."""
    from ..model.work import CompileWork

    fields = versions.compile_metric_fields()
    graph = "graph_op_count" in fields and bool(metric.graph_op_count)  # None, 0: no graph
    restarts = None
    if "restart_reasons" in fields:  # torch's headline of each (its hints follow it)
        restarts = tuple(sorted(_headline(r) for r in metric.restart_reasons or ()))
    # A compile that made no graph generated nothing, seen or not; one the guards-built hook
    # did not see (nothing listened) has no figures.
    kernels, subgraphs, calls = _GRAPHS.get(key, (None, None, None)) if graph else (0, 0, 0)
    return CompileWork(
        graph=graph,
        ops=_metric_count(metric, "graph_op_count"),
        nodes=_metric_count(metric, "graph_node_count"),
        inputs=_metric_count(metric, "graph_input_count"),
        restarts=restarts,
        kernels=kernels,
        subgraphs=subgraphs,
        subgraph_calls=calls,
        cache_hits=_metric_count(
            metric, "inductor_fx_local_cache_hit_count", "inductor_fx_remote_cache_hit_count"
        ),
        cache_misses=_metric_count(
            metric, "inductor_fx_local_cache_miss_count", "inductor_fx_remote_cache_miss_count"
        ),
    )


@functools.cache
def device_summary() -> str:
    """What the compiled code runs on here: "cpu", or the CUDA devices by name."""
    import torch

    if not torch.cuda.is_available():
        return "cpu"
    names = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
    return "cuda: " + ", ".join(names)


# torch's structured-trace logger (torch/_logging/_internal.py): it never propagates, and torch
# builds each structured payload (graphs, guards) whenever it has a handler at all.
_TRACE_LOGGER = "torch.__trace"


def trace_log_uncaptured() -> tuple[Callable[[], list[Any]], Callable[[list[Any]], None]]:
    """Two steps that keep pytest's log-capture handlers off torch's structured-trace logger
    between them: ``off()`` removes them and returns them, ``back(removed)`` puts them back.
    Where the user asked for torch's logs (``TORCH_LOGS``, ``TORCH_TRACE``, read now), both
    do nothing.

    pytest 9 attaches its handlers to every non-propagating logger: torch then fills the
    captured log of a failing test with empty ``DEBUG torch.__trace`` lines and builds every
    trace payload for nobody. torch's own handlers (a ``TORCH_TRACE`` file) are untouched.
    Taken apart so that a gated test's three phases pay a look at the logger's handlers each,
    not a context manager.
    """
    import logging

    if os.environ.get("TORCH_LOGS") or os.environ.get("TORCH_TRACE"):
        return list, lambda removed: None
    logger = logging.getLogger(_TRACE_LOGGER)

    def off() -> list[Any]:
        removed = [h for h in logger.handlers if type(h).__module__ == "_pytest.logging"]
        for handler in removed:
            logger.removeHandler(handler)
        return removed

    def back(removed: list[Any]) -> None:
        for handler in removed:
            logger.addHandler(handler)

    return off, back
