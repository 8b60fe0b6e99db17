"""Fixtures for the toolkit: a real OTel SDK provider per test, the classroom tool, sinks."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from errscope.collector.toolkit import (
    NotFound,
    PositiveInt,
    Tool,
    TracebackReport,
    set_traceback_sink,
    tool,
)

JOBS = {17: {"id": 17, "title": "ship it"}, 42: {"id": 42, "title": "answer"}}
NOT_FOUND_HINT = "job ids look like 17 and 42"


@dataclass
class Traced:
    """A tracer provider that is never the global one, and what it exported."""

    provider: TracerProvider
    exporter: InMemorySpanExporter

    def spans(self) -> tuple[ReadableSpan, ...]:
        """Every finished span so far."""
        return self.exporter.get_finished_spans()

    def only_span(self) -> ReadableSpan:
        """The single finished span; fails when there is not exactly one."""
        spans = self.spans()
        assert len(spans) == 1, spans
        return spans[0]


@pytest.fixture
def traced() -> Iterator[Traced]:
    """An SDK TracerProvider with an in-memory exporter, passed to tools explicitly."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    yield Traced(provider, exporter)
    provider.shutdown()


@dataclass
class Classroom:
    """The classroom get_job tool and a record of the ids its handler was called with."""

    get_job: Tool
    calls: list[int] = field(default_factory=list)


@pytest.fixture
def classroom(traced: Traced) -> Classroom:
    """get_job(job_id: PositiveInt) over two jobs, 17 and 42; misses raise NotFound."""
    calls: list[int] = []

    @tool("get_job", tracer_provider=traced.provider)
    def get_job(job_id: PositiveInt) -> dict[str, Any]:
        calls.append(job_id)
        if job_id not in JOBS:
            raise NotFound(hint=NOT_FOUND_HINT)
        return JOBS[job_id]

    return Classroom(get_job, calls)


@pytest.fixture
def make_tool(traced: Traced) -> Callable[..., Callable[[Callable[..., Any]], Tool]]:
    """`make_tool(name, **options)`: the `tool` decorator bound to the test's provider."""

    def make(name: str = "t", **options: Any) -> Callable[[Callable[..., Any]], Tool]:
        return tool(name, tracer_provider=traced.provider, **options)

    return make


@pytest.fixture
def traceback_reports() -> Iterator[list[TracebackReport]]:
    """Installs a traceback sink that collects reports; restores the previous sink."""
    reports: list[TracebackReport] = []
    previous = set_traceback_sink(reports.append)
    yield reports
    set_traceback_sink(previous)
