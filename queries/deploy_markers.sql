-- name: deploy_markers
-- returns: one row per deploy (service, version, environment): its first time, how it was marked, and the version it replaced
-- param: since timestamp = 30d          -- only deploys at or after this time
-- param: until timestamp = now          -- only deploys before this time (evaluate "as of")
-- param: service text = null            -- only this service
-- param: environment text = null        -- only this environment
-- param: version text = null            -- only this version
WITH marks AS (
    SELECT
        service,
        version,
        environment,
        min(ts) AS ts,
        array_to_string(list_sort(list_distinct(list(source))), ',') AS sources
    FROM deploys
    WHERE ts < $until
      AND ($service IS NULL OR service = $service)
      AND ($environment IS NULL OR environment = $environment)
    GROUP BY service, version, environment
),
ordered AS (
    SELECT
        *,
        lag(version) OVER w AS previous_version,
        lag(ts) OVER w AS previous_ts,
        lead(ts) OVER w AS next_ts
    FROM marks
    WINDOW w AS (PARTITION BY service, environment ORDER BY ts, version)
)
SELECT service, version, environment, ts, sources, previous_version, previous_ts, next_ts
FROM ordered
WHERE ts >= $since
  AND ($version IS NULL OR version = $version)
ORDER BY ts, service, environment
