"""Guard trees: the leaf guards of a cache entry, and which leaf failed for a reason."""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
from dataclasses import dataclass
from types import CodeType, ModuleType
from typing import Any

from . import entries


@dataclass(frozen=True)
class Leaf:
    """One leaf guard of a cache entry's guard tree."""

    torch_kind: str  # the C++ leaf type name: TENSOR_MATCH, LENGTH_CHECK, ...
    source: str  # L['x'], G['step'], ...
    code_parts: tuple[str, ...]
    under_module: bool  # a module, or reached through one (G['math'], G['math'].pi)
    dict_key: bool = False  # on a key of a dict torch iterated (the order of a ModuleList's)

    @property
    def structural(self) -> bool:
        """Torch's own guard on how a value is built (a module's attributes, an iterated
        dict's keys), not on a value the user passes."""
        return self.under_module or self.dict_key


def guard_leaves(guard_manager: Any) -> Iterator[Leaf]:
    """Every leaf of a cache entry's guard tree, symbolic-shape guards included."""
    root = guard_manager.root
    scope = (getattr(guard_manager, "global_scope", None) or {}).get("G") or {}

    def walk(manager: Any, under_module: bool, key: bool = False) -> Iterator[Leaf]:
        source = manager.get_source()
        leaves = manager.get_leaf_guards()
        parts = [(type(leaf).__name__, tuple(leaf.verbose_code_parts())) for leaf in leaves]
        is_module = _guards_a_module(manager, scope)
        for kind, code_parts in parts:
            yield Leaf(kind, source, code_parts, under_module or is_module, key)
        for child, is_key in _children(manager):
            yield from walk(child, under_module or is_module, is_key)

    yield from walk(root, False)
    for guard in root.get_epilogue_lambda_guards():
        parts = tuple(guard.verbose_code_parts())
        if parts and parts[0].startswith(entries.BACKEND_MISMATCH):
            continue  # the plugin's own, on an entry isolation re-installed: not torch's
        yield Leaf(type(guard).__name__, "", parts, False)


def _children(manager: Any) -> Iterator[tuple[Any, bool]]:
    """A node's child managers, each with whether it guards a dict's key: a
    ``DictGuardManager`` (a dict torch iterated) lists its key and value managers apart
    from its children, and they hold the guards on its entries (a ModuleList's layers)."""
    for child in manager.get_child_managers():
        yield child, False
    pairs = getattr(manager, "get_key_value_managers", None)
    if pairs is not None:
        for key, value in pairs().values():
            if key is not None:
                yield key, True
            if value is not None:
                yield value, False


_GLOBAL_NAME = re.compile(r"^G\['(?P<name>[^']+)'\]$")


def _guards_a_module(manager: Any, scope: dict[str, Any]) -> bool:
    """Whether a guard-tree node guards a module (G['math']): what it reaches is a library's.

    2.9+ nodes know the type of the value they guard; before, a global's value is looked up
    in the globals the guards were built with (``scope``). The guard's text says it
    differently per release (2.13: ``type=<class 'module'>``, 2.10-2.12: the module's repr,
    2.9: nothing), so it is not used.
    """
    typed = getattr(manager, "get_type_of_guarded_value", None)
    if typed is not None:
        with contextlib.suppress(Exception):
            return isinstance(typed(), type) and issubclass(typed(), ModuleType)
    named = _GLOBAL_NAME.match(manager.get_source())
    return named is not None and isinstance(scope.get(named.group("name")), ModuleType)


def failing_leaf_kinds(listed: list[Any], reasons: tuple[str, ...]) -> tuple[str | None, ...]:
    """For each reason ("0/1: G['step'] == 0"), the type of the leaf in entry 0/1 that says so.

    None where the reason is not a leaf's code part (torch words tensor mismatches itself).
    """
    from .reasons import same_guard_text

    by_id = {str(entry.compile_id): entry for entry in listed}
    kinds: list[str | None] = []
    for raw in reasons:
        entry_id, _, text = raw.partition(": ")
        entry = by_id.get(entry_id.strip())
        key = same_guard_text(text)
        kind = None
        if entry is not None and key:
            for leaf in guard_leaves(entry.guard_manager):
                if any(same_guard_text(part) == key for part in leaf.code_parts):
                    kind = leaf.torch_kind
                    break
        kinds.append(kind)
    return tuple(kinds)


def trees(code: CodeType) -> list[tuple[str, Any]]:
    """(cache entry id, guard manager) of ``code``'s cache entries (those isolation
    re-installed and the running test's taken offers included)."""
    return [
        (str(entry.compile_id), entry.guard_manager)
        for entry in [*entries.entry_list(code), *entries.kept_entries(code)]
    ]
