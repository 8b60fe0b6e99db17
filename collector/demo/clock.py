"""Span times for the demo: a settable clock and a tracer provider that stamps spans with it.

The back-fill writes 24 hours of history in seconds, so a span must carry the time the
story says, not the time the process ran.  `SimClock` holds that time; `ClockedTracerProvider`
wraps an SDK `TracerProvider` so that every span started through it — including the
`execute_tool` spans `errscope.collector.toolkit` opens, which take no start time — starts at the
clock's time and ends at the clock's time when it ends.  A handler that "works" for 300 ms
advances the clock by 300 ms (`SimClock.sleep`), so durations are as the story draws them.

Span events (the exception event of an internal_error) are stamped with the clock too.
Not thread-safe: one clock per generating thread.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Final

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.trace import Link, Span, SpanContext, SpanKind, Status, StatusCode
from opentelemetry.util import types

__all__ = ["ClockedTracerProvider", "SimClock"]

_NS_PER_S: Final = 1_000_000_000


class SimClock:
    """The demo's notion of now, in nanoseconds since the epoch; moved only by its owner."""

    def __init__(self, now_ns: int = 0) -> None:
        self.now_ns = now_ns

    def set(self, now_ns: int) -> None:
        """Jump to a time (the start of the next conversation)."""
        self.now_ns = now_ns

    def sleep(self, seconds: float) -> None:
        """Let `seconds` pass (a tool's latency, the model's think time); never blocks."""
        self.now_ns += max(0, round(seconds * _NS_PER_S))


class _ClockedSpan(Span):
    """An SDK span whose end and event times default to the clock's time."""

    def __init__(self, inner: Span, clock: SimClock) -> None:
        self._inner = inner
        self._clock = clock

    def end(self, end_time: int | None = None) -> None:
        self._inner.end(end_time if end_time is not None else self._clock.now_ns)

    def get_span_context(self) -> SpanContext:
        return self._inner.get_span_context()

    def set_attributes(self, attributes: Mapping[str, types.AnyValue]) -> None:
        self._inner.set_attributes(attributes)

    def set_attribute(self, key: str, value: types.AnyValue) -> None:
        self._inner.set_attribute(key, value)

    def add_event(
        self, name: str, attributes: types.Attributes = None, timestamp: int | None = None
    ) -> None:
        self._inner.add_event(name, attributes, timestamp or self._clock.now_ns)

    def add_link(self, context: SpanContext, attributes: types.Attributes = None) -> None:
        self._inner.add_link(context, attributes)

    def update_name(self, name: str) -> None:
        self._inner.update_name(name)

    def is_recording(self) -> bool:
        return self._inner.is_recording()

    def set_status(self, status: Status | StatusCode, description: str | None = None) -> None:
        self._inner.set_status(status, description)

    def record_exception(
        self,
        exception: BaseException,
        attributes: types.Attributes = None,
        timestamp: int | None = None,
        escaped: bool = False,
    ) -> None:
        self._inner.record_exception(
            exception, attributes, timestamp or self._clock.now_ns, escaped
        )


class _ClockedTracer(trace.Tracer):
    """Starts spans at the clock's time unless the caller gives one."""

    def __init__(self, inner: trace.Tracer, clock: SimClock) -> None:
        self._inner = inner
        self._clock = clock

    def start_span(  # noqa: PLR0917 - the API's signature
        self,
        name: str,
        context: Context | None = None,
        kind: SpanKind = SpanKind.INTERNAL,
        attributes: types.Attributes = None,
        links: Sequence[Link] | None = None,
        start_time: int | None = None,
        record_exception: bool = True,
        set_status_on_exception: bool = True,
    ) -> Span:
        span = self._inner.start_span(
            name,
            context,
            kind,
            attributes,
            links,
            start_time if start_time is not None else self._clock.now_ns,
            record_exception,
            set_status_on_exception,
        )
        return _ClockedSpan(span, self._clock)

    # The API types this with its private `_agnosticcontextmanager`; a plain contextmanager
    # behaves the same for `with`, which is all the toolkit and the demo use.
    @contextmanager
    def start_as_current_span(  # type: ignore[override]  # noqa: PLR0917
        self,
        name: str,
        context: Context | None = None,
        kind: SpanKind = SpanKind.INTERNAL,
        attributes: types.Attributes = None,
        links: Sequence[Link] | None = None,
        start_time: int | None = None,
        record_exception: bool = True,
        set_status_on_exception: bool = True,
        end_on_exit: bool = True,
    ) -> Iterator[Span]:
        span = self.start_span(
            name,
            context,
            kind,
            attributes,
            links,
            start_time,
            record_exception,
            set_status_on_exception,
        )
        with trace.use_span(
            span,
            end_on_exit=end_on_exit,
            record_exception=record_exception,
            set_status_on_exception=set_status_on_exception,
        ) as current:
            yield current


class ClockedTracerProvider(trace.TracerProvider):
    """A tracer provider whose spans take their times from `clock` (see the module doc)."""

    def __init__(self, inner: trace.TracerProvider, clock: SimClock) -> None:
        self.inner = inner
        self.clock = clock

    def get_tracer(
        self,
        instrumenting_module_name: str,
        instrumenting_library_version: str | None = None,
        schema_url: str | None = None,
        attributes: types.Attributes = None,
    ) -> trace.Tracer:
        """A tracer of the wrapped provider, stamping spans with the clock."""
        tracer = self.inner.get_tracer(
            instrumenting_module_name, instrumenting_library_version, schema_url, attributes
        )
        return _ClockedTracer(tracer, self.clock)
