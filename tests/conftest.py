"""Settings shared by every test folder; imports no placement package (core's tests run alone)."""

from __future__ import annotations

import os
from collections import Counter
from typing import Any

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


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: Any) -> None:
    """When skips are not listed one by one (``-r`` without ``s``, as tests_purepython
    runs), say once per reason how many tests skipped and why."""
    if "s" in config.option.reportchars.replace("A", "s").replace("a", "s"):
        return
    reasons: Counter[str] = Counter()
    for report in terminalreporter.stats.get("skipped", []):
        longrepr = report.longrepr
        reason = longrepr[2] if isinstance(longrepr, tuple) else str(longrepr)
        reasons[reason.removeprefix("Skipped: ")] += 1
    for reason, count in reasons.most_common():
        terminalreporter.write_line(f"{count} skipped: {reason}")
