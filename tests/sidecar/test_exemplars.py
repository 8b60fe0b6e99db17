"""/metrics on a real `errscope serve`: OpenMetrics with trace-id exemplars when the scraper
asks for it, the plain Prometheus text otherwise, each read by prometheus_client's parser."""

from __future__ import annotations

import json
import re
import urllib.request
from pathlib import Path

import pytest
from prometheus_client.openmetrics.parser import (
    text_string_to_metric_families as openmetrics_families,
)
from prometheus_client.parser import text_string_to_metric_families as text_families

from tests.sidecar.harness import finished_spans, http_exporter, send, sidecar

RESOURCE = {"service.name": "billing-agent", "service.version": "1.4.0"}
# What Prometheus 2.x/3.x sends with exemplar storage on, and without.
PROMETHEUS_OPENMETRICS = (
    "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;"
    "q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1"
)
PROMETHEUS_TEXT = "text/plain;version=0.0.4;q=1,*/*;q=0.1"


def _tool(name: str, call_id: str, result: dict[str, object]) -> tuple[str, dict[str, object]]:
    return (
        f"execute_tool {name}",
        {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": name,
            "gen_ai.tool.call.id": call_id,
            "gen_ai.tool.call.result": json.dumps(result),
        },
    )


@pytest.fixture(scope="module")
def scraped(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[str, str]]:
    """One sidecar that stored two failing and one ok call: /metrics under each Accept
    (content type, body), and the trace ids the calls were sent with under "traces"."""
    store: Path = tmp_path_factory.mktemp("exemplars") / "s.duckdb"
    spans = finished_spans(
        [
            _tool("get_job", "c1", {"error": "invalid_args", "field": "job_id"}),
            _tool("get_job", "c2", {"ok": True}),
            _tool("list_jobs", "c3", {"error": "not_found"}),
        ],
        RESOURCE,
    )
    traces = " ".join(f"{s.context.trace_id:032x}" for s in spans)
    out: dict[str, tuple[str, str]] = {"traces": ("", traces)}
    with sidecar(store) as served:
        assert send(http_exporter(served), spans)
        for accept in ("", PROMETHEUS_OPENMETRICS, PROMETHEUS_TEXT, "application/openmetrics-text"):
            headers = {"Accept": accept} if accept else {}
            request = urllib.request.Request(served.url("/metrics"), headers=headers)
            with urllib.request.urlopen(request, timeout=30) as response:
                out[accept] = (response.headers["Content-Type"], response.read().decode())
    return out


@pytest.mark.parametrize(
    "accept",
    [
        pytest.param(PROMETHEUS_OPENMETRICS, id="prometheus-with-exemplars"),
        pytest.param("application/openmetrics-text", id="openmetrics-bare"),
    ],
)
def test_openmetrics_carries_a_trace_exemplar_per_tool_call_series(
    scraped: dict[str, tuple[str, str]], accept: str
) -> None:
    """Asked for OpenMetrics, every tool-call series carries the trace and span id of a
    call it counted, parsed by prometheus_client's OpenMetrics parser (which checks # EOF)."""
    content_type, body = scraped[accept]
    assert content_type.startswith("application/openmetrics-text; version=1.0.0")
    families = {f.name: f for f in openmetrics_families(body)}
    calls = families["errscope_tool_calls"]
    assert calls.type == "counter"
    sent = set(scraped["traces"][1].split())
    by_series = {
        (s.labels["tool"], s.labels["code"]): s for s in calls.samples if s.name.endswith("_total")
    }
    assert set(by_series) == {
        ("get_job", "invalid_args"),
        ("get_job", "ok"),
        ("list_jobs", "not_found"),
    }
    for sample in by_series.values():
        assert sample.exemplar is not None
        assert sample.exemplar.labels["trace_id"] in sent
        assert re.fullmatch(r"[0-9a-f]{16}", sample.exemplar.labels["span_id"])
        assert sample.exemplar.value == 1
        assert sample.exemplar.timestamp is not None
    assert families["errscope_commit_seconds"].type == "summary"


@pytest.mark.parametrize(
    "accept",
    [
        pytest.param("", id="no-accept"),
        pytest.param(PROMETHEUS_TEXT, id="prometheus-text"),
    ],
)
def test_plain_text_has_the_same_counters_and_no_exemplars(
    scraped: dict[str, tuple[str, str]], accept: str
) -> None:
    """A scraper that does not ask for OpenMetrics gets Prometheus text 0.0.4, which
    prometheus_client's text parser reads with the same tool-call counts, no exemplars."""
    content_type, body = scraped[accept]
    assert content_type.startswith("text/plain; version=0.0.4")
    assert "# {" not in body
    assert "# EOF" not in body
    families = {f.name: f for f in text_families(body)}
    counts = {
        (s.labels["tool"], s.labels["code"]): s.value
        for s in families["errscope_tool_calls"].samples
    }
    assert counts == {
        ("get_job", "invalid_args"): 1,
        ("get_job", "ok"): 1,
        ("list_jobs", "not_found"): 1,
    }


def test_both_formats_carry_the_same_values(scraped: dict[str, tuple[str, str]]) -> None:
    """Every sample of the plain text is in the OpenMetrics answer with the same value
    (the one scrape's gauges aside, which moved between the two requests)."""

    def samples(families: object) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
        return {
            (s.name, tuple(sorted(s.labels.items()))): s.value
            for f in families  # type: ignore[attr-defined]
            if f.type != "gauge"
            for s in f.samples
        }

    plain = samples(text_families(scraped[""][1]))
    rich = samples(openmetrics_families(scraped[PROMETHEUS_OPENMETRICS][1]))
    assert plain
    assert plain == {k: v for k, v in rich.items() if k in plain}
    assert set(plain) == set(rich)
