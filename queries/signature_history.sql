-- name: signature_history
-- returns: per tool, code and field of one service: calls, and the tool's calls, for every version but one (the signatures a deploy's new ones are compared with; signature_exposure without its distinct counts, which the history does not need)
-- param: service text                   -- the service
-- param: environment text = null        -- only this environment
-- param: exclude_version text           -- every version except this one
-- param: since timestamp                -- window start
-- param: until timestamp                -- window end, exclusive
-- param: known_by timestamp = now       -- only rows received before this (what --as-of knew)
SELECT
    tool,
    code,
    field,
    count(*) AS n,
    sum(count(*)) OVER (PARTITION BY tool) AS calls
FROM tool_calls
WHERE service = $service
  AND ($environment IS NULL OR environment = $environment)
  AND version IS DISTINCT FROM $exclude_version
  AND ts >= $since
  AND ts < $until
  AND received_at < $known_by
GROUP BY tool, code, field
ORDER BY tool, code, field
