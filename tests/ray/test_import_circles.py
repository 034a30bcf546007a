"""placement_ray has no import circle, counting imports inside functions (only
``if TYPE_CHECKING:`` blocks aside)."""

from __future__ import annotations

from collections.abc import Callable


def test_the_package_has_no_import_circle(import_circle: Callable[[str], str | None]) -> None:
    assert import_circle("placement_ray") is None
