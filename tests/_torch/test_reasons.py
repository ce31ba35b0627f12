"""Failing guards read from torch's reason text, whatever the release's wording (pure)."""

from __future__ import annotations

import pytest

from pytest_recompile._torch.reasons import BACKEND_CHANGED, parse_reason

RAW = (
    "0/2: G['step'] == 2                                  # return x + step  "
    '# t.py:5 in f\nUser stack trace:\n  File "t.py", line 5, in f\n    return x + step'
)


@pytest.mark.parametrize(
    ("raw", "text", "entry"),
    [
        (RAW, "G['step'] == 2", "0/2"),
        ("0/0: tensor 'x' size mismatch at index 0. expected 4, actual 8", None, "0/0"),
        ("tensor 'L['x']' dtype mismatch. expected Float, actual Double", None, None),
        ("1/3: GLOBAL_STATE changed: grad_mode", "GLOBAL_STATE changed: grad_mode", "1/3"),
        ("", "(torch gave no reason)", None),
    ],
)
def test_parse_reason(raw: str, text: str | None, entry: str | None) -> None:
    reason = parse_reason(raw)
    expected = text if text is not None else raw.split(": ", 1)[-1] if entry else raw
    assert (reason.text, reason.entry, reason.raw) == (expected, entry, raw)


@pytest.mark.parametrize(
    ("raw", "kind", "text"),
    [
        # 2.9-2.12: the globals of exec'd code
        ("1/2: G['___unnamed_scope_140687992602752_c90']['step'] == 0", "EQUALS_MATCH", None),
        # 2.9: every guard passed, the backend differs, and torch says nothing else
        ("0/0:", "BACKEND_MATCH", BACKEND_CHANGED),
    ],
)
def test_release_wordings_are_normalised(raw: str, kind: str, text: str | None) -> None:
    reason = parse_reason(raw)
    assert reason.kind == kind
    assert reason.text == (text or "G['step'] == 0")
