-- name: minute_rollup
-- returns: per minute, service, version, environment, tool, code and field: the tool's calls that minute, errors with this code and field, and distinct failing traces
-- param: since timestamp = 6h           -- window start
-- param: until timestamp = now          -- window end, exclusive
-- param: service text = null            -- only this service
-- param: environment text = null        -- only this environment
-- param: tool text = null               -- only this tool
WITH counted AS (
    SELECT
        date_trunc('minute', ts) AS minute,
        service, version, environment, tool, code, field,
        count(*) AS n,
        count(DISTINCT CASE WHEN code <> 'ok' THEN trace_id END) AS traces
    FROM tool_calls
    WHERE ts >= $since
      AND ts < $until
      AND ($service IS NULL OR service = $service)
      AND ($environment IS NULL OR environment = $environment)
      AND ($tool IS NULL OR tool = $tool)
    GROUP BY ALL
)
SELECT
    minute, service, version, environment, tool, code, field,
    sum(n) OVER (PARTITION BY minute, service, version, environment, tool) AS calls,
    CASE WHEN code = 'ok' THEN 0 ELSE n END AS errors,
    traces
FROM counted
ORDER BY minute, service, version, tool, code, field
