"""classify: is this span a tool call, under which convention, and which tool?

Spans are recognised by their attributes, never by their names alone: real tool spans are
named after the operation (`execute_tool get_weather`), the tool (`get_weather`), a Python
class (`SimpleTool`) or a fixed string (`running tool`).  The rules, in order (research/
conventions.md §A):

1. errscope's own spans (`errscope.code` present; `errscope.convention` keeps the original
   convention of a span errscope already processed, so a second pass agrees with the first);
2. OTel GenAI: `gen_ai.operation.name = execute_tool` (fallback: name `execute_tool X`);
3. MCP: `mcp.method.name = tools/call`, or in the RPC conventions' terms `rpc.system =
   jsonrpc` with `rpc.method = tools/call` (Logfire's `MCP request: tools/call X`), the tool
   named after `tools/call ` in the span name;
4. OpenInference: `openinference.span.kind = TOOL`, the tool named by `tool.name` or, when an
   instrumentor writes none (DSPy's), by the span name without its method (`get_job.__call__`);
   not the built-in tools that end an agent's loop (smolagents' `final_answer`, DSPy ReAct's
   `finish`);
5. OpenLLMetry/Traceloop: `traceloop.span.kind = tool`;
6. legacy pydantic-ai/Logfire: name `running tool` with `gen_ai.tool.name` (never the
   aggregate `running tools`, which merges several parallel calls and is no call itself);
7. Vercel AI SDK: `ai.operationId = ai.toolCall` (its tool spans carry no `gen_ai.*`);
8. Haystack's own tracer: `haystack.tool.name` (the `haystack.agent.step.tool` span);
9. Logfire's OpenAI Agents integration: `logfire.msg_template = "Function: {name}"`, the tool
   in `name`;
10. user matchers (span-name glob and/or attribute equality), in the order configured.

Pure functions on frozen data; safe from any thread.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Final

from errscope.collector import semconv as sc
from errscope.collector.config import Matcher
from errscope.collector.spanview import AttrValue, SpanView

__all__ = ["Convention", "Matcher", "ToolSpan", "classify"]

# A bound on what is read of a tool name: the record keeps 128 characters, but the secret
# check must see the whole name first (a key past the cut kept its first 16 characters).
_MAX_TOOL_CHARS: Final = 1024
# Tools an agent framework adds to end its own loop: a TOOL span, never a call of the model's.
_LOOP_END_TOOLS: Final = frozenset({"final_answer", "finish"})
# The method an OpenInference instrumentor names a TOOL span after (`<tool>.__call__`) when it
# writes no `tool.name`.
_CALL_SUFFIXES: Final = (".__call__", ".acall", ".call", ".invoke", ".ainvoke", ".run", ".arun")


class Convention(StrEnum):
    """Which instrumentation convention a tool span follows (stored as `convention`)."""

    ERRSCOPE = "errscope"
    GENAI = "genai"
    MCP = "mcp"
    OPENINFERENCE = "openinference"
    TRACELOOP = "traceloop"
    PYDANTIC_AI_LEGACY = "pydantic_ai_legacy"
    VERCEL_AI = "vercel_ai"
    HAYSTACK = "haystack"
    LOGFIRE = "logfire"
    CUSTOM = "custom"


@dataclass(frozen=True, slots=True)
class ToolSpan:
    """A span recognised as a tool call: its convention and its tool's name."""

    convention: Convention
    tool: str


def _text(value: AttrValue | None) -> str | None:
    return value if isinstance(value, str) and value else None


def _clip(tool: str | None) -> str:
    # The record refuses over-long or odd names; classify keeps the span and lets the
    # pipeline name the tool "unknown_tool" rather than drop the call.
    return tool.strip()[:_MAX_TOOL_CHARS] if tool and tool.strip() else "unknown_tool"


def _suffix(name: str, prefix: str) -> str | None:
    return name[len(prefix) :].strip() or None if name.startswith(prefix) else None


def _oi_tool(view: SpanView) -> str | None:
    """An OpenInference TOOL span's tool: `tool.name`, else the span name without its method."""
    named = _text(view.attributes.get(sc.OI_TOOL_NAME))
    if named:
        return named
    for suffix in _CALL_SUFFIXES:
        if view.name.endswith(suffix) and len(view.name) > len(suffix):
            return view.name.removesuffix(suffix)
    return view.name or None


def classify(view: SpanView, matchers: Sequence[Matcher] = ()) -> ToolSpan | None:
    """The convention and tool of a tool-call span, or None for any other span."""
    attrs = view.attributes
    gen_ai_tool = _text(attrs.get(sc.GEN_AI_TOOL_NAME))
    if sc.ERRSCOPE_CODE in attrs:
        previous = _text(attrs.get(sc.ERRSCOPE_CONVENTION))
        known = {c.value for c in Convention}
        convention = Convention(previous) if previous is not None and previous in known else None
        tool = (
            _text(attrs.get(sc.ERRSCOPE_TOOL)) or gen_ai_tool or _suffix(view.name, "execute_tool ")
        )
        return ToolSpan(convention or Convention.ERRSCOPE, _clip(tool or view.name))
    operation = _text(attrs.get(sc.GEN_AI_OPERATION_NAME))
    if operation == sc.EXECUTE_TOOL and view.name != sc.LEGACY_RUNNING_TOOL:
        return ToolSpan(Convention.GENAI, _clip(gen_ai_tool or _suffix(view.name, "execute_tool ")))
    if operation is None and view.name.startswith("execute_tool "):
        return ToolSpan(Convention.GENAI, _clip(gen_ai_tool or _suffix(view.name, "execute_tool ")))
    if _text(attrs.get(sc.MCP_METHOD_NAME)) == sc.MCP_TOOLS_CALL or (
        _text(attrs.get(sc.RPC_METHOD)) == sc.MCP_TOOLS_CALL
        and _text(attrs.get(sc.RPC_SYSTEM)) == sc.RPC_SYSTEM_JSONRPC
    ):
        # the server's span is `tools/call X`, the client's `MCP send tools/call X`,
        # Logfire's `MCP request: tools/call X`
        after = view.name.partition(f"{sc.MCP_TOOLS_CALL} ")[2].strip() or None
        return ToolSpan(Convention.MCP, _clip(gen_ai_tool or after))
    oi_tool = _oi_tool(view) if attrs.get(sc.OPENINFERENCE_SPAN_KIND) == sc.OI_TOOL else None
    if oi_tool:
        if oi_tool in _LOOP_END_TOOLS:
            return None  # the framework's own loop end: a TOOL span, but no call
        return ToolSpan(Convention.OPENINFERENCE, _clip(oi_tool))
    if _text(attrs.get(sc.TRACELOOP_SPAN_KIND)) == "tool":
        entity = _text(attrs.get(sc.TRACELOOP_ENTITY_NAME))
        return ToolSpan(
            Convention.TRACELOOP, _clip(gen_ai_tool or entity or view.name.removesuffix(".tool"))
        )
    if view.name == sc.LEGACY_RUNNING_TOOL and gen_ai_tool:
        return ToolSpan(Convention.PYDANTIC_AI_LEGACY, _clip(gen_ai_tool))
    if _text(attrs.get(sc.AI_OPERATION_ID)) == sc.AI_TOOL_CALL:
        return ToolSpan(Convention.VERCEL_AI, _clip(_text(attrs.get(sc.AI_TOOL_CALL_NAME))))
    haystack_tool = _text(attrs.get(sc.HAYSTACK_TOOL_NAME))
    if haystack_tool:
        return ToolSpan(Convention.HAYSTACK, _clip(haystack_tool))
    if attrs.get(sc.LOGFIRE_MSG_TEMPLATE) == sc.LOGFIRE_FUNCTION_TEMPLATE:
        return ToolSpan(Convention.LOGFIRE, _clip(_text(attrs.get(sc.LOGFIRE_NAME))))
    for matcher in matchers:
        if matcher.matches(view.name, view.attributes):
            named = _text(attrs.get(matcher.tool_attribute)) if matcher.tool_attribute else None
            return ToolSpan(Convention.CUSTOM, _clip(named or view.name))
    return None
