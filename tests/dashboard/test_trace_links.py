"""The dashboard links first failing calls and looked-up calls to the trace backend."""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from errscope.queries.links import TRACE_URL_ENV
from tests.dashboard.conftest import AppFactory
from tests.dashboard.scenario import TRACEBACK_ID

JAEGER = "http://jaeger.example:16686/trace/"


def _open(at: AppTest, page: str) -> AppTest:
    at.run()
    at.switch_page(page)
    at.run()
    assert not at.exception, [e.message for e in at.exception]
    return at


@pytest.mark.parametrize(
    ("setting", "linked"),
    [
        pytest.param("jaeger:http://jaeger.example:16686", True, id="jaeger"),
        pytest.param(None, False, id="no-template"),
    ],
)
def test_first_failing_calls_link_to_their_trace(
    make_app: AppFactory,
    scenario_db: Path,
    monkeypatch: pytest.MonkeyPatch,
    setting: str | None,
    linked: bool,
) -> None:
    """With ERRSCOPE_TRACE_URL set, the Deploys page's first failing calls carry a trace_url
    built from each call's trace and span id; without it there is no such column."""
    if setting is None:
        monkeypatch.delenv(TRACE_URL_ENV, raising=False)
    else:
        monkeypatch.setenv(TRACE_URL_ENV, setting)
    at = _open(make_app(db=scenario_db), "app_pages/deploys.py")
    first = at.dataframe[2].value
    assert len(first) > 0
    assert ("trace_url" in first.columns) is linked
    if linked:
        for _, row in first.iterrows():
            assert row["span_id"]
            assert row["trace_url"] == f"{JAEGER}{row['trace_id']}?uiFind={row['span_id']}"


def test_looked_up_calls_and_samples_link_to_their_trace(
    make_app: AppFactory, scenario_db: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On the Tracebacks page, a looked-up call links to its trace and span, and a
    traceback sample to its trace."""
    monkeypatch.setenv(TRACE_URL_ENV, "jaeger:http://jaeger.example:16686")
    at = _open(make_app(db=scenario_db), "app_pages/deploys.py")
    failing_id = str(at.dataframe[2].value.iloc[0]["correlation_id"])
    at.switch_page("app_pages/tracebacks.py").run()
    at.text_input(key="tb_lookup").set_value(failing_id).run()
    assert not at.exception, [e.message for e in at.exception]
    calls = at.dataframe[-1].value
    assert failing_id in set(calls["correlation_id"])
    for _, row in calls.iterrows():
        assert row["trace_url"] == f"{JAEGER}{row['trace_id']}?uiFind={row['span_id']}"
    at.text_input(key="tb_lookup").set_value(TRACEBACK_ID).run()
    samples = [str(m.value) for m in at.markdown if "[open trace](" in str(m.value)]
    assert samples
    assert all(f"{JAEGER}{0xD000:032x}?uiFind={0xD000:016x}" in s for s in samples)
