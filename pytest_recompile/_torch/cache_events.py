"""torch's compile-cache lookups, as one process makes them: the structured-trace artifacts
of the FX graph cache and AOTAutograd's cache, read while a warm-start child runs.

Every lookup emits an artifact (``torch/_inductor/compile_fx.py``,
``torch/_functorch/_aot_autograd/autograd_cache.py``): ``fx_graph_cache_{hit,miss,bypass}``
and ``aotautograd_cache_{hit,miss,bypass}`` from about torch 2.7 on, ``*_cache_hash`` with
the outcome in the payload's ``cache_state`` before. The payload (JSON) carries the ``key``,
its ``components`` (one ``[hash] label: value`` line each), ``cache_status_detailed``
(``full_miss``, ``guard_miss``, ``hit``), ``cache_status_guard_expr`` and
``cache_bypass_reason``. torch builds a record only while its ``torch.__trace`` logger has a
handler, and AOTAutograd's components only while the logger
``torch._functorch._aot_autograd.autograd_cache`` is at DEBUG: a :class:`Lookups` sets both
(without letting that logger print) and puts them back as found. The counters of
``torch._dynamo.utils.counters`` count every lookup, described or not.
"""

from __future__ import annotations

import json
import logging
import os
import platform
import re
from collections.abc import Callable
from typing import Any

from ..model.warm_start import CACHES_OFF_VARIABLES, CacheEvent, ChildCompile
from . import caches, events, hooks

_AOT_LOGGER = "torch._functorch._aot_autograd.autograd_cache"
_ARTIFACT = re.compile(r"^(fx_graph|aotautograd)_cache_(hit|miss|bypass|hash)$")
_CACHE = {"fx_graph": "fx_graph", "aotautograd": "aot_autograd"}
_COMPONENT = re.compile(r"^\[(\w+)\] ([^:\n]+): (.*)$", re.DOTALL)
# counters' group and names -> the figures a child hands back
_OUTCOMES = {
    "hits": "hit",
    "misses": "miss",
    "bypasses": "bypass",
    "guard_misses": "guard_miss",
    "saved": "saved",  # AOTAutograd's entries written (a forward waits for its backward)
}


def components(lines: object) -> dict[str, list[str]]:
    """torch's ``[hash] label: value`` lines, by label (a label seen twice keeps its first)."""
    found: dict[str, list[str]] = {}
    for line in lines if isinstance(lines, list) else []:
        match = _COMPONENT.match(str(line))
        if match is not None:
            found.setdefault(match.group(2).strip(), [match.group(1), match.group(3)])
    return found


def event_from(name: str, payload: Any, compile_id: str) -> CacheEvent | None:
    """The lookup an artifact describes (None: not a cache lookup's artifact)."""
    match = _ARTIFACT.match(name)
    if match is None:
        return None
    data = payload if isinstance(payload, dict) else {}
    outcome = match.group(2)
    if outcome == "hash":  # older torch: the outcome is in the payload
        outcome = str(data.get("cache_state") or "miss")
    reason = data.get("cache_bypass_reason")
    guards = data.get("cache_status_guard_expr")
    return {
        "cache": _CACHE[match.group(1)],
        "outcome": outcome if outcome in ("hit", "miss", "bypass") else "miss",
        "status": str(data["cache_status_detailed"]) if data.get("cache_status_detailed") else None,
        "key": str(data["key"]) if data.get("key") else None,
        "components": components(data.get("components")),
        "reason": str(reason) if reason else None,
        "guard_expr": str(guards) if guards else None,
        "compile": str(data.get("compile_id") or compile_id),
        "function": None,
        "file": None,
        "line": None,
    }


def _compile_id(text: str) -> str:
    """``0/1`` from torch's forms of a compile id (``0/1_2`` an attempt, ``!0/0/1`` under
    compiled autograd)."""
    return text.rpartition("!")[2].split("_", 1)[0].strip("[]")


class _Handler(logging.Handler):
    def __init__(self, lookups: Lookups) -> None:
        super().__init__(logging.DEBUG)
        self.lookups = lookups

    def emit(self, record: logging.LogRecord) -> None:
        metadata = getattr(record, "metadata", None)
        if not isinstance(metadata, dict):
            return
        if "compilation_metrics" in metadata:  # one per frame Dynamo compiled
            self.lookups.metrics.append(metadata["compilation_metrics"])
            return
        if "artifact" not in metadata:
            return
        try:
            name = str(metadata["artifact"].get("name", ""))
            if _ARTIFACT.match(name) is None:
                return
            payload = getattr(record, "payload", None)
            if isinstance(payload, str):
                payload = json.loads(payload)
            compile_id = ""
            if "frame_id" in metadata:
                compile_id = f"{metadata['frame_id']}/{metadata.get('frame_compile_id', 0)}"
            event = event_from(name, payload, compile_id)
            if event is not None:
                self.lookups.events.append(event)
        except Exception as exc:  # a record of another shape: named, never raised into torch
            self.lookups.problems.append(f"a cache artifact could not be read: {exc!r}")


class Lookups:
    """A process's cache lookups and frame compiles, from :meth:`start` to :meth:`stop`:
    each compile as the compile hook saw it (its function named as the gate names it), and
    any other Dynamo compile from torch's compile metrics (``aot_compile`` calls no hook)."""

    def __init__(self) -> None:
        self.events: list[CacheEvent] = []
        self.compiles: list[ChildCompile] = []
        self.metrics: list[Any] = []  # torch's compile metrics, as its trace records them
        self.problems: list[str] = []
        self.off: list[str] = []  # what switched the caches off while something compiled
        self._undo: list[Callable[[], None]] = []
        self._start: dict[str, dict[str, int]] = {}

    def start(self) -> None:
        from torch._logging import _internal

        trace = _internal.trace_log
        handler = _Handler(self)
        found = (trace.level, trace.propagate)
        trace.setLevel(logging.DEBUG)
        trace.propagate = False
        trace.addHandler(handler)

        def put_back_trace() -> None:
            trace.removeHandler(handler)
            trace.setLevel(found[0])
            trace.propagate = found[1]

        aot = logging.getLogger(_AOT_LOGGER)
        aot_found = (aot.level, aot.propagate, list(aot.handlers))
        aot.setLevel(logging.DEBUG)  # AOTAutograd builds its components only at DEBUG
        aot.propagate = False  # ... and they are not printed
        aot.handlers = [logging.NullHandler()]

        def put_back_aot() -> None:
            aot.setLevel(aot_found[0])
            aot.propagate = aot_found[1]
            aot.handlers = aot_found[2]

        self._undo += [put_back_trace, put_back_aot]
        self._undo.append(hooks.install_compile_hook(self._compiled, first=True))
        self._start = counters()

    def _compiled(self, event: events.CompileEvent) -> None:
        if not self.off:  # an option a test patches for its own block counts too
            self.off = caches_off()
        code = event.function
        self.compiles.append(
            {
                "compile": _compile_id(event.compile_id),
                "function": event.label or events.qualname(code),
                "file": code.co_filename,
                "line": code.co_firstlineno,
                "inductor": bool(event.inductor),
            }
        )

    def stop(self) -> dict[str, dict[str, int]]:
        """Stop, name each event's function, and return the counters' gains."""
        while self._undo:
            self._undo.pop()()
        named = {c["compile"]: c for c in self.compiles}
        for metric in self.metrics:  # a compile the hook does not see (aot_compile)
            if not isinstance(metric, dict):
                continue
            compile_id = _compile_id(str(metric.get("compile_id") or ""))
            if compile_id in named:
                continue
            found: ChildCompile = {  # aot_compile's records name no frame
                "compile": compile_id,
                "function": str(metric.get("co_name") or "a function compiled ahead of time"),
                "file": str(metric.get("co_filename") or ""),
                "line": int(metric.get("co_firstlineno") or 0),
                "inductor": True,  # its backend is not recorded: not said to lack a cache
            }
            if compile_id:
                named[compile_id] = found
            self.compiles.append(found)
        for event in self.events:
            compiled = named.get(_compile_id(event["compile"]))
            if compiled is not None:
                event["function"] = compiled["function"]
                event["file"] = compiled["file"]
                event["line"] = compiled["line"]
        now = counters()
        return {
            cache: {name: _gained(value, self._start.get(cache, {}).get(name, 0))
                    for name, value in figures.items()}
            for cache, figures in now.items()
        }  # fmt: skip


def _gained(now: int, before: int) -> int:
    """A counter's gain; one that went down was cleared (``counters.clear()``): from 0."""
    return now - before if now >= before else now


def counters() -> dict[str, dict[str, int]]:
    """torch's cache counters now: cache -> hits, misses, bypasses, guard misses."""
    from torch._dynamo.utils import counters as table

    return {
        cache: {
            name: int(table[group].get(prefix + counter, 0)) for name, counter in _OUTCOMES.items()
        }
        for cache, (group, prefix) in caches.CACHES.items()
    }


def caches_off() -> list[str]:
    """What switches the compile caches off in this process: the environment variables, and
    torch's config options that they set (``force_disable_caches``, ``fx_graph_cache``,
    ``enable_autograd_cache``) where set otherwise."""
    found = [
        f"{name}={os.environ[name]}"
        for name, value in CACHES_OFF_VARIABLES.items()
        if os.environ.get(name, "").strip() == value
    ]
    try:
        import torch._functorch.config as functorch_config
        import torch._inductor.config as inductor_config
    except ImportError:
        return found
    options = (
        ("torch._inductor.config", inductor_config, "force_disable_caches", True),
        ("torch._inductor.config", inductor_config, "fx_graph_cache", False),
        ("torch._functorch.config", functorch_config, "enable_autograd_cache", False),
    )
    for where, module, name, off in options:
        if not found and getattr(module, name, not off) is off:
            found.append(f"{where}.{name}={off}")
    return found


def functorch_options() -> dict[str, str]:
    """``torch._functorch.config`` as text (its portable part: what AOTAutograd's key
    hashes as ``autograd_config``), to name the option that differs between two processes."""
    try:
        import torch._functorch.config as functorch_config

        saved = functorch_config.save_config_portable()
    except Exception:  # a torch without it: the option is not named
        return {}
    return {str(name): repr(value) for name, value in dict(saved).items()}


def versions() -> dict[str, str | None]:
    import torch

    triton = None
    try:
        from importlib import metadata

        for name in ("triton", "pytorch-triton", "pytorch-triton-rocm"):
            try:
                triton = metadata.version(name)
                break
            except metadata.PackageNotFoundError:
                continue
    except ImportError:  # pragma: no cover
        pass
    return {"torch": torch.__version__, "triton": triton, "python": platform.python_version()}
