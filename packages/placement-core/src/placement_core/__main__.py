"""``python -m placement_core``: the ``placement`` command."""

from __future__ import annotations

from ._cli import main

if __name__ == "__main__":
    raise SystemExit(main())
