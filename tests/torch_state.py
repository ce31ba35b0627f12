"""torch's global state the plugin touches, read by the plugin's own tests (restoration
checks): how many hooks, callbacks and metrics torch holds, and its stance."""

from __future__ import annotations

from pytest_recompile._torch import hooks, versions


def current_stance() -> str:
    import torch._dynamo.eval_frame as eval_frame

    return str(eval_frame._stance.stance)


def installed_hooks() -> int:
    """How many pre-compile hooks torch holds (restoration checks); before 2.9, whether the
    limit check is wrapped."""
    import torch._dynamo.convert_frame as convert_frame
    import torch._dynamo.utils as dynamo_utils

    if versions.has_hook_list():
        return len(dynamo_utils._recompile_user_contexts or ())
    return int(getattr(convert_frame, versions.LIMIT_CHECK).__module__ == hooks.__name__)


def metrics_capacity() -> int | None:
    """How many compile metrics torch keeps (restoration checks)."""
    import torch._dynamo.utils as dynamo_utils

    return dynamo_utils._compilation_metrics.maxlen


def compile_callbacks() -> int:
    """How many compile start callbacks torch holds (restoration checks)."""
    from torch._dynamo.callback import callback_handler

    return len(callback_handler.start_callbacks)
