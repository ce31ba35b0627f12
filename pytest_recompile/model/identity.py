"""Weak containers keyed by identity, for code objects.

Code objects compare equal by value: a module imported again (``importlib.reload``, pytest's
in-process runs, a module reached under two names) has new code objects equal to the old ones,
and a dict, ``WeakKeyDictionary`` or ``WeakSet`` would take the cache entries of one for the
other's. torch keys its cache entries by the object itself; so does everything here.
"""

from __future__ import annotations

import weakref
from collections.abc import Iterator, MutableMapping, MutableSet
from typing import Any, Generic, TypeVar

K = TypeVar("K")
V = TypeVar("V")


class IdentityMap(MutableMapping[K, V], Generic[K, V]):
    """A mapping keyed by the identity of its keys, holding them weakly.

    Read on every gated test (isolation asks what changed): membership, ``get`` and
    truthiness are answered from the dict directly, never through ``KeyError`` or a walk of
    every key; each key's weak reference carries its id (``weakref.KeyedRef``) to one
    callback per map, not a closure per key."""

    def __init__(self) -> None:
        self._data: dict[int, tuple[weakref.KeyedRef[int, K], V]] = {}
        owner = weakref.ref(self)

        def gone(
            ref: weakref.KeyedRef[int, K], owner: weakref.ref[IdentityMap[K, V]] = owner
        ) -> None:
            found = owner()
            if found is not None and found._data.get(ref.key, (None,))[0] is ref:
                del found._data[ref.key]

        self._gone = gone

    def _find(self, key: object) -> tuple[weakref.KeyedRef[int, K], V] | None:
        found = self._data.get(id(key))
        return found if found is not None and found[0]() is key else None

    def __getitem__(self, key: K) -> V:
        found = self._find(key)
        if found is None:
            raise KeyError(key)
        return found[1]

    def get(self, key: K, default: Any = None) -> Any:
        found = self._find(key)
        return found[1] if found is not None else default

    def __contains__(self, key: object) -> bool:
        return self._find(key) is not None

    def __setitem__(self, key: K, value: V) -> None:
        found = self._find(key)
        ref = found[0] if found is not None else weakref.KeyedRef(key, self._gone, id(key))
        self._data[id(key)] = (ref, value)

    def __delitem__(self, key: K) -> None:
        if self._find(key) is None:  # another object with the same id
            raise KeyError(key)
        del self._data[id(key)]

    def pop(self, key: K, *default: Any) -> Any:
        found = self._find(key)
        if found is None:
            if default:
                return default[0]
            raise KeyError(key)
        del self._data[id(key)]
        return found[1]

    def __iter__(self) -> Iterator[K]:
        for ref, _ in list(self._data.values()):
            key = ref()
            if key is not None:
                yield key

    def __len__(self) -> int:
        return sum(1 for _ in self)

    def __bool__(self) -> bool:
        return any(ref() is not None for ref, _ in self._data.values())


class IdentitySet(MutableSet[K], Generic[K]):
    """A set of objects by identity, holding them weakly."""

    def __init__(self) -> None:
        self._map: IdentityMap[K, None] = IdentityMap()

    def __contains__(self, item: object) -> bool:
        return item in self._map

    def add(self, value: K) -> None:
        self._map[value] = None

    def discard(self, value: K) -> None:
        self._map.pop(value, None)

    def copy(self) -> IdentitySet[K]:
        found: IdentitySet[K] = IdentitySet()
        for value in self:
            found.add(value)
        return found

    def __iter__(self) -> Iterator[K]:
        return iter(self._map)

    def __len__(self) -> int:
        return len(self._map)

    def __bool__(self) -> bool:
        return bool(self._map)
