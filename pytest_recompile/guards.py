"""Guard-failure reasons: parse the strings torch produces into plain values (pure)."""

from __future__ import annotations

import re
from dataclasses import dataclass

# "0/3: " names the cache entry (frame id / compile attempt) whose guards rejected the call.
_ENTRY = re.compile(r"^\s*(?P<entry>\d+/\d+):\s*")
# torch aligns the guard text, then comments it with the user's source line and location:
#   G['step'] == 0                         # return x + step  # tests/test_a.py:5 in f
_COMMENT = re.compile(r"\s{2,}#\s.*?(?=;\s|$)")
_STACK = "\nUser stack trace:"


@dataclass(frozen=True)
class Reason:
    """Why one cache entry rejected a call."""

    text: str  # the failing guard as torch words it, without the source comment
    entry: str | None  # the rejecting cache entry, "0/2"; None when torch did not say
    raw: str  # the full string torch produced

    def to_dict(self) -> dict[str, str | None]:
        return {"text": self.text, "entry": self.entry, "raw": self.raw}


def parse_reason(raw: str) -> Reason:
    """Split torch's reason string; never raises, whatever the text."""
    first = raw.split(_STACK, 1)[0]
    entry = None
    match = _ENTRY.match(first)
    if match:
        entry = match.group("entry")
        first = first[match.end() :]
    lines = [_COMMENT.sub("", line).strip() for line in first.splitlines()]
    text = "; ".join(line for line in lines if line)
    return Reason(text=text or raw.strip() or "(torch gave no reason)", entry=entry, raw=raw)
