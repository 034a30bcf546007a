"""A real headless Chromium (the distribution's package) driven by Playwright.

Playwright never downloads a browser here: it launches the system's ``chromium``
(``PLACEMENT_CHROMIUM`` names another binary). Without one the tests skip, saying why,
except under ``CI=true``, where a missing browser fails the run.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from placement_core import Plan
from placement_core.render import render_html

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page

REPO = Path(__file__).resolve().parents[2]
#: Where the screenshots go (gitignored ``build/``); PLACEMENT_SCREENSHOTS overrides it.
SCREENSHOTS = Path(os.environ.get("PLACEMENT_SCREENSHOTS") or REPO / "build" / "viewer")
BROWSER_NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")


def _in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() in ("true", "1", "yes")


def _unavailable(reason: str) -> None:
    if _in_ci():
        pytest.fail(f"{reason} (CI=true: the browser tests must run in CI)", pytrace=False)
    pytest.skip(reason)


def _chromium() -> str | None:
    named = os.environ.get("PLACEMENT_CHROMIUM")
    if named:
        return named if Path(named).is_file() else None
    return next((path for name in BROWSER_NAMES if (path := shutil.which(name))), None)


@pytest.fixture(scope="session")
def browser() -> Iterator[Browser]:
    """One headless Chromium for the session."""
    executable = _chromium()
    if executable is None:
        _unavailable(
            "no Chromium found (install the distribution's package: apt-get install chromium, "
            "or set PLACEMENT_CHROMIUM)"
        )
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _unavailable("the playwright package is not installed (pip install playwright)")
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=executable)
        yield launched
        launched.close()


@pytest.fixture
def errors() -> list[str]:
    """Console errors and uncaught exceptions of the page under test."""
    return []


@pytest.fixture
def page(browser: Browser, errors: list[str]) -> Iterator[Page]:
    """A fresh page that records its console errors and uncaught exceptions."""
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    opened = context.new_page()
    opened.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    opened.on("pageerror", lambda e: errors.append(str(e)))
    yield opened
    context.close()


@pytest.fixture
def show(page: Page, tmp_path: Path) -> Callable[[Plan], Page]:
    """Write a plan's HTML page to a file and open it from disk, as a user would."""

    def open_plan(plan: Plan, **options: Any) -> Page:
        path = tmp_path / "plan.html"
        path.write_text(render_html(plan, **options), encoding="utf-8")
        page.goto(path.as_uri())
        return page

    return open_plan


@pytest.fixture(scope="session")
def screenshots() -> Path:
    """The folder screenshots are written to."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    return SCREENSHOTS
