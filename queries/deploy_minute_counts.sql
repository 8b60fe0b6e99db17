-- name: deploy_minute_counts
-- returns: per minute, version, tool, code and field of one service: calls with that code (n), distinct traces first failing that minute (units), how many of those traces looped (loop_units: more than two failures on this tool, code and field in the window), and the tool's calls that minute for that version
-- param: service text                   -- the deployed service
-- param: environment text = null        -- only this environment
-- param: new_version text               -- the version deployed
-- param: old_version text = null        -- the version it replaced
-- param: since timestamp                -- window start (typically the deploy time minus the baseline)
-- param: until timestamp                -- window end, exclusive (the evaluation time)
-- param: known_by timestamp = now       -- only rows received before this (what --as-of knew)
WITH scoped AS (
    SELECT date_trunc('minute', ts) AS minute, version, tool, code, field, trace_id
    FROM tool_calls
    WHERE service = $service
      AND ($environment IS NULL OR environment = $environment)
      AND ts >= $since
      AND ts < $until
      AND received_at < $known_by
      AND (version = $new_version OR version = $old_version)
),
counted AS (
    SELECT minute, version, tool, code, field, count(*) AS n
    FROM scoped
    GROUP BY minute, version, tool, code, field
),
-- A trace is one unit of evidence: counted once, in the minute of its first error,
-- so one conversation retrying a field a dozen times is one unit, not twelve.  A trace
-- failing more than twice on one tool, code and field is a loop (the `loop_misuse`
-- rule): detection sets those apart, since a few looping conversations are loop
-- misuse, not evidence about the deploy.
first_units AS (
    SELECT minute, version, tool, code, field, count(*) AS units,
           count(*) FILTER (WHERE failures > 2) AS loop_units
    FROM (
        SELECT min(minute) AS minute, version, tool, code, field, count(*) AS failures
        FROM scoped
        WHERE code <> 'ok'
        GROUP BY version, tool, code, field, trace_id
    )
    GROUP BY minute, version, tool, code, field
)
SELECT
    c.minute,
    c.version,
    c.tool,
    c.code,
    c.field,
    c.n,
    coalesce(u.units, 0) AS units,
    coalesce(u.loop_units, 0) AS loop_units,
    sum(c.n) OVER (PARTITION BY c.minute, c.version, c.tool) AS calls
FROM counted c
LEFT JOIN first_units u
  ON c.minute = u.minute AND c.version = u.version AND c.tool = u.tool
 AND c.code = u.code AND c.field IS NOT DISTINCT FROM u.field
ORDER BY c.minute, c.version, c.tool, c.code, c.field
