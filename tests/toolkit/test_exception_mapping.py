"""Handler failures become catalog codes: toolkit exceptions, HTTP statuses, client errors."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import pytest

from errscope.collector.catalog import default_catalog
from errscope.collector.record import is_safe_id
from errscope.collector.toolkit import (
    Denied,
    InternalError,
    InvalidArgs,
    NotFound,
    RateLimited,
    RetryBudget,
    Timeout,
    Tool,
    ToolError,
    TracebackReport,
    set_traceback_sink,
)
from errscope.collector.toolkit.foreign import http_response


def foreign(module: str, name: str, *bases: type[BaseException]) -> type[Exception]:
    """An exception class that claims to live in `module`, like httpx's or requests' own."""
    cls = type(name, bases or (Exception,), {"__module__": module})
    return cls  # type: ignore[return-value]


@dataclass
class FakeResponse:
    """The part of an httpx/requests response the toolkit reads: status and headers."""

    status_code: int
    headers: dict[str, str] = field(default_factory=dict)


class StatusError(Exception):
    """Like httpx.HTTPStatusError / requests.HTTPError: the status is on `.response`."""

    def __init__(self, response: FakeResponse) -> None:
        super().__init__("HTTP error <html><body>Server Error</body></html>")
        self.response = response


class SDKStatusError(Exception):
    """Like openai.APIStatusError: the status is on the exception itself."""

    def __init__(self, status_code: int) -> None:
        super().__init__("upstream said no")
        self.status_code = status_code


_HttpxTimeout = foreign("httpx._exceptions", "TimeoutException")
_RequestsRequest = foreign("requests.exceptions", "RequestException", OSError)
_RequestsConnection = foreign("requests.exceptions", "ConnectionError", _RequestsRequest)
_RequestsTimeout = foreign("requests.exceptions", "Timeout", _RequestsRequest)


def _raise(exc: BaseException) -> Callable[[], Any]:
    def handler() -> Any:
        raise exc

    return handler


@pytest.mark.parametrize(
    ("exc", "code"),
    [
        pytest.param(InvalidArgs("n: a number", field="n"), "invalid_args", id="toolkit-invalid"),
        pytest.param(NotFound(hint="ids look like 17"), "not_found", id="toolkit-not-found"),
        pytest.param(Denied(), "denied", id="toolkit-denied"),
        pytest.param(RateLimited(retry_after_s=3), "rate_limited", id="toolkit-rate-limited"),
        pytest.param(Timeout(), "timeout", id="toolkit-timeout"),
        pytest.param(InternalError(), "internal_error", id="toolkit-internal"),
        pytest.param(ToolError(code="not_in_catalog"), "internal_error", id="unknown-code"),
        pytest.param(TimeoutError("slow"), "timeout", id="builtin-timeout"),
        pytest.param(PermissionError("/etc/passwd"), "denied", id="permission-error"),
        pytest.param(FileNotFoundError("x"), "not_found", id="file-not-found"),
        pytest.param(LookupError("x"), "not_found", id="lookup-error"),
        pytest.param(KeyError("x"), "internal_error", id="key-error-is-a-bug"),
        # Arguments were validated before the handler ran: its own ValueError is not the
        # model's to fix.
        pytest.param(ValueError("x"), "internal_error", id="value-error-in-handler"),
        pytest.param(ZeroDivisionError(), "internal_error", id="unmapped-fallback"),
        pytest.param(
            foreign("httpx._exceptions", "ReadTimeout", _HttpxTimeout)(),
            "timeout",
            id="httpx-read-timeout",
        ),
        pytest.param(
            foreign("httpx._exceptions", "ConnectError")(),
            "internal_error",
            id="httpx-connect-error",
        ),
        pytest.param(
            foreign("httpx._exceptions", "PoolTimeout", _HttpxTimeout)(),
            "timeout",
            id="httpx-pool-timeout",
        ),
        pytest.param(
            foreign("requests.exceptions", "ReadTimeout", _RequestsTimeout)(),
            "timeout",
            id="requests-read-timeout",
        ),
        pytest.param(
            foreign(
                "requests.exceptions", "ConnectTimeout", _RequestsConnection, _RequestsTimeout
            )(),
            "timeout",
            id="requests-connect-timeout-is-a-timeout",
        ),
        pytest.param(_RequestsConnection(), "internal_error", id="requests-connection-error"),
        pytest.param(foreign("myapp.jobs", "JobDoesNotExist")(), "not_found", id="glob"),
        pytest.param(type("MyTimeout", (TimeoutError,), {})(), "timeout", id="subclass-by-mro"),
        pytest.param(StatusError(FakeResponse(404)), "not_found", id="http-404"),
        pytest.param(StatusError(FakeResponse(403)), "denied", id="http-403"),
        pytest.param(StatusError(FakeResponse(401)), "denied", id="http-401"),
        pytest.param(StatusError(FakeResponse(422)), "invalid_args", id="http-422"),
        pytest.param(StatusError(FakeResponse(429)), "rate_limited", id="http-429"),
        pytest.param(StatusError(FakeResponse(504)), "timeout", id="http-504"),
        pytest.param(StatusError(FakeResponse(503)), "internal_error", id="http-503"),
        pytest.param(StatusError(FakeResponse(418)), "invalid_args", id="http-4xx-fallback"),
        pytest.param(SDKStatusError(404), "not_found", id="sdk-status-code"),
    ],
)
def test_failure_maps_to_code(
    make_tool: Callable[..., Callable[[Callable[..., Any]], Tool]],
    exc: Exception,
    code: str,
) -> None:
    """Every handler exception becomes the catalog's code in a dict with a hint."""
    observation = make_tool("t")(_raise(exc))({})
    assert observation["error"] == code
    assert observation["hint"]
    assert ("correlation_id" in observation) is (code == "internal_error")


@pytest.mark.parametrize(
    ("exc", "retry_after"),
    [
        pytest.param(RateLimited(retry_after_s=2.5), 2.5, id="toolkit"),
        pytest.param(StatusError(FakeResponse(429, {"retry-after": "7"})), 7.0, id="header"),
        pytest.param(StatusError(FakeResponse(429, {"retry-after": "soon"})), None, id="bad"),
        pytest.param(RateLimited(retry_after_s=float("inf")), None, id="infinite"),
        pytest.param(RateLimited(retry_after_s=-1), None, id="negative"),
    ],
)
def test_retry_after(
    make_tool: Callable[..., Callable[[Callable[..., Any]], Tool]],
    exc: Exception,
    retry_after: float | None,
) -> None:
    """rate_limited carries retry_after in seconds when it is known and sane."""
    observation = make_tool("t")(_raise(exc))({})
    assert observation["error"] == "rate_limited"
    assert observation.get("retry_after") == retry_after
    json.loads(json.dumps(observation, allow_nan=False))


@pytest.mark.parametrize(
    "exc",
    [
        pytest.param(RuntimeError("secret /home/alice/app.py <b>boom</b>"), id="runtime"),
        pytest.param(InternalError(hint="db password is hunter2"), id="author-hint"),
        pytest.param(StatusError(FakeResponse(500)), id="html-body"),
        pytest.param(KeyError("sk_live_" + "4eC39HqLyjWDarjtT1zdp7dc"), id="key-error"),
    ],
)
def test_internal_error_hides_everything_but_a_correlation_id(
    make_tool: Callable[..., Callable[[Callable[..., Any]], Tool]], exc: Exception
) -> None:
    """internal_error tells the model "try later" and a correlation id: no type, message, trace."""
    observation = make_tool("t")(_raise(exc))({})
    assert set(observation) == {"error", "hint", "correlation_id"}
    assert is_safe_id(observation["correlation_id"])
    text = json.dumps(observation)
    for leak in (type(exc).__name__, "Traceback", "hunter2", "<", "alice", "sk_live", "boom"):
        assert leak not in text


def test_author_hint_for_a_mapped_code_is_scrubbed_and_plain(
    make_tool: Callable[..., Callable[[Callable[..., Any]], Tool]],
) -> None:
    """A handler's hint reaches the model without secrets or HTML tags."""
    secret = "sk_live_" + "4eC39HqLyjWDarjtT1zdp7dc"
    exc = NotFound(hint=f"<b>no such job</b> for key {secret}")
    observation = make_tool("t")(_raise(exc))({})
    assert observation["error"] == "not_found"
    assert "<" not in observation["hint"]
    assert "no such job" in observation["hint"]
    assert "4eC39HqLyjWD" not in observation["hint"]


def test_traceback_goes_to_the_sink_and_the_span(
    make_tool: Callable[..., Callable[[Callable[..., Any]], Tool]],
    traced: Any,
    traceback_reports: list[TracebackReport],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The sink and the span's exception event get the same redacted traceback."""
    import errscope.collector.scrub

    @dataclass
    class Redacted:
        text: str
        exception_type: str
        fingerprint: str

    def redact(text: str) -> Redacted:
        assert "Traceback" in text
        return Redacted("redacted", "RuntimeError", "fp1")

    monkeypatch.setattr(errscope.collector.scrub, "redact_traceback", redact)
    observation = make_tool("t")(_raise(RuntimeError("boom")))({})
    assert len(traceback_reports) == 1
    report = traceback_reports[0]
    assert report.correlation_id == observation["correlation_id"]
    assert (report.text, report.exception_type, report.fingerprint) == (
        "redacted",
        "RuntimeError",
        "fp1",
    )
    span = traced.only_span()
    assert report.trace_id == format(span.context.trace_id, "032x")
    assert report.span_id == format(span.context.span_id, "016x")
    assert [e.name for e in span.events] == ["exception"]
    # The span carries the redacted copy, never the raw stack trace.
    assert span.events[0].attributes["exception.stacktrace"] == "redacted"


def test_broken_sink_does_not_break_the_call(
    make_tool: Callable[..., Callable[[Callable[..., Any]], Tool]],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A sink that raises is ignored: the loop still gets its internal_error observation."""
    import errscope.collector.scrub

    def explode(report: TracebackReport) -> None:
        raise RuntimeError("sink down")

    previous = set_traceback_sink(explode)
    try:
        monkeypatch.setattr(errscope.collector.scrub, "redact_traceback", lambda text: None)
        observation = make_tool("t")(_raise(RuntimeError("boom")))({})
    finally:
        set_traceback_sink(previous)
    assert observation["error"] == "internal_error"


@pytest.mark.parametrize(
    "cls",
    [
        pytest.param(cls, id=cls.__name__)
        for cls in (InvalidArgs, NotFound, Denied, RateLimited, Timeout, InternalError)
    ],
)
def test_catalog_names_each_toolkit_exception(cls: type[ToolError]) -> None:
    """The catalog maps `errscope.<Class>`, and the earlier `collector.toolkit.<Class>`, to its code."""
    dotted = f"{cls.__module__}.{cls.__qualname__}"
    assert dotted == f"errscope.{cls.__name__}"
    assert default_catalog().for_exception(dotted) == cls.default_code
    assert default_catalog().for_exception(f"collector.toolkit.{cls.__name__}") == cls.default_code


def test_keyboard_interrupt_propagates(
    make_tool: Callable[..., Callable[[Callable[..., Any]], Tool]], traced: Any
) -> None:
    """Interrupts and cancellation reach the loop; the span still counts internal_error."""
    with pytest.raises(KeyboardInterrupt):
        make_tool("t")(_raise(KeyboardInterrupt()))({})
    assert traced.only_span().attributes["errscope.code"] == "internal_error"


def test_real_redaction_reaches_the_sink(
    make_tool: Callable[..., Callable[[Callable[..., Any]], Tool]],
    traceback_reports: list[TracebackReport],
) -> None:
    """With the real scrub engine, the sink's traceback has the secret in the message masked."""
    secret = "sk_live_" + "4eC39HqLyjWDarjtT1zdp7dc"
    observation = make_tool("t")(_raise(RuntimeError(f"login failed with {secret}")))({})
    (report,) = traceback_reports
    assert report.correlation_id == observation["correlation_id"]
    assert "RuntimeError" in report.exception_type
    assert "4eC39HqLyjWD" not in report.text
    assert report.fingerprint


class _RaisingResponse:
    """A response whose status_code property raises (a client library with a bug)."""

    @property
    def status_code(self) -> int:
        raise RuntimeError("no status")


class _ResponseRaisesError(Exception):
    response = _RaisingResponse()


class _AiohttpStyleError(Exception):
    """Like aiohttp.ClientResponseError: `status` and `headers` on the exception itself."""

    def __init__(self, status: int, headers: dict[str, str] | None = None) -> None:
        super().__init__("aiohttp said no")
        self.status = status
        self.headers = headers or {}


@pytest.mark.parametrize(
    ("exc", "code", "retry_after"),
    [
        pytest.param(ToolError("h", code=["x"]), "internal_error", None, id="unhashable-code"),  # type: ignore[arg-type]
        pytest.param(RateLimited("h", retry_after_s=10**400), "rate_limited", None, id="huge-int"),
        pytest.param(
            StatusError(FakeResponse(429, {"retry-after": 10**400})),  # type: ignore[dict-item]
            "rate_limited",
            None,
            id="huge-int-header",
        ),
        pytest.param(_ResponseRaisesError(), "internal_error", None, id="status-property-raises"),
        pytest.param(SDKStatusError("404"), "not_found", None, id="status-as-text"),  # type: ignore[arg-type]
        pytest.param(SDKStatusError(" 429 "), "rate_limited", None, id="status-text-padded"),  # type: ignore[arg-type]
        pytest.param(_AiohttpStyleError(403), "denied", None, id="aiohttp-status"),
        pytest.param(
            _AiohttpStyleError(429, {"Retry-After": "4"}),
            "rate_limited",
            4.0,
            id="aiohttp-retry-after",
        ),
        # `status` of another meaning (not an HTTP status) is not read as one.
        pytest.param(_AiohttpStyleError(7), "internal_error", None, id="status-not-http"),
    ],
)
def test_odd_exceptions_are_read_or_budgeted(
    make_tool: Callable[..., Callable[[Callable[..., Any]], Tool]],
    exc: Exception,
    code: str,
    retry_after: float | None,
) -> None:
    """Exceptions the kit cannot fully read still give a code, and the budget counts it."""
    budget = RetryBudget()
    observation = make_tool("t")(_raise(exc))({}, budget=budget)
    assert observation["error"] == code
    assert observation.get("retry_after") == retry_after
    assert ("correlation_id" in observation) is (code == "internal_error")
    assert budget.take_decision() == (
        "stop" if code in ("internal_error", "denied") else "continue"
    )


def _decode_error() -> UnicodeDecodeError:
    try:
        b"\xff".decode()
    except UnicodeDecodeError as exc:
        return exc
    raise AssertionError


def _json_error() -> json.JSONDecodeError:
    try:
        json.loads("{")
    except json.JSONDecodeError as exc:
        return exc
    raise AssertionError


@pytest.mark.parametrize(
    "exc",
    [
        pytest.param(ValueError("bad upstream payload"), id="value-error"),
        pytest.param(_decode_error(), id="unicode-decode-error"),
        pytest.param(_json_error(), id="json-decode-error"),
        pytest.param(
            foreign("pydantic_core._pydantic_core", "ValidationError", ValueError)(),
            id="pydantic-validation-error",
        ),
    ],
)
def test_handler_validation_errors_are_not_blamed_on_the_model(
    make_tool: Callable[..., Callable[[Callable[..., Any]], Tool]], exc: Exception
) -> None:
    """The arguments passed validation: a ValueError from the handler's own code is ours."""
    observation = make_tool("t")(_raise(exc))({})
    assert observation["error"] == "internal_error"


def test_invalid_args_raised_by_the_author_stays_invalid_args(
    make_tool: Callable[..., Callable[[Callable[..., Any]], Tool]],
) -> None:
    """InvalidArgs is how a handler says the model must fix a field, ValueError cause or not."""

    @make_tool("t")
    def handler(when: str) -> None:
        try:
            int(when)
        except ValueError as exc:
            raise InvalidArgs("when: a day number such as 3", field="when") from exc

    observation = handler({"when": "soon"})
    assert (observation["error"], observation["field"]) == ("invalid_args", "when")


class _BrokenArguments(Mapping[str, object]):
    """A Mapping the loop passed as arguments whose iteration raises: a failure inside the kit."""

    def __getitem__(self, key: str) -> object:
        raise KeyError(key)

    def __iter__(self) -> Iterator[str]:
        raise RuntimeError("broken mapping")

    def __len__(self) -> int:
        return 1


def test_last_resort_is_budgeted_and_recorded(
    make_tool: Callable[..., Callable[[Callable[..., Any]], Tool]], traced: Any
) -> None:
    """When the kit itself fails, the loop still gets a budgeted, correlated internal_error."""
    budget = RetryBudget()
    observation = make_tool("t")(lambda: None)(_BrokenArguments(), budget=budget)
    assert observation["error"] == "internal_error"
    assert is_safe_id(observation["correlation_id"])
    assert budget.take_decision() == "stop"
    span = traced.only_span()
    assert span.attributes["errscope.code"] == "internal_error"
    assert span.attributes["errscope.correlation_id"] == observation["correlation_id"]
    assert span.attributes["errscope.retry.decision"] == "stop"
    assert [e.attributes["exception.type"] for e in span.events] == ["RuntimeError"]


def test_status_reader_survives_a_raising_property() -> None:
    """Reading `exc.response.status_code` that raises gives no status instead of raising."""
    assert http_response(_ResponseRaisesError()) == (None, None)
