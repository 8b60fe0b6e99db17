-- name: code_mix_by_version
-- returns: per service, environment, version and code: calls, the code's share of that version's calls, first and last time seen
-- param: since timestamp = 7d           -- window start
-- param: until timestamp = now          -- window end, exclusive
-- param: service text = null            -- only this service
-- param: environment text = null        -- only this environment
SELECT
    service, environment, version, code,
    count(*) AS calls,
    count(*) / sum(count(*)) OVER (PARTITION BY service, environment, version) AS share,
    min(ts) AS first_seen,
    max(ts) AS last_seen
FROM tool_calls
WHERE ts >= $since
  AND ts < $until
  AND ($service IS NULL OR service = $service)
  AND ($environment IS NULL OR environment = $environment)
GROUP BY service, environment, version, code
ORDER BY service, environment, first_seen, version, code
