"""Traceback samples of calls whose convention records no arguments: free text is masked."""

from __future__ import annotations

from collections.abc import Mapping

import pytest

from errscope.collector.content import arguments_unrecorded, mask_traceback_content
from errscope.collector.pipeline import Pipeline
from errscope.collector.spanview import STATUS_ERROR, AttrValue, EventView, SpanView, StatusView

CANARY = "CNRY-unknown-args-10-878350646d"
TRACE = (
    "Traceback (most recent call last):\n"
    '  File "app/tools.py", line 81, in compute\n'
    f"RuntimeError: division failed while evaluating {CANARY}\n"
    "The above exception was the direct cause of the following exception:\n"
    "Traceback (most recent call last):\n"
    '  File "site-packages/fastmcp/server/server.py", line 1564, in call_tool\n'
    f"fastmcp.exceptions.ToolError: Error calling tool 'compute': division failed {CANARY}"
)
MCP = {"mcp.method.name": "tools/call", "gen_ai.tool.name": "compute"}
GENAI = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "compute"}


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        pytest.param(
            f"RuntimeError: division failed while evaluating {CANARY}",
            "RuntimeError: [content]",
            id="free-text-and-id-shaped-argument",
        ),
        pytest.param(
            "PermissionError: [Errno 13] Permission denied: '/srv/x/secrets.txt'",
            "PermissionError: [Errno 13] [content] '[content]'",
            id="errno-kept",
        ),
        pytest.param(
            "OSError: ENOENT while opening the user's notes",
            "OSError: ENOENT [content]",
            id="constant-code-kept",
        ),
        pytest.param(
            "httpx.HTTPStatusError: status 404 for the user's query",
            "httpx.HTTPStatusError: [content] 404 [content]",
            id="status-number-kept",
        ),
        pytest.param(
            "Caused by: java.io.IOException: cannot read the user's notes",
            "Caused by: java.io.IOException: [content]",
            id="java-cause",
        ),
        pytest.param("    Input should be Paris", "    [content]", id="message-continuation"),
        pytest.param(
            "Traceback (most recent call last):",
            "Traceback (most recent call last):",
            id="structure-kept",
        ),
    ],
)
def test_unknown_arguments_keep_types_and_codes(line: str, expected: str) -> None:
    """With the arguments unknown, an exception line keeps its type and codes, free text masked."""
    masked, count = mask_traceback_content(line, arguments_known=False)
    assert masked == expected
    assert (count > 0) == (expected != line)


@pytest.mark.parametrize(
    ("convention", "attrs", "unrecorded"),
    [
        pytest.param("mcp", MCP, True, id="mcp-records-none"),
        pytest.param(
            "mcp", {**MCP, "gen_ai.tool.call.arguments": "{}"}, False, id="mcp-with-arguments"
        ),
        pytest.param("genai", GENAI, True, id="genai-records-none"),
        pytest.param(
            "genai", {**GENAI, "gen_ai.tool.call.arguments": "{}"}, False, id="genai-with-arguments"
        ),
        pytest.param("openinference", {"tool.name": "compute"}, False, id="openinference"),
        pytest.param("errscope", {"errscope.code": "internal_error"}, False, id="toolkit"),
    ],
)
def test_arguments_unrecorded_by_convention(
    convention: str, attrs: Mapping[str, AttrValue], unrecorded: bool
) -> None:
    """Only a convention that records no arguments, on a span without any, has them unknown."""
    assert arguments_unrecorded(convention, attrs) is unrecorded


def _span(attrs: Mapping[str, AttrValue]) -> SpanView:
    event = EventView(
        "exception",
        1,
        {
            "exception.type": "fastmcp.exceptions.ToolError",
            "exception.message": "Error calling tool 'compute': division failed",
            "exception.stacktrace": TRACE,
        },
    )
    return SpanView(
        name="tools/call compute",
        trace_id="a" * 32,
        span_id="b" * 16,
        start_ns=1,
        end_ns=2,
        status=StatusView(STATUS_ERROR, "Error calling tool 'compute'"),
        attributes=dict(attrs),
        events=(event,),
    )


@pytest.mark.parametrize(
    ("attrs", "canary_kept", "words_kept"),
    [
        pytest.param(MCP, False, False, id="mcp-server-span"),
        pytest.param(
            {**GENAI, "gen_ai.tool.call.arguments": '{"expression": "1/0"}'},
            True,
            True,
            id="genai-with-arguments-unchanged",
        ),
    ],
)
def test_sample_of_unrecorded_arguments(
    attrs: Mapping[str, AttrValue], canary_kept: bool, words_kept: bool
) -> None:
    """An MCP span's stored traceback loses its messages' free text; a span with arguments not."""
    out = Pipeline().process(_span(attrs))
    assert out.traceback is not None
    assert (CANARY in out.traceback.text) is canary_kept
    assert ("division failed" in out.traceback.text) is words_kept
    assert "RuntimeError:" in out.traceback.text
    assert "fastmcp.exceptions.ToolError:" in out.traceback.text
