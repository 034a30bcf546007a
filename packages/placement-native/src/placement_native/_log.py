"""Loggers of placement-native, with the package root's ``NullHandler``.

Imported only by modules that log, so that ``import placement_native`` does not pay for
``import logging``; the handler is attached the first time any of them is loaded.
"""

from __future__ import annotations

import logging

__all__ = ["get_logger"]

logging.getLogger("placement_native").addHandler(logging.NullHandler())


def get_logger(name: str) -> logging.Logger:
    """``logging.getLogger(name)``, with the package's NullHandler in place."""
    return logging.getLogger(name)
