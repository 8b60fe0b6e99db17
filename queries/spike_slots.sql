-- name: spike_slots
-- returns: per service and tool with enough recent errors of one code: calls, errors and failing traces per slot; day 0 is the last 24 hours (slot 0 the newest), days 1.. are the same slots ±1 on earlier days
-- param: code text = not_found          -- the code to watch
-- param: until timestamp = now          -- the evaluation time; slots are aligned to it
-- param: recent_s integer 60..604800 = 3600        -- the recent window watched for spikes
-- param: bucket_s integer 1..86400 = 300         -- slot width in seconds
-- param: history_days integer 1..60 = 7       -- how many earlier days give the expected rate
-- param: min_recent_errors integer = 20 -- skip tools with fewer errors in the recent window
-- param: service text = null            -- only this service
-- param: environment text = null        -- only this environment
-- param: known_by timestamp = now       -- only rows received before this (what --as-of knew)
WITH scoped AS (
    SELECT
        service,
        tool,
        code = $code AS hit,
        trace_id,
        epoch($until) - epoch(ts) AS age_s
    FROM tool_calls
    WHERE ts < $until
      AND received_at < $known_by
      AND ts >= $until - to_days($history_days) - to_seconds($recent_s + $bucket_s)
      AND ($service IS NULL OR service = $service)
      AND ($environment IS NULL OR environment = $environment)
),
placed AS (
    SELECT
        service,
        tool,
        hit,
        trace_id,
        floor((age_s + $bucket_s) / 86400)::INTEGER AS day,
        age_s - floor((age_s + $bucket_s) / 86400) * 86400 AS day_age_s
    FROM scoped
),
slotted AS (
    SELECT service, tool, day, floor(day_age_s / $bucket_s)::INTEGER AS slot, hit, trace_id
    FROM placed
    WHERE day = 0 OR day_age_s < $recent_s + $bucket_s
),
active AS (
    SELECT service, tool
    FROM slotted
    WHERE day = 0 AND slot * $bucket_s < $recent_s AND hit
    GROUP BY service, tool
    HAVING count(*) >= $min_recent_errors
)
SELECT
    s.service,
    s.tool,
    s.day,
    s.slot,
    count(*) AS calls,
    count(*) FILTER (WHERE s.hit) AS errors,
    count(DISTINCT s.trace_id) FILTER (WHERE s.hit) AS traces
FROM slotted s
SEMI JOIN active a ON s.service = a.service AND s.tool = a.tool
GROUP BY s.service, s.tool, s.day, s.slot
ORDER BY s.service, s.tool, s.day, s.slot
