"""The ``fake_nvml`` pytest fixture, registered through placement-native's ``pytest11``
entry point: installing the package makes it available to every test suite.

Two ways to use it::

    def test_on_a_dgx(fake_nvml):
        fake_nvml("dgx-h100")                   # this test now runs on that machine
        assert len(placement_native.snapshot().accelerators) == 8

    @pytest.mark.parametrize("fake_nvml", ["dgx-h100", "mig"], indirect=True)
    def test_on_each(fake_nvml):                # the parameter's machine is already active
        assert fake_nvml.active.name in ("dgx-h100", "mig")

Every machine a test selected is undone when the test ends.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from placement_native.testing import FakeNvml, Topology

__all__ = ["FakeNvmlFixture", "fake_nvml"]


class FakeNvmlFixture:
    """What the ``fake_nvml`` fixture gives: call it with a machine to select it.

    Attributes:
        active: The machine selected last (``FakeNvml``), or None before the first call.
    """

    def __init__(self, monkeypatch: pytest.MonkeyPatch, directory: Path) -> None:
        self._monkeypatch = monkeypatch
        self._directory = directory
        self._count = 0
        self.active: FakeNvml | None = None

    def __call__(
        self,
        machine: str | os.PathLike[str] | Topology,
        *,
        sysfs: str | os.PathLike[str] | None = None,
    ) -> FakeNvml:
        """Make this test run on ``machine`` (a name, a JSON file or a ``Topology``).

        A later call replaces the machine; all are undone after the test.

        Args:
            machine: What ``placement_native.testing.fake_nvml`` accepts.
            sysfs: An existing sysfs tree to use instead of a fresh one.
        """
        from placement_native.testing import fake_nvml

        self._count += 1
        fake = fake_nvml(machine, directory=self._directory / str(self._count), sysfs=sysfs)
        # Through monkeypatch, so a test's own monkeypatch.setenv of the same variables
        # unwinds in the right order.
        for name, value in fake.env.items():
            self._monkeypatch.setenv(name, value)
        self.active = fake
        return fake


@pytest.fixture
def fake_nvml(
    request: pytest.FixtureRequest,
    tmp_path_factory: pytest.TempPathFactory,
    monkeypatch: pytest.MonkeyPatch,
) -> FakeNvmlFixture:
    """Select a fake NVML machine for this test: ``fake_nvml("dgx-h100")``.

    Parametrise it indirectly (``@pytest.mark.parametrize("fake_nvml", [...],
    indirect=True)``) to run the test once per machine, selected before the test starts.
    """
    kit = FakeNvmlFixture(monkeypatch, tmp_path_factory.mktemp("fake_nvml"))
    machine = getattr(request, "param", None)
    if machine is not None:
        kit(machine)
    return kit
