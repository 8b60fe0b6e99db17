"""request_context: the call id a tool span gets from the model spans of its request."""

from __future__ import annotations

import json
from typing import Any

import pytest

from errscope.collector.context import request_context, unrun_calls
from errscope.collector.pipeline import Pipeline
from errscope.collector.spanview import STATUS_ERROR, STATUS_OK, EventView, SpanView, StatusView

TRACE = "0af7651916cd43dd8448eb211c80319c"


def _tool(span_id: str, start_ns: int, name: str = "get_weather") -> SpanView:
    attrs = {"traceloop.span.kind": "tool", "gen_ai.tool.name": name}
    return SpanView(f"{name}.tool", TRACE, span_id, start_ns, start_ns + 5, attributes=attrs)


def _model(span_id: str, start_ns: int, messages: list[dict[str, Any]]) -> SpanView:
    attrs = {"gen_ai.operation.name": "chat", "gen_ai.input.messages": json.dumps(messages)}
    return SpanView("openai.response", TRACE, span_id, start_ns, start_ns + 5, attributes=attrs)


def _asked(*calls: tuple[str, str]) -> dict[str, Any]:
    parts = [{"type": "tool_call", "name": n, "id": i, "arguments": {}} for n, i in calls]
    return {"role": "assistant", "parts": parts}


def _answered(*ids: str) -> dict[str, Any]:
    parts = [{"type": "tool_call_response", "id": i, "response": "{}"} for i in ids]
    return {"role": "tool", "parts": parts}


@pytest.mark.parametrize(
    ("views", "expected"),
    [
        pytest.param(
            [
                _tool("a1", 10),
                _model("m2", 20, [_asked(("get_weather", "fc_x")), _answered("call_x")]),
            ],
            {"a1": "call_x"},
            id="answer-id-differs-from-request-id-paired-by-position",
        ),
        pytest.param(
            [
                _tool("a1", 10, "get_job"),
                _tool("a2", 30, "get_weather"),
                _model("m2", 20, [_asked(("get_job", "call_1")), _answered("call_1")]),
                # the next turn repeats the history: call_1 is taken already
                _model(
                    "m3",
                    40,
                    [
                        _asked(("get_job", "call_1")),
                        _answered("call_1"),
                        _asked(("get_weather", "fc_2")),
                        _answered("call_2"),
                    ],
                ),
            ],
            {"a1": "call_1", "a2": "call_2"},
            id="history-repeated-in-later-turns-is-taken-once",
        ),
        pytest.param(
            [
                _model("m0", 5, [_asked(("get_weather", "fc_x")), _answered("call_x")]),
                _tool("a1", 10),
            ],
            {"a1": None},
            id="an-answer-before-the-tool-ran-is-not-its-answer",
        ),
        pytest.param(
            [
                _tool("a1", 10),
                _model("m2", 20, [_asked(("get_job", "fc_x")), _answered("call_x")]),
            ],
            {"a1": None},
            id="an-answer-for-another-tool-is-not-taken",
        ),
        pytest.param(
            [
                _tool("a1", 10),
                SpanView("chat", TRACE, "m2", 20, 25, attributes={"gen_ai.input.messages": "[{"}),
            ],
            {"a1": None},
            id="malformed-messages-name-nothing",
        ),
    ],
)
def test_call_id_from_a_later_model_span_answer(
    views: list[SpanView], expected: dict[str, str | None]
) -> None:
    """A tool span naming no call id takes the id a later model span's input answered it under."""
    related = request_context(views, ())
    got = {v.span_id: related[id(v)].requested_call_id for v in views if id(v) in related}
    assert got == expected


def _llm(span_id: str, start_ns: int, output_value: Any) -> SpanView:
    attrs = {"openinference.span.kind": "LLM", "output.value": json.dumps(output_value)}
    return SpanView("ScriptedChatModel", TRACE, span_id, start_ns, start_ns + 5, attributes=attrs)


def _oi_tool(span_id: str, start_ns: int) -> SpanView:
    attrs = {"openinference.span.kind": "TOOL", "tool.name": "get_weather"}
    return SpanView("get_weather", TRACE, span_id, start_ns, start_ns + 5, attributes=attrs)


_AI_MESSAGE = {
    "lc": 1,
    "type": "constructor",
    "id": ["langchain_core", "messages", "AIMessage"],
    "kwargs": {
        "content": "",
        "id": "resp-1",
        "tool_calls": [{"id": "call_js_1", "name": "get_weather", "args": {}, "type": "tool_call"}],
    },
}


@pytest.mark.parametrize(
    ("output_value", "expected"),
    [
        pytest.param(
            {"generations": [[{"text": "", "message": _AI_MESSAGE}]], "llmOutput": {}},
            "call_js_1",
            id="langchainjs-generations-object",
        ),
        pytest.param(
            [
                {
                    "role": "assistant",
                    "tool_calls": [{"id": "call_py_1", "type": "function", "name": "get_weather"}],
                }
            ],
            "call_py_1",
            id="message-list",
        ),
        pytest.param(
            {
                "message": {
                    "role": "assistant",
                    "additional_kwargs": {
                        "tool_calls": [
                            {
                                "id": "call_li_1",
                                "type": "function",
                                "function": {"name": "get_weather", "arguments": "{}"},
                            }
                        ]
                    },
                }
            },
            "call_li_1",
            id="llamaindex-openai-shaped-additional-kwargs",
        ),
        pytest.param({"generations": [[{"text": "no tools"}]]}, None, id="no-request"),
    ],
)
def test_call_id_from_an_earlier_model_span_request(
    output_value: Any, expected: str | None
) -> None:
    """A tool span naming no call id takes the id the model span before it requested for that tool."""
    views = [_llm("m1", 5, output_value), _oi_tool("t1", 10)]
    assert request_context(views, ())[id(views[1])].requested_call_id == expected


@pytest.mark.parametrize(
    ("model_attrs", "tool_attrs", "expected"),
    [
        pytest.param(
            {
                "haystack.agent.step.llm.output": json.dumps(
                    {
                        "replies": [
                            {
                                "role": "assistant",
                                "content": [
                                    {"tool_call": {"tool_name": "get_weather", "id": "call_hs_1"}}
                                ],
                            }
                        ]
                    }
                )
            },
            {"haystack.tool.name": "get_weather"},
            "call_hs_1",
            id="haystack-replies",
        ),
        pytest.param(
            {
                "logfire.msg_template": "Chat completion with {gen_ai.request.model!r}",
                "output": json.dumps(
                    [{"type": "function_call", "call_id": "call_lf_1", "name": "get_weather"}]
                ),
            },
            {"logfire.msg_template": "Function: {name}", "name": "get_weather"},
            "call_lf_1",
            id="logfire-openai-agents-output",
        ),
    ],
)
def test_call_id_from_framework_model_spans(
    model_attrs: dict[str, Any], tool_attrs: dict[str, Any], expected: str
) -> None:
    """Haystack's and Logfire's tool spans name no call id: they take the one their model span requested."""
    views = [
        SpanView("llm", TRACE, "m1", 5, 9, attributes=model_attrs),
        SpanView("tool", TRACE, "t1", 10, 15, attributes=tool_attrs),
    ]
    assert request_context(views, ())[id(views[1])].requested_call_id == expected


def _do_generate(span_id: str, start_ns: int, **attrs: Any) -> SpanView:
    values = {"ai.operationId": "ai.generateText.doGenerate", **attrs}
    values = {k: json.dumps(v) if not isinstance(v, str) else v for k, v in values.items()}
    return SpanView(
        "ai.generateText.doGenerate", TRACE, span_id, start_ns, start_ns + 5, attributes=values
    )


_VERCEL_REQUEST = {
    "ai.response.toolCalls": [{"toolCallId": "call_v_3", "toolName": "get_weather", "input": "{}"}]
}


def _vercel_answer(output: dict[str, Any]) -> dict[str, Any]:
    part = {"type": "tool-result", "toolCallId": "call_v_3", "toolName": "get_weather"}
    return {"ai.prompt.messages": [{"role": "tool", "content": [{**part, "output": output}]}]}


def _vercel_tool(span_id: str, start_ns: int) -> SpanView:
    attrs = {
        "ai.operationId": "ai.toolCall",
        "ai.toolCall.name": "get_weather",
        "ai.toolCall.id": "call_v_3",
    }
    return SpanView("ai.toolCall", TRACE, span_id, start_ns, start_ns + 5, attributes=attrs)


_LLAMA_REQUEST = {
    "message": {
        "additional_kwargs": {
            "tool_calls": [
                {"id": "call_li_4", "type": "function", "function": {"name": "get_invoice"}}
            ]
        }
    }
}
_LLAMA_ANSWER = {
    "openinference.span.kind": "LLM",
    "input.value": json.dumps(
        {
            "messages": [
                "ChatMessage(role=<MessageRole.TOOL: 'tool'>, additional_kwargs={'tool_call_id':"
                " 'call_li_4'}, blocks=[TextBlock(block_type='text', text='Tool get_invoice not"
                " found.')])"
            ]
        }
    ),
}
_HS_REQUEST = {
    "haystack.agent.step.llm.output": json.dumps(
        {"replies": [{"content": [{"tool_call": {"tool_name": "get_invoice", "id": "call_hs_4"}}]}]}
    )
}
_HS_ANSWER = {
    "haystack.agent.step.llm.input": "{'messages': [ChatMessage(_role=<ChatRole.TOOL: 'tool'>,"
    " _content=[ToolCallResult(result='ok', origin=ToolCall(tool_name='get_job', arguments={},"
    " id='call_hs_2', extra=None), error=False), ToolCallResult(result=\"Tool 'get_invoice' not"
    " found.\", origin=ToolCall(tool_name='get_invoice', arguments={'invoice_id': 'x)'},"
    " id='call_hs_4', extra=None), error=True)])]}"
}


def _react_llm(span_id: str, start_ns: int, *, ask: str = "", answer: str = "") -> SpanView:
    attrs: dict[str, Any] = {"openinference.span.kind": "LLM"}
    if ask:
        attrs["llm.output_messages.0.message.content"] = (
            f'Thought: use it\nAction: {ask}\nAction Input: {{"invoice_id": "x"}}'
        )
    if answer:
        attrs["llm.input_messages.2.message.content"] = (
            f'Thought: use it\nAction: {answer}\nAction Input: {{"invoice_id": "x"}}\n'
            f"Observation: I encountered an error: Action '{answer}' don't exist\nTool Name: a"
        )
    return SpanView("scripted.llm_call", TRACE, span_id, start_ns, start_ns + 5, attributes=attrs)


def _oi_tool_named(span_id: str, start_ns: int, name: str) -> SpanView:
    attrs = {"openinference.span.kind": "TOOL", "tool.name": name}
    return SpanView(f"{name}.run", TRACE, span_id, start_ns, start_ns + 5, attributes=attrs)


def _smol_step(*, failed: bool) -> SpanView:
    event = EventView(
        "exception",
        3,
        {"exception.type": "smolagents.utils.AgentToolCallError", "exception.message": "bad"},
    )
    return SpanView(
        "Step 1",
        TRACE,
        "s1",
        4,
        30,
        status=StatusView(STATUS_ERROR if failed else STATUS_OK, "AgentToolCallError: bad"),
        attributes={"openinference.span.kind": "CHAIN"},
        events=(event,) if failed else (),
    )


def _smol_model() -> SpanView:
    attrs = {
        "openinference.span.kind": "LLM",
        "llm.output_messages.0.message.tool_calls.0.tool_call.id": "call_smol_3",
        "llm.output_messages.0.message.tool_calls.0.tool_call.function.name": "get_weather",
    }
    return SpanView("Scripted.generate", TRACE, "m1", 5, 9, parent_span_id="s1", attributes=attrs)


def _oi_tool_under(span_id: str, parent: str) -> SpanView:
    attrs = {"openinference.span.kind": "TOOL", "tool.name": "get_weather"}
    return SpanView("SimpleTool", TRACE, span_id, 10, 15, parent_span_id=parent, attributes=attrs)


_LC_ERROR = {
    "messages": [
        [
            {
                "lc": 1,
                "type": "constructor",
                "id": ["langchain_core", "messages", "ToolMessage"],
                "kwargs": {"status": "error", "tool_call_id": "call_js_1", "content": "Error: bad"},
            }
        ]
    ]
}


@pytest.mark.parametrize(
    ("views", "expected"),
    [
        pytest.param(
            [
                _do_generate("m1", 5, **_VERCEL_REQUEST),
                _do_generate(
                    "m2", 20, **_vercel_answer({"type": "error-text", "value": "Invalid input"})
                ),
            ],
            [("m1", "get_weather", "call_v_3", "Invalid input", False)],
            id="vercel-input-rejected-no-tool-span",
        ),
        pytest.param(
            [
                _do_generate("m1", 5, **_VERCEL_REQUEST),
                _do_generate(
                    "m2", 20, **_vercel_answer({"type": "execution-denied", "reason": "no"})
                ),
            ],
            [("m1", "get_weather", "call_v_3", None, True)],
            id="vercel-approval-denied",
        ),
        pytest.param(
            [
                _do_generate("m1", 5, **_VERCEL_REQUEST),
                _vercel_tool("t1", 10),
                _do_generate("m2", 20, **_vercel_answer({"type": "error-text", "value": "boom"})),
            ],
            [],
            id="a-call-a-tool-span-ran-is-not-unrun",
        ),
        pytest.param(
            [
                _do_generate("m1", 5, **_VERCEL_REQUEST),
                _do_generate("m2", 20, **_vercel_answer({"type": "json", "value": {"ok": True}})),
            ],
            [],
            id="a-successful-answer-is-not-a-rejection",
        ),
        pytest.param(
            [_do_generate("m1", 5, **_VERCEL_REQUEST)],
            [],
            id="no-answer-in-the-request-no-row",
        ),
        pytest.param(
            [
                _llm("m1", 5, {"generations": [[{"text": "", "message": _AI_MESSAGE}]]}),
                SpanView(
                    "ScriptedChatModel",
                    TRACE,
                    "m2",
                    20,
                    25,
                    attributes={
                        "openinference.span.kind": "LLM",
                        "input.value": json.dumps(_LC_ERROR),
                    },
                ),
            ],
            [("m1", "get_weather", "call_js_1", "Error: bad", False)],
            id="langchainjs-error-toolmessage-no-tool-span",
        ),
        pytest.param(
            [
                _llm("m1", 5, _LLAMA_REQUEST),
                SpanView("Scripted.achat", TRACE, "m2", 20, 25, attributes=_LLAMA_ANSWER),
            ],
            [("m1", "get_invoice", "call_li_4", "Tool get_invoice not found.", False)],
            id="llamaindex-tool-message-repr-no-tool-span",
        ),
        pytest.param(
            [
                SpanView("haystack.agent.step.llm", TRACE, "m1", 5, 9, attributes=_HS_REQUEST),
                SpanView("haystack.agent.step.llm", TRACE, "m2", 20, 25, attributes=_HS_ANSWER),
            ],
            [("m1", "get_invoice", "call_hs_4", "Tool 'get_invoice' not found.", False)],
            id="haystack-failed-toolcallresult-repr-no-tool-span",
        ),
        pytest.param(
            [_react_llm("m1", 5, ask="get_invoice"), _react_llm("m2", 20, answer="get_invoice")],
            [
                (
                    "m1",
                    "get_invoice",
                    "",
                    "I encountered an error: Action 'get_invoice' don't exist",
                    False,
                )
            ],
            id="crewai-react-answered-without-a-tool-span",
        ),
        pytest.param(
            [
                _react_llm("m1", 5, ask="get_invoice"),
                _oi_tool_named("t1", 10, "get_invoice"),
                _react_llm("m2", 20, answer="get_invoice"),
            ],
            [],
            id="a-react-call-whose-tool-ran-is-not-unrun",
        ),
        pytest.param(
            [_smol_step(failed=True), _smol_model()],
            [
                (
                    "m1",
                    "get_weather",
                    "call_smol_3",
                    "smolagents.utils.AgentToolCallError: bad",
                    False,
                )
            ],
            id="smolagents-failed-step-no-tool-span",
        ),
        pytest.param(
            [_smol_step(failed=False), _smol_model()],
            [],
            id="a-step-that-did-not-fail-rejected-nothing",
        ),
        pytest.param(
            [_smol_step(failed=True), _smol_model(), _oi_tool_under("t1", "s1")],
            [],
            id="a-failed-step-whose-tool-ran-is-the-tools-failure",
        ),
    ],
)
def test_calls_rejected_before_any_tool_ran(
    views: list[SpanView], expected: list[tuple[str, str, str, str | None, bool]]
) -> None:
    """A requested call that no tool span ran, answered with an error by a later model span or failed by its step, is an unrun call on the requesting span."""
    got = [(u.request.span_id, u.tool, u.call_id, u.text, u.denied) for u in unrun_calls(views, ())]
    assert got == expected


def test_an_unrun_call_is_a_row_with_the_rejections_code() -> None:
    """The pipeline stores a call rejected before any tool ran, with the code its rejection's words give, and passes nothing on for it."""
    views = [
        _do_generate("1111111111111111", 5, **_VERCEL_REQUEST),
        _do_generate(
            "2222222222222222",
            20,
            **_vercel_answer({"type": "error-text", "value": "Invalid input for tool"}),
        ),
    ]
    processed = Pipeline().process_request(views)
    records = [p for p in processed if p.record is not None]
    assert len(records) == 1
    assert records[0].forward is None
    record = records[0].record
    assert record is not None
    assert (record.span_id, record.tool, record.code, record.call_id, record.convention) == (
        "1111111111111111",
        "get_weather",
        "invalid_args",
        "call_v_3",
        "vercel_ai",
    )


@pytest.mark.parametrize(
    ("parent", "stored"),
    [
        pytest.param("b7ad6b7169203331", "b7ad6b7169203331", id="child-span"),
        pytest.param(None, None, id="root-span"),
        # Some SDKs write an all-zero id for "no parent".
        pytest.param("0000000000000000", None, id="zero-parent-is-a-root"),
    ],
)
def test_record_keeps_the_parent_span_id(parent: str | None, stored: str | None) -> None:
    """The record carries the span's parent, by which the store folds a call's layers."""
    view = _tool("00f067aa0ba902b7", 10)
    view = SpanView(
        view.name, TRACE, view.span_id, 10, 15, parent_span_id=parent, attributes=view.attributes
    )
    (processed,) = Pipeline().process_request([view])
    assert processed.record is not None
    assert processed.record.parent_span_id == stored
