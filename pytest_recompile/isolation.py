"""Which cache entries a test starts from: who compiled each entry, and dropping the rest.

The contract (README, "Isolation"): a test starts from what live wider-scoped fixtures
(module, class, package, session; unittest ``setUpClass`` / ``setUpModule``) compiled while
they were set up, and from what was compiled outside any test (import, collection); never
from what earlier tests compiled, nor from fixtures already torn down. :class:`Ledger` knows
who compiled each cache entry (the phase that was running when torch compiled it) and, before
a test, drops every entry that is not kept. The torch side of dropping lives in ``_torch``.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass, field
from types import CodeType
from typing import Any, Literal

from . import _torch

_PENDING = 64  # compiles kept per code object while they have made no entry (yet)

OwnerKind = Literal["outside", "fixture", "test", "dropped"]

_UNITTEST_NAMES = (
    ("_unittest_setUpClass_fixture_", "setUpClass of {}"),
    ("_xunit_setup_class_fixture_", "setup_class of {}"),
    ("_xunit_setup_module_fixture_", "setUpModule/setup_module of {}"),
)


@dataclass(eq=False)
class Owner:
    """Who was running when torch compiled: a wider fixture's set-up, a test, or nobody."""

    kind: OwnerKind
    name: str  # the fixture's name, the test's node id
    scope: str = ""  # a fixture's scope
    location: str = ""  # a fixture's node: where it was set up
    live: bool = True  # a fixture not yet torn down
    state: Any = None  # torch's automatic-dynamic state right after a fixture's set-up

    @property
    def kept(self) -> bool:
        return self.kind == "outside" or (self.kind == "fixture" and self.live)

    def describe(self) -> str:
        for prefix, form in _UNITTEST_NAMES:
            if self.name.startswith(prefix):
                return form.format(self.name[len(prefix) :])
        if self.kind == "fixture":
            return f"{self.scope} fixture '{self.name}'"
        return self.name


@dataclass
class Ledger:
    """Cache entries by owner, and the drop before each isolated test."""

    outside: Owner = field(default_factory=lambda: Owner("outside", "outside any test"))
    phase: list[Owner] = field(default_factory=list)
    fixtures: list[Owner] = field(default_factory=list)  # live fixture owners, oldest first
    # guard manager of a cache entry -> who compiled it
    owners: weakref.WeakKeyDictionary[Any, Owner] = field(default_factory=weakref.WeakKeyDictionary)
    # compiles seen but not yet matched to their entries: code -> (compile id, owner)
    pending: dict[CodeType, list[tuple[str, Owner]]] = field(default_factory=dict)
    # entries to keep, held so they can be put back after a drop or a torch reset
    store: dict[CodeType, list[_torch.KeptEntry]] = field(default_factory=dict)
    seen: weakref.WeakSet[CodeType] = field(default_factory=weakref.WeakSet)
    dirty: weakref.WeakSet[CodeType] = field(default_factory=weakref.WeakSet)
    dropped_codes: weakref.WeakSet[CodeType] = field(default_factory=weakref.WeakSet)
    baseline_state: Any = None
    started: bool = False

    @property
    def current(self) -> Owner:
        return self.phase[-1] if self.phase else self.outside

    # -- compiles ---------------------------------------------------------------------------

    def note(self, event: _torch.CompileEvent) -> Owner:
        """Record who is compiling ``event.code`` now; return that owner."""
        code = event.code
        if code not in self.seen:
            self.seen.add(code)
            # Entries made before the gate listened were made outside any test.
            for entry in _torch.entries(code):
                self._own(code, entry, self.outside)
        owner = self.current
        self.pending.setdefault(code, []).append((event.compile_id, owner))
        if not owner.kept:
            self.dirty.add(code)
        return owner

    def compiled_again(self, code: CodeType) -> bool:
        """Whether entries of ``code`` were dropped for an earlier test (isolation cost)."""
        return code in self.dropped_codes

    def _own(self, code: CodeType, entry: _torch.KeptEntry, owner: Owner) -> None:
        self.owners[entry.guard_manager] = owner
        if owner.kept:
            self.store.setdefault(code, []).append(entry)

    def resolve(self) -> None:
        """Match the compiles seen so far to the entries they made.

        A compile still running (this is called from the compile hook too) or one that made
        no entry stays pending; the newest compile of an id wins, since torch restarts
        compile ids after a reset.
        """
        for code, compiles in list(self.pending.items()):
            matched = set()
            for entry in _torch.entries(code):
                if entry.guard_manager in self.owners:
                    continue
                cid = str(entry.compile_id)
                found = [owner for c, owner in compiles if c == cid]
                self._own(code, entry, found[-1] if found else self.outside)
                matched.add(cid)
            left = [(c, owner) for c, owner in compiles if c not in matched][-_PENDING:]
            if left:
                self.pending[code] = left
            else:
                del self.pending[code]

    def owners_of(self, code: CodeType) -> dict[str, Owner]:
        """Compile id -> owner of each entry on ``code`` (kept ones included)."""
        self.resolve()
        found = [*_torch.entries(code), *_torch.kept_entries(code)]
        return {str(e.compile_id): self.owners.get(e.guard_manager, self.outside) for e in found}

    # -- phases -----------------------------------------------------------------------------

    def enter(self, owner: Owner) -> None:
        self.resolve()
        self.phase.append(owner)

    def leave(self, owner: Owner) -> None:
        self.resolve()
        if owner in self.phase:
            del self.phase[self.phase.index(owner) :]
        if owner.kind == "fixture" and owner.live:
            owner.state = _torch.code_state()
            self.fixtures.append(owner)

    def fixture_gone(self, owner: Owner) -> None:
        if owner.live:
            owner.live = False
            if owner in self.fixtures:
                self.fixtures.remove(owner)
            for code in list(self.store):
                self.dirty.add(code)

    # -- isolation --------------------------------------------------------------------------

    def isolate(self) -> int:
        """Drop every entry that is not kept; return how many code objects were changed."""
        self.resolve()
        if not self.started:
            self.started = True
            self.baseline_state = _torch.code_state()
        changed = 0
        codes = set(self.dirty) | set(self.store)
        restore = bool(self.dirty)
        self.dirty = weakref.WeakSet()
        for code in codes:
            keep = [
                e
                for e in self.store.get(code, ())
                if self.owners[e.guard_manager].kept and _torch.entry_alive(e)
            ]
            if keep:
                self.store[code] = keep
            else:
                self.store.pop(code, None)
            now = [*_torch.entries(code), *_torch.kept_entries(code)]
            if {id(e.guard_manager) for e in now} == {id(e.guard_manager) for e in keep}:
                continue
            if len(now) > len(keep):
                self.dropped_codes.add(code)
            _torch.keep_only(code, keep)
            changed += 1
        if restore or changed:
            newest = self.fixtures[-1].state if self.fixtures else self.baseline_state
            _torch.restore_code_state(newest)
        return changed
