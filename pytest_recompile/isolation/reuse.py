"""Whether an earlier test's first compile may answer a later test's call: the reasons an
entry is never offered, and the checks an offer must pass when a call finds it."""

from __future__ import annotations

from typing import Any

from .._torch import dynamic_state, entries, fingerprints, footprint
from .owners import Compiled

RECOMPILED = "a recompile's entry (a first call elsewhere compiles another)"
NO_REUSE = "this torch cannot reuse an earlier test's compile (see the degraded: line)"


def why_not_offered(made: Compiled | None, entry: entries.KeptEntry, reuse: bool) -> str | None:
    """None if a later test may be offered the entry ``made`` made; else why not."""
    if not reuse:
        return NO_REUSE
    if made is None or not made.first:
        return RECOMPILED
    if made.after is None:
        return "its compile's automatic-dynamic state is unknown"
    if made.footprint is None:
        return "what its compile recorded is unknown (it ran across a reset, or is running)"
    if made.event.marks is None:
        return "its inputs could not be read"
    if made.event.filtered:
        return "compiled under a guard_filter_fn"
    return None


def why_not_taken(
    made: Compiled, entry: entries.KeptEntry, f_locals: Any, callback: Any
) -> str | None:
    """None if a fresh compile of this call would make the very entry ``made`` made (same
    config, automatic-dynamic state, closure, input marks, and every object its guards match
    by identity alive; for a function that breaks its graph, a compile that splits the graph
    rather than raising at the break); else why not."""
    code = made.event.code
    breaks = bool(made.footprint and made.footprint.breaks) or entries.breaks_graph(entry)
    if breaks and footprint.errors_at_breaks(callback):
        return "fullgraph or error_on_graph_break (a compile would raise at its graph break)"
    if not fingerprints.same_config(
        made.config, fingerprints.config_fingerprint(made.event.inductor)
    ):
        return "another config (torch._dynamo / inductor config patched)"
    if dynamic_state.state_of(code) != made.before:
        return "other automatic-dynamic state (shapes seen earlier differ)"
    if dynamic_state.other_closure(code, f_locals, made.before, made.after or {}):
        return "automatic-dynamic state of another closure"
    if fingerprints.input_marks(f_locals) != made.event.marks:
        return "other marks or module hooks on the inputs (mark_dynamic, forward hooks, ...)"
    if not entries.entry_alive(entry):
        return "an object its guards match by identity died"
    return None
