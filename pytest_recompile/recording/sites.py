"""Where a call was made: the innermost frame of the project's own code in a traceback."""

from __future__ import annotations

import os
from types import TracebackType
from typing import NamedTuple

from ..model.results import SiteResult
from ..model.text import location


class Site(NamedTuple):
    """Where a call was made: file (absolute), line, function."""

    file: str
    line: int
    function: str

    def describe(self, root: str | None = None) -> str:
        return f"{location(self.file, self.line, root)} in {self.function}"

    def to_dict(self) -> SiteResult:
        return {"file": self.file, "line": self.line, "function": self.function}


def call_frame(tb: TracebackType | None, root: str | None = None) -> Site | None:
    """Where the call went over: the innermost frame of the project's own code (under
    ``root``, outside installed packages), else the innermost frame outside torch and this
    plugin (library code that called the model, a thread's ``run``)."""
    own = other = None
    while tb is not None:
        filename = tb.tb_frame.f_code.co_filename
        if not any(part in filename for part in _INTERNAL):
            other = Site(os.path.abspath(filename), tb.tb_lineno, tb.tb_frame.f_code.co_name)
            if _is_own(filename, root):
                own = other
        tb = tb.tb_next
    return own or other


def _is_own(filename: str, root: str | None) -> bool:
    path = os.path.abspath(filename)
    if any(part in path for part in _INSTALLED):
        return False
    return root is None or path.startswith(os.path.join(os.path.abspath(root), ""))


_INTERNAL = (
    os.sep + os.path.join("torch", ""),
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep,  # the package
)


# Installed packages and the standard library: never the project's own code.
_INSTALLED = (
    os.sep + "site-packages" + os.sep,
    os.sep + "dist-packages" + os.sep,
    os.path.dirname(os.__file__) + os.sep,
)
