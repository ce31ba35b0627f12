"""Which cache entries a test starts from: who compiled each entry, and dropping the rest.

The contract (docs/isolation.md): a test starts from what live wider-scoped fixtures
(module, class, package, session; unittest ``setUpClass`` / ``setUpModule``) compiled while
they were set up, and from what was compiled outside any test (import, collection); never
from what earlier tests compiled, nor from fixtures already torn down. :class:`Ledger` knows
who compiled each cache entry (the phase that was running when torch compiled it) and, before
a test, drops every entry that is not kept. The torch side of dropping lives in ``_torch.entries``.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass, field
from types import CodeType
from typing import Any, Literal

from ._torch import entries, events
from .identity import IdentityMap, IdentitySet

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
    # torch's automatic-dynamic state, per code id, that a fixture's set-up changed
    state: dict[Any, Any] = field(default_factory=dict, repr=False)
    # other fixtures whose entries this fixture's set-up recompiled against (live then)
    against: list[Owner] = field(default_factory=list, repr=False)
    _start: dict[Any, Any] = field(default_factory=dict, repr=False)  # its set-up's start
    _saved: dict[Any, Any] = field(default_factory=dict, repr=False)  # the phase's, set aside

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
    """Cache entries and automatic-dynamic state by owner, and the drop before each
    isolated test."""

    outside: Owner = field(default_factory=lambda: Owner("outside", "outside any test"))
    phase: list[Owner] = field(default_factory=list)
    fixtures: list[Owner] = field(default_factory=list)  # live fixture owners, oldest first
    # guard manager of a cache entry -> who compiled it
    owners: weakref.WeakKeyDictionary[Any, Owner] = field(default_factory=weakref.WeakKeyDictionary)
    # Code objects by identity (equal code of a module imported twice is another object).
    # compiles seen but not yet matched to their entries: code -> (compile id, owner)
    pending: IdentityMap[CodeType, list[tuple[str, Owner]]] = field(default_factory=IdentityMap)
    # entries to keep, held so they can be put back after a drop or a torch reset
    store: IdentityMap[CodeType, list[entries.KeptEntry]] = field(default_factory=IdentityMap)
    seen: IdentitySet[CodeType] = field(default_factory=IdentitySet)
    dirty: IdentitySet[CodeType] = field(default_factory=IdentitySet)
    dropped_codes: IdentitySet[CodeType] = field(default_factory=IdentitySet)
    baseline_state: dict[Any, Any] = field(default_factory=dict)  # at the first test
    installed_state: Any = None  # the state object isolation last gave torch
    state_dirty: bool = False  # a fixture whose state counted was torn down
    faults: list[str] = field(default_factory=list)  # contained internal errors, not yet told
    faulted: IdentitySet[CodeType] = field(default_factory=IdentitySet)
    _told: set[str] = field(default_factory=set)
    started: bool = False
    live: dict[int, Owner] = field(default_factory=dict)  # fixture key -> its current set-up
    tearing: dict[int, Owner] = field(default_factory=dict)  # fixture key -> its teardown

    @property
    def current(self) -> Owner:
        return self.phase[-1] if self.phase else self.outside

    def start(self) -> None:
        """Before the first test: what import and collection compiled is kept from now on,
        through every drop and reset (torch lists the code objects it compiled)."""
        if self.started:
            return
        self.started = True
        self.baseline_state = entries.copy_code_state(entries.code_state())
        for code in entries.compiled_codes():
            self._first_seen(code)

    def _first_seen(self, code: CodeType) -> None:
        if code not in self.seen:
            self.seen.add(code)
            # Entries made before the gate listened were made outside any test.
            for entry in entries.entries(code):
                self._own(code, entry, self.outside)

    # -- compiles ---------------------------------------------------------------------------

    def note(self, event: events.CompileEvent) -> Owner:
        """Record who is compiling ``event.code`` now; return that owner."""
        code = event.code
        self._first_seen(code)
        owner = self.current
        self.pending.setdefault(code, []).append((event.compile_id, owner))
        if not owner.kept:
            self.dirty.add(code)
        return owner

    def compiled_again(self, code: CodeType) -> bool:
        """Whether entries of ``code`` were dropped for an earlier test (isolation cost)."""
        return code in self.dropped_codes

    def _own(self, code: CodeType, entry: entries.KeptEntry, owner: Owner) -> None:
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
            for entry in entries.entries(code):
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
        found = [*entries.entries(code), *entries.kept_entries(code)]
        return {str(e.compile_id): self.owners.get(e.guard_manager, self.outside) for e in found}

    # -- phases -----------------------------------------------------------------------------

    def enter(self, owner: Owner) -> None:
        """A phase starts. A wider fixture's set-up starts from what a test would start from
        (import time's and the live wider fixtures' automatic-dynamic state), not from the
        shapes of the test that happens to trigger it."""
        self.resolve()
        self.phase.append(owner)
        if owner.kind == "fixture":
            owner._saved = entries.copy_code_state(entries.code_state())
            owner._start = self.start_state()
            entries.install_code_state(owner._start)

    def leave(self, owner: Owner) -> None:
        self.resolve()
        if owner in self.phase:
            del self.phase[self.phase.index(owner) :]
        if owner.kind == "fixture" and owner.live:
            owner.state = entries.changed_code_state(owner._start, entries.code_state())
            self.fixtures.append(owner)
            # The running phase goes on with its own state, and what the set-up learned.
            entries.install_code_state(entries.merged_code_state(owner._saved, owner.state))
            owner._start, owner._saved = {}, {}

    def fixture_gone(self, owner: Owner) -> None:
        if owner.live:
            owner.live = False
            if owner in self.fixtures:
                self.fixtures.remove(owner)
            for code in list(self.store):
                self.dirty.add(code)
            self.state_dirty = True

    # -- wider fixtures' lifetimes (keyed by their FixtureDef's id) --------------------------

    def set_up(self, key: int, owner: Owner) -> None:
        """A wider fixture's set-up ended: its entries are kept until it is torn down."""
        self.live[key] = owner

    def teardown_begins(self, key: int, owner: Owner) -> None:
        """A wider fixture's teardown is about to run: compiles there belong to no test."""
        dropped = Owner("dropped", f"teardown of {owner.describe()}")
        self.tearing[key] = dropped
        self.enter(dropped)

    def torn_down(self, key: int) -> tuple[bool, bool]:
        """A fixture's finalizers ran: (its teardown phase ended here, a live wider fixture
        is gone)."""
        dropped = self.tearing.pop(key, None)
        if dropped is not None:
            self.leave(dropped)
        owner = self.live.pop(key, None)
        if owner is not None:
            self.fixture_gone(owner)
        return dropped is not None, owner is not None

    def rejected_by(self, event: events.CompileEvent) -> list[Owner]:
        """The live fixtures whose cache entries rejected this call."""
        owners = self.owners_of(event.code)
        found = (owners.get(reason.partition(":")[0]) for reason in event.reasons)
        return list({id(o): o for o in found if o is not None and o.kind == "fixture"}.values())

    def note_against(self, owner: Owner, event: events.CompileEvent) -> None:
        """A wider fixture's set-up recompiled against another fixture's entries: what it
        keeps then depends on that fixture being live (the order-dependent edge)."""
        for other in self.rejected_by(event):
            if other is not owner and other not in owner.against:
                owner.against.append(other)

    def against(self, event: events.CompileEvent, used: set[str]) -> str | None:
        """Name the live fixtures whose entries rejected the call, if the test does not use
        them (``used``): the one case where a verdict depends on which tests ran before."""
        if not event.is_recompile:
            return None
        strangers = [o.describe() for o in self.rejected_by(event) if o.name not in used]
        if not strangers:
            return None
        return f"against entries made by {', '.join(strangers)}, which this test does not use"

    def order_note(self, used: set[str]) -> str | None:
        """The other direction of the edge: a fixture this test uses was set up as a
        recompile against a live fixture the test does not use, so what the test starts
        from (and may count) differs from a run of the test alone."""
        notes = [
            f"{fixture.describe()} was set up against entries of {other.describe()}"
            for fixture in self.fixtures
            if fixture.name in used
            for other in fixture.against
            if other.name not in used
        ]
        if not notes:
            return None
        return f"{'; '.join(notes)}, which this test does not use: alone, it may count otherwise"

    def start_state(self) -> dict[Any, Any]:
        """The automatic-dynamic state a test starts from: import time's, then each live
        wider fixture's set-up's, in the order they were set up."""
        return entries.merged_code_state(self.baseline_state, *(f.state for f in self.fixtures))

    # -- isolation --------------------------------------------------------------------------

    def isolate(self) -> int:
        """Drop every entry that is not kept; return how many code objects were changed."""
        self.start()
        self.resolve()
        changed = 0
        codes = {id(code): code for code in [*self.dirty, *self.store]}.values()
        restore = bool(self.dirty) or self.state_dirty
        self.dirty = IdentitySet()
        self.state_dirty = False
        for code in codes:
            try:
                changed += self._keep_only_kept(code)
            except Exception as exc:  # contained: this code object starts empty instead
                changed += 1
                self._fault(code, exc)
        # A reset (torch's, a Dynamo TestCase's, a tracker's) replaced the state object.
        if restore or changed or entries.code_state() is not self.installed_state:
            self.installed_state = entries.install_code_state(self.start_state())
        return changed

    def _keep_only_kept(self, code: CodeType) -> int:
        if code in self.faulted:  # keeping failed once: each test starts it empty
            entries.drop_all(code)
            return 1
        keep = [
            e
            for e in self.store.get(code, ())
            if (owner := self.owners.get(e.guard_manager)) is not None
            and owner.kept
            and entries.entry_alive(e)
        ]
        if keep:
            self.store[code] = keep
        else:
            self.store.pop(code, None)
        live = entries.entries(code)
        now = [*live, *entries.kept_entries(code)]
        same = {id(e.guard_manager) for e in now} == {id(e.guard_manager) for e in keep}
        if same and entries.cache_entries(code) == len(live):  # and no entry torch invalidated
            return 0
        if len(now) > len(keep):
            self.dropped_codes.add(code)
        entries.keep_only(code, keep)
        return 1

    def _fault(self, code: CodeType, exc: Exception) -> None:
        """Keeping entries failed: drop every entry of ``code`` (a full reset of that code
        object, so the next test compiles it afresh), and say so once."""
        self.store.pop(code, None)
        self.faulted.add(code)
        try:
            entries.drop_all(code)
        except Exception as again:
            exc = again
        where = f"{events.qualname(code)} ({code.co_filename}:{code.co_firstlineno})"
        self.fault(
            f"keeping the cache entries of {where} failed ({type(exc).__name__}: {exc}); "
            "dropped all of its entries instead, so the next test compiles it afresh"
        )

    def fault(self, message: str) -> None:
        """Note a contained internal error, to be told once."""
        if message not in self._told:
            self._told.add(message)
            self.faults.append(message)

    def take_faults(self) -> list[str]:
        """The faults contained since the last call (each told once)."""
        found, self.faults = self.faults, []
        return found
