"""A real sidecar, real OTel exporters, a real `errscope dashboard`, and headless Chromium.

The Deploys page must show the broken deploy and its tool.  Its screenshot goes to the
test's temporary folder; with ERRSCOPE_UPDATE_SCREENSHOTS=1 it replaces the README's
docs/screenshots/deploys.png instead (a plain test run leaves the checkout clean).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from errscope.collector.cli.dashboard import free_port
from tests.dashboard.otel_traffic import BAD_TOOL, SERVICE, send_broken_deploy
from tests.sidecar.harness import sidecar

pytestmark = [pytest.mark.browser, pytest.mark.slow]

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--headless",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
SCREENSHOT = Path(__file__).resolve().parents[2] / "docs" / "screenshots" / "deploys.png"
#: Generous: the first Streamlit run imports pandas, altair and scipy on a shared 2-core box.
START_TIMEOUT_S = 120


def _dashboard_argv(*args: str) -> list[str]:
    """`errscope dashboard ...`, run by this interpreter."""
    return [sys.executable, "-m", "errscope.collector.cli", "dashboard", *args]


@pytest.fixture
def dashboard_on(tmp_path: Path) -> Iterator[tuple[str, str]]:
    """A sidecar fed with a broken deploy and a dashboard reading its query API: (url, api)."""
    with sidecar(tmp_path / "store.duckdb") as served:
        send_broken_deploy(served.http, datetime.now(UTC))
        port = free_port()
        log = (tmp_path / "dashboard.log").open("w")
        process = subprocess.Popen(
            _dashboard_argv("--api", f"http://{served.api}", "--port", str(port)),
            stdout=log,
            stderr=subprocess.STDOUT,
            env={**os.environ, "ERRSCOPE_TOKEN": ""},
        )
        url = f"http://127.0.0.1:{port}"
        try:
            _wait_healthy(url, process, tmp_path / "dashboard.log")
            yield url, served.api
        finally:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(10)
            log.close()


def _wait_healthy(url: str, process: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            pytest.fail(f"errscope dashboard exited {process.returncode}: {log.read_text()}")
        try:
            health = f"{url}/_stcore/health"  # http on loopback, built above
            with urllib.request.urlopen(health, timeout=5) as response:
                if response.status == 200:
                    return
        except OSError:
            time.sleep(0.5)
    pytest.fail(f"errscope dashboard did not serve within {START_TIMEOUT_S} s: {log.read_text()}")


def test_deploys_page_shows_the_broken_deploy(
    dashboard_on: tuple[str, str], tmp_path: Path
) -> None:
    """Chromium opens the Deploys page and sees the flagged deploy and its tool."""
    update = os.environ.get("ERRSCOPE_UPDATE_SCREENSHOTS") == "1"
    screenshot = SCREENSHOT if update else tmp_path / SCREENSHOT.name
    from playwright.sync_api import expect, sync_playwright

    if not CHROMIUM.exists():
        pytest.fail("Debian's chromium is missing: run `make services` (or .ci/run)")
    url, _ = dashboard_on
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1440, "height": 1100})
            page.goto(f"{url}/deploys", timeout=START_TIMEOUT_S * 1000)
            heading = page.get_by_text(f"{SERVICE} 2.0 regressed")
            expect(heading).to_be_visible(timeout=START_TIMEOUT_S * 1000)
            expect(page.get_by_text(f"Tool {BAD_TOOL}", exact=False).first).to_be_visible()
            page.wait_for_selector("canvas, svg.marks", timeout=60_000)  # the Vega chart
            page.wait_for_timeout(1500)  # let the charts finish drawing
            screenshot.parent.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(screenshot), full_page=True)
        finally:
            browser.close()
    assert screenshot.stat().st_size > 10_000
