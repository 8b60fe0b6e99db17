"""In-process overhead: the application thread's cost of a tool span under instrument().

Two providers with the same inner exporter (a null exporter that accepts everything):
the anchor is a plain TracerProvider with a BatchSpanProcessor; errscope's is
`instrument(..., exporter=null)`, which adds the scrubbing pipeline in the export thread.
Each round starts and ends N realistic tool spans on the main thread and measures:

- app-thread CPU per span (time.thread_time) at a paced rate of 2,000 spans/s (a busy
  agent service; both exporters keep up, so nothing is dropped): the target measure;
- the same unpaced (spans as fast as the loop runs): both queues overflow and drop, so
  this shows the worst case, not the steady state.

Rounds alternate anchor/errscope; medians are compared.  Target: ratio <= 1.10.  Also the
pipeline's own throughput (spans/s through Pipeline.process on realistic tool spans).

    .venv/bin/python bench/overhead.py [--spans 20000] [--rounds 5]
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import time
from collections.abc import Sequence

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import (
    BatchSpanProcessor,
    SimpleSpanProcessor,
    SpanExporter,
    SpanExportResult,
)
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from collector.export import instrument
from collector.pipeline import Pipeline
from collector.scrub.samples import github_style_token
from collector.spanview import from_readable

TOKEN = github_style_token(random.Random(1), "ghp_")


class NullExporter(SpanExporter):
    """Accepts every batch; counts spans."""

    def __init__(self) -> None:
        self.count = 0

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.count += len(spans)
        return SpanExportResult.SUCCESS


def attributes(i: int) -> dict[str, object]:
    """Ten attributes as a GenAI tool span carries them, arguments with a secret, some errors."""
    failing = i % 5 == 0
    return {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "get_job",
        "gen_ai.tool.call.id": f"call_{i}",
        "gen_ai.conversation.id": f"conv-{i // 20}",
        "gen_ai.agent.name": "billing",
        "gen_ai.tool.type": "function",
        "gen_ai.tool.call.arguments": json.dumps({"job_id": i, "token": TOKEN}),
        "gen_ai.tool.call.result": json.dumps(
            {"error": "invalid_args", "field": "job_id"}
            if failing
            else {"ok": True, "result": {"id": i}}
        ),
        "gen_ai.provider.name": "openai",
        "errscope.attempt": 1,
    }


def run_round(provider: TracerProvider, n: int, paced_rate: float | None) -> float:
    """Seconds per span on the main thread: CPU time when unpaced, wall time when paced."""
    tracer = provider.get_tracer("bench")
    attrs = [attributes(i) for i in range(n)]
    if paced_rate is None:
        start = time.thread_time()
        for a in attrs:
            with tracer.start_as_current_span("execute_tool get_job", attributes=a):
                pass
        return (time.thread_time() - start) / n
    interval = 1.0 / paced_rate
    spent = 0.0
    next_at = time.perf_counter()
    for a in attrs:
        began = time.thread_time()
        with tracer.start_as_current_span("execute_tool get_job", attributes=a):
            pass
        spent += time.thread_time() - began
        next_at += interval
        delay = next_at - time.perf_counter()
        if delay > 0:
            time.sleep(delay)
    return spent / n


def anchor_provider() -> TracerProvider:
    """A plain provider with a BatchSpanProcessor and the null exporter."""
    provider = TracerProvider(resource=Resource.create({"service.name": "bench"}))
    provider.add_span_processor(BatchSpanProcessor(NullExporter(), schedule_delay_millis=1000))
    return provider


def errscope_provider() -> TracerProvider:
    """instrument() with the same null exporter inside."""
    return instrument("bench", exporter=NullExporter(), set_global=False)


def pipeline_throughput(n: int) -> float:
    """Spans per second through Pipeline.process on realistic tool spans."""
    provider = TracerProvider(
        resource=Resource.create({"service.name": "bench", "service.version": "1"})
    )
    memory = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("bench")
    for i in range(n):
        with tracer.start_as_current_span("execute_tool get_job", attributes=attributes(i)):
            pass
    views = [from_readable(s) for s in memory.get_finished_spans()]
    pipeline = Pipeline()
    pipeline.process(views[0])
    start = time.perf_counter()
    for view in views:
        pipeline.process(view)
    return n / (time.perf_counter() - start)


def main() -> None:
    """Alternate rounds, print medians and ratios."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spans", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    results: dict[str, dict[str, list[float]]] = {
        "anchor": {"cpu": [], "paced": []},
        "errscope": {"cpu": [], "paced": []},
    }
    for _ in range(args.rounds):
        for name, factory in (("anchor", anchor_provider), ("errscope", errscope_provider)):
            provider = factory()
            results[name]["cpu"].append(run_round(provider, args.spans, None))
            provider.force_flush()
            results[name]["paced"].append(run_round(provider, min(args.spans, 4000), 2000.0))
            provider.shutdown()
    print(
        f"overhead: {args.rounds} rounds x {args.spans:,} spans; "
        "inner exporter: null; anchor: BatchSpanProcessor"
    )
    print(f"{'measure':<36}{'anchor us':>12}{'errscope us':>14}{'ratio':>8}")
    for key, label in (
        ("paced", "app-thread CPU/span at 2,000/s"),
        ("cpu", "app-thread CPU/span, unpaced"),
    ):
        a = statistics.median(results["anchor"][key]) * 1e6
        e = statistics.median(results["errscope"][key]) * 1e6
        print(f"{label:<36}{a:>12.1f}{e:>14.1f}{e / a:>8.2f}")
    ratio = statistics.median(results["errscope"]["paced"]) / statistics.median(
        results["anchor"]["paced"]
    )
    print(
        f"target: app-thread ratio <= 1.10 -> {'MET' if ratio <= 1.10 else 'MISSED'} ({ratio:.2f})"
    )
    rate = pipeline_throughput(5000)
    print(
        f"pipeline throughput: {rate:,.0f} spans/s on one core "
        "(realistic GenAI tool spans, 20% failing)"
    )


if __name__ == "__main__":
    main()
