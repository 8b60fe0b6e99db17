"""Fixtures for the dashboard tests: scenario stores and an AppTest bound to a source.

The scenario store is built once per session (it takes a couple of seconds); each test
gets a fresh AppTest whose environment points at the source under test, with Streamlit's
data cache cleared so no answer leaks from one source to another.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import streamlit as st
from streamlit.testing.v1 import AppTest

from errscope.collector.cli.dashboard import free_port
from errscope.dashboards import source
from tests.dashboard.scenario import AS_OF, build_empty_store, build_store

APP = Path(__file__).resolve().parents[2] / "dashboards" / "app.py"
PAGES = (
    "app_pages/overview.py",
    "app_pages/deploys.py",
    "app_pages/spikes.py",
    "app_pages/loop_health.py",
    "app_pages/tracebacks.py",
    "app_pages/secrets.py",
    "app_pages/connect.py",
)
#: Generous: other engineers run tests on the same two cores.
TIMEOUT_S = 120

AppFactory = Callable[..., AppTest]


@pytest.fixture(scope="session")
def scenario_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The scenario store (bad deploy, spike, loops, tracebacks, redactions)."""
    return build_store(tmp_path_factory.mktemp("dashboard") / "scenario.duckdb")


@pytest.fixture(scope="session")
def empty_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A migrated store without rows."""
    return build_empty_store(tmp_path_factory.mktemp("dashboard-empty") / "empty.duckdb")


@pytest.fixture
def make_app(monkeypatch: pytest.MonkeyPatch) -> AppFactory:
    """An AppTest of the dashboard reading `db` or `api` (with `token`), as of the scenario."""

    def make(
        *, db: Path | None = None, api: str | None = None, token: str | None = None
    ) -> AppTest:
        for name in (source.ENV_API, source.ENV_DB, source.ENV_TOKEN, source.ENV_REFRESH_S):
            monkeypatch.delenv(name, raising=False)
        if db is not None:
            monkeypatch.setenv(source.ENV_DB, str(db))
        if api is not None:
            monkeypatch.setenv(source.ENV_API, api)
        if token is not None:
            monkeypatch.setenv(source.ENV_TOKEN, token)
        monkeypatch.setenv(source.ENV_AS_OF, AS_OF.isoformat())
        st.cache_data.clear()
        return AppTest.from_file(str(APP), default_timeout=TIMEOUT_S)

    return make


class _Refusing(BaseHTTPRequestHandler):
    """A query API that refuses every token, answering the sidecar's error shape."""

    def do_GET(self) -> None:
        body = json.dumps(
            {
                "error": "unauthorized",
                "message": "bad token",
                "entry": None,
                "field": None,
                "hint": None,
            }
        ).encode()
        self.send_response(401)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *_: object) -> None:
        pass


@pytest.fixture
def refusing_api() -> Iterator[str]:
    """The URL of an HTTP server answering 401 to every request."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Refusing)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()
    thread.join()


@pytest.fixture
def dead_api() -> str:
    """The URL of a port nothing listens on."""
    return f"http://127.0.0.1:{free_port()}"
