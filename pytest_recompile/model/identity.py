"""Weak containers keyed by identity, for code objects.

Code objects compare equal by value: a module imported again (``importlib.reload``, pytest's
in-process runs, a module reached under two names) has new code objects equal to the old ones,
and a dict, ``WeakKeyDictionary`` or ``WeakSet`` would take the cache entries of one for the
other's. torch keys its cache entries by the object itself; so does everything here.
"""

from __future__ import annotations

import weakref
from collections.abc import Iterator, MutableMapping, MutableSet
from typing import Generic, TypeVar

K = TypeVar("K")
V = TypeVar("V")


class IdentityMap(MutableMapping[K, V], Generic[K, V]):
    """A mapping keyed by the identity of its keys, holding them weakly."""

    def __init__(self) -> None:
        self._data: dict[int, tuple[weakref.ref[K], V]] = {}

    def _forget(self, key_id: int, ref: weakref.ref[K]) -> None:
        if self._data.get(key_id, (None,))[0] is ref:
            del self._data[key_id]

    def __getitem__(self, key: K) -> V:
        ref, value = self._data[id(key)]
        if ref() is not key:
            raise KeyError(key)
        return value

    def __setitem__(self, key: K, value: V) -> None:
        key_id = id(key)
        found = self._data.get(key_id)
        if found is not None and found[0]() is key:
            self._data[key_id] = (found[0], value)
            return
        data = weakref.ref(self)

        def gone(ref: weakref.ref[K]) -> None:
            owner = data()
            if owner is not None:
                owner._forget(key_id, ref)

        self._data[key_id] = (weakref.ref(key, gone), value)

    def __delitem__(self, key: K) -> None:
        self[key]  # raises KeyError for another object with the same id
        del self._data[id(key)]

    def __iter__(self) -> Iterator[K]:
        for ref, _ in list(self._data.values()):
            key = ref()
            if key is not None:
                yield key

    def __len__(self) -> int:
        return sum(1 for _ in self)


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

    def __iter__(self) -> Iterator[K]:
        return iter(self._map)

    def __len__(self) -> int:
        return len(self._map)
