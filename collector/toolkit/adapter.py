"""`@tool(name)`: the adapter between an agent loop and a tool handler.

A call `get_job(raw_arguments, call_id=..., budget=...)`:

1. opens an `execute_tool {name}` span (kind INTERNAL) on the tracer "errscope.toolkit";
2. validates, then coerces, the raw arguments (`collector.toolkit.arguments`);
3. calls the handler only when both passed;
4. turns what happened into an observation dict (`collector.toolkit.observation`): the
   handler's result, a `ToolError` it raised, or a foreign exception mapped through the
   catalog (HTTP status on the exception's response first, then the exception's class
   names along its MRO, then the catalog's fallback);
5. records the outcome on the span, asks the budget (when given) for a decision, records
   that too, and returns the observation.

It never raises into the agent loop: every `Exception` becomes an observation, including a
bug in the toolkit itself.  `BaseException`s that are not `Exception`s (KeyboardInterrupt,
SystemExit, asyncio.CancelledError) propagate on purpose: cancellation must reach the
loop; the span is marked internal_error first.

Span attributes (never an argument value, a result, `got` or a hint, which may carry text):

    gen_ai.operation.name   "execute_tool" (set at span start: it is sampling-relevant)
    gen_ai.tool.name        the tool name
    gen_ai.tool.type        "function"
    gen_ai.tool.call.id     the caller's `call_id`, when it has the shape of an id
    errscope.code           "ok" or the catalog code
    error.type              the code, on failure only; the span status is then ERROR
                            without a description
    errscope.field          the invalid field, when it is an identifier
    errscope.correlation_id for internal_error
    errscope.retry.decision the budget's decision, when a budget was given

Tracebacks.  On internal_error the exception is recorded on the span with
`record_exception`: the span's `exception` event carries `exception.stacktrace`, and
errscope's pipeline (sidecar or in-process exporter) redacts and samples it before anything
is stored, linked by trace, span and correlation id.  Services that want the redacted
traceback in-process as well install a sink with `set_traceback_sink`.  The traceback never
reaches the observation.

Tools are immutable after construction and safe to call from many threads at once.
"""

from __future__ import annotations

import inspect
import math
import threading
import traceback
import uuid
from collections.abc import Awaitable, Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Final, overload

from opentelemetry import trace
from opentelemetry.trace import Span, SpanKind, Status, StatusCode, TracerProvider

from collector import __version__
from collector.catalog import Catalog, Code, default_catalog
from collector.record import is_identifier, is_safe_id
from collector.toolkit.arguments import Rejection, Signature
from collector.toolkit.budget import RetryBudget
from collector.toolkit.exceptions import RateLimited, ToolError
from collector.toolkit.observation import (
    DEFAULT_MAX_OBSERVATION_BYTES,
    MIN_OBSERVATION_BYTES,
    Observation,
    default_hint,
    error_observation,
    success_observation,
)
from collector.toolkit.scrubbing import looks_secret

__all__ = [
    "AsyncTool",
    "Tool",
    "TracebackReport",
    "TracebackSink",
    "set_traceback_sink",
    "tool",
]

TRACER_NAME: Final = "errscope.toolkit"
# Attribute keys (GenAI semantic conventions, then errscope's own).
ATTR_OPERATION: Final = "gen_ai.operation.name"
ATTR_TOOL_NAME: Final = "gen_ai.tool.name"
ATTR_TOOL_TYPE: Final = "gen_ai.tool.type"
ATTR_CALL_ID: Final = "gen_ai.tool.call.id"
ATTR_ERROR_TYPE: Final = "error.type"
ATTR_CODE: Final = "errscope.code"
ATTR_FIELD: Final = "errscope.field"
ATTR_CORRELATION_ID: Final = "errscope.correlation_id"
ATTR_RETRY_AFTER_S: Final = "errscope.retry_after_s"

# Tool names in the wild: `get_job`, `search.web`, `github/create_issue`, `fs:read-file`.
_TOOL_NAME_CHARS: Final = frozenset(
    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.:/-"
)
_MAX_TOOL_NAME_CHARS: Final = 128
_SKIPPED_BASES: Final = (BaseException, Exception, object)


@dataclass(frozen=True, slots=True)
class TracebackReport:
    """A redacted traceback of an internal_error, with the ids that link it to its call."""

    correlation_id: str
    tool: str
    trace_id: str
    span_id: str
    exception_type: str
    fingerprint: str
    text: str


TracebackSink = Callable[[TracebackReport], None]

_sink_lock: Final = threading.Lock()
_sink: TracebackSink | None = None


def set_traceback_sink(sink: TracebackSink | None) -> TracebackSink | None:
    """Install the process-wide receiver of redacted tracebacks; returns the previous one.

    The sink runs on the calling thread of the tool, must be quick, and should not raise
    (an exception from it is swallowed).  None (the default) sends tracebacks only to the
    span's exception event.
    """
    global _sink  # one process-wide hook, like logging's handlers
    with _sink_lock:
        previous, _sink = _sink, sink
    return previous


@dataclass(frozen=True, slots=True)
class _Failure:
    code: str
    hint: str | None = None
    field: str | None = None
    got: object = None
    has_got: bool = False
    retry_after_s: float | None = None
    correlation_id: str | None = None


@dataclass(frozen=True, slots=True)
class _Success:
    result: object


_Outcome = _Success | _Failure


def _class_names(cls: type) -> Iterator[str]:
    """The names a catalog may list a class under: dotted, then the public package form."""
    if cls.__module__ == "builtins":
        yield cls.__qualname__
        return
    yield f"{cls.__module__}.{cls.__qualname__}"
    # httpx defines ReadTimeout in httpx._exceptions and exports it as httpx.ReadTimeout.
    parts = cls.__module__.split(".")
    if any(part.startswith("_") for part in parts):
        yield f"{parts[0]}.{cls.__qualname__}"


def _http_response(exc: BaseException) -> tuple[int | None, Any]:
    """The HTTP status and headers an httpx/requests/SDK exception carries, if any."""
    response = getattr(exc, "response", None)
    status = getattr(response, "status_code", None)
    if status is None:
        status = getattr(exc, "status_code", None)
    headers = getattr(response, "headers", None)
    if isinstance(status, int) and not isinstance(status, bool):
        return status, headers
    return None, headers


def _retry_after_s(headers: Any) -> float | None:
    """Retry-After in seconds from a headers mapping (delay-seconds form only)."""
    if not isinstance(headers, Mapping):
        return None
    value = headers.get("retry-after") or headers.get("Retry-After")
    try:
        seconds = float(value) if isinstance(value, str | int | float) else None
    except ValueError:
        return None
    return _clean_seconds(seconds)


def _clean_seconds(value: object) -> float | None:
    """Seconds as a finite, non-negative float; a number given as text ("5", straight from a
    Retry-After header) is read; anything else is dropped rather than failing the call."""
    if isinstance(value, bool):
        return None
    if isinstance(value, str):
        try:
            value = float(value.strip())
        except ValueError:
            return None
    if not isinstance(value, int | float) or not math.isfinite(value) or value < 0:
        return None
    return round(float(value), 3)


class _Adapter:
    """What the sync and async tools share: everything but the call of the handler."""

    def __init__(
        self,
        name: str,
        handler: Callable[..., Any],
        *,
        catalog: Catalog | None,
        not_found_hint: str | None,
        max_observation_bytes: int,
        tracer_provider: TracerProvider | None,
    ) -> None:
        if not (
            0 < len(name) <= _MAX_TOOL_NAME_CHARS
            and set(name) <= _TOOL_NAME_CHARS
            and name[0] not in ".:/-"
        ):
            raise ValueError("tool names are 1-128 characters of A-Z a-z 0-9 _ . : / -")
        if max_observation_bytes < MIN_OBSERVATION_BYTES:
            raise ValueError(f"max_observation_bytes must be at least {MIN_OBSERVATION_BYTES}")
        self.name: Final = name
        self.handler: Final = handler
        self.signature: Final = Signature(handler)
        self.catalog: Final = catalog if catalog is not None else default_catalog()
        self.not_found_hint: Final = not_found_hint
        self.max_observation_bytes: Final = max_observation_bytes
        self.__doc__ = handler.__doc__
        if tracer_provider is not None:
            self._tracer = tracer_provider.get_tracer(TRACER_NAME, __version__)
        else:
            # A ProxyTracer until the service sets its provider; it follows that provider.
            self._tracer = trace.get_tracer(TRACER_NAME, __version__)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name!r}>"

    @contextmanager
    def _span(self, call_id: object) -> Iterator[Span]:
        attributes: dict[str, str] = {
            ATTR_OPERATION: "execute_tool",
            ATTR_TOOL_NAME: self.name,
            ATTR_TOOL_TYPE: "function",
        }
        if isinstance(call_id, str) and is_safe_id(call_id):
            attributes[ATTR_CALL_ID] = call_id
        with self._tracer.start_as_current_span(
            f"execute_tool {self.name}",
            kind=SpanKind.INTERNAL,
            attributes=attributes,
            record_exception=False,
            set_status_on_exception=False,
        ) as span:
            try:
                yield span
            except BaseException:
                # Cancellation and interrupts: counted, not swallowed.
                self._mark_failed(span, Code.INTERNAL_ERROR.value)
                raise

    @staticmethod
    def _mark_failed(span: Span, code: str) -> None:
        span.set_attribute(ATTR_CODE, code)
        span.set_attribute(ATTR_ERROR_TYPE, code)
        span.set_status(Status(StatusCode.ERROR))

    def _code_for(self, exc: Exception) -> tuple[str, float | None]:
        """The catalog code for a foreign exception, and retry_after when one is given."""
        status, headers = _http_response(exc)
        if status is not None:
            code = self.catalog.for_http(status)
            if code is not None:
                return code, _retry_after_s(headers)
        for cls in type(exc).__mro__:
            if cls in _SKIPPED_BASES:
                break
            for name in _class_names(cls):
                code = self.catalog.for_exception(name)
                if code is not None:
                    return code, _retry_after_s(headers)
        return self.catalog.fallback["exception"], None

    def _failure(self, exc: Exception, span: Span) -> _Failure:
        """The failure a handler's exception stands for; internal errors get a correlation id."""
        hint: str | None = None
        field: str | None = None
        retry_after_s: float | None = None
        if isinstance(exc, ToolError):
            code = exc.code if exc.code in self.catalog.entries else Code.INTERNAL_ERROR.value
            hint, field = exc.hint, exc.field
            if isinstance(exc, RateLimited):
                retry_after_s = _clean_seconds(exc.retry_after_s)
        else:
            code, retry_after_s = self._code_for(exc)
        if code == Code.NOT_FOUND and hint is None:
            hint = self.not_found_hint
        correlation_id = None
        if code == Code.INTERNAL_ERROR:
            hint = None  # a handler's words about its own bug are for humans
            correlation_id = uuid.uuid4().hex
            span.record_exception(exc)
            self._sample(exc, correlation_id, span)
        return _Failure(
            code,
            hint=hint if isinstance(hint, str) else None,
            # A handler may name a key the model sent, which can be anything, a token
            # included: such a "field" is neither echoed nor recorded.
            field=(
                field
                if isinstance(field, str) and is_identifier(field) and not looks_secret(field)
                else None
            ),
            retry_after_s=retry_after_s,
            correlation_id=correlation_id,
        )

    def _sample(self, exc: Exception, correlation_id: str, span: Span) -> None:
        with _sink_lock:
            sink = _sink
        if sink is None:
            return
        try:
            from collector.scrub import redact_traceback  # noqa: PLC0415 — only with a sink

            redacted = redact_traceback("".join(traceback.format_exception(exc)))
            if redacted is None:
                return
            context = span.get_span_context()
            sink(
                TracebackReport(
                    correlation_id=correlation_id,
                    tool=self.name,
                    trace_id=format(context.trace_id, "032x"),
                    span_id=format(context.span_id, "016x"),
                    exception_type=redacted.exception_type or next(_class_names(type(exc))),
                    fingerprint=redacted.fingerprint,
                    text=redacted.text,
                )
            )
        except Exception:  # noqa: BLE001, S110 — a broken sink must not break the tool call
            pass

    def _bind(self, arguments: object) -> dict[str, object] | _Failure:
        bound = self.signature.bind(arguments)
        if isinstance(bound, Rejection):
            return _Failure(
                Code.INVALID_ARGS.value,
                hint=bound.hint,
                field=bound.field,
                got=bound.got,
                has_got=bound.has_got,
            )
        return bound

    def _finish(self, span: Span, outcome: _Outcome, budget: RetryBudget | None) -> Observation:
        if isinstance(outcome, _Success):
            observation = success_observation(outcome.result)
            span.set_attribute(ATTR_CODE, Code.OK.value)
        else:
            self._mark_failed(span, outcome.code)
            if outcome.field is not None:
                span.set_attribute(ATTR_FIELD, outcome.field)
            if outcome.correlation_id is not None:
                span.set_attribute(ATTR_CORRELATION_ID, outcome.correlation_id)
            if outcome.retry_after_s is not None:  # what the pipeline stores as retry_after_s
                span.set_attribute(ATTR_RETRY_AFTER_S, outcome.retry_after_s)
            observation = error_observation(
                outcome.code,
                outcome.hint or default_hint(outcome.code, self.catalog),
                catalog=self.catalog,
                max_bytes=self.max_observation_bytes,
                field=outcome.field,
                got=outcome.got,
                has_got=outcome.has_got,
                retry_after_s=outcome.retry_after_s,
                correlation_id=outcome.correlation_id,
            )
        if budget is not None:
            budget.record(observation, tool=self.name, span=span)
        return observation

    def _last_resort(self) -> Observation:
        """What the loop gets when the toolkit itself failed: internal_error, nothing else."""
        return {
            "error": Code.INTERNAL_ERROR.value,
            "hint": default_hint(Code.INTERNAL_ERROR.value, self.catalog),
        }


class Tool(_Adapter):
    """A synchronous tool: `tool(raw_arguments, *, call_id=None, budget=None) -> observation`.

    `raw_arguments` is what the model sent: a dict, or the JSON text of one.  `call_id` is
    the model's tool-call id (recorded as `gen_ai.tool.call.id`); `budget` a `RetryBudget`
    whose decision is recorded on the span (read it back with `budget.last_decision`).
    `.handler` is the undecorated function, for direct unit tests.
    """

    def __call__(
        self, arguments: object, /, *, call_id: str | None = None, budget: RetryBudget | None = None
    ) -> Observation:
        """Run one tool call and return its observation; never raises an `Exception`."""
        try:
            with self._span(call_id) as span:
                outcome: _Outcome
                bound = self._bind(arguments)
                if isinstance(bound, _Failure):
                    outcome = bound
                else:
                    try:
                        outcome = _Success(self.handler(**bound))
                    except Exception as exc:  # noqa: BLE001 — every failure becomes a code
                        outcome = self._failure(exc, span)
                return self._finish(span, outcome, budget)
        except Exception:  # noqa: BLE001 — the adapter never raises into the agent loop
            return self._last_resort()


class AsyncTool(_Adapter):
    """An async tool: `await tool(raw_arguments, *, call_id=None, budget=None)`; see `Tool`."""

    async def __call__(
        self, arguments: object, /, *, call_id: str | None = None, budget: RetryBudget | None = None
    ) -> Observation:
        """Run one tool call and return its observation; never raises an `Exception`."""
        try:
            with self._span(call_id) as span:
                outcome: _Outcome
                bound = self._bind(arguments)
                if isinstance(bound, _Failure):
                    outcome = bound
                else:
                    try:
                        outcome = _Success(await self.handler(**bound))
                    except Exception as exc:  # noqa: BLE001 — every failure becomes a code
                        outcome = self._failure(exc, span)
                return self._finish(span, outcome, budget)
        except Exception:  # noqa: BLE001 — the adapter never raises into the agent loop
            return self._last_resort()


class _Decorator:
    """What `tool(name, ...)` returns: applied to a handler, it builds the tool."""

    def __init__(self, name: str, options: dict[str, Any]) -> None:
        self._name = name
        self._options = options

    @overload
    def __call__(self, handler: Callable[..., Awaitable[Any]]) -> AsyncTool: ...
    @overload
    def __call__(self, handler: Callable[..., Any]) -> Tool: ...
    def __call__(self, handler: Callable[..., Any]) -> Tool | AsyncTool:
        """Wrap `handler`; raises TypeError/ValueError for a tool that cannot be checked."""
        if inspect.iscoroutinefunction(handler):
            return AsyncTool(self._name, handler, **self._options)
        return Tool(self._name, handler, **self._options)


def tool(
    name: str,
    *,
    catalog: Catalog | None = None,
    not_found_hint: str | None = None,
    max_observation_bytes: int = DEFAULT_MAX_OBSERVATION_BYTES,
    tracer_provider: TracerProvider | None = None,
) -> _Decorator:
    """Declare a tool: `@tool("get_job")` over `def get_job(job_id: PositiveInt) -> dict`.

    The handler's parameters and annotations are its schema (see
    `collector.toolkit.arguments` for what is supported); a signature that cannot be
    checked raises TypeError here, at import time, never during a call.  `not_found_hint`
    is the hint for a `NotFound` raised without one ("job ids look like 17 or 42").
    `max_observation_bytes` caps error observations (at least 128).  `tracer_provider`
    defaults to the global one; tests pass their own.  An `async def` handler makes an
    `AsyncTool`.
    """
    return _Decorator(
        name,
        {
            "catalog": catalog,
            "not_found_hint": not_found_hint,
            "max_observation_bytes": max_observation_bytes,
            "tracer_provider": tracer_provider,
        },
    )
