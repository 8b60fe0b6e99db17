"""services → a real OpenTelemetry Collector → a real `errscope serve`, through an overload.

The Collector runs deploy/otelcol/gateway.yaml as committed (redaction, batch, an OTLP
exporter with a sending queue and retries); the OpenTelemetry SDK's own exporters send it
tool-call spans.  Midway, errscope's admission is held full by a client that sends most of a
body and waits, so every export the Collector makes is refused as retryable (503 +
Retry-After, or UNAVAILABLE + RetryInfo); once that client goes away, the Collector's queue
must deliver every span, and errscope must store each exactly once.
"""

from __future__ import annotations

import json
import re
import socket
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
import pytest
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpExporter
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

from errscope.collector.sidecar.admission import RETRY_AFTER_S
from tests.otelcol.harness import Collector, collector, metric, wait_until
from tests.pipeline.spans import DB_URL, GITHUB_TOKEN, OPENAI_KEY
from tests.sidecar.harness import Served, finished_spans, sidecar
from tests.sidecar.test_sidecar import all_strings

RESOURCE = {
    "service.name": "billing-agent",
    "service.version": "1.4.0",
    "deployment.environment.name": "prod",
}
# errscope's admission bound, and how much of it the holding client takes: every export
# the Collector makes (kilobytes) is then over the bound and refused.
MAX_BYTES = 1024 * 1024
HELD_BYTES = MAX_BYTES - 256
BEFORE, DURING = 60, 240  # spans sent before the overload and while it lasts
SDK_BATCH = 40
RETRIES_SEEN = 2  # retries of the refused exports watched before the overload clears
# Generous for a busy two-core machine; each wait ends as soon as its condition holds.
STORED_WITHIN_S = 120.0
# Go's time.Duration.String() units, for the Collector's retry interval.
_GO_DURATION_UNITS = {"h": 3600, "m": 60, "s": 1, "ms": 1e-3, "µs": 1e-6, "us": 1e-6, "ns": 1e-9}
_SECRETS = (GITHUB_TOKEN, OPENAI_KEY, DB_URL.split(":")[2].split("@")[0])


@dataclass(frozen=True)
class Leg:
    """One way through: the SDK exporter into the Collector, the Collector's exporter out."""

    sdk: str  # "grpc" | "http"
    exporter: str  # a pipeline exporter of gateway.yaml


def tool_specs(tag: str, first: int, count: int) -> list[tuple[str, dict[str, Any]]]:
    """Tool spans whose outcomes cycle ok / invalid_args / not_found, secrets in arguments."""
    specs = []
    for i in range(first, first + count):
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": "get_job",
            "gen_ai.tool.call.id": f"call_{tag}_{i}",
            "gen_ai.tool.call.arguments": json.dumps(
                {"job_id": i, "token": (GITHUB_TOKEN, OPENAI_KEY, DB_URL)[i % 3]}
            ),
        }
        match i % 3:
            case 0:
                attributes["gen_ai.tool.call.result"] = json.dumps({"ok": True})
            case 1:
                attributes["gen_ai.tool.call.result"] = json.dumps(
                    {"error": "invalid_args", "field": "job_id", "hint": "an integer"}
                )
            case _:
                attributes["http.response.status_code"] = 404
        specs.append(("execute_tool get_job", attributes))
    return specs


def expected_code(call_id: str) -> str:
    """The code `tool_specs` planted for a call id."""
    return ("ok", "invalid_args", "not_found")[int(call_id.rsplit("_", 1)[1]) % 3]


def sdk_exporter(leg: Leg, otelcol: Collector) -> SpanExporter:
    """The SDK's OTLP exporter aimed at the Collector's receiver."""
    if leg.sdk == "grpc":
        return GrpcExporter(endpoint=otelcol.grpc, insecure=True, timeout=30)
    return HttpExporter(endpoint=f"http://{otelcol.http}/v1/traces", timeout=30)


def export(exporter: SpanExporter, spans: Sequence[ReadableSpan]) -> None:
    """Send spans in SDK-sized batches; the Collector acknowledges once it has queued them."""
    for start in range(0, len(spans), SDK_BATCH):
        assert exporter.export(spans[start : start + SDK_BATCH]) is SpanExportResult.SUCCESS


def stored(served: Served) -> float:
    """Tool calls errscope has committed so far."""
    return metric(served.api, "errscope_tool_calls_stored_total")


def retry_interval_s(line: str) -> float:
    """The wait in the Collector's "Will retry" log line (its fields are JSON), in seconds."""
    fields = json.loads(line[line.index("{") :])
    total = 0.0
    for number, unit in re.findall(r"(\d+(?:\.\d+)?)(h|ms|µs|us|ns|m|s)", fields["interval"]):
        total += float(number) * _GO_DURATION_UNITS[unit]
    return total


def hold_admission(served: Served) -> socket.socket:
    """A client that declares a full-size body, sends all but 256 bytes of it, and waits.

    errscope admits a body's bytes as they arrive, so until this socket closes the bytes in
    flight sit at the bound and every other export is refused as retryable.
    """
    host, port = served.http.rsplit(":", 1)
    holder = socket.create_connection((host, int(port)), timeout=30)
    head = (
        "POST /v1/traces HTTP/1.1\r\nHost: errscope\r\n"
        f"Content-Type: application/x-protobuf\r\nContent-Length: {MAX_BYTES}\r\n\r\n"
    )
    holder.sendall(head.encode() + b"\0" * HELD_BYTES)

    def held() -> bool:
        status, body = served.get("/healthz")
        return status == 200 and json.loads(body)["inflight_bytes"] >= HELD_BYTES

    wait_until(held, 30, "errscope admitted the held body")
    return holder


@pytest.mark.slow
@pytest.mark.parametrize(
    "leg",
    [
        pytest.param(Leg(sdk="grpc", exporter="otlp_http/errscope"), id="sdk-grpc-to-otlp-http"),
        pytest.param(Leg(sdk="http", exporter="otlp_grpc/errscope"), id="sdk-http-to-otlp-grpc"),
    ],
)
def test_the_collector_delivers_every_span_once_through_errscopes_overload(
    tmp_path: Path, leg: Leg
) -> None:
    """Spans through the Collector are stored with their codes and ids; exports refused for
    overload are retried from its queue until each span is stored exactly once."""
    tag = leg.sdk
    spans = finished_spans(tool_specs(tag, 0, BEFORE + DURING), RESOURCE)
    store = tmp_path / "errscope.duckdb"
    limits = ("--max-body-bytes", str(MAX_BYTES), "--max-inflight-bytes", str(MAX_BYTES))
    with sidecar(store, *limits) as served:
        env = {"ERRSCOPE_OTLP_GRPC": served.grpc, "ERRSCOPE_OTLP_HTTP": served.http}
        with collector(tmp_path, "gateway.yaml", exporters=[leg.exporter], env=env) as otelcol:
            exporter = sdk_exporter(leg, otelcol)
            # 1. no overload: the spans land
            export(exporter, spans[:BEFORE])
            wait_until(lambda: stored(served) >= BEFORE, STORED_WITHIN_S, "the first spans stored")
            refused_before = metric(
                served.api, "errscope_exports_refused_total", 'reason="overloaded"'
            )
            # 2. admission held full: the Collector's exports are refused, and it retries
            holder = hold_admission(served)
            try:
                export(exporter, spans[BEFORE:])
                wait_until(
                    lambda: (
                        metric(served.api, "errscope_exports_refused_total", 'reason="overloaded"')
                        > refused_before
                    ),
                    60,
                    "errscope refused an export for overload",
                )
                # The Collector keeps retrying while the overload lasts, each time waiting
                # errscope's hint (1 s): its own backoff alone starts at 200 ms.
                for _ in range(RETRIES_SEEN):
                    retry = otelcol.wait_line("Will retry the request after interval", 60)
                    assert retry_interval_s(retry) >= RETRY_AFTER_S, retry
                assert stored(served) == BEFORE  # nothing got past the held admission
            finally:
                holder.close()  # 3. the overload clears
            wait_until(
                lambda: stored(served) >= BEFORE + DURING, STORED_WITHIN_S, "every span stored"
            )
            exporter.shutdown()
            received = metric(served.api, "errscope_spans_received_total")
            assert otelcol.stop() == 0
        assert served.terminate() == 0
    con = duckdb.connect(str(store), read_only=True)
    rows = con.execute("SELECT call_id, code, trace_id, span_id FROM tool_calls").fetchall()
    con.close()
    sent_ids = {(f"{s.context.trace_id:032x}", f"{s.context.span_id:016x}") for s in spans}
    # Exactly once: one row per span sent, whatever the Collector redelivered (the store's
    # primary key on the ids absorbs an at-least-once resend; `received` counts those).
    assert len(rows) == len(spans), f"{len(rows)} rows for {len(spans)} spans"
    assert {(r[2], r[3]) for r in rows} == sent_ids
    assert received >= len(spans)
    assert {r[0]: r[1] for r in rows} == {r[0]: expected_code(r[0]) for r in rows}
    text = all_strings(store)
    for secret in _SECRETS:
        assert secret not in text
