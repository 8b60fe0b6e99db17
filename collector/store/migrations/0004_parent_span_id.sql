-- version 4: one row per real tool call when a call is recorded at two layers.
-- A framework's tool span may have, as its child, another library's span of the same call
-- (fastmcp's `tools/call x` over the mcp SDK's `MCP send tools/call x`), and the two often
-- arrive in different export requests.  parent_span_id lets the store recognise the lower
-- layer: a row whose parent is a stored row of the same trace, service and tool.  That row
-- is moved to tool_call_layers (kept whole, with the span id of the call it belongs to), so
-- tool_calls counts the call once; its ids and a more specific code enrich the outer row.
ALTER TABLE tool_calls ADD COLUMN parent_span_id VARCHAR;

CREATE TABLE IF NOT EXISTS tool_call_layers (
    ts                 TIMESTAMPTZ NOT NULL,
    received_at        TIMESTAMPTZ,
    service            VARCHAR     NOT NULL,
    version            VARCHAR,
    environment        VARCHAR,
    tool               VARCHAR     NOT NULL,
    code               VARCHAR     NOT NULL,
    raw_code           VARCHAR,
    field              VARCHAR,
    trace_id           VARCHAR     NOT NULL,
    span_id            VARCHAR     NOT NULL,
    call_id            VARCHAR,
    session_id         VARCHAR,
    correlation_id     VARCHAR,
    duration_ms        DOUBLE,
    attempt            INTEGER,
    retry_after_s      DOUBLE,
    http_status        INTEGER,
    convention         VARCHAR,
    source             VARCHAR,
    redactions         INTEGER     NOT NULL DEFAULT 0,
    conversation_id    VARCHAR,
    thread_id          VARCHAR,
    agent_run_id       VARCHAR,
    mcp_session_id     VARCHAR,
    jsonrpc_request_id VARCHAR,
    parent_span_id     VARCHAR,
    outer_span_id      VARCHAR     NOT NULL,
    PRIMARY KEY (trace_id, span_id)
);
