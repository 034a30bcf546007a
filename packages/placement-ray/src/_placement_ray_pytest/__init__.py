"""placement-ray's pytest plugin (``pytest11`` entry point): the ``placement_cluster`` fixture.

A top-level module of its own so that loading it imports nothing of Ray before
``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0`` is in the environment (``placement_ray`` imports
Ray, and Ray reads the variable once, at import). An explicit value set by the user wins.

The cluster's shape, nearest first: ``@pytest.mark.placement_cluster(nodes=..., ...)`` on the
test, its class or module (``pytestmark``); the ini options ``placement_cluster_nodes``,
``placement_cluster_gpus_per_node``, ``placement_cluster_cpus_per_node``,
``placement_cluster_topology``, ``placement_cluster_accelerator``; the defaults of
``placement_ray.testing.ClusterSpec``.
One cluster runs at a time: tests asking for the same shape share it; another shape
replaces it. So that each shape starts once, tests are grouped by the shape their
``placement_cluster`` asks for (in order of first appearance; tests without the fixture
run first, before any cluster starts; the order within a group is kept). The terminal
summary lists the clusters started and how long each start took.
"""

from __future__ import annotations

import os
import time

os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from placement_ray import Cluster
    from placement_ray.testing import ClusterSpec, SimulatedCluster

__all__ = ["PlacementClusterFactory", "placement_cluster", "placement_cluster_factory"]

MARKER = "placement_cluster"
INI_OPTIONS = {
    "nodes": ("placement_cluster_nodes", int),
    "gpus_per_node": ("placement_cluster_gpus_per_node", int),
    "cpus_per_node": ("placement_cluster_cpus_per_node", int),
    "topology": ("placement_cluster_topology", str),
    "accelerator": ("placement_cluster_accelerator", str),
}


def pytest_addoption(parser: pytest.Parser) -> None:
    for field, (name, kind) in INI_OPTIONS.items():
        parser.addini(name, f"placement_cluster fixture default: {field} ({kind.__name__})")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        f"{MARKER}(nodes=2, gpus_per_node=None, cpus_per_node=4, topology=None, "
        "accelerator='nvidia', accelerator_model=None, labelled=True, separate_head=False, "
        "job='pytest', "
        "object_store_mb=80, timeout_s=60): the shape of the "
        "simulated Ray cluster the placement_cluster fixture gives this test",
    )


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    shapes: list[dict[str, Any]] = []
    keys: list[int] = []
    for item in items:
        # Direct or through a fixture of any scope: ``fixturenames`` is the closure.
        if "placement_cluster_factory" not in getattr(item, "fixturenames", ()):
            keys.append(-1)  # needs no cluster: runs first, before any cluster starts
            continue
        marker = item.get_closest_marker(MARKER)
        fields = dict(marker.kwargs) if marker is not None else {}
        if fields not in shapes:
            shapes.append(fields)
        keys.append(shapes.index(fields))
    order = sorted(range(len(items)), key=keys.__getitem__)  # stable within one shape
    items[:] = [items[i] for i in order]


class PlacementClusterFactory:
    """Session-wide keeper of the one running ``SimulatedCluster``.

    Call it with ``ClusterSpec`` fields to get placement-ray's ``Cluster`` of a cluster
    of that shape (started on first use, reused while the shape stays the same).

    Attributes:
        current: The running ``SimulatedCluster``, or None.
    """

    def __init__(self, config: pytest.Config) -> None:
        self._config = config
        self.current: SimulatedCluster | None = None
        # Shapes that did not come up, with the first line of why: the first test of a
        # shape gets the error, the rest of that shape are skipped (no second long wait).
        self._failed: list[tuple[ClusterSpec, str]] = []
        self.starts: list[tuple[ClusterSpec, float]] = []
        """Every cluster started, with the seconds its start took, in order."""

    def defaults(self) -> dict[str, Any]:
        """The ini options that are set, as ``ClusterSpec`` fields."""
        fields: dict[str, Any] = {}
        for field, (name, kind) in INI_OPTIONS.items():
            raw = self._config.getini(name)
            if not raw:
                continue
            try:
                fields[field] = kind(str(raw).strip())
            except ValueError:
                raise pytest.UsageError(
                    f"ini option {name}: expected {kind.__name__}, got {raw!r}"
                ) from None
        return fields

    def spec(self, **fields: Any) -> ClusterSpec:
        """A ``ClusterSpec`` from the ini defaults overridden by ``fields``."""
        from placement_ray.testing import ClusterSpec

        return ClusterSpec(**{**self.defaults(), **fields})

    def simulated(self, **fields: Any) -> SimulatedCluster:
        """The running ``SimulatedCluster`` of this shape (started, or replacing another)."""
        from placement_ray import ClusterError
        from placement_ray.testing import SimulatedCluster

        wanted = self.spec(**fields)
        earlier = next((why for spec, why in self._failed if spec == wanted), None)
        if earlier is not None:
            pytest.skip(f"this test's simulated cluster did not come up earlier: {earlier}")
        if self.current is not None and self.current.spec != wanted:
            self.close()
        if self.current is None:
            began = time.monotonic()
            try:
                self.current = SimulatedCluster(wanted)
            except ClusterError as error:
                self._failed.append((wanted, str(error).splitlines()[0][:300]))
                raise
            self.starts.append((wanted, time.monotonic() - began))
        self.current.connect()
        return self.current

    def __call__(self, **fields: Any) -> Cluster:
        return self.simulated(**fields).view()

    def close(self) -> None:
        """Shut the running cluster down."""
        if self.current is not None:
            current, self.current = self.current, None
            current.shutdown()


def pytest_terminal_summary(terminalreporter: Any) -> None:
    factory = getattr(terminalreporter.config, "_placement_cluster_factory", None)
    if factory is None or not factory.starts:
        return
    total = sum(seconds for _, seconds in factory.starts)
    terminalreporter.write_sep(
        "-", f"simulated clusters: {len(factory.starts)} started, {total:.0f}s"
    )
    for spec, seconds in factory.starts:
        terminalreporter.write_line(f"{seconds:6.1f}s  {_shape(spec)}")


def _shape(spec: ClusterSpec) -> str:
    from dataclasses import fields

    from placement_ray.testing import ClusterSpec

    default = ClusterSpec()
    changed = [
        f"{f.name}={_brief(getattr(spec, f.name))}"
        for f in fields(spec)
        if getattr(spec, f.name) != getattr(default, f.name)
    ]
    return ", ".join(changed) or "the default shape"


def _brief(value: Any) -> str:
    """A field's value in a few words: a fake machine given as an object by its type."""
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_brief(v) for v in value) + "]"
    text = repr(value)
    return text if len(text) <= 40 else f"<{type(value).__name__}>"


@pytest.fixture(scope="session")
def placement_cluster_factory(
    pytestconfig: pytest.Config,
) -> Iterator[PlacementClusterFactory]:
    """``factory(nodes=..., gpus_per_node=..., ...)``: placement-ray's ``Cluster`` of a
    simulated cluster of that shape, for fixtures of any scope. Shut down at session end."""
    factory = PlacementClusterFactory(pytestconfig)
    pytestconfig._placement_cluster_factory = factory  # type: ignore[attr-defined]
    try:
        yield factory
    finally:
        factory.close()


@pytest.fixture
def placement_cluster(
    request: pytest.FixtureRequest, placement_cluster_factory: PlacementClusterFactory
) -> Iterator[Cluster]:
    """placement-ray's ``Cluster`` of the session's simulated cluster (shape from the
    ``placement_cluster`` marker or ini options).

    After the test, the actors and placement groups it created are removed and the fixture
    waits until every node's free CPUs and GPUs are back to what they were before it.
    """
    marker = request.node.get_closest_marker(MARKER)
    if marker is not None and marker.args:
        raise pytest.UsageError(
            f"@pytest.mark.{MARKER} takes keyword arguments only, got {marker.args!r}"
        )
    fields = dict(marker.kwargs) if marker is not None else {}
    simulated = placement_cluster_factory.simulated(**fields)
    view = simulated.view()
    before = simulated.baseline()
    yield view
    simulated.cleanup(before)
