"""What a user sees without configuring logging: warnings, and the progress of long waits.

placement-ray logs through ``logging`` and never configures a handler (the package root
has a ``NullHandler``), so its log records are silent unless the application shows them.
Some events must reach a user who configured nothing: a recovery after a node loss, a
detached launch attached with workers gone, a wait for nodes that takes minutes. So:

- :func:`warn` logs the message at WARNING and also issues it as a
  :class:`PlacementRayWarning` (Python prints warnings to stderr by
  default; ``warnings.filterwarnings("ignore", category=PlacementRayWarning)`` silences
  them, ``"error"`` makes them raise).
- :class:`Progress` logs each new progress line at INFO and, once a wait has lasted
  :data:`PROGRESS_AFTER_S` seconds, prints its lines to stderr as well (a new line when it
  changes, the same line again every :data:`PROGRESS_EVERY_S` seconds).
  ``PLACEMENT_PROGRESS=0`` in the environment turns the stderr lines off.

See docs/guides/logging.md.
"""

from __future__ import annotations

import logging
import os
import sys
import time
import warnings

from .errors import PlacementRayWarning

__all__ = [
    "PROGRESS_AFTER_S",
    "PROGRESS_ENV",
    "PROGRESS_EVERY_S",
    "Progress",
    "warn",
]

#: Seconds a wait lasts before its progress lines go to stderr too.
PROGRESS_AFTER_S = 10.0
#: Seconds between two stderr lines of a wait whose progress does not change.
PROGRESS_EVERY_S = 30.0
#: ``0`` (or ``false``, ``no``, ``off``) turns the stderr progress lines off.
PROGRESS_ENV = "PLACEMENT_PROGRESS"


def warn(logger: logging.Logger, message: str, *, stacklevel: int = 2) -> None:
    """Log ``message`` at WARNING on ``logger`` and issue it as a ``PlacementRayWarning``."""
    logger.warning("%s", message)
    warnings.warn(message, PlacementRayWarning, stacklevel=stacklevel + 1)


def _progress_on() -> bool:
    return os.environ.get(PROGRESS_ENV, "1").strip().lower() not in {"0", "false", "no", "off"}


class Progress:
    """The progress lines of one wait (see the module docstring).

    Args:
        logger: Where each new line is logged at INFO.
    """

    def __init__(self, logger: logging.Logger) -> None:
        self._logger = logger
        self._start = time.monotonic()
        self._line: str | None = None
        self._printed: tuple[str, float] | None = None

    def __call__(self, line: str) -> None:
        """Report the wait's state now (call it at every poll, changed or not)."""
        if line != self._line:
            self._logger.info("%s", line)
            self._line = line
        now = time.monotonic()
        if now - self._start < PROGRESS_AFTER_S or not _progress_on():
            return
        if (
            self._printed is None
            or self._printed[0] != line
            or now - self._printed[1] >= (PROGRESS_EVERY_S)
        ):
            waited = now - self._start
            print(f"placement: {line} ({waited:.0f}s)", file=sys.stderr, flush=True)
            self._printed = (line, now)
