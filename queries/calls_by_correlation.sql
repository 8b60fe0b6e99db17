-- name: calls_by_correlation
-- returns: the tool calls that carry an id as trace id, call id, session id or correlation id
-- param: id text                    -- the id to look up
-- param: since timestamp = 7d       -- only calls after this (keeps the scan to recent data)
-- param: until timestamp = now      -- and before this
-- param: limit integer = 1000       -- at most this many calls, oldest first
SELECT
    ts, received_at, service, version, environment, tool, code, raw_code, field,
    trace_id, span_id, call_id, session_id, correlation_id,
    duration_ms, attempt, retry_after_s, http_status, convention, source, redactions
FROM tool_calls
WHERE ts >= $since
  AND ts < $until
  AND (trace_id = lower($id)
       OR call_id = $id
       OR correlation_id = $id
       OR session_id = $id)
ORDER BY ts, span_id
LIMIT $limit
