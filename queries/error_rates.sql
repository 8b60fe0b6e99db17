-- name: error_rates
-- returns: tool calls per time bucket, service, tool and code (code 'ok' included), newest last
-- param: since timestamp = 24h      -- start of the window (ISO 8601, or a duration ago)
-- param: until timestamp = now      -- end of the window, exclusive
-- param: bucket_s integer 1..31622400 = 60      -- bucket width in seconds
-- param: service text = null        -- only this service
-- param: tool text = null           -- only this tool
SELECT
    time_bucket(to_seconds($bucket_s), ts) AS bucket,
    service,
    tool,
    code,
    count(*) AS calls
FROM tool_calls
WHERE ts >= $since
  AND ts < $until
  AND ($service IS NULL OR service = $service)
  AND ($tool IS NULL OR tool = $tool)
GROUP BY ALL
ORDER BY bucket, service, tool, code
