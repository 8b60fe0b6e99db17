"""AppTest drives every dashboard page against the scenario store and the failure states."""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from tests.dashboard.conftest import PAGES, AppFactory
from tests.dashboard.scenario import (
    BAD_FIELD,
    BAD_TOOL,
    SPIKE_TOOL,
    TRACEBACK_ID,
    UNKNOWN_RAW_CODE,
)


def _open(at: AppTest, page: str | None = None) -> AppTest:
    at.run()
    if page is not None:
        at.switch_page(page)
        at.run()
    assert not at.exception, [e.message for e in at.exception]
    return at


def _text(at: AppTest) -> str:
    """Everything the page wrote as text (markdown, callouts, captions, code, headers)."""
    kinds = (
        "markdown",
        "error",
        "warning",
        "info",
        "success",
        "caption",
        "code",
        "title",
        "header",
        "subheader",
    )
    return "\n".join(str(el.value) for kind in kinds for el in at.get(kind))


def _metric(at: AppTest, label: str) -> str:
    return next(str(m.value) for m in at.metric if m.label == label)


@pytest.mark.parametrize("page", PAGES)
def test_every_page_renders_on_the_scenario(
    make_app: AppFactory, scenario_db: Path, page: str
) -> None:
    """Each page renders without an exception and without a banner on normal data."""
    at = _open(make_app(db=scenario_db), page)
    assert at.title, "every page has a title"
    assert "Cannot" not in _text(at)


def test_overview_shows_current_findings(make_app: AppFactory, scenario_db: Path) -> None:
    """The flagged deploy, the spike and the loops are listed at the top of the Overview."""
    at = _open(make_app(db=scenario_db))
    text = "\n".join(str(e.value) for e in at.error) + "\n".join(str(w.value) for w in at.warning)
    assert "deploy regression" in text
    assert BAD_TOOL in text
    assert BAD_FIELD in text
    assert f"search-agent/{SPIKE_TOOL}" in text
    assert "invalid_args_repeated" in text
    assert at.get("vega_lite_chart"), "the calls-by-code chart is drawn"


def test_overview_filters_change_the_numbers(make_app: AppFactory, scenario_db: Path) -> None:
    """Service, environment, tool and time range each change the calls counted."""
    at = _open(make_app(db=scenario_db))
    every = int(_metric(at, "Tool calls").replace(",", ""))
    at.selectbox(key="filter_service").set_value("search-agent").run()
    search = int(_metric(at, "Tool calls").replace(",", ""))
    assert 0 < search < every
    # search-agent has no deploy in the window and only its own findings remain
    assert _metric(at, "Deploys") == "0"
    at.selectbox(key="filter_service").set_value(None).run()
    at.selectbox(key="filter_environment").set_value("prod").run()
    prod = int(_metric(at, "Tool calls").replace(",", ""))
    assert prod + search == every
    at.selectbox(key="overview_tool").set_value(BAD_TOOL).run()
    one_tool = int(_metric(at, "Tool calls").replace(",", ""))
    assert 0 < one_tool < prod
    at.button_group(key="filter_range").set_value("1 h").run()
    last_hour = int(_metric(at, "Tool calls").replace(",", ""))
    assert 0 < last_hour < one_tool
    assert not at.exception


def test_deploys_page_shows_the_flagged_deploy(make_app: AppFactory, scenario_db: Path) -> None:
    """The bad deploy is flagged, with its tool, the field that started failing and first ids."""
    at = _open(make_app(db=scenario_db), "app_pages/deploys.py")
    text = _text(at)
    assert "billing-agent 2.0 regressed" in text
    assert f"Tool `{BAD_TOOL}`" in text
    verdicts = at.dataframe[0].value
    assert "regression" in set(verdicts["verdict"])
    fields = at.dataframe[1].value
    assert fields.iloc[0]["field"] == BAD_FIELD
    assert bool(fields.iloc[0]["new"])
    first = at.dataframe[2].value
    assert len(first) > 0
    assert set(first["tool"]) == {BAD_TOOL}
    assert first.iloc[0]["correlation_id"] in text, "the finding names its first failing ids"
    assert at.get("vega_lite_chart"), "the before/after chart is drawn"


def test_spikes_page_labels_the_spike(make_app: AppFactory, scenario_db: Path) -> None:
    """The not_found spike of one tool with no deploy is labelled as such."""
    at = _open(make_app(db=scenario_db), "app_pages/spikes.py")
    text = _text(at)
    assert f"search-agent / {SPIKE_TOOL}: one tool, no deploy" in text
    at.selectbox(key="spikes_code").set_value("timeout").run()
    assert "No timeout spikes" in _text(at)


def test_loop_health_counts_rules_and_unknown_codes(
    make_app: AppFactory, scenario_db: Path
) -> None:
    """Each retry rule's traces are counted and unknown codes are shown as handler bugs."""
    at = _open(make_app(db=scenario_db), "app_pages/loop_health.py")
    assert _metric(at, "invalid_args retried on the same field") == "3 traces"
    assert _metric(at, "retried after denied") == "2 traces"
    assert _metric(at, "guessed ids (repeated not_found)") == "2 traces"
    unknown = at.dataframe[-1].value
    assert UNKNOWN_RAW_CODE in set(unknown["raw_code"])
    assert "handler" in _text(at)


def test_tracebacks_groups_sample_and_lookup(make_app: AppFactory, scenario_db: Path) -> None:
    """Groups are counted, a redacted sample is shown, and a correlation id finds its traceback."""
    at = _open(make_app(db=scenario_db), "app_pages/tracebacks.py")
    groups = at.dataframe[0].value
    assert dict(zip(groups["exception_type"], groups["samples"], strict=True)) == {
        "KeyError": 5,
        "TimeoutError": 3,
    }
    assert "1.0, 2.0" in set(groups["versions"])
    assert "KeyError: '<redacted:value>'" in _text(at)
    at.text_input(key="tb_lookup").set_value(TRACEBACK_ID).run()
    assert "**KeyError** in `get_job`" in _text(at)


def test_secret_exposure_counts_by_rule(make_app: AppFactory, scenario_db: Path) -> None:
    """Masked values are counted per tool and rule; the range filter changes the count."""
    at = _open(make_app(db=scenario_db), "app_pages/secrets.py")
    six_hours = int(_metric(at, "Values masked"))
    summary = at.dataframe[0].value
    assert set(summary["rule"]) == {"aws-access-key-id", "github-pat", "jwt"}
    at.button_group(key="filter_range").set_value("24 h").run()
    assert int(_metric(at, "Values masked")) > six_hours


@pytest.mark.parametrize("page", PAGES)
def test_empty_store_shows_how_to_connect(make_app: AppFactory, empty_db: Path, page: str) -> None:
    """On an empty store every address shows the OTel variables that point an agent here."""
    at = make_app(db=empty_db)
    at.run()
    if page != PAGES[0]:
        at.switch_page(page).run()
    assert not at.exception
    text = _text(at)
    assert "No tool calls stored yet" in text
    assert "OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:4318" in text
    assert not at.error


@pytest.mark.parametrize("page", PAGES)
def test_unreachable_api_shows_a_banner(make_app: AppFactory, dead_api: str, page: str) -> None:
    """A sidecar that is not running gives a banner with the address tried, no traceback."""
    at = make_app(api=dead_api)
    at.run()
    if page != PAGES[0]:
        at.switch_page(page).run()
    assert not at.exception
    banner = at.error[0].value
    assert "Cannot reach the errscope sidecar" in banner
    assert dead_api in banner


@pytest.mark.parametrize("page", PAGES)
def test_refused_token_shows_a_banner(make_app: AppFactory, refusing_api: str, page: str) -> None:
    """A token the sidecar refuses gives its own banner with the address, no traceback."""
    at = make_app(api=refusing_api, token="wrong")
    at.run()
    if page != PAGES[0]:
        at.switch_page(page).run()
    assert not at.exception
    banner = at.error[0].value
    assert "refused the token" in banner
    assert refusing_api in banner
    assert "wrong" not in banner


def test_missing_file_shows_a_banner(make_app: AppFactory, tmp_path: Path) -> None:
    """A --db path that does not exist is a banner naming the path."""
    at = make_app(db=tmp_path / "nope.duckdb")
    at.run()
    assert not at.exception
    assert str(tmp_path / "nope.duckdb") in at.error[0].value


def test_auto_refresh_can_be_switched_on(make_app: AppFactory, scenario_db: Path) -> None:
    """Choosing an auto-refresh interval re-renders the page without an exception."""
    at = _open(make_app(db=scenario_db))
    at.selectbox(key="auto_refresh").set_value(15).run()
    assert not at.exception
    assert _metric(at, "Tool calls")


def test_overview_offers_to_evaluate_every_deploy(
    make_app: AppFactory, scenario_db: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With more deploys than one render evaluates, the Overview says so and offers them all."""
    from errscope.dashboards import data

    monkeypatch.setattr(data, "MAX_DEPLOYS", 0)
    at = _open(make_app(db=scenario_db))
    assert "cover the 0 newest of 1 deploys" in _text(at)
    assert "deploy regression" not in _text(at)
    at.toggle(key="overview_all_deploys").set_value(True).run()
    assert "deploy regression" in _text(at)
