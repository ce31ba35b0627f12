"""Which cache entries a test starts from: who compiled each entry, and dropping the rest.

The contract (docs/isolation.md): a test starts from what the live wider-scoped fixtures it
uses (module, class, package, session; unittest ``setUpClass`` / ``setUpModule``) compiled
while they were set up, and from what was compiled outside any test (import, collection);
never from what earlier tests compiled, nor from fixtures already torn down or that it does
not use. :class:`Ledger` knows who compiled each cache entry (the phase that was running when
torch compiled it) and, before a test, keeps only the entries the test would have alone.

What it drops is not lost: an entry an earlier test's *first compile* made (its owner had no
entry of that code) is *offered* to later tests. An offer answers a call only where the test
alone would compile right then (it holds no entry of that code yet) and a fresh compile would
make the very same entry: its guards pass, same backend, same config, same automatic-dynamic
state. Taking it leaves torch as that compile would have (the entry answers the test's later
calls, the automatic-dynamic state is what the compile left), and the test's record shows a
compile, reused. The torch side lives in ``_torch.entries``.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from types import CodeType
from typing import Any

from .._torch import dynamic_state, entries, events, fingerprints, footprint, hooks, instruments
from ..model.faults import Faults
from ..model.identity import IdentityMap, IdentitySet
from . import reuse
from .owners import Compiled, Owner
from .phases import Phases

_PENDING = 64  # compiles kept per code object while they have made no entry (yet)
_OFFERS = 8  # reusable entries kept per code object, newest first (each miss checks them)


class Ledger:
    """Who compiled each cache entry, and each owner's automatic-dynamic state: the phases,
    the wider fixtures' lifetimes, and the offers a test takes; before each isolated test,
    the entries it would have alone kept, and earlier tests' first compiles offered.

    Its state is its own: the gate and :class:`~pytest_recompile.wider_fixtures.WiderFixtures`
    tell it what happens (``note``, ``begin_test``, ``enter``, ``set_up``, ...) and ask it
    who owns a compile (``current``) and what a test starts from (``isolate``,
    ``in_view``)."""

    def __init__(self, *, faults: Faults) -> None:
        self._faults = faults  # contained internal errors, told once (the gate's)
        # Code objects are kept by identity (equal code of a module imported twice is another
        # object); cache entries by their guard manager, weakly.

        # -- phases: who owns a compile now (pure Python) ---------------------------------
        self._phases = Phases()

        # -- entry records: who compiled each entry, and the compiles not matched yet -----
        # guard manager of a cache entry -> who compiled it, and the compile
        self._owners: weakref.WeakKeyDictionary[Any, Owner] = weakref.WeakKeyDictionary()
        self._made: weakref.WeakKeyDictionary[Any, Compiled] = weakref.WeakKeyDictionary()
        # guard manager -> the other owners whose phase took a live fixture's entry as theirs
        self._sharers: weakref.WeakKeyDictionary[Any, list[Owner]] = weakref.WeakKeyDictionary()
        # compiles seen but not yet matched to their entries
        self._pending: IdentityMap[CodeType, list[Compiled]] = IdentityMap()
        self._windows: list[Compiled] = []  # compiles whose footprint is open

        # -- arrangement: which entries each test starts from -----------------------------
        # entries to keep or offer, held so they can be put back after a drop or a torch reset
        self._store: IdentityMap[CodeType, list[entries.KeptEntry]] = IdentityMap()
        self._seen: IdentitySet[CodeType] = IdentitySet()
        self._dirty: IdentitySet[CodeType] = IdentitySet()
        # compiles of each code object, in tests' phases, that torch went on with (not refused
        # by the gate before it began): torch may have decided about the code beyond its entries
        self._went_on: IdentityMap[CodeType, int] = IdentityMap()
        # code objects the running test holds an entry of (it would not compile them first)
        self._held: IdentitySet[CodeType] = IdentitySet()
        self._held_stale = True  # held gained a code object, or shown changed, since the copy
        self._shown: IdentitySet[CodeType] = IdentitySet()  # with entries kept now
        self._identity: IdentitySet[CodeType] = IdentitySet()  # entries match ids
        self._fixture_codes: IdentitySet[CodeType] = IdentitySet()  # fixtures' own
        self._faulted: IdentitySet[CodeType] = IdentitySet()  # keeping failed: start empty

        # -- offers: earlier tests' first compiles, taken where a test would compile ------
        self._reuse = False  # offer earlier tests' first compiles (this torch can)
        self._on_reuse: Callable[[Owner, Compiled], None] | None = None  # told of each taken
        # why a first compile of a code object repeats one an earlier test made: this test
        # refused the offer (again), or the entries dropped could not be offered (unreusable)
        self._again: IdentityMap[CodeType, str] = IdentityMap()
        self._unreusable: IdentityMap[CodeType, str] = IdentityMap()

        # -- automatic-dynamic state (and eager_then_compile's examples) ------------------
        self._started = False  # the baseline is read, once, before the first test
        self._baseline_state: dict[Any, Any] = {}  # at the first test
        self._baseline_examples: dict[str, list[Any]] = {}  # eager_then_compile's
        self._installed_examples: dict[str, list[Any]] = {}
        self._installed_state: Any = None  # the state object isolation last gave torch
        self._state_dirty = False  # a fixture whose state counted was torn down

        # -- recompile_limit: torch's eager fallback, per phase ---------------------------
        # code objects torch runs eagerly since a phase hit recompile_limit there, and who hit it
        self._limited: IdentityMap[CodeType, list[Owner]] = IdentityMap()
        self._lifted: IdentitySet[CodeType] = IdentitySet()  # a fixture's, lifted

    @property
    def current(self) -> Owner:
        """Who owns a compile now (see :class:`~.phases.Phases`)."""
        return self._phases.current

    @property
    def using(self) -> frozenset[str] | None:
        """The wider fixtures the running test uses (None: all)."""
        return self._phases.using

    def configure(self, *, reuse: bool, on_reuse: Callable[[Owner, Compiled], None]) -> None:
        """What this torch allows, decided once before the first test: whether earlier tests'
        first compiles are offered (``reuse``), and who is told of each offer taken."""
        self._reuse = reuse
        self._on_reuse = on_reuse

    def begin_test(self, owner: Owner, *, reusing: bool) -> None:
        """A test's phases begin: its compiles are ``owner``'s; ``reusing``: it is isolated,
        so earlier tests' first compiles may answer its calls."""
        self._phases.begin_test(owner, reusing=reusing)

    def end_test(self, owner: Owner) -> None:
        """A test's phases ended: what compiles until the next test begins is still its (and
        dropped before the next isolated test, as its own compiles are)."""
        self._phases.end_test(owner)

    def start(self) -> None:
        """Before the first test: what import and collection compiled is kept from now on,
        through every drop and reset (torch lists the code objects it compiled)."""
        if self._started:
            return
        self._started = True
        self._baseline_state = dynamic_state.copy_code_state(dynamic_state.code_state())
        self._baseline_examples = self._installed_examples = dynamic_state.examples()
        for code in entries.compiled_codes():
            self._first_seen(code)

    def _first_seen(self, code: CodeType) -> None:
        if code not in self._seen:
            self._seen.add(code)
            # Entries made before the gate listened were made outside any test.
            for entry in entries.entries(code):
                self._own(code, entry, self._phases.outside, None)

    # -- compiles ---------------------------------------------------------------------------

    def note(self, event: events.CompileEvent) -> Owner:
        """Record who is compiling ``event.code`` now; return that owner."""
        code = event.code
        self._first_seen(code)
        owner = self.current
        compiles = self._pending.setdefault(code, [])
        if self._reuse:
            state = dynamic_state.state_of(code)
            for earlier in compiles:  # they ended before this one began
                if earlier.after is None:
                    earlier.after = state
            self._close_windows()
            config = fingerprints.config_fingerprint(event.inductor)
            made = Compiled(event, owner, not event.is_recompile, state, config)
            made.mark = footprint.mark()
            self._windows.append(made)
        else:
            made = Compiled(event, owner, not event.is_recompile, {}, ())
        compiles.append(made)
        if event.limit is not None and not event.refused:  # torch runs it eagerly from now on
            self._limited.setdefault(code, []).append(owner)
            self._lifted.discard(code)
        self._hold(code)
        if not owner.kept:
            self._dirty.add(code)
            self._went_on[code] = self._went_on.get(code, 0) + 1
        return owner

    @property
    def has_unmatched_compiles(self) -> bool:
        """Whether compiles were seen that ``resolve`` has not matched to entries yet."""
        return bool(self._pending)

    def refused(self, event: events.CompileEvent) -> None:
        """The gate refused ``event``'s compile (fail-fast) before torch began it: torch
        decided nothing more about its code object."""
        count = self._went_on.get(event.code, 0)
        if count > 1:
            self._went_on[event.code] = count - 1
        else:
            self._went_on.pop(event.code, None)

    def _close_windows(self, only: Compiled | None = None) -> None:
        """What the compiles still open (all, or ``only``) recorded besides their entries:
        they ended (torch compiles one frame at a time)."""
        for made in list(self._windows):
            if only is None or made is only:
                self._windows.remove(made)
                if made.mark is not None:
                    made.footprint = footprint.since(made.mark)
                    made.mark = None

    def compiled_again(self, event: events.CompileEvent) -> str | None:
        """Why this compile repeats one an earlier test made (isolation's cost), if it does:
        a first compile of code whose entries were dropped, not reused."""
        if event.is_recompile:
            return None
        if dynamic_state.code_state() is not self._installed_state:
            # torch was reset since isolation arranged the entries (the suite's own reset, a
            # Dynamo TestCase's): a plain run compiles this afresh too
            return None
        code = event.code
        return self._again.get(code) or entries.refusal(code) or self._unreusable.get(code)

    def _own(
        self, code: CodeType, entry: entries.KeptEntry, owner: Owner, made: Compiled | None
    ) -> None:
        self._owners[entry.guard_manager] = owner
        if made is not None:
            self._made[entry.guard_manager] = made
        if owner.kept or self._reusable(entry) is None:
            self._store.setdefault(code, []).append(entry)
            if owner.kind == "fixture":
                self._fixture_codes.add(code)
            if entries.matches_identity(entry):
                self._identity.add(code)

    def _reusable(self, entry: entries.KeptEntry) -> str | None:
        """None if a later test may reuse the entry; else why not."""
        return reuse.why_not_offered(self._made.get(entry.guard_manager), entry, self._reuse)

    def resolve(self) -> None:
        """Match the compiles seen so far to the entries they made.

        A compile still running (this is called from the compile hook too) or one that made
        no entry stays pending; the newest compile of an id wins, since torch restarts
        compile ids after a reset.
        """
        timed: list[Compiled] = []
        for code, compiles in list(self._pending.items()):
            matched = set()
            for entry in entries.entries(code):
                if entry.guard_manager in self._owners:
                    continue
                cid = str(entry.compile_id)
                found = [c for c in compiles if c.compile_id == cid]
                made = found[-1] if found else None
                if made is not None and made.first and self._reuse:
                    if made.after is None:
                        made.after = dynamic_state.state_of(code)  # no compile of it came since
                    self._close_windows(made)
                    timed.append(made)
                self._own(code, entry, made.owner if made else self._phases.outside, made)
                matched.add(cid)
            left = [c for c in compiles if c.compile_id not in matched][-_PENDING:]
            if left:
                self._pending[code] = left
            else:
                del self._pending[code]
        if timed:  # what each compile another test may reuse took, and its guard figures
            keys = [events.compile_key(made.event.code, made.compile_id) for made in timed]
            figures = instruments.newest_figures(keys)
            for made, key in zip(timed, keys, strict=True):
                made.seconds, made.guards, made.work = figures.get(key, (None, None, None))

    # -- reuse ------------------------------------------------------------------------------

    def _take(self, offer: entries.Offer, f_locals: Any, callback: Any) -> bool:
        """An offered entry's guards and backend passed on a call: answer it with that entry
        if the test alone would compile right now and would make the very same one.

        Runs inside torch's guard evaluation: an internal error is named once and the call
        compiles, as it would alone.
        """
        try:
            return self._take_uncontained(offer, f_locals, callback)
        except Exception as exc:
            self._faults.add(
                f"reusing an earlier test's entry failed ({type(exc).__name__}: {exc}); "
                "the call compiled instead"
            )
            return False

    def _take_uncontained(self, offer: entries.Offer, f_locals: Any, callback: Any) -> bool:
        entry = offer.entry
        made = self._made.get(entry.guard_manager)
        if made is None or not self._phases.reusing or made.event.code in self._held:
            return False
        if hooks.listeners() > 1 or not instruments.default_stance():
            # Alone this call compiles, which a warm() block or a stance refuses, and which
            # a user's own tracker (scoped(), RecompileTracker) records: let it compile.
            self._again[made.event.code] = "a warm() block, a stance or the test's own tracker"
            return False
        code = made.event.code
        why = reuse.why_not_taken(made, entry, f_locals, callback)
        if why is not None:
            self._again[code] = why
            return False
        dynamic_state.set_state_of(code, made.after or {})
        if made.footprint is not None:  # its graph breaks and counters, as if compiled now
            footprint.replay(made.footprint)
        self._again.pop(code, None)  # the offers refused before this one say nothing now
        entries.forget_refusals(code)
        owner = self.current
        if not self._owners.get(entry.guard_manager, self._phases.outside).kept:
            self._owners[entry.guard_manager] = owner
        else:  # a live fixture's entry stays its own, and is this phase's too
            self._sharers.setdefault(entry.guard_manager, []).append(owner)
        self._hold(code)
        self._dirty.add(code)  # the next test finds the offer untaken again
        if self._on_reuse is not None:
            self._on_reuse(owner, made)
        return True

    # -- phases -----------------------------------------------------------------------------

    def enter(self, owner: Owner) -> None:
        """A phase starts. A wider fixture's set-up starts from what a test would start from
        (import time's and the live wider fixtures' automatic-dynamic state), not from the
        shapes of the test that happens to trigger it."""
        self.resolve()
        self._phases.push(owner)
        if owner.kind == "fixture":
            owner._saved = dynamic_state.copy_code_state(dynamic_state.code_state())
            owner._start = self._start_state()
            dynamic_state.install_code_state(owner._start)
            owner._examples = dynamic_state.examples()
            dynamic_state.install_examples(self._start_examples())

    def leave(self, owner: Owner) -> None:
        self.resolve()
        if self._phases.pop(owner):  # a wider fixture's set-up ended, live; the test uses it
            owner.state = dynamic_state.changed_code_state(owner._start, dynamic_state.code_state())
            # The running phase goes on with its own state, and what the set-up learned.
            dynamic_state.install_code_state(
                dynamic_state.merged_code_state(owner._saved, owner.state)
            )
            owner.examples = dynamic_state.examples_changed(self._start_examples())
            dynamic_state.install_examples({**owner._examples, **owner.examples})
            owner._start, owner._saved, owner._examples = {}, {}, {}

    def _fixture_gone(self) -> None:
        """A live wider fixture was torn down: the entries and state it compiled go."""
        for code in list(self._fixture_codes):
            self._dirty.add(code)
        self._state_dirty = True

    # -- wider fixtures' lifetimes (keyed by their FixtureDef's id) --------------------------

    def set_up(self, key: int, owner: Owner) -> None:
        """A wider fixture's set-up ended: its entries are kept until it is torn down."""
        self._phases.set_up(key, owner)

    def teardown_begins(self, key: int, owner: Owner) -> None:
        """A wider fixture's teardown is about to run: compiles there belong to no test."""
        self.resolve()
        self._phases.teardown_begins(key, owner)

    def torn_down(self, key: int) -> tuple[bool, bool]:
        """A fixture's finalizers ran: (its teardown phase ended here, a live wider fixture
        is gone)."""
        if key in self._phases.tearing:  # what its teardown compiled, matched while it runs
            self.resolve()
        dropped, gone = self._phases.torn_down(key)
        if gone is not None:
            self._fixture_gone()
        return dropped is not None, gone is not None

    def note_against(self, owner: Owner, event: events.CompileEvent) -> None:
        """A wider fixture's set-up recompiled against another fixture's entries: its
        recompiled entries are seen only by tests that use that fixture too."""
        self.resolve()
        found = [*entries.entries(event.code), *entries.kept_entries(event.code)]
        by_id = {str(e.compile_id): e for e in found}
        for reason in event.reasons:
            entry = by_id.get(reason.partition(":")[0])
            if entry is None or owner in self._sharers.get(entry.guard_manager, ()):
                continue
            other = self._owners.get(entry.guard_manager, self._phases.outside)
            if other.kind == "fixture" and other is not owner and other not in owner.against:
                owner.against.append(other)

    def _visible(self, entry: entries.KeptEntry) -> bool:
        owner = self._owners.get(entry.guard_manager)
        if owner is None:
            return False
        if any(self._phases.uses(o) for o in self._sharers.get(entry.guard_manager, ())):
            return True
        if not self._phases.uses(owner):
            return False
        made = self._made.get(entry.guard_manager)
        return made is None or made.first or all(self._phases.uses(o) for o in owner.against)

    def _start_state(self) -> dict[Any, Any]:
        """The automatic-dynamic state a test starts from: import time's, then each live
        wider fixture's set-up's that it uses, in the order they were set up."""
        used = (f.state for f in self._phases.fixtures if self._phases.uses(f))
        return dynamic_state.merged_code_state(self._baseline_state, *used)

    def _start_examples(self) -> dict[str, list[Any]]:
        """The inputs the eager_then_compile stances kept that a test starts from: import
        time's, then those each live wider fixture it uses added while set up."""
        found = dict(self._baseline_examples)
        for owner in self._phases.fixtures:
            if self._phases.uses(owner):
                found.update(owner.examples)
        return found

    def _fallbacks(self) -> IdentitySet[CodeType]:
        """torch's eager fallback after a recompile_limit hit ends with the phase that hit it:
        it stays set only where a phase the test sees (import time, a live wider fixture it
        uses) hit the limit. Return the code objects whose fallback ends now: emptying their
        lists (as arranging them does) lifts it in every ``isolate_recompiles`` region."""
        lift: IdentitySet[CodeType] = IdentitySet()
        for code, hit in list(self._limited.items()):
            if any(self._phases.uses(owner) for owner in hit):
                if code in self._lifted:  # a fixture's hit, lifted for a test that did not use it
                    self._lifted.discard(code)
                    entries.set_eager_fallback(code)
                continue
            kept = [owner for owner in hit if owner.kept]
            if code not in self._lifted:
                lift.add(code)
            if kept:
                self._limited[code] = kept
                self._lifted.add(code)
            else:
                del self._limited[code]
                self._lifted.discard(code)
        return lift

    # -- isolation --------------------------------------------------------------------------

    def isolate(self, using: frozenset[str] | None = None, *, begins: bool = True) -> int:
        """Before a test that uses the wider fixtures named ``using`` (None: all live ones):
        keep what it would see alone, offer what earlier tests' first compiles made, drop the
        rest; return how many code objects were changed. ``begins=False``: again, in the
        middle of the test's set-up (a wider fixture torn down): what the test compiled or
        took so far stays its own."""
        self.start()
        self.resolve()
        if begins:  # what the last test left compiling is dropped now, as its own compiles
            self._phases.left_by = None
        changed = 0
        # A reset (torch's, a Dynamo TestCase's, a tracker's) replaced the state object and
        # emptied every list: everything kept or offered goes back.
        reset = dynamic_state.code_state() is not self._installed_state
        restore = bool(self._dirty) or self._state_dirty or using != self._phases.using or reset
        # Only what can have changed is looked at again (a suite's codes grow with its tests):
        # what the last test compiled or took, what a fixture's lifetime or use changes, and
        # entries whose guards match objects by identity (they may have died).
        lift = self._fallbacks() if self._limited else ()
        # Mid-set-up, what the test decided so far stays its own, as its entries do.
        compiled = self._went_on if begins else IdentityMap()
        codes: list[CodeType] = []
        for more in (self._dirty, self._identity, lift, compiled):
            if more:  # a look, not a walk: most tests compile and take nothing
                codes += more
        if using != self._phases.using:
            codes += self._fixture_codes
        if reset:
            codes += self._store
        self._phases.using = using
        if self._dirty:
            self._dirty = IdentitySet()
        if compiled:
            self._went_on = IdentityMap()
        self._state_dirty = False
        for code in {id(code): code for code in codes}.values():
            try:
                changed += self._arrange(code, lift=code in lift, compiled=code in compiled)
            except Exception as exc:  # contained: this code object starts empty instead
                changed += 1
                self._fault(code, exc)
        if restore or changed or dynamic_state.examples_differ(self._installed_examples):
            self._installed_examples = self._start_examples()
            dynamic_state.install_examples(self._installed_examples)
        if begins:
            if self._held_stale:  # else held is still what is shown: most tests change neither
                self._held, self._held_stale = self._shown.copy(), False
            if self._again:
                self._again = IdentityMap()
        if restore or changed:
            self._installed_state = dynamic_state.install_code_state(self._start_state())
        return changed

    def in_view(
        self, using: frozenset[str] | None
    ) -> IdentityMap[CodeType, list[entries.KeptEntry]]:
        """Before a full reset (a torch that cannot keep single entries): the entries a test
        that uses the wider fixtures named ``using`` would have alone, by code object."""
        self.start()
        self.resolve()
        found: IdentityMap[CodeType, list[entries.KeptEntry]] = IdentityMap()
        running, self._phases.using = self._phases.using, using
        try:
            for code, stored in self._store.items():
                keep = [
                    e
                    for e in stored
                    if e.guard_manager in self._owners
                    and entries.entry_alive(e)
                    and self._visible(e)
                ]
                if keep:
                    found[code] = keep
        finally:
            self._phases.using = running
        return found

    def _hold(self, code: CodeType) -> None:
        self._held.add(code)
        self._held_stale = True

    def _arrange(self, code: CodeType, *, lift: bool = False, compiled: bool = False) -> int:
        """Put on ``code`` what the next test would see alone; return 1 where that changed
        torch's lists. ``compiled``: torch went on with a compile of ``code`` in the last
        test's phases, so it may have decided about the code object beyond its entries (a
        frame in which it found no graph is skipped from then on): its lists are emptied
        and refilled even where the entries are the same, which lifts any such decision, as
        a fresh process has none."""
        if code in self._faulted:  # keeping failed once: each test starts it empty
            entries.drop_all(code)
            return 1
        alive = [
            e
            for e in self._store.get(code, ())
            if e.guard_manager in self._owners and entries.entry_alive(e)
        ]
        keep = [e for e in alive if self._visible(e)]
        if bool(keep) != (code in self._shown):  # held starts from shown: copied again
            self._held_stale = True
            if keep:
                self._shown.add(code)
            else:
                self._shown.discard(code)
        shown = {id(e) for e in keep}
        reusable = [e for e in alive if id(e) not in shown and self._reusable(e) is None]
        offer = reusable[-_OFFERS:][::-1]  # newest first
        offered = {id(e) for e in offer}
        stored = [
            e
            for e in alive
            if id(e) in shown or id(e) in offered or any(o.kept for o in self._all_owners(e))
        ]
        if stored:
            self._store[code] = stored
        else:
            self._store.pop(code, None)
        if any(entries.matches_identity(e) for e in stored):
            self._identity.add(code)
        else:
            self._identity.discard(code)
        if any(o.kind == "fixture" for e in stored for o in self._all_owners(e)):
            self._fixture_codes.add(code)
        else:
            self._fixture_codes.discard(code)
        live = entries.entries(code)
        kept, offers = entries.installed(code)
        same = _ids([*live, *kept]) == _ids(keep) and _ids(list(offers)) == _ids(offer)
        if same and not lift and not compiled and entries.cache_entries(code) == len(live):
            # none invalidated
            entries.renew_offers(code)
            return 0
        wanted = _ids([*keep, *offer])
        why = self._why_not(
            [e for e in [*live, *kept, *offers] if id(e.guard_manager) not in wanted]
        )
        if why is not None:
            self._unreusable[code] = why
        entries.keep_only(code, keep)
        entries.offer(code, [entries.Offer(e, self._take) for e in offer])
        return 1

    def _all_owners(self, entry: entries.KeptEntry) -> list[Owner]:
        """Who compiled the entry, and the phases that took it as theirs since."""
        owner = self._owners.get(entry.guard_manager)
        sharers = self._sharers.get(entry.guard_manager, [])
        return [owner, *sharers] if owner is not None else list(sharers)

    def _why_not(self, dropped: list[entries.KeptEntry]) -> str | None:
        for entry in dropped:
            why = self._reusable(entry)
            if why is not None and why != reuse.RECOMPILED:
                return why
        return None

    def _fault(self, code: CodeType, exc: Exception) -> None:
        """Keeping entries failed: drop every entry of ``code`` (a full reset of that code
        object, so the next test compiles it afresh), and say so once."""
        self._store.pop(code, None)
        self._faulted.add(code)
        try:
            entries.drop_all(code)
        except Exception as again:
            exc = again
        where = f"{events.qualname(code)} ({code.co_filename}:{code.co_firstlineno})"
        self._faults.add(
            f"keeping the cache entries of {where} failed ({type(exc).__name__}: {exc}); "
            "dropped all of its entries instead, so the next test compiles it afresh"
        )


def _ids(found: list[entries.KeptEntry]) -> set[int]:
    return {id(e.guard_manager) for e in found}
