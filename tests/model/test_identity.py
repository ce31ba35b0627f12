"""The weak identity containers isolation keys code objects by (pure: no torch)."""

from __future__ import annotations

import gc

import pytest

from pytest_recompile.model.identity import IdentityMap, IdentitySet


def code_of(source: str):
    """A fresh code object each call, equal by value to the others."""
    return compile(source, "<test>", "exec")


def test_equal_code_objects_are_different_keys() -> None:
    first, second = code_of("x = 1"), code_of("x = 1")
    assert first == second
    assert first is not second
    found: IdentityMap = IdentityMap()
    found[first] = "first"
    assert second not in found
    assert found.get(second) is None
    assert found.get(second, "none") == "none"
    found[second] = "second"
    assert (found[first], found[second]) == ("first", "second")
    assert len(found) == 2
    assert bool(found)


def test_a_dead_key_is_forgotten() -> None:
    found: IdentityMap = IdentityMap()
    code = code_of("y = 2")
    found[code] = 1
    assert found
    del code
    gc.collect()
    assert not found
    assert len(found) == 0
    assert list(found) == []
    assert found._data == {}


def test_pop_and_delete() -> None:
    found: IdentityMap = IdentityMap()
    code, other = code_of("z = 3"), code_of("z = 3")
    found[code] = 5
    assert found.pop(other, None) is None
    with pytest.raises(KeyError):
        found.pop(other)
    with pytest.raises(KeyError):
        del found[other]
    assert found.pop(code) == 5
    assert code not in found
    found[code] = 6
    found[code] = 7  # set again: one key
    assert len(found) == 1
    del found[code]
    assert not found


def test_a_set_copy_is_its_own() -> None:
    codes = [code_of(f"a = {n}") for n in range(3)]
    held: IdentitySet = IdentitySet()
    held.add(codes[0])
    held.add(codes[1])
    copied = held.copy()
    copied.add(codes[2])
    held.discard(codes[0])
    assert codes[2] not in held
    assert codes[0] in copied
    assert len(held) == 1
    assert len(copied) == 3
    del codes[:]
    gc.collect()
    assert not held
    assert not copied
