"""``python -m placement_ray jobs [--address A] [--json]`` (see ``_jobs_cli``)."""

from __future__ import annotations

import sys

from ._jobs_cli import main

if __name__ == "__main__":
    sys.exit(main())
