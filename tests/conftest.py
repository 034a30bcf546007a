"""Settings shared by every test folder; imports no placement package (core's tests run alone)."""

from __future__ import annotations

import os

try:
    from hypothesis import settings
except ImportError:  # a session without hypothesis (the viewer's) has no property tests
    pass
else:
    # CI replays the same examples every run, so a red CI always names a real regression;
    # local runs keep exploring new examples.
    settings.register_profile("ci", derandomize=True, print_blob=True)
    if os.environ.get("CI", "").lower() == "true":
        settings.load_profile("ci")
