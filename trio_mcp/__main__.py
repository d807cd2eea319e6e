"""``python -m trio_mcp`` and the ``trio-mcp`` console script."""

from __future__ import annotations

import sys

from ._cli import main as main

if __name__ == "__main__":
    sys.exit(main())
