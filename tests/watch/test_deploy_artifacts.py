"""The shipped Prometheus rules and Grafana dashboard: each parses, and each query names only
metrics errscope exports (read from a real sidecar's and a real watch's /metrics text with
prometheus_client's parser; the queries with a PromQL parser)."""

from __future__ import annotations

import json
import re
from datetime import timedelta
from pathlib import Path
from typing import Any

import promql_parser
import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from errscope.collector.sidecar.app import Sidecar
from errscope.collector.sidecar.config import ServeConfig
from errscope.collector.store.duckdb import DuckDBStore
from errscope.collector.watch.loop import WatchConfig, Watcher
from errscope.collector.watch.sinks import parse_sink
from errscope.collector.watch.state import WatchState
from tests.queries.traffic import DEPLOY_TS, StoreSource, call
from tests.watch.receiver import receiver

ROOT = Path(__file__).resolve().parents[2]
RULES = ROOT / "deploy/prometheus/errscope-rules.yml"
DASHBOARD = ROOT / "deploy/grafana/errscope-dashboard.json"
# Series Prometheus makes itself for every target; a rule may use them too.
PROMETHEUS_MADE = frozenset({"up"})
_GRAFANA_VARIABLES = re.compile(r"\$__(rate_interval|interval|range)")
_SEVERITIES = frozenset({"critical", "warning", "info"})


def _names(text: str) -> set[str]:
    """Every sample name an exposition can carry, read by prometheus_client's parser."""
    names: set[str] = set()
    for family in text_string_to_metric_families(text):
        names |= {s.name for s in family.samples}
        match family.type:
            case "counter":
                names.add(f"{family.name}_total")
            case "summary":
                names |= {f"{family.name}_sum", f"{family.name}_count"}
            case _:
                names.add(family.name)
    return names


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> frozenset[str]:
    """The metric names of a sidecar (with a forwarder, so its gauges show) and of a watch
    with an open finding and a delivery."""
    folder = tmp_path_factory.mktemp("exported")
    sidecar = Sidecar(
        ServeConfig(
            otlp_grpc=None,
            otlp_http=None,
            api="127.0.0.1:0",
            store=str(folder / "s.duckdb"),
            forward="http://127.0.0.1:9",  # never started: only its gauges are read
        )
    )
    try:
        with sidecar.metrics.lock:
            sidecar.metrics.count_tool_call(
                "svc", "tool", "ok", trace_id="a" * 32, span_id="b" * 16
            )
            sidecar.metrics.rejected["bad_ids"] += 1
            sidecar.metrics.refused["overloaded"] += 1
            sidecar.metrics.redactions["github_token"] += 1
            text = sidecar.metrics.render(sidecar.gauges())
    finally:
        sidecar.stop()
    store = DuckDBStore(":memory:")
    start = DEPLOY_TS + timedelta(minutes=5)
    store.append_tool_calls(
        [
            call(
                start + timedelta(seconds=i), code="invalid_args", field="job_id", trace_id="f" * 32
            )
            for i in range(4)
        ]
    )
    try:
        with receiver() as rx, WatchState(folder / "w.duckdb") as state:
            watcher = Watcher(
                StoreSource(store),
                state,
                [parse_sink(f"json={rx.url('/hook')}", index=0)],
                WatchConfig(rate_per_min=6000),
            )
            watcher.run_once(start + timedelta(minutes=10))
            watcher.deliver(start + timedelta(minutes=10))
            text += watcher.exposition()
    finally:
        store.close()
    names = frozenset(_names(text))
    assert {"errscope_finding_open", "errscope_tool_calls_total"} <= names
    return names


def _metrics_in(expr: str) -> set[str]:
    """The metric names a PromQL expression selects (Grafana's interval variables as 5m)."""
    tree = promql_parser.parse(_GRAFANA_VARIABLES.sub("5m", expr))
    found: set[str] = set()

    def visit(node: Any) -> None:
        selector = node.vector_selector if isinstance(node, promql_parser.MatrixSelector) else node
        if isinstance(selector, promql_parser.VectorSelector) and selector.name:
            found.add(selector.name)

    promql_parser.walk(tree, pre_visit=visit)
    return found


def _rules() -> list[dict[str, Any]]:
    loaded = yaml.safe_load(RULES.read_text())
    return [rule for group in loaded["groups"] for rule in group["rules"]]


def _panel_queries() -> list[tuple[str, str]]:
    dashboard = json.loads(DASHBOARD.read_text())
    return [
        (panel["title"], target["expr"])
        for panel in dashboard["panels"]
        if panel["type"] != "row"
        for target in panel["targets"]
    ]


def test_the_rule_file_has_the_shape_prometheus_loads() -> None:
    """Groups of named rules, each an alert with an expression, a severity and a summary;
    names unique, `for` a Prometheus duration, label templates balanced."""
    loaded = yaml.safe_load(RULES.read_text())
    assert set(loaded) == {"groups"}
    groups = loaded["groups"]
    assert len({g["name"] for g in groups}) == len(groups)
    rules = _rules()
    assert len({r["alert"] for r in rules}) == len(rules)
    for rule in rules:
        assert set(rule) <= {"alert", "expr", "for", "labels", "annotations"}, rule["alert"]
        assert rule["labels"]["severity"] in _SEVERITIES
        assert rule["annotations"]["summary"]
        if "for" in rule:
            assert re.fullmatch(r"\d+[smhd]", rule["for"]), rule["alert"]
        for text in rule["annotations"].values():
            assert text.count("{{") == text.count("}}"), rule["alert"]


@pytest.mark.parametrize("rule", _rules(), ids=lambda r: r["alert"])
def test_every_rule_names_only_exported_metrics(
    rule: dict[str, Any], exported: frozenset[str]
) -> None:
    """Each alert's expression parses as PromQL and selects only metrics errscope exports
    (or `up`, which Prometheus makes): a renamed metric breaks this test, not the page."""
    names = _metrics_in(rule["expr"])
    assert names
    assert names <= exported | PROMETHEUS_MADE, names - exported


def test_the_finding_alerts_cover_every_finding_kind() -> None:
    """There is an alert on errscope_finding_open for each kind of finding detection reports."""
    from errscope.queries.findings import FindingKind

    kinds = {m for r in _rules() for m in re.findall(r'kind="([a-z_]+)"', r["expr"])}
    assert kinds == {str(k) for k in FindingKind}


@pytest.mark.parametrize(("title", "expr"), _panel_queries(), ids=lambda v: str(v)[:40])
def test_every_panel_query_names_an_exported_metric(
    title: str, expr: str, exported: frozenset[str]
) -> None:
    """Each dashboard query parses as PromQL and selects only metrics errscope exports."""
    names = _metrics_in(expr)
    assert names, title
    assert names <= exported, (title, names - exported)


def test_the_dashboard_is_grafana_json_with_a_datasource_variable() -> None:
    """Unique panel ids that fit the 24-column grid, every target on the ${datasource}
    variable, and the tool-call panels asking for exemplars (the link to a trace)."""
    dashboard = json.loads(DASHBOARD.read_text())
    assert dashboard["uid"] == "errscope"
    assert [v["name"] for v in dashboard["templating"]["list"]] == ["datasource"]
    panels = dashboard["panels"]
    assert len({p["id"] for p in panels}) == len(panels)
    for panel in panels:
        grid = panel["gridPos"]
        assert grid["x"] + grid["w"] <= 24, panel["title"]
        for target in panel.get("targets", []):
            assert target["datasource"]["uid"] == "${datasource}"
    exemplar_panels = {
        p["title"]
        for p in panels
        for t in p.get("targets", [])
        if t.get("exemplar") and "errscope_tool_calls_total" in t["expr"]
    }
    assert exemplar_panels
