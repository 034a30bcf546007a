"""``python -m placement_native snapshot [--json]`` / ``python -m placement_native topo``."""

from __future__ import annotations

import sys

from ._cli import main

if __name__ == "__main__":
    sys.exit(main())
