"""The precedence ladder, signal by signal: which signal on a tool span gives which code.

Each row is one signal as real frameworks write it (tests/conformance/cases and
docs/conventions-polyglot.md name where each was seen); whole spans are in
test_conventions.py.  A second table pins what the ladder must NOT read as an error.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import pytest

from errscope.collector.catalog import default_catalog
from errscope.collector.codes import Source, normalise
from errscope.collector.content import mask_traceback_content
from errscope.collector.pipeline import ContentPolicy, Pipeline
from errscope.collector.spanview import (
    STATUS_ERROR,
    STATUS_OK,
    STATUS_UNSET,
    AttrValue,
    EventView,
    SpanView,
    StatusView,
)

TOOL = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "lookup"}


@dataclass(frozen=True)
class Case:
    """One signal on an execute_tool span and the code (and source) it must give."""

    signal: str
    code: str
    source: Source
    attrs: Mapping[str, AttrValue] = field(default_factory=dict)
    exception: Mapping[str, AttrValue] | None = None
    status: int = STATUS_ERROR
    message: str = ""
    children: tuple[SpanView, ...] = ()


def _span(case: Case) -> SpanView:
    events = (EventView("exception", 1, dict(case.exception)),) if case.exception else ()
    return SpanView(
        name="execute_tool lookup",
        trace_id="a" * 32,
        span_id="b" * 16,
        start_ns=1,
        end_ns=2,
        status=StatusView(case.status, case.message),
        attributes={**TOOL, **case.attrs},
        events=events,
    )


def _http_child(status: int | None, error_type: AttrValue) -> SpanView:
    attrs: dict[str, AttrValue] = {"http.request.method": "GET", "error.type": error_type}
    if status is not None:
        attrs["http.response.status_code"] = status
    return SpanView(
        name="GET",
        trace_id="a" * 32,
        span_id="c" * 16,
        parent_span_id="b" * 16,
        start_ns=1,
        end_ns=2,
        kind=2,
        status=StatusView(STATUS_ERROR),
        attributes=attrs,
    )


LADDER = [
    Case(
        signal="errscope.code",
        code="denied",
        source=Source.ERROR_TYPE,
        attrs={"errscope.code": "denied", "http.response.status_code": 404},
    ),
    Case(
        signal="error.type catalog code beats HTTP",
        code="rate_limited",
        source=Source.ERROR_TYPE,
        attrs={"error.type": "rate_limited", "http.response.status_code": 500},
    ),
    Case(
        signal="structured error in an OK span's result",
        code="not_found",
        source=Source.OBSERVATION,
        status=STATUS_UNSET,
        attrs={"gen_ai.tool.call.result": '{"error": "not_found", "message": "no order"}'},
    ),
    Case(
        signal="LangChain serialised ToolMessage (lc constructor)",
        code="not_found",
        source=Source.OBSERVATION,
        status=STATUS_OK,
        attrs={
            "gen_ai.tool.call.result": '{"output": {"lc": 1, "type": "constructor", "id":'
            ' ["langchain", "schema", "messages", "ToolMessage"], "kwargs": {"content":'
            ' "{\\"error\\": \\"not_found\\"}", "type": "tool", "tool_call_id": "c1"}}}'
        },
    ),
    Case(
        signal="Vercel ai.toolCall.result",
        code="not_found",
        source=Source.OBSERVATION,
        status=STATUS_UNSET,
        attrs={"ai.toolCall.result": '{"error":"not_found"}'},
    ),
    Case(
        signal="numeric error.type (Java loop)",
        code="denied",
        source=Source.HTTP,
        attrs={"error.type": "403"},
        exception={"exception.type": "errscope.conformance.Agent$HttpStatusException"},
    ),
    Case(
        signal="HTTP child span's status (undici, otelhttp)",
        code="not_found",
        source=Source.HTTP,
        exception={"exception.type": "HttpStatusError"},
        children=(_http_child(404, "404"),),
    ),
    Case(
        signal="Go child's context deadline",
        code="timeout",
        source=Source.EXCEPTION,
        exception={"exception.type": "*url.Error", "exception.message": "Get x: EOF"},
        children=(_http_child(None, "context.deadlineExceededError"),),
    ),
    Case(
        signal="pydantic-ai validation stage",
        code="invalid_args",
        source=Source.MARKER,
        attrs={"pydantic_ai.tool.failure_stage": "validation"},
        exception={"exception.type": "pydantic_ai.exceptions.ToolRetryError"},
    ),
    Case(
        signal="error.type names a class, exception.type is a DOMException code",
        code="timeout",
        source=Source.EXCEPTION,
        attrs={"error.type": "TimeoutError"},
        exception={"exception.type": "23"},
    ),
    Case(
        signal="zod",
        code="invalid_args",
        source=Source.EXCEPTION,
        exception={"exception.type": "ZodError"},
    ),
    Case(
        signal="IllegalArgumentException exactly",
        code="invalid_args",
        source=Source.EXCEPTION,
        exception={"exception.type": "java.lang.IllegalArgumentException"},
    ),
    Case(
        signal="NumberFormatException is a parsing bug, not validation",
        code="internal_error",
        source=Source.EXCEPTION,
        exception={"exception.type": "java.lang.NumberFormatException"},
    ),
    Case(
        signal="Go pointer type",
        code="invalid_args",
        source=Source.EXCEPTION,
        exception={"exception.type": "*json.UnmarshalTypeError"},
    ),
    Case(
        signal="wrapper: the chained cause decides",
        code="denied",
        source=Source.EXCEPTION,
        exception={
            "exception.type": "ToolException",
            "exception.stacktrace": 'Traceback (most recent call last):\n  File "t.py", line 1, in f\n'
            "PermissionError: [Errno 13]\n\nThe above exception was the direct cause"
            " of the following exception:\n\nToolException: failed",
        },
    ),
    Case(
        signal="wrapper: its message decides (pydantic-ai ModelRetry)",
        code="not_found",
        source=Source.TEXT,
        attrs={"pydantic_ai.tool.retry.cause": "model_retry"},
        exception={
            "exception.type": "pydantic_ai.exceptions.ToolRetryError",
            "exception.message": "user u-9 not found",
        },
    ),
    Case(
        signal="wrapper without words: its own mapping",
        code="invalid_args",
        source=Source.EXCEPTION,
        exception={"exception.type": "pydantic_ai.exceptions.ToolRetryError"},
    ),
    Case(
        signal="unmapped exception, HTTP status in its message",
        code="rate_limited",
        source=Source.TEXT,
        exception={
            "exception.type": "httpx.HTTPStatusError",
            "exception.message": "Client error '429 Too Many Requests' for url 'http://h/rate'",
        },
    ),
    Case(
        signal="status description is a dict repr with the error",
        code="denied",
        source=Source.TEXT,
        message="Error running tool: {'tool_name': 'rm', 'error': \"[Errno 13] Permission "
        "denied: '/etc/x'\"}",
    ),
    Case(
        signal="`ClassName: message` text, no exception.type (LangChain.js)",
        code="timeout",
        source=Source.TEXT,
        exception={"exception.message": "aborted\n\nTimeoutError: aborted\n    at x (y.js:1:2)"},
    ),
    Case(
        signal="text starting with an HTTP status",
        code="denied",
        source=Source.TEXT,
        message="403: forbidden by policy",
    ),
    Case(
        signal="`HTTP 404` inside the message",
        code="not_found",
        source=Source.TEXT,
        exception={
            "exception.type": "HttpStatusError",
            "exception.message": "GET http://h/x failed: HTTP 404 Not Found",
        },
    ),
    Case(
        signal="missing argument in words (Go wrapped sentinel)",
        code="invalid_args",
        source=Source.TEXT,
        exception={
            "exception.type": "*fmt.wrapError",
            "exception.message": "invalid tool arguments: x",
        },
    ),
    Case(
        signal="timeout notice as the result of an OK span",
        code="timeout",
        source=Source.TEXT,
        status=STATUS_OK,
        attrs={"gen_ai.tool.call.result": "Tool 'wait' timed out after 0.3 seconds."},
    ),
    Case(
        signal="generic marker: the exception decides over TOOL_ERROR",
        code="denied",
        source=Source.EXCEPTION,
        attrs={"error.type": "tool_error"},
        exception={"exception.type": "PermissionError"},
    ),
    Case(
        signal="generic marker alone",
        code="internal_error",
        source=Source.MARKER,
        attrs={"error.type": "tool_error"},
    ),
    Case(signal="status ERROR and nothing else", code="internal_error", source=Source.STATUS),
    # signals seen in LlamaIndex, DSPy, Haystack, Semantic Kernel and Agno payloads
    Case(
        signal="result JSON-encoded twice (OpenInference DSPy)",
        code="not_found",
        source=Source.OBSERVATION,
        status=STATUS_OK,
        attrs={"gen_ai.tool.call.result": '"{\\"error\\": \\"not_found\\"}"'},
    ),
    Case(
        signal="LlamaIndex ToolOutput: the tool's own raw_output",
        code="not_found",
        source=Source.OBSERVATION,
        status=STATUS_OK,
        attrs={
            "gen_ai.tool.call.result": '{"blocks": [{"text": "{}"}], "tool_name": "lookup",'
            ' "raw_output": "{\\"error\\": \\"not_found\\"}"}'
        },
    ),
    Case(
        signal="error message as the result's error string (Haystack)",
        code="denied",
        source=Source.TEXT,
        status=STATUS_UNSET,
        attrs={
            "haystack.tool.error": True,
            "gen_ai.tool.call.result": '{"error": "Failed to invoke Tool `lookup` with parameters'
            " {'path': '/srv/x'}. Error: [Errno 13] Permission denied: '/srv/x'\"}",
        },
    ),
    Case(
        signal="Haystack's error flag alone: a failure",
        code="internal_error",
        source=Source.STATUS,
        status=STATUS_UNSET,
        attrs={"haystack.tool.error": True},
    ),
    Case(
        signal="TypeError of Python binding the model's arguments",
        code="invalid_args",
        source=Source.EXCEPTION,
        exception={
            "exception.type": "TypeError",
            "exception.message": "lookup() got an unexpected keyword argument 'bogus'",
        },
    ),
    Case(
        signal="TypeError of a bug stays internal_error",
        code="internal_error",
        source=Source.EXCEPTION,
        exception={
            "exception.type": "TypeError",
            "exception.message": "'NoneType' object is not subscriptable",
        },
    ),
    Case(
        signal="jsonschema's message as the only words",
        code="invalid_args",
        source=Source.TEXT,
        message="Arg city is invalid: 12345 is not of type 'string'",
    ),
    Case(
        signal="Semantic Kernel's conversion failure inside its wrapper",
        code="invalid_args",
        source=Source.TEXT,
        attrs={"error.type": "FunctionExecutionException"},
        message="FunctionExecutionException: Parameter days is expected to be parsed to"
        " <class 'int'> but is not.",
    ),
    Case(
        signal="CrewAI's unknown tool words",
        code="not_found",
        source=Source.TEXT,
        message="I encountered an error: Action 'get_invoice' don't exist",
    ),
    Case(
        signal="pydantic validation text only (Agno)",
        code="invalid_args",
        source=Source.TEXT,
        message="1 validation error for get_forecast\ndays\n  Input should be a valid integer",
    ),
]

NOT_ERRORS = [
    Case(
        signal="an OK result that mentions a timeout at length",
        code="ok",
        source=Source.STATUS,
        status=STATUS_OK,
        attrs={"gen_ai.tool.call.result": "x" * 400 + " timed out "},
    ),
    Case(
        signal="an OK result saying 'not found' is the tool's answer",
        code="ok",
        source=Source.STATUS,
        status=STATUS_OK,
        attrs={"gen_ai.tool.call.result": "no documents found; 3 not found"},
    ),
    Case(
        signal="LangGraph interrupt",
        code="ok",
        source=Source.EXCEPTION,
        exception={"exception.type": "langgraph.errors.GraphInterrupt"},
    ),
]


@pytest.mark.parametrize("case", [pytest.param(c, id=c.signal) for c in LADDER + NOT_ERRORS])
def test_signal_gives_code(case: Case) -> None:
    """Each signal, alone or over a weaker one, decides the code and names itself as source."""
    out = normalise(_span(case), default_catalog(), children=case.children)
    assert (out.code, out.source) == (case.code, case.source)


def test_text_retry_after_is_kept() -> None:
    """A Retry-After told only in the message is kept as retry_after_s."""
    case = Case(
        signal="429 text",
        code="rate_limited",
        source=Source.TEXT,
        exception={
            "exception.type": "HttpStatusError",
            "exception.message": "HTTP 429 Too Many Requests (retry after 7s)",
        },
    )
    assert normalise(_span(case), default_catalog()).retry_after_s == 7.0


@pytest.mark.parametrize(
    ("text", "values", "leaked"),
    [
        pytest.param("HttpError: GET http://h:1/customers/CNRY-1 failed", (), "CNRY-1", id="url"),
        pytest.param(
            'NumberFormatException: For input string: "CNRY-2"', (), "CNRY-2", id="quoted"
        ),
        pytest.param(
            "RuntimeError: failed evaluating CNRY-3", ("CNRY-3",), "CNRY-3", id="argument-value"
        ),
    ],
)
def test_traceback_messages_lose_arguments(text: str, values: tuple[str, ...], leaked: str) -> None:
    """A stored traceback's exception line keeps its type, never the call's arguments."""
    masked, count = mask_traceback_content(text, values)
    assert leaked not in masked
    assert count >= 1
    assert masked.split(":", 1)[0] == text.split(":", 1)[0]


def _agent_span() -> SpanView:
    return SpanView(
        name="chat model",
        trace_id="a" * 32,
        span_id="d" * 16,
        start_ns=1,
        end_ns=2,
        status=StatusView(STATUS_ERROR, "failed on CNRY-msg"),
        attributes={
            "gen_ai.operation.name": "chat",
            "gen_ai.request.model": "gpt-x",
            "gen_ai.usage.input_tokens": 12,
            "gen_ai.response.finish_reasons": ("stop",),
            "gen_ai.conversation.id": "conv-1",
            "gen_ai.input.messages": '[{"role": "user", "content": "CNRY-msg"}]',
            "llm.input_messages.0.message.content": "CNRY-msg",
            "ai.prompt.messages": "CNRY-msg",
            "ai.response.finishReason": "stop",
            "url.full": "http://h/x?q=CNRY-msg",
        },
        events=(
            EventView("exception", 1, {"exception.type": "E", "exception.message": "CNRY-msg"}),
            EventView("gen_ai.user.message", 1, {"content": "CNRY-msg"}),
        ),
    )


@pytest.mark.parametrize(
    ("policy", "content_left"),
    [
        pytest.param(ContentPolicy.DROP, False, id="drop"),
        pytest.param(ContentPolicy.KEEP, True, id="keep"),
    ],
)
def test_content_policy_on_non_tool_spans(policy: ContentPolicy, content_left: bool) -> None:
    """`drop` removes messages, events and exception words, counted per family; `keep` keeps them."""
    out = Pipeline(content=policy).process(_agent_span())
    assert out.forward is not None
    strings = [out.forward.status.message, *map(str, out.forward.attributes.values())]
    strings += [str(v) for e in out.forward.events for v in e.attributes.values()]
    assert any("CNRY-msg" in s for s in strings) is content_left
    kept = out.forward.attributes
    assert kept["gen_ai.request.model"] == "gpt-x"
    assert kept["gen_ai.usage.input_tokens"] == 12
    assert kept["ai.response.finishReason"] == "stop"
    assert kept["gen_ai.conversation.id"] == "conv-1"
    if not content_left:
        assert out.content_dropped["content:gen_ai.messages"] == 1
        assert out.content_dropped["content:openinference"] == 1
        assert out.content_dropped["content:vercel_ai"] == 1
        assert out.content_dropped["content:events"] == 1


@pytest.mark.parametrize(
    ("name", "attributes", "expected_name", "dropped_family"),
    [
        pytest.param(
            "assistant.please help with CNRY-task-0.execute",
            {"task_description": "please help with CNRY-task-0-9f7816ff7d", "agent.goal": "g"},
            "assistant.[content].execute",
            "content:crewai",
            id="crewai-agent-span-named-after-the-task",
        ),
        pytest.param(
            "Function: {name}",
            {"logfire.msg": "Function: get_job", "output": '{"error": "not_found"}'},
            "Function: {name}",
            "content:logfire",
            id="logfire-template-name-kept",
        ),
        pytest.param(
            "haystack.agent.step.llm",
            {"haystack.agent.step.llm.input": "{'messages': [...]}"},
            "haystack.agent.step.llm",
            "content:haystack",
            id="haystack-model-step",
        ),
    ],
)
def test_non_tool_span_names_and_framework_content(
    name: str, attributes: dict[str, AttrValue], expected_name: str, dropped_family: str
) -> None:
    """Under `drop`, a framework's content attributes leave, and a span name repeating one loses it."""
    view = SpanView(
        name=name,
        trace_id="a" * 32,
        span_id="e" * 16,
        start_ns=1,
        end_ns=2,
        attributes=attributes,
    )
    out = Pipeline().process(view)
    assert out.forward is not None
    assert out.forward.name == expected_name
    assert out.content_dropped[dropped_family] >= 1
    assert not any(key in out.forward.attributes for key in attributes)
