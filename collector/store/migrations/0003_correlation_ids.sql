-- version 3: the ids that find a call again across a framework's own views of it.
-- session_id keeps the session (OpenInference session.id, OpenLLMetry's session_id, Vercel's
-- metadata.sessionId), else the conversation id, as before; conversation_id keeps
-- gen_ai.conversation.id whenever it exists, so both are stored when both exist.
ALTER TABLE tool_calls ADD COLUMN conversation_id VARCHAR;
ALTER TABLE tool_calls ADD COLUMN thread_id VARCHAR;
ALTER TABLE tool_calls ADD COLUMN agent_run_id VARCHAR;
ALTER TABLE tool_calls ADD COLUMN mcp_session_id VARCHAR;
ALTER TABLE tool_calls ADD COLUMN jsonrpc_request_id VARCHAR;
