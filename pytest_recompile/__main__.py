"""``python -m pytest_recompile``: the ``pytest-recompile`` command (``cli.py``)."""

import sys

from .cli import main

if __name__ == "__main__":
    sys.exit(main())
