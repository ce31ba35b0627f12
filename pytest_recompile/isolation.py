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

from dataclasses import dataclass
from types import CodeType

from . import reuse
from ._torch import dynamic_state, entries, events
from .book import Book
from .identity import IdentityMap, IdentitySet
from .owners import Owner

_OFFERS = 8  # reusable entries kept per code object, newest first (each miss checks them)


@dataclass
class Ledger(Book):
    """Cache entries and automatic-dynamic state by owner (the :class:`~.book.Book`); before
    each isolated test, the entries it would have alone kept, and earlier tests' first
    compiles offered."""

    # -- isolation --------------------------------------------------------------------------

    def isolate(self, using: frozenset[str] | None = None, *, begins: bool = True) -> int:
        """Before a test that uses the wider fixtures named ``using`` (None: all live ones):
        keep what it would see alone, offer what earlier tests' first compiles made, drop the
        rest; return how many code objects were changed. ``begins=False``: again, in the
        middle of the test's set-up (a wider fixture torn down): what the test compiled or
        took so far stays its own."""
        self.start()
        self.resolve()
        changed = 0
        # A reset (torch's, a Dynamo TestCase's, a tracker's) replaced the state object and
        # emptied every list: everything kept or offered goes back.
        reset = dynamic_state.code_state() is not self.installed_state
        restore = bool(self.dirty) or self.state_dirty or using != self.using or reset
        # Only what can have changed is looked at again (a suite's codes grow with its tests):
        # what the last test compiled or took, what a fixture's lifetime or use changes, and
        # entries whose guards match objects by identity (they may have died).
        codes = [*self.dirty, *self.identity]
        if using != self.using:
            codes += self.fixture_codes
        if reset:
            codes += self.store
        self.using = using
        self.dirty = IdentitySet()
        self.state_dirty = False
        for code in {id(code): code for code in codes}.values():
            try:
                changed += self._arrange(code)
            except Exception as exc:  # contained: this code object starts empty instead
                changed += 1
                self._fault(code, exc)
        if begins:
            self.held = IdentitySet()
            self.held |= self.shown
            self.again = IdentityMap()
        if restore or changed:
            self.installed_state = dynamic_state.install_code_state(self.start_state())
        return changed

    def _arrange(self, code: CodeType) -> int:
        if code in self.faulted:  # keeping failed once: each test starts it empty
            entries.drop_all(code)
            return 1
        alive = [
            e
            for e in self.store.get(code, ())
            if e.guard_manager in self.owners and entries.entry_alive(e)
        ]
        keep = [e for e in alive if self._visible(e)]
        if keep:
            self.shown.add(code)
        else:
            self.shown.discard(code)
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
            self.store[code] = stored
        else:
            self.store.pop(code, None)
        if any(entries.matches_identity(e) for e in stored):
            self.identity.add(code)
        else:
            self.identity.discard(code)
        if any(o.kind == "fixture" for e in stored for o in self._all_owners(e)):
            self.fixture_codes.add(code)
        else:
            self.fixture_codes.discard(code)
        live = entries.entries(code)
        kept, offers = entries.installed(code)
        same = _ids([*live, *kept]) == _ids(keep) and _ids(list(offers)) == _ids(offer)
        if same and entries.cache_entries(code) == len(live):  # and no entry torch invalidated
            entries.renew_offers(code)
            return 0
        wanted = _ids([*keep, *offer])
        why = self._why_not(
            [e for e in [*live, *kept, *offers] if id(e.guard_manager) not in wanted]
        )
        if why is not None:
            self.unreusable[code] = why
        entries.keep_only(code, keep)
        entries.offer(code, [entries.Offer(e, self.take) for e in offer])
        return 1

    def _all_owners(self, entry: entries.KeptEntry) -> list[Owner]:
        """Who compiled the entry, and the phases that took it as theirs since."""
        owner = self.owners.get(entry.guard_manager)
        sharers = self.sharers.get(entry.guard_manager, [])
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
        self.store.pop(code, None)
        self.faulted.add(code)
        try:
            entries.drop_all(code)
        except Exception as again:
            exc = again
        where = f"{events.qualname(code)} ({code.co_filename}:{code.co_firstlineno})"
        self.faults.add(
            f"keeping the cache entries of {where} failed ({type(exc).__name__}: {exc}); "
            "dropped all of its entries instead, so the next test compiles it afresh"
        )


def _ids(found: list[entries.KeptEntry]) -> set[int]:
    return {id(e.guard_manager) for e in found}
