-- name: signature_exposure
-- returns: per tool, code and field of one service: calls, distinct failing traces and correlation ids, first time, and the tool's calls, for one version or for every version but one
-- param: service text                   -- the service
-- param: environment text = null        -- only this environment
-- param: version text = null            -- only this version
-- param: exclude_version text = null    -- every version except this one
-- param: since timestamp                -- window start
-- param: until timestamp                -- window end, exclusive
-- param: known_by timestamp = now       -- only rows received before this (what --as-of knew)
SELECT
    tool,
    code,
    field,
    count(*) AS n,
    count(DISTINCT CASE WHEN code <> 'ok' THEN trace_id END) AS traces,
    count(DISTINCT CASE WHEN code <> 'ok' THEN coalesce(correlation_id, trace_id) END) AS ids,
    min(ts) AS first_ts,
    sum(count(*)) OVER (PARTITION BY tool) AS calls
FROM tool_calls
WHERE service = $service
  AND ($environment IS NULL OR environment = $environment)
  AND ($version IS NULL OR version = $version)
  AND ($exclude_version IS NULL OR version IS DISTINCT FROM $exclude_version)
  AND ts >= $since
  AND ts < $until
  AND received_at < $known_by
GROUP BY tool, code, field
ORDER BY tool, code, field
