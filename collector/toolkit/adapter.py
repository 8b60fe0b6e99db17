"""`@tool(name)`: the adapter between an agent loop and a tool handler.

A call `get_job(raw_arguments, call_id=..., budget=...)`:

1. opens an `execute_tool {name}` span (kind INTERNAL) on the tracer "errscope.toolkit";
2. validates, then coerces, the raw arguments (`errscope.collector.toolkit.arguments`);
3. calls the handler only when both passed;
4. turns what happened into an observation dict (`errscope.collector.toolkit.observation`): the
   handler's result, a `ToolError` it raised, or a foreign exception mapped through the
   catalog (`errscope.collector.toolkit.foreign`: HTTP status on the exception's response
   first, then the exception's class names along its MRO, then the catalog's fallback);
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

Telemetry never decides an outcome.  The OTel SDK does not catch exceptions from span
processors, so starting or ending the span, setting its attributes and recording the
exception are each guarded: a failure there is logged as one line
("errscope.toolkit telemetry_error: ...", the exception type, no values) and the call's
observation stands.  Once the handler returned, its success is what the loop gets.

Tracebacks.  On internal_error the span gets an `exception` event that is safe for any
exporter: `exception.type` (the dotted class name), `exception.message` (the message
scrubbed by the scrub engine, at most 512 characters; left out when it cannot be read or
scrubbed) and `exception.stacktrace` (the engine's redacted copy of the traceback: frame
functions, relative file names and line numbers, messages masked; left out when the engine
cannot run).  Not `span.record_exception`, which would put the raw message and stack on the
span for whatever exporter the service configured.  errscope's pipeline samples these
redacted traces (redacting is idempotent), linked by trace, span and correlation id.
Services that want the same redacted traceback in-process install a sink with
`set_traceback_sink`.  The traceback never reaches the observation.

Tools are immutable after construction and safe to call from many threads at once.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import logging
import threading
import traceback
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, overload

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import INVALID_SPAN, Span, SpanKind, Status, StatusCode, TracerProvider

from errscope.collector import __version__
from errscope.collector import semconv as sc
from errscope.collector.catalog import Catalog, Code, default_catalog
from errscope.collector.record import is_identifier, is_safe_id
from errscope.collector.toolkit.arguments import Rejection, Signature
from errscope.collector.toolkit.budget import RetryBudget
from errscope.collector.toolkit.exceptions import RateLimited, ToolError
from errscope.collector.toolkit.foreign import class_names, clean_seconds, code_for
from errscope.collector.toolkit.observation import (
    DEFAULT_MAX_OBSERVATION_BYTES,
    MIN_OBSERVATION_BYTES,
    Observation,
    default_hint,
    error_observation,
    success_observation,
)
from errscope.collector.toolkit.scrubbing import looks_secret, scrub_text, warm_up

if TYPE_CHECKING:
    from errscope.collector.scrub import RedactedTraceback

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
_SPAN_MESSAGE_MAX_CHARS: Final = 512
# The code a telemetry failure is logged under (one line, no values).
_TELEMETRY_ERROR: Final = "errscope.toolkit telemetry_error"
_log: Final = logging.getLogger(__name__)


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


def _guarded(what: str, action: Callable[[], object]) -> None:
    """Run a telemetry action; a failure is logged as one line and never fails the call.

    The OTel SDK does not catch exceptions from span processors (`on_start`, `on_end`), so
    starting or ending a span can raise whatever a third-party processor raises.  The tool
    call's outcome (a card charged, a row written) must stand regardless.
    """
    try:
        action()
    except Exception as exc:  # noqa: BLE001 — telemetry never decides a tool call's outcome
        _log.warning("%s: %s raised %s", _TELEMETRY_ERROR, what, type(exc).__name__)


def _message(exc: BaseException) -> str | None:
    """The exception's message, scrubbed, for the span; None when it cannot be read safely."""
    try:
        text = str(exc)
    except Exception:  # noqa: BLE001 — a __str__ that raises: no message
        return None
    scrubbed = scrub_text(text)
    return None if scrubbed is None else scrubbed[:_SPAN_MESSAGE_MAX_CHARS]


def _redacted(exc: BaseException) -> RedactedTraceback | None:
    """The scrub engine's redacted copy of the exception's traceback; None if it cannot run."""
    try:
        from errscope.collector.scrub import redact_traceback  # noqa: PLC0415 — only on internal_error

        return redact_traceback("".join(traceback.format_exception(exc)))
    except Exception:  # noqa: BLE001 — fail closed: no stack trace on the span
        return None


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
        warm_up()  # compile the scrub engine off the caller's thread, before the first call
        if tracer_provider is not None:
            self._tracer = tracer_provider.get_tracer(TRACER_NAME, __version__)
        else:
            # A ProxyTracer until the service sets its provider; it follows that provider.
            self._tracer = trace.get_tracer(TRACER_NAME, __version__)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name!r}>"

    def _start(self, call_id: object) -> tuple[Span, object]:
        """Start the span and make it current; a failing tracer gives a non-recording span."""
        attributes: dict[str, str] = {
            ATTR_OPERATION: "execute_tool",
            ATTR_TOOL_NAME: self.name,
            ATTR_TOOL_TYPE: "function",
        }
        if isinstance(call_id, str) and is_safe_id(call_id):
            attributes[ATTR_CALL_ID] = call_id
        span: Span = INVALID_SPAN
        token: object = None
        try:
            span = self._tracer.start_span(
                f"execute_tool {self.name}",
                kind=SpanKind.INTERNAL,
                attributes=attributes,
                record_exception=False,
                set_status_on_exception=False,
            )
            token = otel_context.attach(trace.set_span_in_context(span))
        except Exception as exc:  # noqa: BLE001 — see _guarded: the call runs untraced
            _log.warning("%s: span start raised %s", _TELEMETRY_ERROR, type(exc).__name__)
        return span, token

    @staticmethod
    def _end(span: Span, token: object) -> None:
        if token is not None:
            _guarded("context detach", lambda: otel_context.detach(token))  # type: ignore[arg-type]
        _guarded("span end", span.end)

    @staticmethod
    def _mark_failed(span: Span, code: str) -> None:
        def mark() -> None:
            span.set_attribute(ATTR_CODE, code)
            span.set_attribute(ATTR_ERROR_TYPE, code)
            span.set_status(Status(StatusCode.ERROR))

        _guarded("span status", mark)

    def _classify(self, exc: Exception) -> _Failure:
        """The code, hint, field and retry_after a handler's exception stands for."""
        if not isinstance(exc, ToolError):
            code, retry_after_s = code_for(self.catalog, exc)
            return _Failure(code, retry_after_s=retry_after_s)
        code = exc.code
        if not (isinstance(code, str) and code in self.catalog.entries):
            code = Code.INTERNAL_ERROR.value  # a code the catalog does not know (or not a str)
        retry_after_s = clean_seconds(exc.retry_after_s) if isinstance(exc, RateLimited) else None
        hint, field = exc.hint, exc.field
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
        )

    def _failure(self, exc: Exception, span: Span) -> _Failure:
        """The failure a handler's exception stands for; internal errors get a correlation id."""
        try:
            failure = self._classify(exc)
        except Exception:  # noqa: BLE001 — an exception the kit cannot read is internal_error
            failure = _Failure(Code.INTERNAL_ERROR.value)
        if failure.code == Code.NOT_FOUND and failure.hint is None:
            return _Failure(failure.code, hint=self.not_found_hint, field=failure.field)
        if failure.code != Code.INTERNAL_ERROR:
            return failure
        # A handler's words about its own bug are for humans: no hint, a correlation id.
        correlation_id = uuid.uuid4().hex
        self._record_exception(exc, correlation_id, span)
        return _Failure(failure.code, correlation_id=correlation_id)

    def _record_exception(self, exc: BaseException, correlation_id: str, span: Span) -> None:
        """Put the exception on the span, redacted, and offer it to the traceback sink.

        Not `span.record_exception`: that writes `str(exc)` and the raw stack trace, which
        any exporter the service configured would ship unscrubbed.  The event carries the
        exception's type, its message scrubbed, and the scrub engine's redacted traceback
        (each left out when it cannot be produced safely).
        """
        exception_type = next(class_names(type(exc)))
        redacted = _redacted(exc)
        attributes: dict[str, str] = {sc.EXCEPTION_TYPE: exception_type}
        message = _message(exc)
        if message:
            attributes[sc.EXCEPTION_MESSAGE] = message
        if redacted is not None:
            attributes[sc.EXCEPTION_STACKTRACE] = redacted.text
        _guarded("exception event", lambda: span.add_event(sc.EXCEPTION_EVENT, attributes))
        if redacted is not None:
            self._sample(redacted, exception_type, correlation_id, span)

    def _sample(
        self, redacted: RedactedTraceback, exception_type: str, correlation_id: str, span: Span
    ) -> None:
        with _sink_lock:
            sink = _sink
        if sink is None:
            return
        try:
            context = span.get_span_context()
            sink(
                TracebackReport(
                    correlation_id=correlation_id,
                    tool=self.name,
                    trace_id=format(context.trace_id, "032x"),
                    span_id=format(context.span_id, "016x"),
                    exception_type=redacted.exception_type or exception_type,
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

    def _annotate(self, span: Span, outcome: _Outcome) -> None:
        if isinstance(outcome, _Success):
            _guarded("span attribute", lambda: span.set_attribute(ATTR_CODE, Code.OK.value))
            return
        self._mark_failed(span, outcome.code)

        def attributes() -> None:
            if outcome.field is not None:
                span.set_attribute(ATTR_FIELD, outcome.field)
            if outcome.correlation_id is not None:
                span.set_attribute(ATTR_CORRELATION_ID, outcome.correlation_id)
            if outcome.retry_after_s is not None:  # what the pipeline stores as retry_after_s
                span.set_attribute(ATTR_RETRY_AFTER_S, outcome.retry_after_s)

        _guarded("span attributes", attributes)

    def _lookup(self, outcome: _Outcome, bound: object) -> str | None:
        """A digest of what a not_found call looked up: the named field's value, or all."""
        if not (isinstance(outcome, _Failure) and outcome.code == Code.NOT_FOUND):
            return None
        if not isinstance(bound, dict):
            return None
        looked_up: object = bound
        if outcome.field is not None and outcome.field in bound:
            looked_up = {outcome.field: bound[outcome.field]}
        try:
            text = json.dumps([self.name, looked_up], sort_keys=True, default=repr)
        except Exception:  # noqa: BLE001 — an unprintable id counts as a new miss
            return None
        return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()

    def _finish(
        self, span: Span, outcome: _Outcome, budget: RetryBudget | None, bound: object
    ) -> Observation:
        if isinstance(outcome, _Success):
            observation = success_observation(outcome.result)
        else:
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
        self._annotate(span, outcome)
        if budget is not None:
            budget.record(
                observation,
                tool=self.name,
                span=span,
                declared_fields=self.signature.params,
                lookup=self._lookup(outcome, bound),
            )
        return observation

    def _last_resort(
        self, exc: Exception, span: Span, outcome: _Outcome | None, budget: RetryBudget | None
    ) -> Observation:
        """What the loop gets when the toolkit itself failed.

        After the handler returned, its success stands (its side effects happened; an
        internal_error would invite a retry).  Otherwise internal_error with a correlation
        id, recorded on the span and in the budget like any other.
        """
        observation: Observation
        if isinstance(outcome, _Success):
            observation = success_observation(outcome.result)
            self._annotate(span, outcome)
        else:
            correlation_id = uuid.uuid4().hex
            observation = {
                "error": Code.INTERNAL_ERROR.value,
                "hint": default_hint(Code.INTERNAL_ERROR.value, self.catalog),
                "correlation_id": correlation_id,
            }
            # Guarded as a whole: nothing on this path may raise into the loop.
            _guarded("exception event", lambda: self._record_exception(exc, correlation_id, span))
            self._annotate(span, _Failure(Code.INTERNAL_ERROR.value, correlation_id=correlation_id))
        if budget is not None:
            try:
                budget.record(observation, tool=self.name, span=span)
            except Exception as record_exc:  # noqa: BLE001 — a budget subclass that raises
                _log.warning("%s: budget raised %s", _TELEMETRY_ERROR, type(record_exc).__name__)
        return observation


class Tool(_Adapter):
    """A synchronous tool: `tool(raw_arguments, *, call_id=None, budget=None) -> observation`.

    `raw_arguments` is what the model sent: a dict, or the JSON text of one.  `call_id` is
    the model's tool-call id (recorded as `gen_ai.tool.call.id`); `budget` a `RetryBudget`
    whose decision is recorded on the span (read it back with `budget.take_decision()`).
    `.handler` is the undecorated function, for direct unit tests.
    """

    def __call__(
        self, arguments: object, /, *, call_id: str | None = None, budget: RetryBudget | None = None
    ) -> Observation:
        """Run one tool call and return its observation; never raises an `Exception`."""
        span, token = self._start(call_id)
        outcome: _Outcome | None = None
        try:
            bound = self._bind(arguments)
            if isinstance(bound, _Failure):
                outcome = bound
            else:
                try:
                    outcome = _Success(self.handler(**bound))
                except Exception as exc:  # noqa: BLE001 — every failure becomes a code
                    outcome = self._failure(exc, span)
            return self._finish(span, outcome, budget, bound)
        except Exception as exc:  # noqa: BLE001 — the adapter never raises into the agent loop
            return self._last_resort(exc, span, outcome, budget)
        except BaseException:
            # Cancellation and interrupts: counted, not swallowed.
            self._mark_failed(span, Code.INTERNAL_ERROR.value)
            raise
        finally:
            self._end(span, token)


class AsyncTool(_Adapter):
    """An async tool: `await tool(raw_arguments, *, call_id=None, budget=None)`; see `Tool`."""

    async def __call__(
        self, arguments: object, /, *, call_id: str | None = None, budget: RetryBudget | None = None
    ) -> Observation:
        """Run one tool call and return its observation; never raises an `Exception`."""
        span, token = self._start(call_id)
        outcome: _Outcome | None = None
        try:
            bound = self._bind(arguments)
            if isinstance(bound, _Failure):
                outcome = bound
            else:
                try:
                    outcome = _Success(await self.handler(**bound))
                except Exception as exc:  # noqa: BLE001 — every failure becomes a code
                    outcome = self._failure(exc, span)
            return self._finish(span, outcome, budget, bound)
        except Exception as exc:  # noqa: BLE001 — the adapter never raises into the agent loop
            return self._last_resort(exc, span, outcome, budget)
        except BaseException:
            # Cancellation and interrupts: counted, not swallowed.
            self._mark_failed(span, Code.INTERNAL_ERROR.value)
            raise
        finally:
            self._end(span, token)


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
    `errscope.collector.toolkit.arguments` for what is supported); a signature that cannot be
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
