"""What other spans of one export request say about each tool span in it.

`request_context(views, matchers)` returns, per tool span, a `Related`: its child spans (an
HTTP client child carries the status), the ids it inherits from its nearest ancestors (the
agent span's conversation id), and the call id a model span requested for it when the tool
span names none (or, failing that, the id under which a later model span's input answered
it: OpenLLMetry's OpenAI Agents spans write only there).  `unrun_calls` finds the calls a
framework answered without running any tool.  Pure: reads the views, bounded in depth and
size, never raises on malformed JSON in an attribute; the Python reprs some instrumentations
write (LlamaIndex's and Haystack's messages) are read with linear-time RE2 patterns.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any, Final

import orjson
import re2

from errscope.collector import semconv as sc
from errscope.collector.classify import Matcher, ToolSpan, classify
from errscope.collector.spanview import STATUS_ERROR, AttrValue, SpanView

__all__ = ["NO_RELATED", "Related", "UnrunCall", "request_context", "unrun_calls"]

# Ids a tool span inherits from its nearest ancestor in the same request (the agent span
# holds the conversation id; per the GenAI conventions the tool span need not repeat it).
_INHERITED_KEYS: Final = (
    sc.GEN_AI_CONVERSATION_ID,
    sc.OI_SESSION_ID,
    sc.TRACELOOP_SESSION_ID,
    sc.TRACELOOP_THREAD_ID,
    sc.TRACELOOP_RUN_ID,
    sc.AI_SESSION_ID,
    sc.AI_SESSION_ID_SNAKE,
    sc.GEN_AI_AGENT_CALL_ID,
    sc.AGNO_RUN_ID,
    sc.LOGFIRE_GROUP_ID,
    sc.MCP_SESSION_ID,
    sc.ERRSCOPE_CORRELATION_ID,
)
OWN_CALL_ID_KEYS: Final = (
    sc.GEN_AI_TOOL_CALL_ID,
    sc.AI_TOOL_CALL_ID,
    sc.OI_TOOL_CALL_ID,
    sc.OI_TOOL_ID,
)
_MAX_ANCESTORS: Final = 64
_MAX_REPR_CHARS: Final = 262144
# A Python string literal as repr() writes it: single quotes, or double when it holds one.
_PY_STR: Final = r"""(?:'((?:[^'\\]|\\.)*)'|"((?:[^"\\]|\\.)*)")"""
# Tool answers in the Python reprs of a model span's input messages, (call id, words) each:
# LlamaIndex's ChatMessage(role=TOOL, additional_kwargs={'tool_call_id': ...}, blocks=[...])
# (OpenInference writes `input.value` as JSON whose messages are these reprs), and Haystack's
# ToolCallResult(result=..., origin=ToolCall(..., id=...), error=True) in its tracer's
# `haystack.agent.step.llm.input`.
_LLAMA_TOOL_ANSWER_RE: Final = re2.compile(
    r"MessageRole\.TOOL: 'tool'>, additional_kwargs=\{'tool_call_id': '([A-Za-z0-9_.:-]{1,128})'"
    r"[^}]{0,512}\}, blocks=\[TextBlock\(block_type='text', text=" + _PY_STR
)
# ReAct text (CrewAI's, and every agent that prompts for `Action:` / `Action Input:`): the
# model's reply asks for a tool; the framework appends `Observation: <answer>` to that reply in
# the next model call's input.
_REACT_ACTION_RE: Final = re2.compile(
    r"(?m)^[ \t]*Action:[ \t]*([A-Za-z0-9_.-]{1,128})[ \t]*\n[ \t]*Action Input:"
)
_REACT_ANSWER_RE: Final = re2.compile(
    r"(?s)Action:[ \t]*([A-Za-z0-9_.-]{1,128})[ \t]*\n[ \t]*Action Input:.*?\n[ \t]*"
    r"Observation:[ \t]*([^\n]{0,1000})"
)
_OI_MESSAGE_CONTENT: Final = ".message.content"
_HAYSTACK_TOOL_ANSWER_RE: Final = re2.compile(
    r"^result=" + _PY_STR + r", origin=ToolCall\(tool_name=(?:'[^']{0,256}'|None)"
    r", arguments=.*?, id='([A-Za-z0-9_.:-]{1,128})'[^)]{0,512}\), error=True\)"
)


@dataclass(frozen=True, slots=True)
class Related:
    """What other spans of the same export request say about a tool span."""

    children: tuple[SpanView, ...] = ()
    inherited: Mapping[str, AttrValue] = field(default_factory=lambda: MappingProxyType({}))
    requested_call_id: str | None = None


NO_RELATED: Final = Related()


def first_text(attrs: Mapping[str, AttrValue], *keys: str) -> str | None:
    for key in keys:
        value = attrs.get(key)
        if isinstance(value, str) and value:
            return value
        if isinstance(value, int) and not isinstance(value, bool):
            return str(value)  # jsonrpc.request.id may be a number
    return None


def metadata_ids(attrs: Mapping[str, AttrValue]) -> tuple[str | None, str | None]:
    """(thread id, run id) from OpenInference's `metadata` JSON (LangGraph puts them there)."""
    value = attrs.get(sc.OI_METADATA)
    if not isinstance(value, str) or not value.startswith("{") or len(value) > 65536:
        return None, None
    try:
        parsed = orjson.loads(value)
    except orjson.JSONDecodeError:
        return None, None
    if not isinstance(parsed, dict):
        return None, None
    thread = parsed.get("thread_id")
    run = parsed.get("run_id")
    return (
        thread if isinstance(thread, str) and thread else None,
        run if isinstance(run, str) and run else None,
    )


def _requests_in(view: SpanView) -> Iterator[tuple[str, str]]:
    """(tool name, call id) pairs a model span asked for, in each convention's shape."""
    attrs = view.attributes
    for key in (
        sc.AI_RESPONSE_TOOL_CALLS,
        sc.OI_OUTPUT_VALUE,
        sc.GEN_AI_OUTPUT_MESSAGES,
        sc.LOGFIRE_OUTPUT,
        sc.HAYSTACK_LLM_OUTPUT,
    ):
        value = attrs.get(key)
        # a list of messages, or LangChain's `{"generations": [[{"message": ...}]]}`
        if isinstance(value, str) and value.lstrip()[:1] in "[{" and len(value) <= 262144:
            try:
                parsed = orjson.loads(value)
            except orjson.JSONDecodeError:
                continue
            yield from _requests_of(parsed, 0)
    flat: dict[str, dict[str, str]] = defaultdict(dict)
    for key, value in attrs.items():
        if not isinstance(value, str):
            continue
        for prefix in (sc.OI_LLM_OUTPUT_PREFIX, "gen_ai.completion."):
            if key.startswith(prefix) and ".tool_calls." in key:
                head, _, leaf = key.rpartition(".")
                if leaf == "name" and head.endswith(".function"):
                    head = head.removesuffix(".function")
                    leaf = "fname"
                flat[head.removesuffix(".tool_call")][leaf] = value
    for item in flat.values():
        name = item.get("fname") or item.get("name")
        call = item.get("id")
        if name and call:
            yield name, call


def _answers_in(view: SpanView) -> Iterator[tuple[str, str]]:
    """(tool name, call id) pairs a model span's input messages answered: a `tool` message's
    `tool_call_response` part, named by the assistant `tool_call` part it answers (by id, or
    by position when the two ids differ: OpenLLMetry's OpenAI Agents spans write the
    response item's id `fc_...` on the request and the call id on the answer)."""
    value = view.attributes.get(sc.GEN_AI_INPUT_MESSAGES)
    if not isinstance(value, str) or not value.lstrip().startswith("[") or len(value) > 262144:
        return
    try:
        messages = orjson.loads(value)
    except orjson.JSONDecodeError:
        return
    if not isinstance(messages, list):
        return
    asked: list[tuple[str, str | None]] = []  # (name, id) of requests not yet answered
    for message in messages[:256]:
        if not isinstance(message, dict) or not isinstance(message.get("parts"), list):
            continue
        parts = [p for p in message["parts"][:64] if isinstance(p, dict)]
        if message.get("role") == "assistant":
            asked.extend(
                (p["name"], p.get("id") if isinstance(p.get("id"), str) else None)
                for p in parts
                if p.get("type") == "tool_call" and isinstance(p.get("name"), str)
            )
        elif message.get("role") == "tool":
            for part in parts:
                call = part.get("id")
                if part.get("type") != "tool_call_response" or not isinstance(call, str):
                    continue
                same = [i for i, (_, asked_id) in enumerate(asked) if asked_id == call]
                if same or asked:
                    name, _ = asked.pop(same[0] if same else 0)
                    yield name, call


def _requests_of(obj: Any, depth: int) -> Iterator[tuple[str, str]]:
    if depth > 8:
        return
    if isinstance(obj, list):
        for item in obj[:256]:
            yield from _requests_of(item, depth + 1)
        return
    if not isinstance(obj, dict):
        return
    function = obj.get("function")
    if obj.get("type") == "function" and isinstance(function, dict):
        # OpenAI's chat-completions tool call, as LlamaIndex keeps it in additional_kwargs
        name, call = function.get("name"), obj.get("id")
        if isinstance(name, str) and isinstance(call, str):
            yield name, call
        return
    if isinstance(obj.get("tool_name"), str) and isinstance(obj.get("id"), str):
        yield obj["tool_name"], obj["id"]  # Haystack's ToolCall, as its tracer writes it
        return
    name = obj.get("toolName") or obj.get("name")
    call = obj.get("toolCallId") or obj.get("call_id") or obj.get("id")
    kind = obj.get("type")
    if (
        isinstance(name, str)
        and isinstance(call, str)
        and kind in ("tool-call", "function_call", "tool_call", "function", None)
        and ("toolCallId" in obj or "call_id" in obj or kind in ("tool_call", "function"))
    ):
        yield name, call
        return
    for key in (
        "parts",
        "tool_calls",
        "content",
        "generations",
        "message",
        "kwargs",
        "additional_kwargs",
        "replies",
        "tool_call",
    ):
        inner = obj.get(key)
        if isinstance(inner, list | dict):
            yield from _requests_of(inner, depth + 1)


@dataclass(frozen=True, slots=True)
class UnrunCall:
    """A call a model span requested that no tool span of the request ran, and that a later
    model span's input answered with an error: the framework rejected it before any tool
    ran (LangChain.js's zod check, Vercel AI's input check or a denied approval)."""

    request: SpanView  # the model span that requested it: the row takes its ids
    tool: str
    call_id: str  # "" for a ReAct text request, which names no call id
    text: str | None  # the rejection's words, read for a code only
    denied: bool  # Vercel AI's `execution-denied` answer

    def as_view(self, code: str, convention: str) -> SpanView:
        """The call as a span of errscope's own convention, on the requesting span's ids:
        its code, tool and call id, and the correlation ids the model span carries."""
        ids = {k: v for k, v in self.request.attributes.items() if k in _INHERITED_KEYS}
        attributes: dict[str, AttrValue] = {
            **ids,
            sc.ERRSCOPE_CODE: code,
            sc.ERRSCOPE_TOOL: self.tool,
            sc.ERRSCOPE_CONVENTION: convention,
        }
        if self.call_id:  # a ReAct text request has none
            attributes[sc.GEN_AI_TOOL_CALL_ID] = self.call_id
        return replace(
            self.request, name=f"execute_tool {self.tool}", attributes=attributes, events=()
        )


@dataclass(slots=True)
class _Matched:
    tools: list[tuple[SpanView, ToolSpan]]
    requests: list[tuple[SpanView, str, str]]  # (model span, tool name, call id)
    requested: dict[int, str]  # id(tool view) -> the call id it took
    taken: set[tuple[str, str]]  # (trace id, call id) of every call a tool span has


def _match(views: Sequence[SpanView], matchers: Sequence[Matcher]) -> _Matched:
    """Which call id each tool span of a request takes from its model spans."""
    tools: list[tuple[SpanView, ToolSpan]] = []
    request_list: list[tuple[SpanView, str, str]] = []
    requests: dict[str, list[tuple[int, str, str]]] = defaultdict(list)
    answers: dict[str, list[tuple[int, str, str]]] = defaultdict(list)
    for view in views:
        tool_span = classify(view, matchers)
        if tool_span is not None:
            tools.append((view, tool_span))
        else:
            for name, call in _requests_in(view):
                requests[view.trace_id].append((view.start_ns, name, call))
                request_list.append((view, name, call))
            answers[view.trace_id].extend(
                (view.start_ns, name, call) for name, call in _answers_in(view)
            )
    # the id a model span requested, for a tool span that names none: same trace, same
    # tool, the earliest request not yet taken that started before the tool span
    requested: dict[int, str] = {}
    taken: set[tuple[str, str]] = set()
    for view, _ in tools:
        if any(k in view.attributes for k in OWN_CALL_ID_KEYS):
            taken.add((view.trace_id, str(first_text(view.attributes, *OWN_CALL_ID_KEYS))))
    for view, tool_span in sorted(tools, key=lambda t: t[0].start_ns):
        if any(k in view.attributes for k in OWN_CALL_ID_KEYS):
            continue
        for start, name, call in sorted(requests.get(view.trace_id, ())):
            if (
                name == tool_span.tool
                and start <= view.start_ns
                and (view.trace_id, call) not in taken
            ):
                taken.add((view.trace_id, call))
                requested[id(view)] = call
                break
    # no request named it: the earliest answer, in a model span that started after the tool
    # span (every later turn repeats the history, so an answer is taken once)
    for view, tool_span in sorted(tools, key=lambda t: t[0].start_ns):
        if id(view) in requested or any(k in view.attributes for k in OWN_CALL_ID_KEYS):
            continue
        for start, name, call in sorted(answers.get(view.trace_id, ())):
            if (
                name == tool_span.tool
                and start >= view.start_ns
                and (view.trace_id, call) not in taken
            ):
                taken.add((view.trace_id, call))
                requested[id(view)] = call
                break
    return _Matched(tools, request_list, requested, taken)


def request_context(views: Sequence[SpanView], matchers: Sequence[Matcher]) -> dict[int, Related]:
    """Per tool span of one request (keyed by id() of its view): its related facts."""
    by_span = {(v.trace_id, v.span_id): v for v in views}
    children: dict[tuple[str, str], list[SpanView]] = defaultdict(list)
    for view in views:
        if view.parent_span_id:
            children[(view.trace_id, view.parent_span_id)].append(view)
    matched = _match(views, matchers)
    tools, requested = matched.tools, matched.requested
    out: dict[int, Related] = {}
    for view, _ in tools:
        inherited: dict[str, AttrValue] = {}
        parent = view.parent_span_id
        for _ in range(_MAX_ANCESTORS):
            ancestor = by_span.get((view.trace_id, parent)) if parent else None
            if ancestor is None:
                break
            for key in _INHERITED_KEYS:
                if key not in inherited and key in ancestor.attributes:
                    inherited[key] = ancestor.attributes[key]
            parent = ancestor.parent_span_id
        out[id(view)] = Related(
            children=tuple(children.get((view.trace_id, view.span_id), ())),
            inherited=inherited,
            requested_call_id=requested.get(id(view)),
        )
    return out


def _llama_answers(text: str) -> Iterator[tuple[str, str | None, bool]]:
    """(call id, words, False) of each LlamaIndex tool message in a ChatMessage repr."""
    for match in _LLAMA_TOOL_ANSWER_RE.finditer(text[:_MAX_REPR_CHARS]):
        call, single, double = match.groups()
        yield call, single or double or None, False


def _haystack_answers(text: str) -> Iterator[tuple[str, str | None, bool]]:
    """(call id, words, False) of each failed Haystack ToolCallResult in a messages repr; each
    result is matched on its own, so one result's words never pair with the next one's id."""
    for piece in text[:_MAX_REPR_CHARS].split("ToolCallResult(")[1:]:
        match = _HAYSTACK_TOOL_ANSWER_RE.search(piece)
        if match is not None:
            single, double, call = match.groups()
            yield call, single or double or None, False


def _error_answers_in(view: SpanView) -> Iterator[tuple[str, str | None, bool]]:
    """(call id, words, denied) of every error answer a model span's input holds: Vercel AI's
    `tool-result` parts with an `error-text`/`error-json`/`execution-denied` output,
    LangChain's serialised ToolMessages with `status: "error"` (OpenInference's input.value),
    Haystack's ToolCallResults with `error=True`, and LlamaIndex's tool messages (which carry
    no error flag: for a call no tool span ran, any answer is the framework's own)."""
    haystack = view.attributes.get(sc.HAYSTACK_LLM_INPUT)
    if isinstance(haystack, str) and "ToolCallResult(" in haystack:
        yield from _haystack_answers(haystack)
    for key in (sc.AI_PROMPT_MESSAGES, sc.OI_INPUT_VALUE):
        value = view.attributes.get(key)
        if not isinstance(value, str) or value.lstrip()[:1] not in "[{" or len(value) > 262144:
            continue
        try:
            parsed = orjson.loads(value)
        except orjson.JSONDecodeError:
            continue
        yield from _error_answers_of(parsed, 0)


def _error_answers_of(obj: Any, depth: int) -> Iterator[tuple[str, str | None, bool]]:
    if depth > 8:
        return
    if isinstance(obj, list):
        for item in obj[:256]:
            yield from _error_answers_of(item, depth + 1)
        return
    if not isinstance(obj, dict):
        return
    output = obj.get("output")
    call = obj.get("toolCallId")
    if obj.get("type") == "tool-result" and isinstance(call, str) and isinstance(output, dict):
        kind = output.get("type")
        if kind == "execution-denied":
            yield call, None, True
        elif kind in ("error-text", "error-json"):
            words = output.get("value")
            yield call, words if isinstance(words, str) else None, False
        return
    kwargs = obj.get("kwargs")
    ids = obj.get("id")
    if (
        obj.get("lc") == 1
        and isinstance(kwargs, dict)
        and isinstance(ids, list)
        and ids[-1:] == ["ToolMessage"]
    ):
        call = kwargs.get("tool_call_id")
        if kwargs.get("status") == "error" and isinstance(call, str):
            words = kwargs.get("content")
            yield call, words if isinstance(words, str) else None, False
        return
    for key in ("messages", "content"):
        inner = obj.get(key)
        if isinstance(inner, list):
            yield from _error_answers_of(inner, depth + 1)
            for item in inner[:256]:
                if isinstance(item, str) and "MessageRole.TOOL" in item:
                    yield from _llama_answers(item)


def _failure_words(view: SpanView) -> str | None:
    """What a failed span says of its failure: its first exception as `Type: message`, else
    its status description."""
    for event in view.events:
        kind = event.attributes.get(sc.EXCEPTION_TYPE)
        message = event.attributes.get(sc.EXCEPTION_MESSAGE)
        if event.name == sc.EXCEPTION_EVENT and isinstance(kind, str) and kind:
            return f"{kind}: {message}" if isinstance(message, str) else kind
    return view.status.message or None


def unrun_calls(views: Sequence[SpanView], matchers: Sequence[Matcher]) -> list[UnrunCall]:
    """Calls of one request that a model span requested, that no tool span ran, and that a
    model span starting later answered with an error, or whose step failed.

    Both model spans are in the request, so a tool span that ran the call would be too: it
    ends after the request and before the answer, and exporters send spans in the order
    they end.  A step (the requesting model span's parent) that ended ERROR with no tool
    span under it rejected the call itself (smolagents' argument check and unknown-tool
    error, raised in the step after the model answered): its exception is the rejection.
    At most one call per requesting span (its ids key the row).
    """
    matched = _match(views, matchers)
    ran = {call for _, call in matched.taken}
    pending = [r for r in matched.requests if r[2] not in ran]
    if not pending:
        # the common case: every requested call has its tool span; parse no more
        return _react_unrun(views, matched, set())
    first = min(r[0].start_ns for r in pending)
    answered: dict[str, tuple[int, str | None, bool]] = {}
    for view in views:
        if view.start_ns <= first or classify(view, matchers) is not None:
            continue
        for call, words, denied in _error_answers_in(view):
            if call not in answered or view.start_ns < answered[call][0]:
                answered[call] = (view.start_ns, words, denied)
    by_span = {(v.trace_id, v.span_id): v for v in views}
    tool_parents = {(v.trace_id, v.parent_span_id) for v, _ in matched.tools}
    for view, _, call in pending:
        step = by_span.get((view.trace_id, view.parent_span_id or ""))
        if (
            call not in answered
            and step is not None
            and step.status.code == STATUS_ERROR
            and (step.trace_id, step.span_id) not in tool_parents
            and classify(step, matchers) is None
        ):
            answered[call] = (step.end_ns, _failure_words(step), False)
    out: list[UnrunCall] = []
    keys: set[tuple[str, str]] = set()
    for view, name, call in sorted(pending, key=lambda r: r[0].start_ns):
        answer = answered.get(call)
        key = (view.trace_id, view.span_id)
        if call in ran or answer is None or answer[0] <= view.start_ns or key in keys:
            continue
        ran.add(call)
        keys.add(key)
        out.append(UnrunCall(view, name, call, answer[1], answer[2]))
    return [*out, *_react_unrun(views, matched, keys)]


def _message_texts(attrs: Mapping[str, AttrValue], prefix: str) -> list[str]:
    """The message contents OpenInference flattens under `prefix` (its input or output)."""
    return [
        v
        for k, v in attrs.items()
        if isinstance(v, str) and k.startswith(prefix) and k.endswith(_OI_MESSAGE_CONTENT)
    ]


def _react_unrun(
    views: Sequence[SpanView], matched: _Matched, keys: set[tuple[str, str]]
) -> list[UnrunCall]:
    """Calls a model asked for in ReAct text that no tool span ran and that the framework
    answered itself: the next model call's input repeats the request with an `Observation:`
    (CrewAI's "Action 'x' don't exist"), and no tool span of that name started in between.
    The row has no call id (ReAct text has none)."""
    asks: list[tuple[SpanView, str]] = []
    answers: list[tuple[SpanView, str, str]] = []
    for view in views:
        if any(v is view for v, _ in matched.tools):
            continue
        attrs = view.attributes
        for text in _message_texts(attrs, sc.OI_LLM_OUTPUT_PREFIX):
            found = _REACT_ACTION_RE.finditer(text[:_MAX_REPR_CHARS])
            asks.extend((view, m.group(1)) for m in found)
        for text in _message_texts(attrs, sc.OI_LLM_INPUT_PREFIX):
            found = _REACT_ANSWER_RE.finditer(text[:_MAX_REPR_CHARS])
            answers.extend((view, m.group(1), m.group(2)) for m in found)
    if not asks or not answers:
        return []
    ran = [(v.trace_id, t.tool, v.start_ns) for v, t in matched.tools]
    out: list[UnrunCall] = []
    for ask, name in sorted(asks, key=lambda a: a[0].start_ns):
        key = (ask.trace_id, ask.span_id)
        later = [
            (v.start_ns, words)
            for v, asked, words in answers
            if v.trace_id == ask.trace_id and asked == name and v.start_ns > ask.start_ns
        ]
        if key in keys or not later:
            continue
        answered_at, words = min(later)
        if any(
            trace == ask.trace_id and tool == name and ask.start_ns <= start <= answered_at
            for trace, tool, start in ran
        ):
            continue
        keys.add(key)
        out.append(UnrunCall(ask, name, "", words or None, False))
    return out
