"""What a user sees without configuring logging: warnings, and long waits' progress lines
on stderr (no cluster needed: Ray's node table is scripted)."""

from __future__ import annotations

import logging
import warnings
from typing import Any

import pytest

import placement_ray._cluster as cluster_module
import placement_ray._notice as notice
from placement_ray import NodesNotReadyError, PlacementRayWarning

logger = logging.getLogger("placement_ray.test")


def test_a_warning_is_issued_and_logged(caplog: pytest.LogCaptureFixture) -> None:
    with pytest.warns(PlacementRayWarning, match="node loss: recovered"):
        notice.warn(logger, "node loss: recovered in 1.00s")
    assert "node loss: recovered in 1.00s" in caplog.text


def test_a_warning_can_be_silenced_the_usual_way() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        warnings.filterwarnings("ignore", category=PlacementRayWarning)
        notice.warn(logger, "quiet")


def test_library_logging_stays_unconfigured() -> None:
    root = logging.getLogger("placement_ray")
    assert all(isinstance(h, logging.NullHandler) for h in root.handlers)


def _scripted_nodes(monkeypatch: pytest.MonkeyPatch, counts: list[int]) -> None:
    table = iter(counts)

    def alive() -> list[dict[str, Any]]:
        nodes = range(next(table, counts[-1]))
        return [{"NodeID": f"n{i}", "Labels": {}, "Resources": {"CPU": 4.0}} for i in nodes]

    monkeypatch.setattr(cluster_module, "alive_nodes", alive)


def test_a_long_wait_for_nodes_prints_progress_to_stderr(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(notice, "PROGRESS_AFTER_S", 0.0)
    monkeypatch.delenv(notice.PROGRESS_ENV, raising=False)
    _scripted_nodes(monkeypatch, [1, 1, 2, 3])
    cluster_module.wait_for_nodes(3, timeout_s=5, poll_s=0.01)
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith("placement: 1/3 nodes up, waiting for 2 more (")
    assert any(line.startswith("placement: 2/3 nodes up") for line in err)
    assert err[-1].startswith("placement: 3/3 nodes up")


def test_a_short_wait_prints_nothing(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv(notice.PROGRESS_ENV, raising=False)
    _scripted_nodes(monkeypatch, [1, 3])
    cluster_module.wait_for_nodes(3, timeout_s=5, poll_s=0.01)
    assert capsys.readouterr().err == ""


def test_progress_lines_are_switched_off_by_the_environment(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(notice, "PROGRESS_AFTER_S", 0.0)
    monkeypatch.setenv(notice.PROGRESS_ENV, "0")
    _scripted_nodes(monkeypatch, [1])
    with pytest.raises(NodesNotReadyError):
        cluster_module.wait_for_nodes(3, timeout_s=0.1, poll_s=0.01)
    assert capsys.readouterr().err == ""


def test_an_unchanged_wait_repeats_its_line_only_now_and_then(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(notice, "PROGRESS_AFTER_S", 0.0)
    monkeypatch.delenv(notice.PROGRESS_ENV, raising=False)
    progress = notice.Progress(logger)
    for _ in range(100):
        progress("1/3 nodes up")
    assert len(capsys.readouterr().err.splitlines()) == 1
