"""The pipeline on spans shaped like each real instrumentation's: the record, and what is passed on."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import StatusCode

from errscope.collector.classify import Matcher
from errscope.collector.pipeline import NonToolPolicy, Pipeline
from errscope.collector.spanview import from_readable
from errscope.collector.store.duckdb import DuckDBStore
from tests.pipeline.spans import (
    DB_URL,
    GITHUB_TOKEN,
    OPENAI_KEY,
    PLANTED,
    RESOURCE,
    args_json,
    make_span,
    real_exception,
    strings_of,
)

ERR = StatusCode.ERROR
OK = StatusCode.OK
AGENTS_SDK_DESC = (
    "Error running tool (non-fatal): {'tool_name': 'get_weather', 'error': "
    "'Tool execution failed. Error details are redacted.'}"
)
SECRET_ARGS = args_json(city="Paris", api_key=OPENAI_KEY, db=DB_URL)


def _pydantic_ok() -> ReadableSpan:
    return make_span(
        "execute_tool get_weather",
        {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": "get_weather",
            "gen_ai.tool.call.id": "call_ok_1",
            "gen_ai.tool.call.arguments": SECRET_ARGS,
            "gen_ai.agent.name": "weather_agent",
            "gen_ai.conversation.id": "01a22b87-028a-7134-9df3-a25fd26877d2",
            "logfire.msg": f"running tool: get_weather {GITHUB_TOKEN}",
            "gen_ai.tool.call.result": '{"city":"Paris","temp_c":12}',
        },
    )


def _pydantic_validation() -> ReadableSpan:
    return make_span(
        "execute_tool get_weather",
        {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": "get_weather",
            "gen_ai.tool.call.id": "call_badargs_3",
            "gen_ai.tool.call.arguments": args_json(city=12345, token=GITHUB_TOKEN),
            "pydantic_ai.tool.failure_stage": "validation",
            "pydantic_ai.tool.retry.cause": "validation_error",
            "pydantic_ai.tool.retry.attempt": 1,
            "gen_ai.tool.call.result": '[{"type":"string_type","loc":["city"],"input":12345}]',
        },
        exception=real_exception(ValueError),
        status=(ERR, None),
    )


def _pydantic_model_retry() -> ReadableSpan:
    return make_span(
        "execute_tool lookup_user",
        {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": "lookup_user",
            "gen_ai.tool.call.id": "call_retry_2",
            "pydantic_ai.tool.retry.cause": "model_retry",
            "gen_ai.tool.call.result": "user u-404 not found",
        },
        events=[("exception", {"exception.type": "pydantic_ai.exceptions.ToolRetryError"})],
        status=(ERR, None),
    )


def _pydantic_permission() -> ReadableSpan:
    return make_span(
        "execute_tool delete_file",
        {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": "delete_file",
            "gen_ai.tool.call.id": "call_crash_4",
        },
        exception=real_exception(PermissionError),
        status=(ERR, f"PermissionError: denied with token={GITHUB_TOKEN}"),
    )


def _pydantic_legacy() -> ReadableSpan:
    return make_span(
        "running tool",
        {
            "gen_ai.tool.name": "lookup_user",
            "gen_ai.tool.call.id": "call_retry_2",
            "tool_arguments": args_json(user_id="u-404", password=DB_URL),
            "tool_response": "user u-404 not found\n\nFix the errors and try again.",
        },
        events=[
            (
                "exception",
                {
                    "exception.type": "pydantic_ai.exceptions.ToolRetryError",
                    "exception.message": "",
                },
            )
        ],
        status=(ERR, "ToolRetryError: "),
    )


def _pydantic_aggregate() -> ReadableSpan:
    return make_span(
        "running tools", {"tools": ["get_weather", "lookup_user"], "logfire.msg": "running 2 tools"}
    )


def _agents_openinference() -> ReadableSpan:
    return make_span(
        "get_weather",
        {
            "tool.name": "get_weather",
            "input.value": SECRET_ARGS,
            "output.value": "An error occurred while running the tool. Please try again.",
            "openinference.span.kind": "TOOL",
        },
        status=(ERR, AGENTS_SDK_DESC),
    )


def _agents_traceloop() -> ReadableSpan:
    return make_span(
        "delete_file.tool",
        {
            "traceloop.span.kind": "tool",
            "gen_ai.tool.name": "delete_file",
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.call.arguments": args_json(path="/etc/passwd", key=OPENAI_KEY),
        },
        status=(
            ERR,
            f"{{'message': 'Error running tool', 'data': {{'error': \"Permission denied: {OPENAI_KEY}\"}}}}",
        ),
    )


def _langgraph_ok() -> ReadableSpan:
    output = {
        "type": "tool",
        "data": {
            "content": '{"city": "Paris"}',
            "type": "tool",
            "tool_call_id": "call_ok_1",
            "status": "success",
        },
    }
    return make_span(
        "get_weather",
        {
            "input.value": SECRET_ARGS,
            "output.value": json.dumps(output),
            "tool.name": "get_weather",
            "session.id": "sess-7",
            "metadata": json.dumps({"session_id": "sess-7", "api_key": OPENAI_KEY}),
            "openinference.span.kind": "TOOL",
        },
        status=(OK, None),
    )


def _langgraph_tool_exception() -> ReadableSpan:
    output = {
        "type": "tool",
        "data": {
            "content": f"user u-404 not found ({GITHUB_TOKEN})",
            "tool_call_id": "call_toolexc_2",
            "status": "error",
        },
    }
    return make_span(
        "lookup_user",
        {
            "input.value": "u-404",
            "output.value": json.dumps(output),
            "tool.name": "lookup_user",
            "session.id": "sess-7",
            "openinference.span.kind": "TOOL",
        },
        status=(OK, None),
    )


def _langgraph_crash() -> ReadableSpan:
    exc = real_exception(PermissionError)
    desc = f"PermissionError(13, 'Permission denied')Traceback (most recent call last):\n  File \"/home/alice/app/tools.py\", line 12, in delete_file\n    os.remove(path)  # {GITHUB_TOKEN}\nPermissionError: denied"
    return make_span(
        "delete_file",
        {
            "input.value": "/etc/passwd",
            "tool.name": "delete_file",
            "session.id": "sess-7",
            "openinference.span.kind": "TOOL",
        },
        exception=exc,
        status=(ERR, desc),
    )


def _smolagents_crash() -> ReadableSpan:
    return make_span(
        "SimpleTool",
        {
            "input.value": json.dumps(
                {"args": [], "kwargs": {"path": "/etc/passwd", "token": GITHUB_TOKEN}}
            ),
            "tool.name": "delete_file",
            "openinference.span.kind": "TOOL",
        },
        exception=real_exception(PermissionError),
        status=(ERR, "PermissionError: [Errno 13] Permission denied: '/etc/passwd'"),
    )


def _smolagents_final_answer() -> ReadableSpan:
    return make_span(
        "FinalAnswerTool",
        {"tool.name": "final_answer", "input.value": OPENAI_KEY, "openinference.span.kind": "TOOL"},
    )


def _dspy_tool_no_name() -> ReadableSpan:
    # OpenInference's DSPy instrumentor names the span `<tool>.__call__` and writes no tool.name
    return make_span(
        "get_job.__call__",
        {
            "openinference.span.kind": "TOOL",
            "input.value": json.dumps({"kwargs": {"job_id": "17", "token": OPENAI_KEY}}),
            "output.value": json.dumps(json.dumps({"error": "not_found", "key": DB_URL})),
            "session.id": "sess-dspy-1",
        },
    )


def _dspy_finish() -> ReadableSpan:
    return make_span(
        "finish.__call__",
        {
            "openinference.span.kind": "TOOL",
            "input.value": OPENAI_KEY,
            "output.value": '"Completed."',
        },
    )


def _haystack_denied() -> ReadableSpan:
    return make_span(
        "haystack.agent.step.tool",
        {
            "haystack.tool.name": "delete_file",
            "haystack.tool.description": "Delete a file.",
            "haystack.agent.step.tool.input": json.dumps({"path": f"/srv/{GITHUB_TOKEN}"}),
            "haystack.tool.error": True,
            "haystack.agent.step.tool.output": json.dumps(
                {
                    "error": "Failed to invoke Tool `delete_file` with parameters"
                    f" {{'path': '/srv/{GITHUB_TOKEN}'}}. Error: [Errno 13] Permission denied"
                }
            ),
        },
    )


def _logfire_function_timeout() -> ReadableSpan:
    return make_span(
        "Function: {name}",
        {
            "logfire.msg_template": "Function: {name}",
            "logfire.msg": f"Function: wait_for_batch {OPENAI_KEY}",
            "logfire.span_type": "span",
            "name": "wait_for_batch",
            "input": json.dumps({"batch": DB_URL}),
            "output": "Tool 'wait_for_batch' timed out after 0.3 seconds.",
        },
    )


def _traceloop_not_found() -> ReadableSpan:
    return make_span(
        "lookup_order.tool",
        {
            "traceloop.span.kind": "tool",
            "traceloop.entity.name": "lookup_order",
            "traceloop.entity.input": json.dumps(
                {"args": [], "kwargs": {"order_id": "99", "auth": f"Bearer {OPENAI_KEY}"}}
            ),
            "traceloop.entity.output": json.dumps(
                {"error": "not_found", "hint": "order ids look like 17"}
            ),
            "traceloop.association.properties.session_id": "sess-9",
        },
    )


def _mcp_invalid_params() -> ReadableSpan:
    return make_span(
        "tools/call create_issue",
        {
            "mcp.method.name": "tools/call",
            "gen_ai.tool.name": "create_issue",
            "jsonrpc.request.id": "42",
            "mcp.session.id": "mcp-sess-1",
            "error.type": "-32602",
            "rpc.response.status_code": "-32602",
        },
        status=(ERR, f"Invalid params: token {GITHUB_TOKEN}"),
    )


def _mcp_is_error() -> ReadableSpan:
    result = {"isError": True, "content": [{"type": "text", "text": f"upstream failed: {DB_URL}"}]}
    return make_span(
        "tools/call create_issue",
        {
            "mcp.method.name": "tools/call",
            "gen_ai.tool.name": "create_issue",
            "error.type": "tool_error",
            "mcp.response.value": json.dumps(result),
        },
        status=(ERR, "tool_error"),
    )


def _mcp_is_error_with_observation() -> ReadableSpan:
    text = json.dumps({"error": "invalid_args", "field": "repo", "hint": "owner/name"})
    result = {"isError": True, "content": [{"type": "text", "text": text}]}
    return make_span(
        "tools/call create_issue",
        {
            "mcp.method.name": "tools/call",
            "gen_ai.tool.name": "create_issue",
            "error.type": "tool_error",
            "mcp.response.value": json.dumps(result),
        },
        status=(ERR, None),
    )


def _logfire_mcp(text: str) -> Callable[[], ReadableSpan]:
    """Logfire's instrument_mcp span (mcp 1.x): RPC conventions, the result as `response`."""
    result = {"content": [{"type": "text", "text": text}], "isError": False}

    def span() -> ReadableSpan:
        return make_span(
            "MCP request: tools/call get_job",
            {
                "rpc.system": "jsonrpc",
                "rpc.method": "tools/call",
                "request": json.dumps({"method": "tools/call", "params": {"name": "get_job"}}),
                "response": json.dumps(result),
            },
        )

    return span


def _openllmetry_mcp_result() -> ReadableSpan:
    """OpenLLMetry's MCP tool span (mcp 1.x): the tool's text inside `{"result": ...}`."""
    text = json.dumps({"error": "not_found", "message": "no job 7"})
    return make_span(
        "get_job.tool",
        {
            "traceloop.span.kind": "tool",
            "traceloop.entity.name": "get_job",
            "traceloop.entity.output": json.dumps({"result": text}),
        },
        status=(OK, None),
    )


def _http_rate_limited() -> ReadableSpan:
    return make_span(
        "execute_tool search",
        {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": "search",
            "http.response.status_code": 429,
            "http.response.header.retry-after": ["30"],
        },
        status=(ERR, None),
    )


def _http_not_found_unset_status() -> ReadableSpan:
    return make_span(
        "execute_tool get_job",
        {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": "get_job",
            "http.response.status_code": 404,
        },
    )


def _grpc_deadline() -> ReadableSpan:
    return make_span(
        "execute_tool fetch",
        {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": "fetch",
            "rpc.grpc.status_code": 4,
        },
        status=(ERR, "deadline exceeded"),
    )


def _rpc_status_name() -> ReadableSpan:
    return make_span(
        "execute_tool fetch",
        {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": "fetch",
            "rpc.status_code": "PERMISSION_DENIED",
        },
        status=(ERR, None),
    )


def _toolkit_span() -> ReadableSpan:
    return make_span(
        "execute_tool get_job",
        {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": "get_job",
            "gen_ai.tool.call.id": "call_9",
            "errscope.code": "invalid_args",
            "errscope.field": "job_id",
            "error.type": "invalid_args",
        },
        status=(ERR, "invalid_args"),
    )


def _unknown_code() -> ReadableSpan:
    return make_span(
        "execute_tool charge",
        {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": "charge",
            "gen_ai.tool.call.result": json.dumps({"error": "quota_blown", "hint": "later"}),
        },
    )


def _graph_interrupt() -> ReadableSpan:
    return make_span(
        "execute_tool approve",
        {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "approve"},
        events=[("exception", {"exception.type": "langgraph.errors.GraphInterrupt"})],
        status=(ERR, None),
    )


def _custom_matcher() -> ReadableSpan:
    return make_span(
        "tool:refund", {"app.kind": "tool", "app.tool": "refund", "http.response.status_code": 403}
    )


CASES = [
    # (builder, code, tool, convention, source, field, call_id, session_id)
    pytest.param(
        _pydantic_ok,
        "ok",
        "get_weather",
        "genai",
        "status",
        None,
        "call_ok_1",
        "01a22b87-028a-7134-9df3-a25fd26877d2",
        id="pydantic-ai-ok",
    ),
    pytest.param(
        _pydantic_validation,
        "invalid_args",
        "get_weather",
        "genai",
        "marker",
        None,
        "call_badargs_3",
        None,
        id="pydantic-ai-validation-stage",
    ),
    pytest.param(
        _pydantic_model_retry,
        "invalid_args",
        "lookup_user",
        "genai",
        "marker",
        None,
        "call_retry_2",
        None,
        id="pydantic-ai-model-retry",
    ),
    pytest.param(
        _pydantic_permission,
        "denied",
        "delete_file",
        "genai",
        "exception",
        None,
        "call_crash_4",
        None,
        id="pydantic-ai-permission-error",
    ),
    pytest.param(
        _pydantic_legacy,
        "invalid_args",
        "lookup_user",
        "pydantic_ai_legacy",
        "exception",
        None,
        "call_retry_2",
        None,
        id="pydantic-ai-1.0-running-tool",
    ),
    pytest.param(
        _agents_openinference,
        "internal_error",
        "get_weather",
        "openinference",
        "status",
        None,
        None,
        None,
        id="agents-sdk-openinference-redacted-error",
    ),
    pytest.param(
        _agents_traceloop,
        "denied",  # the error dict's text: "[Errno 13] Permission denied"
        "delete_file",
        "genai",
        "text",
        None,
        None,
        None,
        id="agents-sdk-traceloop-fatal",
    ),
    pytest.param(
        _langgraph_ok,
        "ok",
        "get_weather",
        "openinference",
        "status",
        None,
        "call_ok_1",
        "sess-7",
        id="langgraph-ok-call-id-in-output",
    ),
    pytest.param(
        _langgraph_tool_exception,
        "not_found",  # the error ToolMessage's own words: "user u-404 not found"
        "lookup_user",
        "openinference",
        "text",
        None,
        "call_toolexc_2",
        "sess-7",
        id="langgraph-handled-error-status-ok",
    ),
    pytest.param(
        _langgraph_crash,
        "denied",
        "delete_file",
        "openinference",
        "exception",
        None,
        None,
        "sess-7",
        id="langgraph-crash-traceback-in-status",
    ),
    pytest.param(
        _smolagents_crash,
        "denied",
        "delete_file",
        "openinference",
        "exception",
        None,
        None,
        None,
        id="smolagents-class-named-span",
    ),
    pytest.param(
        _traceloop_not_found,
        "not_found",
        "lookup_order",
        "traceloop",
        "observation",
        None,
        None,
        "sess-9",
        id="traceloop-observation",
    ),
    pytest.param(
        _mcp_invalid_params,
        "invalid_args",
        "create_issue",
        "mcp",
        "rpc",
        None,
        "42",
        "mcp-sess-1",
        id="mcp-jsonrpc-invalid-params",
    ),
    pytest.param(
        _mcp_is_error,
        "internal_error",
        "create_issue",
        "mcp",
        "marker",
        None,
        None,
        None,
        id="mcp-is-error",
    ),
    pytest.param(
        _mcp_is_error_with_observation,
        "invalid_args",
        "create_issue",
        "mcp",
        "observation",
        "repo",
        None,
        None,
        id="mcp-is-error-with-observation",
    ),
    # A structured error the tool returned as its text: the server called it a success.
    pytest.param(
        _logfire_mcp(json.dumps({"error": "not_found", "message": "no job 7"})),
        "not_found",
        "get_job",
        "mcp",
        "observation",
        None,
        None,
        None,
        id="logfire-mcp-ok-result-holding-an-error",
    ),
    pytest.param(
        _openllmetry_mcp_result,
        "not_found",
        "get_job",
        "traceloop",
        "observation",
        None,
        None,
        None,
        id="openllmetry-mcp-result-holding-an-error",
    ),
    pytest.param(
        _logfire_mcp(json.dumps({"job": "7", "state": "done"})),
        "ok",
        "get_job",
        "mcp",
        "status",
        None,
        None,
        None,
        id="logfire-mcp-ok-result",
    ),
    pytest.param(
        _http_rate_limited,
        "rate_limited",
        "search",
        "genai",
        "http",
        None,
        None,
        None,
        id="http-429-retry-after",
    ),
    pytest.param(
        _http_not_found_unset_status,
        "not_found",
        "get_job",
        "genai",
        "http",
        None,
        None,
        None,
        id="http-404-on-unset-status",
    ),
    pytest.param(
        _grpc_deadline,
        "timeout",
        "fetch",
        "genai",
        "rpc",
        None,
        None,
        None,
        id="grpc-old-int-status",
    ),
    pytest.param(
        _rpc_status_name,
        "denied",
        "fetch",
        "genai",
        "rpc",
        None,
        None,
        None,
        id="rpc-status-code-name",
    ),
    pytest.param(
        _toolkit_span,
        "invalid_args",
        "get_job",
        "errscope",
        "error_type",
        "job_id",
        "call_9",
        None,
        id="errscope-toolkit",
    ),
    pytest.param(
        _unknown_code,
        "unknown",
        "charge",
        "genai",
        "observation",
        None,
        None,
        None,
        id="unknown-code-kept-raw",
    ),
    pytest.param(
        _graph_interrupt,
        "ok",
        "approve",
        "genai",
        "exception",
        None,
        None,
        None,
        id="graph-interrupt-is-not-an-error",
    ),
    pytest.param(
        _dspy_tool_no_name,
        "not_found",
        "get_job",
        "openinference",
        "observation",
        None,
        None,
        "sess-dspy-1",
        id="dspy-tool-named-by-its-span-result-encoded-twice",
    ),
    pytest.param(
        _haystack_denied,
        "denied",
        "delete_file",
        "haystack",
        "text",
        None,
        None,
        None,
        id="haystack-error-only-as-output-text",
    ),
    pytest.param(
        _logfire_function_timeout,
        "timeout",
        "wait_for_batch",
        "logfire",
        "text",
        None,
        None,
        None,
        id="logfire-openai-agents-timeout-notice",
    ),
]


def _assert_nothing_leaks(forward: Any) -> None:
    text = "\n".join(strings_of(asdict(forward)))
    for secret in PLANTED:
        assert secret not in text
    assert "Traceback (most recent call last)" not in text
    assert 'File "' not in text
    assert "/home/alice" not in text


@pytest.mark.parametrize(
    ("builder", "code", "tool", "convention", "source", "field", "call_id", "session_id"), CASES
)
def test_tool_span_record_and_forward(
    builder: Callable[[], ReadableSpan],
    code: str,
    tool: str,
    convention: str,
    source: str,
    field: str | None,
    call_id: str | None,
    session_id: str | None,
) -> None:
    """Each convention's tool span yields the right record; the span passed on leaks nothing."""
    span = builder()
    view = from_readable(span)
    out = Pipeline().process(view)
    assert out.record is not None
    record = out.record
    assert (record.code, record.tool, record.convention, record.source) == (
        code,
        tool,
        convention,
        source,
    )
    assert record.field == field
    assert record.call_id == call_id
    assert record.session_id == session_id
    assert (record.trace_id, record.span_id) == (view.trace_id, view.span_id)
    assert (record.service, record.version, record.environment) == (
        "weather-agent",
        "2.1.0",
        "prod",
    )
    assert not any(secret in str(asdict(record)) for secret in PLANTED)
    forward = out.forward
    assert forward is not None
    assert (forward.trace_id, forward.span_id) == (view.trace_id, view.span_id)
    _assert_nothing_leaks(forward)
    if code == "ok":
        assert "error.type" not in forward.attributes
        assert forward.status.code != 2
    else:
        assert forward.attributes["error.type"] == code
        assert forward.status.code == 2
    assert forward.attributes["errscope.code"] == code


def test_unknown_code_keeps_raw_identifier() -> None:
    """An unknown handler code is stored as unknown with its raw identifier."""
    record = Pipeline().process(from_readable(_unknown_code())).record
    assert record is not None
    assert record.raw_code == "quota_blown"


@pytest.mark.parametrize(
    ("error_type", "raw"),
    [("rateLimited", "rateLimited"), ("tool-error", "tool-error"), ("quota blown", None)],
)
def test_an_unreadable_error_type_is_a_failure_not_ok(error_type: str, raw: str | None) -> None:
    """OpenTelemetry sets error.type only when the call failed: a value errscope cannot map
    (and no status, no exception) is `unknown`, never `ok`."""
    span = make_span(
        "execute_tool get_job",
        {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": "get_job",
            "error.type": error_type,
        },
    )
    record = Pipeline().process(from_readable(span)).record
    assert record is not None
    assert (record.code, record.raw_code) == ("unknown", raw)


@pytest.mark.parametrize(("attempt", "kept"), [(3, 3), (2**31, None), (-1, None)])
def test_an_attempt_past_any_real_retry_count_is_dropped(
    tmp_path: Path, attempt: int, kept: int | None
) -> None:
    """A huge attempt counter is legal OTLP but not a retry count; it must not reach the
    32-bit column, where it failed the whole grouped commit."""
    span = make_span(
        "execute_tool get_job",
        {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": "get_job",
            "pydantic_ai.tool.retry.attempt": attempt,
        },
        status=(ERR, None),
    )
    record = Pipeline().process(from_readable(span)).record
    assert record is not None
    assert record.attempt == kept
    with DuckDBStore(tmp_path / "s.duckdb") as store:
        assert store.append_tool_calls([record]) == 1


def test_retry_after_from_header() -> None:
    """A 429 keeps retry_after_s from the Retry-After header and the HTTP status."""
    record = Pipeline().process(from_readable(_http_rate_limited())).record
    assert record is not None
    assert (record.retry_after_s, record.http_status) == (30.0, 429)


@pytest.mark.parametrize(
    "builder",
    [
        pytest.param(_pydantic_aggregate, id="pydantic-running-tools-aggregate"),
        pytest.param(_smolagents_final_answer, id="smolagents-final-answer"),
        pytest.param(_dspy_finish, id="dspy-react-finish"),
    ],
)
def test_not_tool_calls(builder: Callable[[], ReadableSpan]) -> None:
    """Aggregate and final-answer spans are not tool calls: no record, scrubbed when passed on."""
    out = Pipeline().process(from_readable(builder()))
    assert out.record is None
    assert out.forward is not None
    _assert_nothing_leaks(out.forward)


def test_custom_matcher() -> None:
    """A user matcher (name glob + attribute equality) recognises an in-house tool span."""
    matcher = Matcher(name_glob="tool:*", equals=(("app.kind", "tool"),), tool_attribute="app.tool")
    record = Pipeline(matchers=[matcher]).process(from_readable(_custom_matcher())).record
    assert record is not None
    assert (record.tool, record.convention, record.code) == ("refund", "custom", "denied")
    assert Pipeline().process(from_readable(_custom_matcher())).record is None


@pytest.mark.parametrize("policy", list(NonToolPolicy))
def test_non_tool_policy(policy: NonToolPolicy) -> None:
    """Non-tool spans are dropped, scrubbed, or passed with secrets masked: never leaked."""
    span = make_span(
        "invoke_agent weather_agent",
        {
            "gen_ai.operation.name": "invoke_agent",
            "pydantic_ai.all_messages": json.dumps([{"content": f"my key is {OPENAI_KEY}"}]),
            "nested.list": [GITHUB_TOKEN, "fine"],
        },
        exception=real_exception(PermissionError),
        status=(ERR, f"PermissionError: {GITHUB_TOKEN}"),
    )
    out = Pipeline(non_tool=policy).process(from_readable(span))
    assert out.record is None
    if policy is NonToolPolicy.DROP:
        assert out.forward is None
        return
    assert out.forward is not None
    text = "\n".join(strings_of(asdict(out.forward)))
    for secret in PLANTED:
        assert secret not in text
    assert out.redactions
    if policy is NonToolPolicy.SCRUB:
        assert "Traceback (most recent call last)" not in text
    assert out.forward.attributes["nested.list"][1] == "fine"


def test_traceback_sampled_and_redacted() -> None:
    """A failing call's traceback is kept redacted, linked by ids; no secret or local value survives."""
    out = Pipeline().process(from_readable(_pydantic_permission()))
    assert out.traceback is not None
    assert out.traceback.exception_type == "PermissionError"
    assert out.traceback.span_id == out.record.span_id if out.record else False
    for secret in PLANTED:
        assert secret not in out.traceback.text
    assert "_leaky_handler" in out.traceback.text
    assert len(out.traceback.text.encode()) <= 8192


def test_redaction_counts_are_per_rule() -> None:
    """Masked values are counted per rule for the redactions table, never stored as values."""
    out = Pipeline().process(from_readable(_pydantic_permission()))
    assert out.record is not None
    assert out.record.redactions == sum(out.redactions.values())
    assert all(isinstance(k, str) and isinstance(v, int) for k, v in out.redactions.items())


def test_second_pass_agrees_with_first() -> None:
    """A span errscope already passed on is classified the same way by a second errscope."""
    first = Pipeline().process(from_readable(_langgraph_tool_exception()))
    assert first.forward is not None
    from errscope.collector.spanview import to_readable

    second = Pipeline().process(from_readable(to_readable(first.forward)))
    assert first.record is not None
    assert second.record is not None
    assert (second.record.code, second.record.convention, second.record.tool) == (
        first.record.code,
        first.record.convention,
        first.record.tool,
    )


def test_non_tool_redactions_are_filed_under_their_service_and_hour() -> None:
    """A non-tool span's masked values count under its service and its start's hour."""
    from errscope.collector.pipeline import NON_TOOL
    from errscope.collector.store.batch import StoreBatch

    span = make_span(
        "invoke_agent weather_agent",
        {"gen_ai.operation.name": "invoke_agent", "prompt": f"use {OPENAI_KEY}"},
    )
    out = Pipeline().process(from_readable(span))
    assert out.record is None
    # the prompt is content: dropped, and the key in it still counted as exposed
    assert (out.service, out.redactions) == (RESOURCE["service.name"], {"openai-api-key": 1})
    assert out.content_dropped == {"content:pydantic_ai": 1}
    assert out.ts is not None
    assert span.start_time is not None
    assert out.ts.timestamp() == pytest.approx(span.start_time / 1e9)
    batch = StoreBatch()
    batch.add(out)
    hour = out.ts.replace(minute=0, second=0, microsecond=0)
    assert dict(batch.redactions) == {
        (hour, RESOURCE["service.name"], NON_TOOL, "openai-api-key"): 1
    }
    clean = make_span("invoke_agent weather_agent", {"gen_ai.operation.name": "invoke_agent"})
    assert Pipeline().process(from_readable(clean)).service is None  # nothing counted
