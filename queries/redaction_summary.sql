-- name: redaction_summary
-- returns: how many values each scrub rule masked per service and tool (counts only, never values), with the first and last hour
-- param: since timestamp = 7d           -- window start
-- param: until timestamp = now          -- window end, exclusive
-- param: service text = null            -- only this service
SELECT
    service, tool, rule,
    sum(count) AS redactions,
    min(hour) AS first_hour,
    max(hour) AS last_hour
FROM redactions
WHERE hour >= $since
  AND hour < $until
  AND ($service IS NULL OR service = $service)
GROUP BY service, tool, rule
ORDER BY redactions DESC, service, tool, rule
