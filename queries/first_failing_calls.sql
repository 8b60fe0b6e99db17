-- name: first_failing_calls
-- returns: the first failing calls of one version per tool, code and field, one per correlation id, oldest first
-- param: service text                   -- the service
-- param: environment text = null        -- only this environment
-- param: version text = null            -- only this version
-- param: code text = null               -- only this code
-- param: since timestamp                -- window start
-- param: until timestamp                -- window end, exclusive
-- param: per_group integer 1..1000 = 5          -- at most this many ids per tool, code and field
-- param: known_by timestamp = now       -- only rows received before this (what --as-of knew)
WITH failing AS (
    SELECT tool, code, field, ts, span_id, trace_id, call_id,
           coalesce(correlation_id, trace_id) AS correlation_id
    FROM tool_calls
    WHERE service = $service
      AND ($environment IS NULL OR environment = $environment)
      AND ($version IS NULL OR version = $version)
      AND ($code IS NULL OR code = $code)
      AND code <> 'ok'
      AND ts >= $since
      AND ts < $until
      AND received_at < $known_by
    QUALIFY row_number() OVER (PARTITION BY tool, code, field, correlation_id ORDER BY ts, span_id) = 1
)
SELECT tool, code, field, ts, correlation_id, trace_id, span_id, call_id
FROM failing
QUALIFY row_number() OVER (PARTITION BY tool, code, field ORDER BY ts, span_id) <= $per_group
ORDER BY tool, code, field, ts, span_id
