"""The execute_tool span: GenAI attributes, errscope's code, and never a value."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest
from opentelemetry.sdk.trace import SpanProcessor, TracerProvider
from opentelemetry.trace import SpanKind, StatusCode

from errscope.collector.toolkit import AsyncTool, Denied, NotFound, PositiveInt, RetryBudget, tool

SECRET = "sk_live_" + "4eC39HqLyjWDarjtT1zdp7dc"


@pytest.mark.parametrize(
    ("raw", "call_id", "expected"),
    [
        pytest.param(
            {"job_id": "17"},
            "call_ok_1",
            {"errscope.code": "ok", "gen_ai.tool.call.id": "call_ok_1"},
            id="ok",
        ),
        pytest.param(
            {"job_id": "abc"},
            "call_2",
            {
                "errscope.code": "invalid_args",
                "error.type": "invalid_args",
                "errscope.field": "job_id",
                "gen_ai.tool.call.id": "call_2",
            },
            id="invalid-args",
        ),
        pytest.param(
            {"job_id": 99},
            None,
            {"errscope.code": "not_found", "error.type": "not_found"},
            id="not-found-without-call-id",
        ),
        pytest.param(
            {"job_id": 17},
            "call with spaces",  # not id-shaped: left off rather than stored
            {"errscope.code": "ok"},
            id="unsafe-call-id",
        ),
    ],
)
def test_span_attributes(
    classroom: Any, traced: Any, raw: object, call_id: str | None, expected: dict[str, str]
) -> None:
    """One INTERNAL execute_tool span per call, with exactly the expected attributes."""
    classroom.get_job(raw, call_id=call_id)
    span = traced.only_span()
    assert span.name == "execute_tool get_job"
    assert span.kind is SpanKind.INTERNAL
    assert span.instrumentation_scope.name == "errscope.toolkit"
    base = {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "get_job",
        "gen_ai.tool.type": "function",
    }
    assert dict(span.attributes) == base | expected
    failed = "error.type" in expected
    assert span.status.status_code is (StatusCode.ERROR if failed else StatusCode.UNSET)
    assert span.status.description is None
    assert list(span.events) == []


def test_internal_error_span_has_correlation_id_and_exception_event(traced: Any) -> None:
    """internal_error records the correlation id the model got and an exception event."""

    @tool("boom", tracer_provider=traced.provider)
    def boom() -> None:
        raise RuntimeError("kaput")

    observation = boom({})
    span = traced.only_span()
    assert span.attributes["errscope.correlation_id"] == observation["correlation_id"]
    assert span.attributes["error.type"] == "internal_error"
    assert span.events[0].attributes["exception.type"] == "RuntimeError"


def test_no_argument_value_or_hint_on_the_span(classroom: Any, traced: Any) -> None:
    """Neither what the model sent nor the hint is recorded anywhere on the span."""
    classroom.get_job({"job_id": SECRET})
    span = traced.only_span()
    recorded = repr(dict(span.attributes)) + repr(span.events) + repr(span.status)
    assert "4eC39HqLyjWD" not in recorded
    assert "positive integer" not in recorded


def test_handler_spans_are_children(traced: Any) -> None:
    """Spans the handler opens (an HTTP call, a query) nest under the execute_tool span."""
    tracer = traced.provider.get_tracer("handler")

    @tool("nested", tracer_provider=traced.provider)
    def nested() -> str:
        with tracer.start_as_current_span("GET /jobs"):
            return "done"

    nested({})
    child, parent = traced.spans()
    assert child.parent is not None
    assert child.parent.span_id == parent.context.span_id


@pytest.mark.parametrize(
    ("calls", "decisions"),
    [
        pytest.param([{"job_id": 17}], ["continue"], id="ok"),
        pytest.param([{"job_id": "x"}, {"job_id": "y"}], ["continue", "handoff"], id="cap-trip"),
        pytest.param([{"job_id": 99}, {"job_id": 98}], ["continue", "handoff"], id="invented"),
    ],
)
def test_budget_decision_on_the_span(
    classroom: Any, traced: Any, calls: list[dict[str, object]], decisions: list[str]
) -> None:
    """With a budget, each span records the decision and the budget returns the same one."""
    budget = RetryBudget()
    for raw in calls:
        classroom.get_job(raw, budget=budget)
    recorded = [s.attributes["errscope.retry.decision"] for s in traced.spans()]
    assert recorded == decisions
    assert budget.last_decision == decisions[-1]


def test_without_budget_no_decision_is_recorded(classroom: Any, traced: Any) -> None:
    """A call without a budget leaves errscope.retry.decision off the span."""
    classroom.get_job({"job_id": 17})
    assert "errscope.retry.decision" not in traced.only_span().attributes


def test_async_tool(traced: Any) -> None:
    """An async handler makes an AsyncTool with the same validation, codes and span."""
    called: list[int] = []

    @tool("get_job_async", tracer_provider=traced.provider)
    async def get_job(job_id: PositiveInt) -> dict[str, int]:
        called.append(job_id)
        if job_id != 17:
            raise NotFound(hint="ids look like 17")
        return {"id": job_id}

    assert isinstance(get_job, AsyncTool)

    async def run() -> list[dict[str, Any]]:
        return [await get_job({"job_id": raw}, call_id="c1") for raw in ("17", 99, True)]

    ok, missing, invalid = asyncio.run(run())
    assert ok == {"ok": True, "result": {"id": 17}}
    assert missing == {"error": "not_found", "hint": "ids look like 17"}
    assert invalid["error"] == "invalid_args"
    assert called == [17, 99]
    codes = [s.attributes["errscope.code"] for s in traced.spans()]
    assert codes == ["ok", "not_found", "invalid_args"]


@pytest.mark.parametrize("seconds", [7.5, "5", " 12 "], ids=["number", "text", "padded-text"])
def test_retry_after_reaches_the_span(traced: Any, seconds: object) -> None:
    """RateLimited's retry_after_s, as a number or as the header's text, is on the span (the
    pipeline stores it as retry_after_s) and in the observation; the call stays rate_limited."""
    from errscope.collector.toolkit import RateLimited

    @tool("search", tracer_provider=traced.provider)
    def search() -> None:
        raise RateLimited("slow down", retry_after_s=seconds)  # type: ignore[arg-type]

    observation = search({})
    expected = float(str(seconds).strip())
    assert (observation["error"], observation["retry_after"]) == ("rate_limited", expected)
    span = traced.only_span()
    assert span.attributes["errscope.retry_after_s"] == expected
    assert span.attributes["errscope.code"] == "rate_limited"


def test_a_secret_named_as_the_field_is_neither_echoed_nor_recorded(traced: Any) -> None:
    """A handler naming a key the model sent (which may be a token) as the field: the call is
    invalid_args, the field is left out of the observation and the span."""
    from errscope.collector.toolkit import InvalidArgs

    @tool("search", tracer_provider=traced.provider)
    def search(filters: dict[str, int]) -> None:
        for key in filters:
            raise InvalidArgs("unknown filter; use owner or status", field=key)

    observation = search({"filters": {SECRET: 1}})
    assert observation["error"] == "invalid_args"
    assert "field" not in observation
    span = traced.only_span()
    assert "errscope.field" not in span.attributes
    assert "4eC39HqLyjWD" not in repr(dict(span.attributes))


class _RaisingProcessor(SpanProcessor):
    """A third-party span processor with a bug in one hook (the SDK does not catch it)."""

    def __init__(self, hook: str) -> None:
        self.hook = hook

    def on_start(self, span: Any, parent_context: Any = None) -> None:
        if self.hook == "on_start":
            raise RuntimeError("processor bug")

    def on_end(self, span: Any) -> None:
        if self.hook == "on_end":
            raise RuntimeError("processor bug")


@pytest.mark.parametrize("hook", ["on_start", "on_end"])
def test_a_raising_span_processor_does_not_undo_a_success(
    hook: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Once the handler returned (the card is charged), the success stands; a line is logged."""
    provider = TracerProvider()
    provider.add_span_processor(_RaisingProcessor(hook))
    charged: list[int] = []

    @tool("charge_card", tracer_provider=provider)
    def charge_card(amount: int) -> dict[str, int]:
        charged.append(amount)
        return {"charged": amount}

    budget = RetryBudget()
    with caplog.at_level(logging.WARNING, logger="errscope.collector.toolkit.adapter"):
        observation = charge_card({"amount": 5}, budget=budget)
    assert observation == {"ok": True, "result": {"charged": 5}}
    assert charged == [5]
    assert budget.take_decision() == "continue"
    assert any("telemetry_error" in r.getMessage() for r in caplog.records)
    assert all("processor bug" not in r.getMessage() for r in caplog.records)


def test_a_raising_span_processor_keeps_an_error_counted() -> None:
    """A failing on_end does not turn denied into internal_error, and the budget still stops."""
    provider = TracerProvider()
    provider.add_span_processor(_RaisingProcessor("on_end"))

    @tool("delete_repo", tracer_provider=provider)
    def delete_repo() -> None:
        raise Denied()

    budget = RetryBudget()
    assert delete_repo({}, budget=budget)["error"] == "denied"
    assert budget.take_decision() == "stop"


def test_exception_event_is_scrubbed(traced: Any) -> None:
    """The span's exception event has the type, a scrubbed message and a redacted trace."""

    @tool("boom", tracer_provider=traced.provider)
    def boom() -> None:
        raise RuntimeError(f"login failed with {SECRET} for /home/alice/app")

    boom({})
    (event,) = traced.only_span().events
    assert event.name == "exception"
    assert event.attributes["exception.type"] == "RuntimeError"
    assert "login failed" in event.attributes["exception.message"]
    assert "Traceback" in event.attributes["exception.stacktrace"]
    assert "4eC39HqLyjWD" not in repr(dict(event.attributes))
    assert "/home/alice" not in event.attributes["exception.stacktrace"]


def test_exception_whose_str_raises_is_recorded_without_a_message(traced: Any) -> None:
    """An exception whose __str__ raises still gives internal_error, budgeted, with its type."""

    class BadStrError(Exception):
        def __str__(self) -> str:
            raise RuntimeError("no text")

    @tool("boom", tracer_provider=traced.provider)
    def boom() -> None:
        raise BadStrError

    budget = RetryBudget()
    observation = boom({}, budget=budget)
    assert observation["error"] == "internal_error"
    assert "correlation_id" in observation
    assert budget.take_decision() == "stop"
    span = traced.only_span()
    assert span.attributes["errscope.correlation_id"] == observation["correlation_id"]
    (event,) = span.events
    assert event.attributes["exception.type"].endswith("BadStrError")
    assert "exception.message" not in event.attributes
