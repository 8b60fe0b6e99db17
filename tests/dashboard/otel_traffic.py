"""A broken deploy sent through real OpenTelemetry SDK exporters, as GenAI execute_tool spans.

billing-agent 1.0 calls get_job and list_jobs for `before_min` minutes (2 % invalid_args
on job_id), then 2.0 takes over for `after_min` minutes and get_job fails invalid_args on
the new field `due_date` for 30 % of its calls.  Span times are set in the past, so an
hour of history is sent in seconds; each span is its own trace.  The failing spans carry
what instrumented tools emit: `errscope.code` and a structured observation in
`gen_ai.tool.call.result`.
"""

from __future__ import annotations

import json
import random
from datetime import datetime, timedelta
from typing import Final

from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.trace import Status, StatusCode

SERVICE: Final = "billing-agent"
BAD_TOOL: Final = "get_job"
BAD_FIELD: Final = "due_date"
_TOOLS: Final = ("get_job", "list_jobs")
_CALLS_PER_MIN: Final = 15


def _ns(ts: datetime) -> int:
    return int(ts.timestamp() * 1_000_000_000)


def send_broken_deploy(
    otlp_http: str,
    now: datetime,
    *,
    before_min: int = 55,
    after_min: int = 20,
    token: str | None = None,
    seed: int = 5,
) -> datetime:
    """Send the traffic to `otlp_http` (host:port); return the deploy time of 2.0."""
    rng = random.Random(seed)
    deploy = now - timedelta(minutes=after_min)
    start = deploy - timedelta(minutes=before_min)
    n = 0
    for version, first, minutes in (("1.0", start, before_min), ("2.0", deploy, after_min)):
        exporter = OTLPSpanExporter(
            endpoint=f"http://{otlp_http}/v1/traces",
            headers={"Authorization": f"Bearer {token}"} if token else None,
            timeout=30,
        )
        provider = TracerProvider(
            resource=Resource.create(
                {
                    "service.name": SERVICE,
                    "service.version": version,
                    "deployment.environment.name": "prod",
                }
            )
        )
        provider.add_span_processor(BatchSpanProcessor(exporter, max_export_batch_size=512))
        tracer = provider.get_tracer("errscope-dashboard-test")
        for minute in range(minutes):
            for tool in _TOOLS:
                for i in range(_CALLS_PER_MIN):
                    n += 1
                    ts = first + timedelta(minutes=minute, seconds=60 * i / _CALLS_PER_MIN)
                    attributes: dict[str, str] = {
                        "gen_ai.operation.name": "execute_tool",
                        "gen_ai.tool.name": tool,
                        "gen_ai.tool.call.id": f"call_{n}",
                        "gen_ai.conversation.id": f"conv-{n // 5}",
                        "errscope.correlation_id": f"req-{n}",
                    }
                    failing = None
                    if version == "2.0" and tool == BAD_TOOL and rng.random() < 0.3:
                        failing = BAD_FIELD
                    elif rng.random() < 0.02:
                        failing = "job_id"
                    if failing:
                        attributes["errscope.code"] = "invalid_args"
                        attributes["gen_ai.tool.call.result"] = json.dumps(
                            {"error": "invalid_args", "field": failing, "hint": "fix the field"}
                        )
                    span = tracer.start_span(
                        f"execute_tool {tool}", attributes=attributes, start_time=_ns(ts)
                    )
                    if failing:
                        span.set_status(Status(StatusCode.ERROR))
                    span.end(end_time=_ns(ts) + 40_000_000)
        provider.shutdown()  # flushes: the sidecar acknowledges only committed spans
    return deploy
