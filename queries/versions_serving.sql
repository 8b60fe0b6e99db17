-- name: versions_serving
-- returns: calls per version of one service in a window, most calls first (which version was serving before a deploy)
-- param: service text                   -- the service
-- param: environment text = null        -- only this environment
-- param: since timestamp = 30m          -- window start
-- param: until timestamp = now          -- window end, exclusive
-- param: known_by timestamp = now       -- only rows received before this (what --as-of knew)
SELECT version, count(*) AS calls
FROM tool_calls
WHERE service = $service
  AND ($environment IS NULL OR environment = $environment)
  AND ts >= $since
  AND ts < $until
  AND received_at < $known_by
  AND version IS NOT NULL
GROUP BY version
ORDER BY calls DESC, version
