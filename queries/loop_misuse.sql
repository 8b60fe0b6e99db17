-- name: loop_misuse
-- returns: one row per trace, tool and rule broken: invalid_args on one field more than twice, any call of a tool after it was denied, more than two not_found on different calls
-- param: since timestamp = 24h          -- window start
-- param: until timestamp = now          -- window end, exclusive
-- param: service text = null            -- only this service
-- param: environment text = null        -- only this environment
-- param: limit integer = 1000           -- at most this many rows, newest first
-- param: known_by timestamp = now       -- only rows received before this (what --as-of knew)
WITH errs AS (
    SELECT service, version, tool, code, field, trace_id, session_id, span_id, call_id, ts,
           coalesce(correlation_id, trace_id) AS correlation_id
    FROM tool_calls
    WHERE code IN ('invalid_args', 'denied', 'not_found')
      AND ts >= $since
      AND ts < $until
      AND received_at < $known_by
      AND ($service IS NULL OR service = $service)
      AND ($environment IS NULL OR environment = $environment)
),
repeated_field AS (
    SELECT 'invalid_args_repeated' AS rule, service, min(version) AS version, tool, field,
           trace_id, min(session_id) AS session_id, min(correlation_id) AS correlation_id,
           count(*) AS calls, min(ts) AS first_ts, max(ts) AS last_ts
    FROM errs
    WHERE code = 'invalid_args'
    GROUP BY service, tool, field, trace_id
    HAVING count(*) > 2
),
not_found_repeated AS (
    SELECT 'not_found_repeated' AS rule, service, min(version) AS version, tool,
           NULL::VARCHAR AS field, trace_id, min(session_id) AS session_id,
           min(correlation_id) AS correlation_id,
           count(DISTINCT coalesce(call_id, span_id)) AS calls, min(ts) AS first_ts,
           max(ts) AS last_ts
    FROM errs
    WHERE code = 'not_found'
    GROUP BY service, tool, trace_id
    HAVING count(DISTINCT coalesce(call_id, span_id)) > 2
),
denied AS (
    SELECT service, tool, trace_id, min(ts) AS denied_at
    FROM errs
    WHERE code = 'denied'
    GROUP BY service, tool, trace_id
),
after_denied AS (
    SELECT 'retry_after_denied' AS rule, t.service, min(t.version) AS version, t.tool,
           NULL::VARCHAR AS field, t.trace_id, min(t.session_id) AS session_id,
           min(coalesce(t.correlation_id, t.trace_id)) AS correlation_id,
           count(*) AS calls, min(d.denied_at) AS first_ts, max(t.ts) AS last_ts
    FROM tool_calls t
    JOIN denied d ON t.trace_id = d.trace_id AND t.tool = d.tool AND t.service = d.service
    WHERE t.ts > d.denied_at
      AND t.ts >= $since
      AND t.ts < $until
      AND t.received_at < $known_by
    GROUP BY t.service, t.tool, t.trace_id
)
SELECT * FROM repeated_field
UNION ALL SELECT * FROM not_found_repeated
UNION ALL SELECT * FROM after_denied
ORDER BY last_ts DESC, service, tool, rule, trace_id
LIMIT $limit
