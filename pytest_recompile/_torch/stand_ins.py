"""Stand-in inputs: tensors like a call's, built from their description alone (sizes, strides'
order, dtype, device, requires_grad, torch's marks), never holding the call's tensors or their
memory; a call's arguments captured so, and an entry's guard check timed on them. The shape
certificate builds its points from them; the gate times each entry's guards on the arguments of
the call that compiled it."""

from __future__ import annotations

import contextlib
import statistics
import time
import weakref
from collections.abc import Mapping
from typing import Any, NamedTuple

from . import entries, fingerprints

CHECKS = 31  # guard checks timed per entry: the median is reported


class StandIn:
    """Makes a tensor like the example's at a point's sizes and dtype: same device, layout
    order, requires_grad, type and torch's marks (``mark_dynamic`` and the like). It keeps the
    example's description only, never the tensor (nor its memory)."""

    def __init__(self, name: str, example: Any) -> None:
        import torch

        self.name = name
        self.sizes = tuple(example.shape)
        self.stride = tuple(example.stride())
        self.dtype = example.dtype
        self.device = example.device
        self.requires_grad = example.requires_grad
        self.kind = type(example).__name__
        self.parameter = type(example) is torch.nn.Parameter
        self.plain = type(example) in (torch.Tensor, torch.nn.Parameter)
        self.marks = fingerprints.tensor_marks(example)
        # dims from the outermost in memory to the innermost: a dense layout in that order
        self.order = sorted(range(len(self.sizes)), key=lambda d: -self.stride[d])
        self.dense = example.storage_offset() == 0 and self._dense_strides() == self.stride

    @property
    def shape(self) -> tuple[int, ...]:
        """The example's sizes (a domain is checked against them as against a tensor's)."""
        return self.sizes

    def _dense_strides(self) -> tuple[int, ...]:
        """The strides of the example's sizes laid out densely in its order (what
        :meth:`_empty` makes), worked out rather than allocated: this runs at every compile."""
        strides = [0] * len(self.sizes)
        step = 1
        for dim in reversed(self.order):
            strides[dim] = step
            step *= max(self.sizes[dim], 1)
        return tuple(strides)

    def _empty(self, sizes: tuple[int, ...], dtype: Any) -> Any:
        import torch

        outer = [sizes[d] for d in self.order]
        back = sorted(range(len(self.order)), key=lambda i: self.order[i])
        return torch.empty(outer, dtype=dtype, device=self.device).permute(back)

    def make(self, change: Mapping[Any, Any]) -> Any:
        """The stand-in, or a str: why none can be made."""
        import torch

        sizes = list(self.sizes)
        for dim, size in change.items():
            if dim != "dtype":
                sizes[dim] = size
        dtype = change.get("dtype", self.dtype)
        if not self.plain:
            return f"{self.name} is a {self.kind}, not a plain tensor"
        if tuple(sizes) == self.sizes:
            made = torch.empty_strided(self.sizes, self.stride, dtype=dtype, device=self.device)
        elif not self.dense:
            return (
                f"{self.name}'s strides {self.stride} are not a dense layout: "
                "the strides of other sizes are not known"
            )
        else:
            made = self._empty(tuple(sizes), dtype)
        if self.requires_grad:
            if not (made.is_floating_point() or made.is_complex()):
                return f"{self.name} requires grad, which a {dtype} tensor cannot"
            made.requires_grad_(True)
        if self.parameter:
            made = torch.nn.Parameter(made, requires_grad=self.requires_grad)
        for key, value in self.marks.items():
            setattr(made, key, value)
        return made


class Captured:
    """A call's arguments by name, each tensor (also inside a tuple, list or dict) kept as its
    description, any other object weakly, a plain value (a number, a string, a dtype) as it
    is: nothing of the call is kept alive by it (a compile's event lives as long as its cache
    entry). An object that takes no weak reference is not kept at all: the arguments cannot
    be rebuilt then."""

    def __init__(self, f_locals: Mapping[str, Any]) -> None:
        self._values = {name: _describe(name, value) for name, value in f_locals.items()}

    def values(self) -> dict[str, Any]:
        """The arguments by name, each tensor as its :class:`StandIn`."""
        return dict(self._values)

    def declared(self) -> list[tuple[str, int, int, int]]:
        """(argument, dim, min, max) of each size the call declared to torch with both bounds
        (``mark_dynamic(x, dim, min=..., max=...)``), in the arguments' order."""
        found = []
        for name, value in self._values.items():
            if isinstance(value, StandIn):
                for declared in sorted(value.marks.get("_dynamo_dynamic_range") or (), key=str):
                    low, high = getattr(declared, "min", None), getattr(declared, "max", None)
                    dim = getattr(declared, "dim", None)
                    if isinstance(low, int) and isinstance(high, int) and isinstance(dim, int):
                        found.append((name, dim, low, high))
        return found

    def rebuild(self) -> dict[str, Any] | None:
        """The arguments with a fresh stand-in for each tensor (None: one cannot be made)."""
        found = {name: _rebuild(value) for name, value in self._values.items()}
        return None if any(v is _NONE for v in found.values()) else found


_NONE = object()


def _describe(name: str, value: Any, depth: int = 0) -> Any:
    import torch

    if isinstance(value, torch.Tensor):
        return StandIn(name, value)
    if depth < 2 and type(value) in (tuple, list):
        return type(value)(_describe(name, v, depth + 1) for v in value)
    if depth < 2 and type(value) is dict:
        if not all(k is None or type(k) in _PLAIN for k in value):
            return _NONE  # an object as a key would be kept alive by the dict: not kept
        return {k: _describe(name, v, depth + 1) for k, v in value.items()}
    if value is None or type(value) in _PLAIN or isinstance(value, (torch.dtype, torch.device)):
        return value
    try:
        return _Weak(weakref.ref(value))
    except TypeError:  # no weak reference (a namedtuple, a deeper list): not kept
        return _NONE


# Values kept as they are: they hold nothing of the call's.
_PLAIN = (bool, int, float, complex, str, bytes, type(Ellipsis))


class _Weak(NamedTuple):
    ref: weakref.ref[Any]


def _rebuild(value: Any) -> Any:
    if isinstance(value, StandIn):
        made = value.make({})
        return _NONE if isinstance(made, str) else made
    if isinstance(value, _Weak):
        alive = value.ref()
        return _NONE if alive is None else alive
    if type(value) in (tuple, list):
        items = [_rebuild(v) for v in value]
        return _NONE if any(v is _NONE for v in items) else type(value)(items)
    if type(value) is dict:
        pairs = {k: _rebuild(v) for k, v in value.items()}
        return _NONE if any(v is _NONE for v in pairs.values()) else pairs
    return value


def capture(f_locals: Mapping[str, Any]) -> Captured:
    return Captured(f_locals)


def check_us(guard_manager: Any, f_locals: Mapping[str, Any]) -> float | None:
    """The median time of one check of an entry's guards on a call's arguments (the call that
    compiled it, or stand-ins of that call), in microseconds (None: the entry does not accept
    them)."""
    check = guard_manager.check
    with entries.checking(None):  # a re-installed entry takes no offer here
        if not check(f_locals):
            return None
        times = []
        for _ in range(CHECKS):
            began = time.perf_counter_ns()
            check(f_locals)
            times.append(time.perf_counter_ns() - began)
    with contextlib.suppress(TypeError):  # a manager that takes no weak reference: no range
        _RANGES[guard_manager] = (round(min(times) / 1000, 3), round(max(times) / 1000, 3))
    return round(statistics.median(times) / 1000, 3)


# The fastest and the slowest of each entry's timed checks (microseconds), by guard manager:
# the spread its repetitions show, what ``compare`` holds a change of the median against.
_RANGES: weakref.WeakKeyDictionary[Any, tuple[float, float]] = weakref.WeakKeyDictionary()


def check_range(guard_manager: Any) -> tuple[float, float] | None:
    """The fastest and slowest of the entry's timed checks (None: not timed)."""
    try:
        return _RANGES.get(guard_manager)
    except TypeError:
        return None


def check_us_later(guard_manager: Any, captured: Captured) -> float | None:
    """:func:`check_us` on stand-ins of the call that compiled the entry, read after the
    compile (a torch that calls no hook when it builds guards): None where the call's objects
    are gone by then (the figure gives way; nothing kept them alive)."""
    f_locals = captured.rebuild()
    return None if f_locals is None else check_us(guard_manager, f_locals)
