"""Bad input, the one base class: a file or a value the user gave that the plugin cannot use.

Every such error is one line that says which input and why, and what is accepted: a report
that does not fit its schema (``ReportError``), reports that are not shards of one run
(``CombineError``), an unusable baseline or output path (``BaselineError``,
``OutputFileError``). The command line catches :class:`InputError` once and exits 2
(``cli.BAD_INPUT``), as coverage.py's command line catches its ``CoverageException``.
"""

from __future__ import annotations


class InputError(ValueError):
    """A file or value the user gave that cannot be used: one line saying which and why."""
