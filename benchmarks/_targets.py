"""One line per target, alike in every benchmark, for ``nox -s bench``'s table.

Each line holds what is measured, its baseline and their ratio side by side, the target
and the verdict; the bench session gathers the lines of every script into the table at
the top of ``benchmarks/RESULTS.md``.

Single-process planning benchmarks judge their targets on the process's CPU time and
print the wall time beside it: on an idle machine the two are the same for one busy
thread, and on a shared one the wall clock also counts every other process's turns.
"""

from __future__ import annotations

__all__ = ["PREFIX", "target_line"]

PREFIX = "TARGET |"


def target_line(what: str, measured: str, baseline: str, ratio: float, goal: str, met: bool) -> str:
    """``TARGET | what | measured | baseline | ratio | goal | met`` (or ``MISSED``).

    Args:
        what: The figure judged, e.g. ``"10k x 8 plan(), CPU"``.
        measured: Its value, with its unit.
        baseline: What it is compared with and its value (for a time budget: the budget).
        ratio: ``measured / baseline`` (or ``baseline / measured`` for a speed-up, as
            ``goal`` says).
        goal: The target on ``ratio`` or on ``measured``.
        met: Whether the target is met.
    """
    verdict = "met" if met else "MISSED"
    return f"{PREFIX} {what} | {measured} | {baseline} | {ratio:.2f}x | {goal} | {verdict}"
