"""Who compiled: the owner of a compile (a wider fixture's set-up, a test, a torn-down
fixture's teardown, or nobody), and one compile as the isolation ledger saw it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from .._torch import events, footprint, instruments
from ..model.work import CompileWork

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
    # other fixtures whose entries this fixture's set-up recompiled against (live then): its
    # recompiled entries are seen only by tests that use those fixtures too
    against: list[Owner] = field(default_factory=list, repr=False)
    # the inputs the eager_then_compile stances kept, per function, that its set-up added
    examples: dict[str, list[Any]] = field(default_factory=dict, repr=False)
    _start: dict[Any, Any] = field(default_factory=dict, repr=False)  # its set-up's start
    _examples: dict[str, list[Any]] = field(default_factory=dict, repr=False)
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


@dataclass(eq=False)
class Compiled:
    """One compile the ledger saw: who made it, and what another test needs to reuse it."""

    event: events.CompileEvent
    owner: Owner
    first: bool  # no entry its owner saw answered the call: a first compile
    before: dict[Any, Any]  # the code's automatic-dynamic state when the compile began
    config: tuple[Any, ...]  # the config hashes then
    after: dict[Any, Any] | None = None  # the state it left (None: not known yet)
    seconds: float | None = None  # what it took, once read from torch's metrics
    guards: instruments.GuardMetrics | None = None  # torch's guard figures, read with them
    work: CompileWork | None = None  # its counted work, read with them
    mark: footprint.Mark | None = None  # torch's records when it began
    # what it recorded besides its entry (graph breaks, counters), once it ended; None: unknown
    footprint: footprint.Footprint | None = None

    @property
    def compile_id(self) -> str:
        return self.event.compile_id
