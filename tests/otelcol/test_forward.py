"""A real `errscope serve --forward` → a real OpenTelemetry Collector: what reaches it.

The Collector runs deploy/otelcol/from-errscope.yaml as committed, its pipeline's exporter
switched to `debug`, which writes every span it receives in full to a file; the test reads
that file as the Collector's output.  Secrets never reach it, conversation content only when
errscope is told to keep it, and the trace and span ids arrive as the service sent them.
"""

from __future__ import annotations

import json
import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.otelcol.harness import collector, debug_spans, wait_until
from tests.pipeline.spans import DB_PASSWORD, DB_URL, GITHUB_TOKEN, OPENAI_KEY
from tests.sidecar.harness import finished_spans, http_exporter, send, sidecar

RESOURCE = {
    "service.name": "support-agent",
    "service.version": "0.9.2",
    "deployment.environment.name": "staging",
}
SECRETS = (GITHUB_TOKEN, OPENAI_KEY, DB_PASSWORD)
# Conversation content no scrubber rule knows: it reaches the Collector only with --content keep.
CANARY = f"CNRY-otelcol-{secrets.token_hex(8)}"
FORWARDED_WITHIN_S = 90.0


@dataclass(frozen=True)
class Case:
    """How errscope forwards, and whether the content canary may reach the Collector."""

    forward: str  # "http" | "grpc": the scheme of --forward
    content: str  # --content
    canary_reaches: bool


def specs() -> list[tuple[str, dict[str, Any]]]:
    """Agent and tool spans carrying secrets and the canary where real frameworks put them."""
    tool = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "lookup_order"}
    return [
        (
            "execute_tool lookup_order",
            {
                **tool,
                "gen_ai.tool.call.id": "call_fwd_ok",
                "gen_ai.tool.call.arguments": json.dumps(
                    {"order": "A-17", "note": CANARY, "api_key": OPENAI_KEY}
                ),
                "gen_ai.tool.call.result": json.dumps({"ok": True, "by": GITHUB_TOKEN}),
            },
        ),
        (
            "execute_tool lookup_order",
            {
                **tool,
                "gen_ai.tool.call.id": "call_fwd_nf",
                "http.response.status_code": 404,
                "db.connection_string": DB_URL,
            },
        ),
        (
            "invoke_agent support",
            {
                "gen_ai.operation.name": "invoke_agent",
                "gen_ai.input.messages": json.dumps(
                    [{"role": "user", "parts": [{"type": "text", "content": f"{CANARY} hi"}]}]
                ),
                "prompt": f"my key is {OPENAI_KEY}",
            },
        ),
    ]


@pytest.mark.slow
@pytest.mark.parametrize(
    "case",
    [
        pytest.param(Case(forward="http", content="drop", canary_reaches=False), id="http-drop"),
        pytest.param(Case(forward="grpc", content="drop", canary_reaches=False), id="grpc-drop"),
        # Kept content still goes through the scrubber: the canary arrives, no secret does
        # (and the canary's arrival shows this test reads what the Collector received).
        pytest.param(Case(forward="http", content="keep", canary_reaches=True), id="http-keep"),
    ],
)
def test_forwarded_spans_reach_the_collector_scrubbed_with_their_ids(
    tmp_path: Path, case: Case
) -> None:
    """Every span errscope forwards arrives at the Collector with its ids and no secret;
    conversation content arrives only under --content keep."""
    output = tmp_path / "collector-output.txt"
    spans = finished_spans(specs(), RESOURCE)
    sent = {(f"{s.context.trace_id:032x}", f"{s.context.span_id:016x}") for s in spans}
    env = {"OTELCOL_DEBUG_OUTPUT": str(output)}
    with collector(tmp_path, "from-errscope.yaml", exporters=["debug"], env=env) as otelcol:
        target = otelcol.http if case.forward == "http" else otelcol.grpc
        forward = ("--forward", f"{case.forward}://{target}", "--content", case.content)
        with sidecar(tmp_path / "errscope.duckdb", *forward) as served:
            assert send(http_exporter(served), spans)

            def arrived() -> set[tuple[str, str]] | None:
                ids = {(s.get("Trace ID"), s.get("ID")) for s in debug_spans(output)}
                return ids if sent <= ids else None

            received = wait_until(arrived, FORWARDED_WITHIN_S, "every span at the Collector")
            assert served.terminate() == 0
        assert otelcol.stop() == 0
    assert received == sent
    # The tool spans arrive with their call ids and errscope's code beside them.
    by_id = {s["ID"]: s for s in debug_spans(output)}
    tool_spans = {
        (s.attributes or {}).get("gen_ai.tool.call.id"): by_id[f"{s.context.span_id:016x}"]
        for s in spans
        if (s.attributes or {}).get("gen_ai.operation.name") == "execute_tool"
    }
    assert {
        call_id: (
            span["Name"],
            span["attributes"].get("gen_ai.tool.call.id"),
            span["attributes"].get("errscope.code"),
        )
        for call_id, span in tool_spans.items()
    } == {
        "call_fwd_ok": ("execute_tool lookup_order", "call_fwd_ok", "ok"),
        "call_fwd_nf": ("execute_tool lookup_order", "call_fwd_nf", "not_found"),
    }
    text = output.read_text() + otelcol.log.read_text()
    for secret in SECRETS:
        assert secret not in text
    assert (CANARY in text) is case.canary_reaches
