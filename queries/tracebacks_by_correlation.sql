-- name: tracebacks_by_correlation
-- returns: the sampled, redacted tracebacks that carry an id as trace id or correlation id, oldest first
-- param: id text                        -- the id to look up
-- param: limit integer = 100            -- at most this many tracebacks
SELECT ts, service, version, tool, trace_id, span_id, correlation_id, exception_type,
       fingerprint, text
FROM tracebacks
WHERE trace_id = lower($id)
   OR correlation_id = $id
ORDER BY ts, span_id
LIMIT $limit
