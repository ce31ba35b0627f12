"""Who owns a compile now: the phase running, as the gate follows pytest's, and the wider
fixtures alive. Plain Python, no torch: the :class:`~.ledger.Ledger` keeps torch's side (the
automatic-dynamic state each phase starts from, the entries to arrange again) and asks
:class:`Phases` who is compiling (``current``) and whose entries the running test sees
(``uses``)."""

from __future__ import annotations

from .owners import Owner


class Phases:
    """Who owns a compile now, and whose compiles the running test sees: the phase stack,
    the test that ran last, the live wider fixtures. Modelled on pytest's ``SetupState``:
    the gate's hooks drive it, in pytest's own order.

    A worked example: ``test_a`` uses a module fixture ``model``, set up for it; ``test_b``,
    the module's last test, does not use it (``using``, the fixtures a test uses, is set by
    isolation before each isolated test: say ``{"model"}`` for ``test_a``, ``set()`` for
    ``test_b``). Before the first test the stack is empty::

        []                      current: outside    uses: outside

    ``current`` is ``outside``: import and collection compile outside any test. Then
    ``begin_test(test_a)``: its set-up begins::

        [test_a]                current: test_a     uses: outside, test_a

    Its set-up requests ``model``, which pytest sets up inside it: ``push(model)``. What
    compiles now is the fixture's, charged to no test, and it starts from what any test
    would (``test_a``'s own compiles are not its)::

        [test_a, model]         current: model      uses: outside, model

    The set-up ends: ``pop(model)`` (it joins the live fixtures, oldest first, and the
    fixtures ``test_a`` uses) and ``set_up(key, model)`` (keyed by its ``FixtureDef``, for
    its teardown)::

        [test_a]                current: test_a     uses: outside, test_a, model

    ``test_a``'s call changes nothing here. ``end_test(test_a)``: between tests the stack is
    empty, but what compiles now (a finalizer, an object freed late, a thread) is the last
    test's, never import time's (``left_by``)::

        []                      current: test_a     uses: outside, test_a, model

    Isolation before ``test_b`` forgets ``left_by`` and sets ``using`` to ``set()``, then
    ``begin_test(test_b)``: ``model`` is live, but not ``test_b``'s::

        [test_b]                current: test_b     uses: outside, test_b

    ``test_b`` is the module's last test: its teardown tears ``model`` down.
    ``teardown_begins(key, model)`` pushes the teardown's own owner (kind ``dropped``): what
    it compiles belongs to no test and is kept for none::

        [test_b, teardown of model]   current: teardown of model
                                      uses: outside, teardown of model

    ``torn_down(key)``: the teardown phase ends, and ``model`` is gone: no test sees what it
    compiled from now on (``uses(model)`` is False whatever ``using`` says)::

        [test_b]                current: test_b     uses: outside, test_b

    and ``end_test(test_b)`` leaves ``[]``, ``current`` ``test_b``, until the next test.
    """

    def __init__(self) -> None:
        self.outside = Owner("outside", "outside any test")
        self.stack: list[Owner] = []  # the phases running, innermost last
        # The test that ran last: a compile between two tests (a finalizer, an object pytest
        # frees after the teardown, a thread still running) is its, never import time's.
        self.left_by: Owner | None = None
        self.fixtures: list[Owner] = []  # live wider fixtures, oldest first
        self.live: dict[int, Owner] = {}  # fixture key -> its current set-up
        self.tearing: dict[int, Owner] = {}  # fixture key -> its teardown's phase
        # the wider fixtures the running test uses, by name (None: all); set by isolation
        self.using: frozenset[str] | None = None
        self.reusing = False  # an isolated test's phases are running: offers may be taken

    @property
    def current(self) -> Owner:
        """Who owns a compile now: the innermost phase, else the test that ran last, else
        nobody (``outside``)."""
        if self.stack:
            return self.stack[-1]
        return self.left_by or self.outside

    def uses(self, owner: Owner) -> bool:
        """Whether the running test sees what ``owner`` compiled (a fixture: while set up):
        import time's and the current phase's always; a wider fixture's while it is live and
        the test uses it; nothing else."""
        if owner.kind == "outside" or owner is self.current:
            return True
        if owner.kind != "fixture" or not owner.live:
            return False
        return self.using is None or owner.name in self.using

    # -- tests ------------------------------------------------------------------------------

    def begin_test(self, owner: Owner, *, reusing: bool) -> None:
        """A test's phases begin: its compiles are ``owner``'s; ``reusing``: it is isolated,
        so earlier tests' first compiles may answer its calls."""
        self.stack = [owner]
        self.reusing = reusing
        self.left_by = None

    def end_test(self, owner: Owner) -> None:
        """A test's phases ended: what compiles until the next test begins is still its."""
        self.stack = []
        self.reusing = False
        self.left_by = owner

    # -- phases inside a test's ------------------------------------------------------------

    def push(self, owner: Owner) -> None:
        """A phase starts inside the running one (a wider fixture's set-up, a teardown)."""
        self.stack.append(owner)

    def pop(self, owner: Owner) -> bool:
        """``owner``'s phase ended, and any phase still open inside it. Return whether a
        wider fixture's set-up ended with the fixture live: it joins the live fixtures, and
        the running test, whose set-up it ran in, uses it."""
        if owner in self.stack:
            del self.stack[self.stack.index(owner) :]
        if owner.kind != "fixture" or not owner.live:
            return False
        self.fixtures.append(owner)
        if self.using is not None:  # set up for the running test: it uses it
            self.using = self.using | {owner.name}
        return True

    # -- wider fixtures' lifetimes (keyed by their FixtureDef's id) --------------------------

    def set_up(self, key: int, owner: Owner) -> None:
        """A wider fixture's set-up ended: it is live until ``torn_down(key)``."""
        self.live[key] = owner

    def teardown_begins(self, key: int, owner: Owner) -> Owner:
        """A wider fixture's teardown is about to run: push its own phase, whose compiles
        belong to no test; return that phase's owner."""
        dropped = Owner("dropped", f"teardown of {owner.describe()}")
        self.tearing[key] = dropped
        self.push(dropped)
        return dropped

    def torn_down(self, key: int) -> tuple[Owner | None, Owner | None]:
        """A fixture's finalizers ran (any fixture: only a wider one's key is known). Return
        the teardown phase that ended here, and the live wider fixture that is gone now
        (None: none)."""
        dropped = self.tearing.pop(key, None)
        if dropped is not None:
            self.pop(dropped)
        owner = self.live.pop(key, None)
        gone = owner if owner is not None and self.fixture_gone(owner) else None
        return dropped, gone

    def fixture_gone(self, owner: Owner) -> bool:
        """``owner``'s fixture was torn down: no test sees its compiles from now on. Return
        whether it was live until now."""
        if not owner.live:
            return False
        owner.live = False
        if owner in self.fixtures:
            self.fixtures.remove(owner)
        return True
