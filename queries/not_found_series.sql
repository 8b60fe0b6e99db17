-- name: not_found_series
-- returns: per time bucket, service and tool: calls, not_found calls and distinct traces with a not_found
-- param: since timestamp = 24h          -- window start
-- param: until timestamp = now          -- window end, exclusive
-- param: bucket_s integer 1..31622400 = 300         -- bucket width in seconds
-- param: service text = null            -- only this service
-- param: tool text = null               -- only this tool
SELECT
    time_bucket(to_seconds($bucket_s), ts) AS bucket,
    service,
    tool,
    count(*) AS calls,
    count(*) FILTER (WHERE code = 'not_found') AS not_found,
    count(DISTINCT trace_id) FILTER (WHERE code = 'not_found') AS traces
FROM tool_calls
WHERE ts >= $since
  AND ts < $until
  AND ($service IS NULL OR service = $service)
  AND ($tool IS NULL OR tool = $tool)
GROUP BY ALL
ORDER BY bucket, service, tool
