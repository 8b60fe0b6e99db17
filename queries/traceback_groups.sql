-- name: traceback_groups
-- returns: sampled tracebacks grouped by fingerprint: exception type, service, tool, samples, versions, first and last time, an example correlation id
-- param: since timestamp = 7d           -- window start
-- param: until timestamp = now          -- window end, exclusive
-- param: service text = null            -- only this service
SELECT
    fingerprint, exception_type, service, tool,
    count(*) AS samples,
    list_sort(list_distinct(list(version))) AS versions,
    min(ts) AS first_seen,
    max(ts) AS last_seen,
    min(coalesce(correlation_id, trace_id)) AS example_correlation_id
FROM tracebacks
WHERE ts >= $since
  AND ts < $until
  AND ($service IS NULL OR service = $service)
GROUP BY fingerprint, exception_type, service, tool
ORDER BY samples DESC, last_seen DESC, fingerprint
