"""``pytest-recompile`` (and ``python -m pytest_recompile``): the commands beside the plugin.

``pytest-recompile compare BASE.json HEAD.json`` compares two JSON reports
(``--recompile-report=PATH``); see docs/compare.md and :mod:`.reports.compare`.
"""

from __future__ import annotations

import sys

from .reports.compare import main

if __name__ == "__main__":
    sys.exit(main())
