"""Attribute keys errscope reads and writes, as constants (research/conventions.md §A, §B).

Grouped by the convention that defines them.  Only keys listed in `FORWARD_ALLOWLIST`
survive on a tool span that errscope passes on; every other attribute of a tool span is
dropped (arguments, results, messages), and every other string that leaves is scrubbed.
"""

from __future__ import annotations

from typing import Final

# --- OTel GenAI semantic conventions (execute_tool span)
GEN_AI_OPERATION_NAME: Final = "gen_ai.operation.name"
GEN_AI_TOOL_NAME: Final = "gen_ai.tool.name"
GEN_AI_TOOL_CALL_ID: Final = "gen_ai.tool.call.id"
GEN_AI_TOOL_TYPE: Final = "gen_ai.tool.type"
GEN_AI_TOOL_CALL_RESULT: Final = "gen_ai.tool.call.result"
GEN_AI_CONVERSATION_ID: Final = "gen_ai.conversation.id"
GEN_AI_AGENT_NAME: Final = "gen_ai.agent.name"
GEN_AI_AGENT_ID: Final = "gen_ai.agent.id"
GEN_AI_PROVIDER_NAME: Final = "gen_ai.provider.name"
GEN_AI_AGENT_CALL_ID: Final = "gen_ai.agent.call.id"  # pydantic-ai: one id per agent run
GEN_AI_TOOL_CALL_ARGUMENTS: Final = "gen_ai.tool.call.arguments"
GEN_AI_INPUT_MESSAGES: Final = "gen_ai.input.messages"  # content: read for ids, then dropped
GEN_AI_OUTPUT_MESSAGES: Final = "gen_ai.output.messages"
EXECUTE_TOOL: Final = "execute_tool"
ERROR_TYPE: Final = "error.type"

# --- exception events
EXCEPTION_EVENT: Final = "exception"
EXCEPTION_TYPE: Final = "exception.type"
EXCEPTION_MESSAGE: Final = "exception.message"
EXCEPTION_STACKTRACE: Final = "exception.stacktrace"

# --- HTTP / RPC (all four RPC names are accepted: old and new)
HTTP_RESPONSE_STATUS_CODE: Final = "http.response.status_code"
HTTP_STATUS_CODE_OLD: Final = "http.status_code"
HTTP_REQUEST_METHOD: Final = "http.request.method"
URL_FULL: Final = "url.full"
HTTP_RETRY_AFTER: Final = "http.response.header.retry-after"
RPC_STATUS_CODE: Final = "rpc.status_code"
RPC_RESPONSE_STATUS_CODE: Final = "rpc.response.status_code"
RPC_GRPC_STATUS_CODE: Final = "rpc.grpc.status_code"
RPC_JSONRPC_ERROR_CODE: Final = "rpc.jsonrpc.error_code"

# --- MCP
MCP_METHOD_NAME: Final = "mcp.method.name"
# The RPC conventions' names for a JSON-RPC call (Logfire's instrument_mcp on mcp 1.x).
RPC_SYSTEM: Final = "rpc.system"
RPC_METHOD: Final = "rpc.method"
RPC_SYSTEM_JSONRPC: Final = "jsonrpc"
# Logfire's instrument_mcp (mcp 1.x) records the whole JSON-RPC result as `response`.
LOGFIRE_MCP_RESPONSE: Final = "response"
MCP_TOOLS_CALL: Final = "tools/call"
MCP_SESSION_ID: Final = "mcp.session.id"
MCP_RESPONSE_VALUE: Final = "mcp.response.value"
JSONRPC_REQUEST_ID: Final = "jsonrpc.request.id"

# --- OpenInference
OPENINFERENCE_SPAN_KIND: Final = "openinference.span.kind"
OI_TOOL: Final = "TOOL"
OI_TOOL_NAME: Final = "tool.name"
OI_TOOL_ID: Final = "tool.id"
OI_TOOL_CALL_ID: Final = "tool_call.id"
OI_OUTPUT_VALUE: Final = "output.value"
OI_SESSION_ID: Final = "session.id"
OI_INPUT_VALUE: Final = "input.value"
OI_METADATA: Final = "metadata"
OI_LLM_OUTPUT_PREFIX: Final = "llm.output_messages."
OI_LLM_INPUT_PREFIX: Final = "llm.input_messages."

# --- OpenLLMetry / Traceloop
TRACELOOP_SPAN_KIND: Final = "traceloop.span.kind"
TRACELOOP_ENTITY_NAME: Final = "traceloop.entity.name"
TRACELOOP_ENTITY_OUTPUT: Final = "traceloop.entity.output"
TRACELOOP_SESSION_ID: Final = "traceloop.association.properties.session_id"
TRACELOOP_THREAD_ID: Final = "traceloop.association.properties.thread_id"
TRACELOOP_RUN_ID: Final = "traceloop.association.properties.run_id"
TRACELOOP_ENTITY_INPUT: Final = "traceloop.entity.input"

# --- Vercel AI SDK (built-in telemetry; no gen_ai.* on its tool spans)
AI_OPERATION_ID: Final = "ai.operationId"
AI_TOOL_CALL: Final = "ai.toolCall"
AI_TOOL_CALL_NAME: Final = "ai.toolCall.name"
AI_TOOL_CALL_ID: Final = "ai.toolCall.id"
AI_TOOL_CALL_ARGS: Final = "ai.toolCall.args"
AI_TOOL_CALL_RESULT: Final = "ai.toolCall.result"
AI_RESPONSE_TOOL_CALLS: Final = "ai.response.toolCalls"
AI_PROMPT_MESSAGES: Final = "ai.prompt.messages"
AI_METADATA_PREFIX: Final = "ai.telemetry.metadata."
AI_SESSION_ID: Final = "ai.telemetry.metadata.sessionId"
AI_SESSION_ID_SNAKE: Final = "ai.telemetry.metadata.session_id"

# --- Logfire's OpenAI Agents integration (logfire.instrument_openai_agents): spans named by
# their message template; a function span has the tool in `name`, the arguments in `input`,
# the result in `output`; the trace's root span holds the SDK's group_id (the conversation)
LOGFIRE_MSG_TEMPLATE: Final = "logfire.msg_template"
LOGFIRE_FUNCTION_TEMPLATE: Final = "Function: {name}"
LOGFIRE_NAME: Final = "name"
LOGFIRE_INPUT: Final = "input"
LOGFIRE_OUTPUT: Final = "output"
LOGFIRE_GROUP_ID: Final = "group_id"

# --- Agno (OpenInference's agno instrumentor writes Agno's run id on the AGENT span)
AGNO_RUN_ID: Final = "agno.run.id"

# --- CrewAI (OpenInference's event-listener mode): CrewAI runs a failing tool up to three
# times itself; each execution is a TOOL span with its attempt number
CREWAI_TOOL_RUN_ATTEMPTS: Final = "tool.run_attempts"

# --- Haystack's own tracer (opentelemetry-haystack): one `haystack.agent.step.tool` span per
# call; the input and output are content tags, written only with content tracing on
HAYSTACK_TOOL_NAME: Final = "haystack.tool.name"
HAYSTACK_TOOL_ERROR: Final = "haystack.tool.error"
HAYSTACK_TOOL_INPUT: Final = "haystack.agent.step.tool.input"
HAYSTACK_TOOL_OUTPUT: Final = "haystack.agent.step.tool.output"
HAYSTACK_LLM_INPUT: Final = "haystack.agent.step.llm.input"  # a Python repr of the messages
HAYSTACK_LLM_OUTPUT: Final = "haystack.agent.step.llm.output"  # JSON: {"replies": [...]}

# --- pydantic-ai / Logfire
PYDANTIC_AI_FAILURE_STAGE: Final = "pydantic_ai.tool.failure_stage"
PYDANTIC_AI_RETRY_CAUSE: Final = "pydantic_ai.tool.retry.cause"
PYDANTIC_AI_RETRY_ATTEMPT: Final = "pydantic_ai.tool.retry.attempt"
LEGACY_TOOL_RESPONSE: Final = "tool_response"
LEGACY_TOOL_ARGUMENTS: Final = "tool_arguments"
LEGACY_RUNNING_TOOL: Final = "running tool"

# --- resource
SERVICE_NAME: Final = "service.name"
SERVICE_VERSION: Final = "service.version"
DEPLOYMENT_ENVIRONMENT: Final = "deployment.environment.name"
DEPLOYMENT_ENVIRONMENT_OLD: Final = "deployment.environment"

# --- errscope's own attributes (written by collector.toolkit and by errscope itself)
ERRSCOPE_CODE: Final = "errscope.code"
ERRSCOPE_FIELD: Final = "errscope.field"
ERRSCOPE_CORRELATION_ID: Final = "errscope.correlation_id"
ERRSCOPE_ATTEMPT: Final = "errscope.attempt"
ERRSCOPE_RETRY_AFTER_S: Final = "errscope.retry_after_s"
ERRSCOPE_CONVENTION: Final = "errscope.convention"
ERRSCOPE_SOURCE: Final = "errscope.source"
ERRSCOPE_TOOL: Final = "errscope.tool"
ERRSCOPE_RETRY_DECISION: Final = "errscope.retry.decision"

# Result-bearing attributes, per convention, where a structured observation may sit.
RESULT_KEYS: Final = (
    GEN_AI_TOOL_CALL_RESULT,
    AI_TOOL_CALL_RESULT,
    OI_OUTPUT_VALUE,
    TRACELOOP_ENTITY_OUTPUT,
    LEGACY_TOOL_RESPONSE,
    MCP_RESPONSE_VALUE,
    HAYSTACK_TOOL_OUTPUT,
    LOGFIRE_OUTPUT,
    LOGFIRE_MCP_RESPONSE,
)

# Attributes a passed-on tool span keeps (values still scanned for secrets); all else drops.
FORWARD_ALLOWLIST: Final = frozenset(
    {
        GEN_AI_OPERATION_NAME,
        GEN_AI_TOOL_NAME,
        GEN_AI_TOOL_CALL_ID,
        GEN_AI_TOOL_TYPE,
        GEN_AI_CONVERSATION_ID,
        GEN_AI_AGENT_NAME,
        GEN_AI_AGENT_ID,
        GEN_AI_PROVIDER_NAME,
        GEN_AI_AGENT_CALL_ID,
        AI_TOOL_CALL_ID,
        AI_TOOL_CALL_NAME,
        AI_OPERATION_ID,
        AI_SESSION_ID,
        AI_SESSION_ID_SNAKE,
        TRACELOOP_SESSION_ID,
        TRACELOOP_THREAD_ID,
        ERROR_TYPE,
        HTTP_RESPONSE_STATUS_CODE,
        RPC_STATUS_CODE,
        MCP_METHOD_NAME,
        MCP_SESSION_ID,
        JSONRPC_REQUEST_ID,
        OI_SESSION_ID,
        HAYSTACK_TOOL_NAME,
        HAYSTACK_TOOL_ERROR,
        ERRSCOPE_CODE,
        ERRSCOPE_FIELD,
        ERRSCOPE_CORRELATION_ID,
        ERRSCOPE_ATTEMPT,
        ERRSCOPE_RETRY_AFTER_S,
        ERRSCOPE_CONVENTION,
        ERRSCOPE_SOURCE,
        ERRSCOPE_RETRY_DECISION,
    }
)

# Argument-bearing attributes of a tool span: their values are masked wherever a stored
# traceback repeats them (an exception message that quotes its input).
ARGUMENT_KEYS: Final = (
    GEN_AI_TOOL_CALL_ARGUMENTS,
    AI_TOOL_CALL_ARGS,
    OI_INPUT_VALUE,
    TRACELOOP_ENTITY_INPUT,
    LEGACY_TOOL_ARGUMENTS,
    HAYSTACK_TOOL_INPUT,
    LOGFIRE_INPUT,
    "mcp.request.argument",
    "tool.parameters",  # OpenInference's pydantic-ai mapping writes the real arguments here
)

# Conversation content, by family: dropped from every passed-on span (tool or not) unless
# the content policy is `keep`.  An attribute is content when its key equals a family's
# key or starts with one of its prefixes (`gen_ai.prompt.0.content`,
# `llm.input_messages.2.message.content`).  Each drop is counted as `content:<family>`.
CONTENT_FAMILIES: Final[tuple[tuple[str, tuple[str, ...], tuple[str, ...]], ...]] = (
    (
        "gen_ai.messages",
        (
            "gen_ai.input.messages",
            "gen_ai.output.messages",
            "gen_ai.system_instructions",
            "gen_ai.tool.definitions",
            "gen_ai.memory.query.text",
            "gen_ai.memory.records",
        ),
        ("gen_ai.prompt.", "gen_ai.completion.", "gen_ai.prompt.variable."),
    ),
    ("gen_ai.prompt", ("gen_ai.prompt", "gen_ai.completion"), ()),
    ("gen_ai.tool", ("gen_ai.tool.call.arguments", "gen_ai.tool.call.result"), ()),
    (
        "openinference",
        # `metadata`: the user's own key/values (LangGraph's whole run config among them)
        # `smolagents.task`: the user's task, as OpenInference's smolagents instrumentor writes it
        (
            "input.value",
            "output.value",
            "tool.parameters",
            "llm.invocation_parameters",
            "metadata",
            "smolagents.task",
        ),
        (
            "llm.input_messages.",
            "llm.output_messages.",
            "llm.prompts.",
            "llm.prompt_template.",
            "llm.tools.",
            "tool_call.function.arguments",
            "message.content",
            "retrieval.documents.",
            "embedding.embeddings.",
            "reranker.",
        ),
    ),
    (
        "traceloop",
        ("traceloop.entity.input", "traceloop.entity.output"),
        ("gen_ai.task.input", "gen_ai.task.output"),  # OpenLLMetry's task spans
    ),
    (
        "pydantic_ai",
        (
            "pydantic_ai.all_messages",
            "all_messages_events",
            "final_result",
            "tool_arguments",
            "tool_response",
            "model_request_parameters",
            "events",
            "prompt",
        ),
        (),
    ),
    (
        "vercel_ai",
        (
            "ai.prompt",
            "ai.toolCall.args",
            "ai.toolCall.result",
            "ai.schema",
            "ai.value",
            "ai.values",
        ),
        ("ai.prompt.", "ai.response.", "ai.result."),
    ),
    (
        "haystack",
        # the content tags of Haystack's tracer: agent, step, tool and pipeline component I/O
        (
            "haystack.agent.input",
            "haystack.agent.output",
            "haystack.agent.tools",
            HAYSTACK_LLM_INPUT,
            HAYSTACK_LLM_OUTPUT,
            HAYSTACK_TOOL_INPUT,
            HAYSTACK_TOOL_OUTPUT,
        ),
        ("haystack.component.input", "haystack.component.output"),
    ),
    (
        "crewai",
        # OpenInference's CrewAI event listener: the agent's goal and backstory, the task's
        # description (also as the tool span's task name) and the crew's own copies of them
        (
            "agent.goal",
            "agent.backstory",
            "task_description",
            "task_expected_output",
            "tool.task_name",
            "crew_agents",
            "crew_tasks",
            "crew_inputs",
        ),
        (),
    ),
    (
        "logfire",
        # Logfire's OpenAI Agents spans: arguments, results, model requests and responses, the
        # error object (its data repeats the tool's error text) and the formatted message
        (
            LOGFIRE_INPUT,
            LOGFIRE_OUTPUT,
            "request_data",
            "response",
            "raw_input",
            "error",
            "logfire.msg",
        ),
        (),
    ),
    # A tool's HTTP request on its client child span carries the arguments in its URL.
    ("url", ("url.full", "url.path", "url.query", "http.url", "http.target"), ()),
    (
        "mcp",
        ("mcp.request.argument", "mcp.response.value"),
        ("mcp.request.argument.", "mcp.request.arguments", "mcp.response."),
    ),
)
# Vercel's ai.response.* also holds what is no content: kept.
CONTENT_KEEP: Final = frozenset(
    {
        "ai.response.finishReason",
        "ai.response.id",
        "ai.response.model",
        "ai.response.timestamp",
        "ai.response.msToFirstChunk",
        "ai.response.msToFinish",
        "ai.response.avgCompletionTokensPerSecond",
        "ai.response.providerMetadata",
        "input.mime_type",
        "output.mime_type",
    }
)
# Span events holding messages or arguments (GenAI's per-message events, OpenInference's
# and pydantic-ai's) are dropped whole under the `drop` policy.
CONTENT_EVENT_PREFIXES: Final = ("gen_ai.", "llm.", "ai.")
