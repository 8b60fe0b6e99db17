-- name: top_invalid_args_fields
-- returns: the fields models get wrong most: invalid_args per service, tool and field with distinct traces and sessions, the versions seen, and the share of the tool's invalid_args
-- param: since timestamp = 24h          -- window start
-- param: until timestamp = now          -- window end, exclusive
-- param: service text = null            -- only this service
-- param: limit integer = 50             -- at most this many rows, most errors first
SELECT
    service,
    tool,
    field,
    count(*) AS errors,
    count(DISTINCT trace_id) AS traces,
    count(DISTINCT session_id) AS sessions,
    list_sort(list_distinct(list(version))) AS versions,
    count(*) / sum(count(*)) OVER (PARTITION BY service, tool) AS share_of_tool,
    min(ts) AS first_seen,
    max(ts) AS last_seen
FROM tool_calls
WHERE code = 'invalid_args'
  AND ts >= $since
  AND ts < $until
  AND ($service IS NULL OR service = $service)
GROUP BY service, tool, field
ORDER BY errors DESC, service, tool, field
LIMIT $limit
