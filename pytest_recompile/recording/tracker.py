"""Tracking: torch's instruments driven for a block (a test, a ``with`` block).

The tracker is a :class:`~.recorder.Recorder` that listens to torch: compile
events, graph breaks, CUDA-graph recordings, compile seconds and cache entries. It hands its
records to :func:`~pytest_recompile.model.judge.judge`; in fail-fast mode it raises at the compile
that breaks the rules. Plain Python, usable in a script or notebook as well as from the pytest
plugin::

    from pytest_recompile import RecompileTracker

    with RecompileTracker(max_recompiles=0) as tracker:
        model(x)          # raises RecompileBudgetExceeded at the first recompile
    print(tracker.total_recompiles)
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator, Mapping
from contextlib import AbstractContextManager, ExitStack, contextmanager
from types import CodeType, TracebackType
from typing import Any

from .._torch import (
    caches,
    dynamic_state,
    entries,
    events,
    hooks,
    instruments,
    stand_ins,
    versions,
)
from ..model.budget import Budget, Rule, check_count
from ..model.certificate import Certificate
from ..model.faults import Faults
from ..model.guards import InstalledGuard
from ..model.identity import IdentityMap
from ..model.judge import Violation, judge, unknown_functions
from ..model.names import MODES, relative
from ..model.records import FunctionRecord, GraphBreak, distinct_breaks
from ..model.results import CachesResult
from ..model.work import CompileWork
from .errors import CompiledWhileWarm, RecompileBudgetExceeded, warm_message, warm_refusal
from .guard_reader import GuardTrees
from .recorder import Recorder, event_reasons
from .sites import call_frame


class RecompileTracker(Recorder):
    """Counts compiles and recompiles per function while the ``with`` block runs.

    ``budget`` (or the shorthand ``max_recompiles=n``) is enforced according to ``mode``:
    ``fail-fast`` raises :class:`RecompileBudgetExceeded` at the call whose recompile goes
    over budget, before that compile runs; ``at-end`` raises when the block exits;
    ``report-only`` only records. ``reset=True`` clears torch's compile caches on entry so
    the counts do not depend on what ran before. A function's first compile inside the block
    is never a recompile, unless ``warm_start=True``: then the entries compiled before the
    block count, and any compile torch calls a recompile is one.
    """

    def __init__(
        self,
        budget: Budget | None = None,
        *,
        max_recompiles: int | None = None,
        mode: str = "fail-fast",
        reset: bool = True,
        warm_start: bool = False,
        listen: bool = True,
        certify_marks: bool = True,
    ) -> None:
        if budget is not None and max_recompiles is not None:
            raise TypeError("pass either budget= or max_recompiles=, not both")
        if max_recompiles is not None:
            count = check_count(max_recompiles, "RecompileTracker(max_recompiles=...)")
            budget = Budget(Rule(count, f"max_recompiles={count}"), total_counts_named=True)
        if mode not in MODES:
            raise ValueError(f"mode must be one of {', '.join(MODES)}; got {mode!r}")
        super().__init__(warm_start=warm_start)
        self.budget = budget
        self.mode = mode
        self.reset = reset
        self.listen = listen  # False: the pytest gate hands it the events of the test's phases
        self.graph_breaks: list[GraphBreak] = []  # distinct break sites seen in the block
        self.fullgraph_break: GraphBreak | None = None  # the break that stopped a fullgraph block
        self.cudagraph_recordings: list[str] = []  # compile id of each CUDA-graph recording
        self._lock = threading.RLock()
        self._stack = ExitStack()
        self._seconds = instruments.CompileSeconds()
        self._callbacks: instruments.CompileCallbacks | None = None
        self.faults = Faults()  # what it contained (the gate shares its own: named once)
        self._trees = GuardTrees(self.faults)  # each entry's guards, read once
        self._breaks: list[GraphBreak] = []
        self._breaks_mark = 0
        self._paused: int | None = None  # CUDA-graph recordings when paused
        self._caches = caches.CacheCounts()  # torch's compile-cache counters, the block's
        self._worked: set[events.CompileKey] = set()  # compiles whose work was looked for
        # fullgraph: torch stops at the break (2.9+), else judged from the breaks recorded
        self.stop_at_breaks = True
        self.active = False
        self._settled = False  # nothing happened since the last refresh: no need of another
        self.certificates: list[tuple[Certificate, str]] = []  # covers()'s, with its call site
        # a gated block certifies the domains its calls declared to torch (mark_dynamic with
        # min and max) for the function that received them, when it is judged
        self.certify_marks = certify_marks
        # each function's call that declared a domain (its objects held weakly: certified
        # whenever the function gained an entry, at the next compile or the block's end, while
        # they live; the last certificate stands once they are gone)
        self._declared: IdentityMap[CodeType, stand_ins.Captured] = IdentityMap()
        self._declared_done: IdentityMap[CodeType, tuple[int, list[tuple[Certificate, str]]]] = (
            IdentityMap()
        )

    # -- lifecycle ----------------------------------------------------------------------------

    def start(self) -> RecompileTracker:
        """Start recording (what ``with`` does); :meth:`stop` ends it."""
        versions.check_torch()
        if self.reset:
            entries.reset_caches()
        # Nothing recorded yet, nothing to refresh: every event that can change what a
        # refresh reads (a compile, its end, a reuse, a pause) unsettles it.
        self._settled = True
        self._seconds.start()
        self._breaks_mark = instruments.graph_break_count()
        self._callbacks = instruments.block_callbacks(self._after_compile)
        self.cudagraph_recordings = self._callbacks.recordings
        with ExitStack() as stack:
            stack.callback(self._callbacks.close)
            if self.budget is not None and self.budget.fullgraph and self._stops_at_breaks():
                stack.enter_context(instruments.error_on_graph_break())
            if self.listen:
                stack.callback(hooks.install_compile_hook(self.on_compile))
            self._caches.start()
            stack.callback(self._caches.pause)
            self._stack = stack.pop_all()
        self.active = True
        return self

    def __enter__(self) -> RecompileTracker:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
        if isinstance(exc, RecompileBudgetExceeded) and exc.stopped:
            exc.locate()  # its message says where the call was made
        if exc is not None:
            self.note_exception(exc)
        elif self.mode == "at-end":
            self.check()

    def note_exception(self, exc: BaseException) -> GraphBreak | None:
        """Record ``exc`` if it is torch stopping at a graph break under fullgraph."""
        if self.budget is not None and self.budget.fullgraph:
            self.fullgraph_break = instruments.graph_break_error(exc) or self.fullgraph_break
        return self.fullgraph_break

    def share_faults(self, faults: Faults) -> RecompileTracker:
        """Name what this tracker contains in ``faults`` (the gate's), once for the run."""
        self.faults = self._trees.faults = faults
        return self

    def stop(self) -> None:
        """Stop recording and restore what was changed; safe to call twice."""
        if not self.active:
            return
        self._refresh()  # while torch still keeps every compile's metrics
        self._trees.forget()
        self.active = False
        if self.budget is not None:  # certified as the entries stand, where the calls live
            self.declared_certificates()
        self._declared.clear()  # the certificates stay
        try:
            self._stack.close()  # nothing compiles from here on: no second read
        finally:
            seconds = self._seconds.stop()
            if seconds:
                self.note_seconds(seconds)

    # -- events -------------------------------------------------------------------------------

    def on_compile(self, event: events.CompileEvent, *, again: str | None = None) -> None:
        """Record one compile; in fail-fast mode, raise if it breaks the budget.

        ``again`` says why this compile repeats one an earlier test made (isolation's cost).
        """
        with self._lock:
            self._settled = False
            self._seconds.widen()  # a compile is on its way: keep every metric till the end
            self.rearm()
            self._observe()
            self._read_trees(latest=True)  # the entries compiled so far exist now
            self._trees.compiled(
                event.code, events.compile_key(event.code, event.compile_id), event.inputs
            )
            if self.budget is not None and self._declared:  # the entries made so far exist
                self.declared_certificates()
            if (
                self.certify_marks
                and event.inputs is not None
                and event.code is event.function  # not a resume function's stack values
                and event.inputs.declared()
            ):
                self._declared[event.code] = event.inputs
            record, recompile = self.add(event, again=again)
            violations: list[Violation] = []
            # At a limit where torch raises itself, its exception reaches the user's code
            # (which may expect it); the limit hit is judged when the test ends.
            if (
                self.mode == "fail-fast"
                and not event.refused
                and (recompile is not None or event.limit is not None or self._forbids)
            ):
                if self._forbids:
                    record.guards = self._trees.installed(record)
                violations = [
                    v
                    for v in judge(self.records, self.budget)
                    if (v.function is None or v.function is record)
                    # judged at the phase's end
                    and v.kind not in ("guards", "new_guards", "work")
                ]
            if not violations:
                self.let_through(record, recompile)
                if event.limit is None:  # it compiles: what its code object holds before it
                    record.held_before[event.compile_id] = entries.answering_entries(event.code)
                return
            if recompile is not None:
                recompile.stopped = True
            self._refresh()
            self._settled = False  # the refused compile goes on until torch raises
        raise RecompileBudgetExceeded(self.records, violations, stopped=True)

    def on_stopped(self, event: events.CompileEvent) -> None:
        """Record a recompile that a warm block stopped before it ran: counted, and shown as
        stopped, as fail-fast shows the recompile it stops (a first compile stopped made
        nothing to count)."""
        if not event.is_recompile:
            return
        with self._lock:
            self._settled = False
            self.rearm()
            self._observe()
            _, recompile = self.add(event)
            if recompile is not None:
                recompile.stopped = True

    def on_reuse(
        self,
        event: events.CompileEvent,
        seconds: float | None,
        guards: instruments.GuardMetrics | None = None,
        work: CompileWork | None = None,
    ) -> None:
        """Record a first compile that an earlier test's entry answered (no compile ran);
        ``guards`` and ``work``: torch's guard figures of that compile and its counted work,
        where they were read with it."""
        with self._lock:
            self._settled = False
            self.reuse(event, seconds, work)
            self._trees.compiled(event.code)  # its entry is read as if compiled here
            if guards is not None:
                self._trees.measured(events.compile_key(event.code, event.compile_id), guards)

    def rearm(self) -> None:
        """Register again the compile callbacks a ``torch._dynamo.reset()`` dropped."""
        if self._callbacks is not None:
            self._callbacks.rearm()

    def pause(self) -> None:
        """Leave out what happens until :meth:`resume` (a wider fixture being set up)."""
        self._settled = False
        self._observe()
        self._read_trees()
        self._paused = len(self.cudagraph_recordings)
        self._caches.pause()

    def resume(self) -> None:
        if self._paused is None:
            return
        self._settled = False
        self._caches.resume()
        del self.cudagraph_recordings[self._paused :]
        self._paused = None
        self._breaks_mark = instruments.graph_break_count()

    def _after_compile(self) -> None:
        """After each compile in the process (torch's end callback: contained, as torch would
        raise an error here in the user's call)."""
        self._settled = False
        self._seconds.widen()
        self.faults.call(self._observe)

    def _observe(self) -> None:
        """Note cache entries and graph breaks now, before a torch._dynamo.reset() (which
        torch's Dynamo TestCase calls in tearDown) can clear them."""
        with self._lock:
            self.note_entries(entries.answering_entries)
            if self._paused is not None:
                return
            count = instruments.graph_break_count()
            if count < self._breaks_mark:  # a reset cleared torch's list
                self._breaks_mark = 0
            if count > self._breaks_mark:
                self._breaks += instruments.graph_breaks_since(self._breaks_mark)
                self._breaks_mark = count
                self.graph_breaks = distinct_breaks(self._breaks)

    def _read_trees(self, *, latest: bool = False) -> None:
        """Each new entry's guards, on its function's record."""
        for record, entry, guards in self._trees.read(self.owners(), self.codes(), latest=latest):
            record.entries[entry] = guards

    def _note_metrics(self) -> None:
        """torch's guard count and latency estimate of each entry, on its function's record;
        each compile's counted work; and, for a function recompiled for a size, the sources
        torch's automatic dynamic now compiles dynamic."""
        for record, entry, guards in self._trees.metrics(self.owners()):
            record.entries[entry] = guards
        # each compile's work read once: the newest back to it, where the compile just ended
        # (a reused compile came with its work)
        owners = self.owners()
        wanted = [k for k in owners if k not in self._worked and k[3] not in owners[k].work]
        if wanted:
            self._worked.update(wanted)
            self.note_work(instruments.newest_work(wanted))
        for record in self.records:
            for compile_id, held in record.held_before.items():
                if compile_id in record.entries:  # it made an entry: held + 1 at once
                    record.code_entries = max(record.code_entries, held + 1)
            if record.resized:
                record.dynamic_sources = dynamic_state.dynamic_sources(self.compiled(record))

    @property
    def _forbids(self) -> bool:
        return self.budget is not None and bool(self.budget.forbidden)

    def _refresh(self) -> None:
        """Fill in cache entries, graph breaks and guards (compile seconds: at :meth:`stop`,
        once the block has measured them). Nothing to do where nothing compiled, paused or
        resumed since the last refresh (a gated test's teardown, after its call's refresh)."""
        if self._settled:
            return
        self._settled = True  # before reading: a compile meanwhile (a thread's) asks again
        try:
            self._observe()
            self._read_trees()
            for record in self._records.values():
                if self._forbids:
                    record.guards = self._trees.installed(record)
            self._note_metrics()
        except BaseException:
            self._settled = False
            raise

    # -- results ------------------------------------------------------------------------------

    @property
    def records(self) -> list[FunctionRecord]:
        """Per-function records, in the order the functions were first compiled. Their entry
        counts are noted again unless nothing compiled since the last refresh noted them (a
        count only keeps its most, and only a compile or a reuse adds an entry)."""
        if self.active and not self._settled:
            self.note_entries(entries.answering_entries)
        return list(self._records.values())

    @property
    def caches(self) -> CachesResult:
        """How often torch's compile caches answered in the block (a pause left out)."""
        return self._caches.result()

    def installed_guards(self, *, framework: bool = False) -> dict[str, list[InstalledGuard]]:
        """The guards installed on each function's cache entries, by qualname.

        Only guards on the block's own values unless ``framework=True``; reads the guard
        trees, so ask only when needed.
        """
        result = {}
        for record in self._records.values():
            self._read_trees()
            record.guards = self._trees.installed(record)
            result[record.qualname] = [
                g for g in record.guards or () if framework or not g.framework
            ]
        return result

    def scoped(self, max_recompiles: int, *, function: str | None = None) -> RecompileTracker:
        """A budget for a block inside this one: ``with tracker.scoped(0): model(x)``.

        Code compiled before the block counts (warm start): a recompile inside the block
        fails at that call, whatever was compiled earlier.
        """
        where = f"scoped(max_recompiles={max_recompiles!r})"
        count = check_count(max_recompiles, where)
        if function is None:
            budget = Budget(Rule(count, f"scoped({count})"), total_counts_named=True)
        else:
            source = f"scoped({count}, function={function!r})"
            budget = Budget(per_function={function: Rule(count, source)})
        return RecompileTracker(budget, mode="fail-fast", reset=False, warm_start=True)

    def covers(self, fn: Any, args: Any, domain: Mapping[str, Any]) -> Certificate:
        """Which points of ``domain`` would compile again if ``fn`` were called there with
        ``args`` (the example call) changed by the point, decided from the guards of the cache
        entries that answer ``fn`` now: nothing is compiled or run (``docs/certificate.md``).

        In a gated block, a point not covered (or undecided) breaks the gate; otherwise the
        result is there to assert on (``result.covered``, ``.uncovered``, ``.undecided``).
        """
        from .._torch.certify import certify

        caller = sys._getframe(1)
        found = certify(fn, args, domain)
        where = f"covers() at {relative(caller.f_code.co_filename)}:{caller.f_lineno}"
        with self._lock:
            self.certificates.append((found, where))
        return found

    @staticmethod
    def warm() -> AbstractContextManager[None]:
        """A block in which any compile at all fails; see :func:`warm`."""
        return warm()

    def violations(self, elsewhere: frozenset[str] = frozenset()) -> list[Violation]:
        """The rules the block broke (``elsewhere``: functions that other processes compiled,
        which a ``function=`` budget may name)."""
        if self.active:
            self._refresh()
        found = judge(self.records, self.budget, self.graph_breaks, self.cudagraph_recordings)
        found += unknown_functions(self.records, self.budget, elsewhere)
        if self.budget is not None:
            found += [
                Violation("uncovered", len(c.uncovered) + len(c.undecided), 0, where, certificate=c)
                for c, where in [*self.certificates, *self.declared_certificates()]
                if not c.covered
            ]
        fullgraph = self.budget.fullgraph if self.budget is not None else None
        if fullgraph and self.fullgraph_break is not None:
            found.append(Violation("fullgraph", 1, 0, fullgraph, breaks=(self.fullgraph_break,)))
        elif fullgraph and self.graph_breaks and not self._stops_at_breaks():
            # torch did not stop at the break (before 2.9, a child): judged from the records.
            breaks = tuple(self.graph_breaks)
            found.append(Violation("fullgraph", len(breaks), 0, fullgraph, breaks=breaks))
        return found

    def declared_certificates(self) -> list[tuple[Certificate, str]]:
        """The domains the block's calls declared to torch (``mark_dynamic(x, d, min=,
        max=)``), certified for the function that received them, as its entries stand (again
        only where it gained an entry since)."""
        from .._torch.certify import certify_declared

        for code, captured in self._declared.items():
            held = entries.answering_entries(code)
            done = self._declared_done.get(code)
            if done is not None and done[0] == held:
                continue
            certified = self.faults.call(certify_declared, code, captured) or []
            if isinstance(certified, str):  # the call's objects are gone: the last one stands
                if done is None:
                    self.faults.add(
                        f"certificates: the domain declared to '{events.qualname(code)}' "
                        f"(mark_dynamic with min and max) was not certified: {certified}"
                    )
                    self._declared_done[code] = (held, [])
                continue
            self._declared_done[code] = (held, [
                (c, f"declared by {words}") for c, words in certified
            ])  # fmt: skip
        return [found for _, done in self._declared_done.values() for found in done]

    def _stops_at_breaks(self) -> bool:
        return self.stop_at_breaks and versions.can_error_on_graph_break()

    def check(self) -> None:
        """Raise RecompileBudgetExceeded if the block broke its budget."""
        found = self.violations()
        if found:
            raise RecompileBudgetExceeded(self.records, found, stopped=False)


@contextmanager
def warm() -> Iterator[None]:
    """A block in which any compile at all fails, before it is paid for.

    For code that was compiled (warmed up) before the block. torch's
    ``set_stance("fail_on_recompile")`` does the same, but cannot name the guards of entries
    that isolation kept (nor any guard before torch 2.10); this uses the plugin's own
    pre-compile hook, which sees them all. The hook is process-wide, like the stance, and
    removed when the block ends, however it ends.
    """
    versions.check_torch()
    refused: list[tuple[str, str]] = []  # (the refusal in one line, the whole message)

    def refuse(event: events.CompileEvent) -> None:
        code = event.function
        where = (event.label or events.qualname(code), code.co_filename, code.co_firstlineno)
        refused.append((warm_refusal(*where), warm_message(*where, event_reasons(event))))
        hooks.tell_stopped(event)
        error = CompiledWhileWarm(refused[-1][1])
        error.refusal = refused[-1][0]
        raise error

    remove = hooks.install_compile_hook(refuse, first=True)
    site = None
    try:
        yield
    except CompiledWhileWarm as exc:
        if not refused:
            raise
        site = call_frame(exc.__traceback__)
    finally:
        remove()
    if refused:  # raised afresh: torch's frames between the call and the hook are no help
        at = f"\n  stopped at {site.describe()}, before compiling" if site else ""
        error = CompiledWhileWarm(refused[-1][1] + at)
        error.site = site
        error.refusal = refused[-1][0]
        raise error from None
