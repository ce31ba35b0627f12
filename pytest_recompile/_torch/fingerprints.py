"""What decides a compile beyond its guards: the config modules' hashes, and the marks and
hooks a call's inputs carry (torch guards neither); two compiles alike in these and in their
guards make the same entry."""

from __future__ import annotations

import sys
from typing import Any


def config_fingerprint(inductor: bool = True) -> tuple[Any, ...]:
    """What torch's compile reads beyond guards: the hashes of Dynamo's, AOT autograd's and
    (``inductor``) inductor's config, without the keys torch marks as not affecting compiles;
    None for a config module not imported yet or not read (no compile used it)."""
    names = ("torch._dynamo.config", "torch._functorch.config", "torch._inductor.config")
    found = [sys.modules.get(name) for name in names]
    if not inductor:
        found[2] = None
    return tuple(_hash(module) if module is not None else None for module in found)


# Per config module: the values its hash was last taken of, and that hash. torch marks a
# module's hash stale at every ``config.patch`` (each compile patches and restores some keys),
# and then hashes the ``repr`` of every value again (about 70 us for functorch's config); the
# values themselves, read from torch's cached dict and compared, cost a few microseconds.
_MEMO: dict[str, tuple[dict[str, Any], Any]] = {}


def _hash(module: Any) -> Any:
    """``module.get_hash()``, taken again only where the values it hashes changed."""
    from . import versions

    ignored = getattr(module, "_compile_ignored_keys", None)
    if ignored is None or not versions.caches_config_reads():
        return module.get_hash()
    values = module._get_dict(ignored_keys=list(ignored), readonly_values=True)
    known = _MEMO.get(module.__name__)
    if known is not None and known[0] == values:
        return known[1]
    found = module.get_hash()
    _MEMO[module.__name__] = (values, found)
    return found


def same_config(made: tuple[Any, ...], now: tuple[Any, ...]) -> bool:
    """A config module imported after the compile (None then) did not take part in it."""
    return len(made) == len(now) and all(
        a is None or b is None or a == b for a, b in zip(made, now, strict=True)
    )


_MARK_PREFIXES = ("_dynamo_", "_specialize_", "_has_dynamo_")


# Set by Dynamo itself on the parameters and buffers it traces (static inputs, unguarded),
# so present after any compile of a module and absent on a new one: says nothing of a call.
_DYNAMO_OWN = frozenset({"_dynamo_static_input_type"})


Marks = tuple[tuple[str, tuple[tuple[str, str], ...]], ...]


def tensor_marks(tensor: Any) -> dict[str, Any]:
    """torch's marks on one tensor (``mark_dynamic`` and the rest), by attribute name:
    what decides a compile beyond its guards, and what a stand-in of it must carry."""
    attrs = getattr(tensor, "__dict__", None) or {}
    return {k: v for k, v in attrs.items() if k.startswith(_MARK_PREFIXES) and k not in _DYNAMO_OWN}


_MODULE_HOOKS = (
    "_forward_hooks",
    "_forward_pre_hooks",
    "_backward_hooks",
    "_backward_pre_hooks",
)


def input_marks(f_locals: Any) -> Marks | None:
    """What a call passes that torch does not guard, yet that decides what a compile makes:
    the dynamic-shape marks (``mark_dynamic``, ``maybe_mark_dynamic``, ``mark_unbacked``,
    ``mark_static``, ``mark_static_address``, ...) on its tensors (top-level, inside lists,
    tuples and dicts, a module's parameters and buffers), and the hooks on its modules and
    submodules and the global module hooks (torch skips guards on them by default). None if
    they cannot be read: nothing then proves two calls alike."""
    try:
        return _input_marks(f_locals)
    except Exception:
        return None


def _input_marks(f_locals: Any) -> Marks:
    import torch
    import torch.nn.modules.module as module_

    found: list[tuple[str, tuple[tuple[str, str], ...]]] = []

    def hooks(path: str, holder: Any, names: tuple[str, ...]) -> None:
        held = tuple(
            (name, repr([getattr(fn, "__qualname__", type(fn).__name__) for fn in table.values()]))
            for name in names
            if (table := getattr(holder, name, None))
        )
        if held:
            found.append((path, held))

    def visit(path: str, value: Any, depth: int) -> None:
        if isinstance(value, torch.Tensor):
            marks = tuple(sorted((k, repr(v)) for k, v in tensor_marks(value).items()))
            if marks:
                found.append((path, marks))
        elif depth > 2:
            return
        elif type(value) in (list, tuple):
            for index, item in enumerate(value):
                visit(f"{path}[{index}]", item, depth + 1)
        elif type(value) is dict:
            for key, item in value.items():
                visit(f"{path}[{key!r}]", item, depth + 1)
        elif isinstance(value, torch.nn.Module):
            for name, tensor in [*value.named_parameters(), *value.named_buffers()]:
                visit(f"{path}.{name}", tensor, 3)
            for name, child in value.named_modules():
                hooks(f"{path}.{name}" if name else path, child, _MODULE_HOOKS)

    for name, value in list(f_locals.items()):
        visit(str(name), value, 0)
    hooks("<global>", module_, tuple(f"_global{name}" for name in _MODULE_HOOKS))
    return tuple(found)
