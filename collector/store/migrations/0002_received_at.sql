-- version 2: record when the sidecar stored each call, so client clock skew can be seen
-- and never hides rows; rows stored before this version take their span time.
ALTER TABLE tool_calls ADD COLUMN received_at TIMESTAMPTZ;
UPDATE tool_calls SET received_at = ts WHERE received_at IS NULL;
