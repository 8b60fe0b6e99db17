-- name: unknown_codes
-- returns: codes outside the catalog (handler bugs) per service, version, tool and raw code: calls, first and last time, an example correlation id
-- param: since timestamp = 7d           -- window start
-- param: until timestamp = now          -- window end, exclusive
-- param: service text = null            -- only this service
SELECT
    service, version, tool, raw_code,
    count(*) AS calls,
    min(ts) AS first_seen,
    max(ts) AS last_seen,
    min(coalesce(correlation_id, trace_id)) AS example_correlation_id
FROM tool_calls
WHERE code = 'unknown'
  AND ts >= $since
  AND ts < $until
  AND ($service IS NULL OR service = $service)
GROUP BY service, version, tool, raw_code
ORDER BY calls DESC, service, version, tool, raw_code
