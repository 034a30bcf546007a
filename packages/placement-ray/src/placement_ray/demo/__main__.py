"""``python -m placement_ray.demo``: see :mod:`placement_ray.demo.run`.

Ray reads ``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER`` once, when it is imported, and importing
``placement_ray`` imports Ray; without the variable set to 0 Ray rewrites 127.0.0.1 to the
machine's public address and the loopback-only cluster hangs. So when it is not set, the
demo starts itself again with it set.
"""

from __future__ import annotations

import os
import sys

if os.environ.get("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER") != "0":
    os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
    os.execv(sys.executable, [sys.executable, "-m", "placement_ray.demo", *sys.argv[1:]])

from placement_core import PlacementError

from .run import main

try:
    sys.exit(main())
except PlacementError as error:  # a cluster that did not come up, ...: one line
    print(f"error: {error}", file=sys.stderr)
    sys.exit(1)
except KeyboardInterrupt:
    # Ctrl-C: the demo's own cleanup has run (run.main's finally); one line, no traceback.
    print("\ninterrupted: the demo's simulated cluster was shut down", file=sys.stderr)
    sys.exit(130)
