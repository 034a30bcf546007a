"""The compat tests run verl's and OpenRLHF's own code, installed without dependencies.

``stubs/`` (stand-ins for torch, vLLM, DeepSpeed, ...) and this folder (the workers the
tests start) go on ``sys.path`` here and on ``PYTHONPATH`` for the Ray processes the
simulated clusters start; the stubs only answer imports made by verl or OpenRLHF.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

HERE = Path(__file__).parent
STUBS = HERE / "stubs"

for path in (str(HERE), str(STUBS)):
    if path not in sys.path:
        sys.path.insert(0, path)
os.environ["PYTHONPATH"] = os.pathsep.join(
    [str(STUBS), str(HERE), *filter(None, [os.environ.get("PYTHONPATH")])]
)

# verl picks its platform by probing torch; the stubbed torch has no devices.
os.environ.setdefault("VERL_PLATFORM", "nvidia")

import compat_stubs  # noqa: E402

compat_stubs.install()
