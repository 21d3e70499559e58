"""A real browser for the tests of pages minibroker writes or serves: headless Chromium
(Debian's `chromium`, installed by tools/system_deps.py) driven by Playwright through its
executable path, since Playwright's own browser download is not used.

Screenshots go under `test-artefacts/screenshots/` at the top of the checkout (or
`$MINIBROKER_ARTEFACTS/screenshots`).
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]


def chromium_path() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        if found := shutil.which(name):
            return found
    return None


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """A headless Chromium for a module's tests; skips with the reason when there is none.

    Per module, not per session: Playwright's synchronous API keeps an event loop running
    in the main thread while it is open, and the tests after it that run asyncio need it
    gone."""
    sync_api = pytest.importorskip(
        "playwright.sync_api", reason="the browser tests need playwright (the test extra)"
    )
    executable = chromium_path()
    if executable is None:
        pytest.skip("no Chromium: apt-get install chromium (tools/system_deps.py does, as root)")
    with sync_api.sync_playwright() as playwright:
        launched = playwright.chromium.launch(
            executable_path=executable, args=["--no-sandbox", "--disable-dev-shm-usage"]
        )
        try:
            yield launched
        finally:
            launched.close()


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    """A fresh page (its own context), with a viewport large enough for the pages shown."""
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    try:
        yield context.new_page()
    finally:
        context.close()


@pytest.fixture
def screenshot(page: Any, request: pytest.FixtureRequest) -> Any:
    """`screenshot("name")` saves the page under the run's artefacts; returns the path."""
    folder = Path(os.environ.get("MINIBROKER_ARTEFACTS", ROOT / "test-artefacts")) / "screenshots"
    folder.mkdir(parents=True, exist_ok=True)
    test = re.sub(r"[^A-Za-z0-9_.-]+", "_", request.node.name)

    def take(name: str) -> Path:
        path = folder / f"{test}-{name}.png"
        page.screenshot(path=str(path), full_page=True)
        return path

    return take
