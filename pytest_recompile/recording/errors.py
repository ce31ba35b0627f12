"""The failures the gate raises: data (the records, the broken rules, where the call was
made), worded when shown (:mod:`..model.messages`)."""

from __future__ import annotations

from typing import Any

from ..model.guards import Reason
from ..model.judge import Violation
from ..model.messages import failure_message, fix_lines, site_lines, violation_result
from ..model.names import PREFIX
from ..model.records import FunctionRecord
from ..model.text import location
from .sites import Site, call_frame


class RecompileGateError(AssertionError):
    """Base class of the failures the gate raises."""

    site: Site | None = None  # where the call was made, once known
    from_child = False  # raised in a child process, re-raised here by its launcher

    def __reduce__(self) -> tuple[Any, ...]:
        # A child process's error crosses to its parent pickled (multiprocessing): as its
        # message, which is all the parent can show.
        return (_rebuilt, (type(self), str(self)))


def _rebuilt(cls: type[RecompileGateError], message: str) -> RecompileGateError:
    error = cls.__new__(cls)
    AssertionError.__init__(error, message)
    error.from_child = True
    if isinstance(error, RecompileBudgetExceeded):
        error.records, error.violations, error.stopped = [], [], True
        error._text = message
    return error


class CompiledWhileWarm(RecompileGateError):
    """torch was about to compile inside a :func:`~.tracker.warm` block."""

    refusal: str | None = None  # the refused compile in one line, without the prefix


class RecompileBudgetExceeded(RecompileGateError):
    """A test broke its rules: a recompile over budget or of an unexpected guard kind, a
    forbidden guard, too many graph breaks, or a fall-back to eager at recompile_limit.

    It carries the records and the broken rules; its message is worded when first shown.
    """

    _text: str | None = None
    at: Site | None = None  # where the call was made, once the tracker's block ended

    def __init__(
        self, records: list[FunctionRecord], violations: list[Violation], *, stopped: bool
    ) -> None:
        self.records = records
        self.violations = violations
        self.stopped = stopped
        super().__init__()

    def __str__(self) -> str:
        if self._text is None:
            self._text = self._worded(self.at.describe() if self.at is not None else None)
        return self._text

    def locate(self) -> None:
        """The block that raised it ended: its message says where the call was made."""
        self.at, self._text = call_frame(self.__traceback__), None

    def message(self, root: str | None = None, site: Site | None = None) -> str:
        """The message with where the call was made (``site``, when the caller located it
        already; ``root``: what paths are relative to)."""
        if self.from_child:
            return str(self)
        site = site or call_frame(self.__traceback__, root)
        return self._worded(site.describe(root) if site is not None else None)

    def _worded(self, site: str | None) -> str:
        return failure_message(
            [r.to_dict() for r in self.records],
            [violation_result(v) for v in self.violations],
            stopped=self.stopped,
            site=site,
        )


def stopped_message(
    stopped: RecompileGateError, root: str | None = None, site: Site | None = None
) -> str:
    """The gate's message for a call it stopped, with where the call was made (``site``,
    when known already; a warm block's message says it itself)."""
    if not isinstance(stopped, RecompileBudgetExceeded):
        return str(stopped)
    return stopped.message(root, site)


WARM_REFUSED = "would have compiled inside a warm block"


def warm_refusal(name: str, filename: str, lineno: int) -> str:
    """The one wording of a compile refused inside a warm block (the test's ``warm``
    violation), without the ``pytest-recompile:`` prefix."""
    return f"'{name}' ({location(filename, lineno)}) {WARM_REFUSED}"


def warm_message(name: str, filename: str, lineno: int, reasons: tuple[Reason, ...]) -> str:
    """A compile refused inside a warm block: the function, and each guard that failed with
    its kind and fix (none: a first compile)."""
    lines = [f"{PREFIX} {warm_refusal(name, filename, lineno)}"]
    for reason in reasons:
        lines.append(f"    {reason.entry or '?'} {reason.label}: {reason.text}")
        lines += site_lines(reason.to_dict())
    if not reasons:
        lines.append("    a first compile: warm the function up before the warm block")
    return "\n".join(lines + fix_lines([(r.label, r.hint) for r in reasons]))
