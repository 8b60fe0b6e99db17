"""The dashboard through a real sidecar's query API: same pages, same numbers as the file."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.dashboard.conftest import PAGES, AppFactory
from tests.dashboard.scenario import BAD_TOOL
from tests.sidecar.harness import Served, sidecar

pytestmark = pytest.mark.slow

TOKEN = "dashboard-test-token-0123456789"


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory, scenario_db: Path) -> Iterator[Served]:
    """`errscope serve --token` holding a copy of the scenario store."""
    store = tmp_path_factory.mktemp("dashboard-api") / "store.duckdb"
    shutil.copy(scenario_db, store)
    with sidecar(store, "--token", TOKEN) as running:
        yield running


def test_every_page_renders_through_the_api(make_app: AppFactory, served: Served) -> None:
    """Each page renders through the query API without an exception or a banner."""
    at = make_app(api=f"http://{served.api}", token=TOKEN)
    at.run()
    for page in PAGES:
        at.switch_page(page).run()
        assert not at.exception, (page, [e.message for e in at.exception])
        assert not any("Cannot" in str(e.value) for e in at.error), page


def test_api_and_file_show_the_same_numbers(
    make_app: AppFactory, served: Served, scenario_db: Path
) -> None:
    """The Overview counts the same calls through the API as from the file."""

    def calls(at_kwargs: dict[str, object]) -> str:
        at = make_app(**at_kwargs)
        at.run()
        return next(str(m.value) for m in at.metric if m.label == "Tool calls")

    assert calls({"api": f"http://{served.api}", "token": TOKEN}) == calls({"db": scenario_db})


def test_flagged_deploy_through_the_api(make_app: AppFactory, served: Served) -> None:
    """The Deploys page flags the bad deploy when reading the sidecar."""
    at = make_app(api=f"http://{served.api}", token=TOKEN)
    at.run()
    at.switch_page("app_pages/deploys.py").run()
    headers = [str(h.value) for h in at.header]
    assert "billing-agent 2.0 regressed" in headers
    assert any(BAD_TOOL in str(s.value) for s in at.subheader)


def test_wrong_token_is_a_banner(make_app: AppFactory, served: Served) -> None:
    """The real sidecar's 401 becomes the refused-token banner with its address."""
    at = make_app(api=f"http://{served.api}", token="not-the-token-at-all")
    at.run()
    assert not at.exception
    assert "refused the token" in at.error[0].value
    assert served.api in at.error[0].value
