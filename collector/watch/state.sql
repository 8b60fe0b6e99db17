-- errscope watch's own state file: finding episodes and their deliveries (an outbox).
-- Version 1.  Only `errscope watch` opens this file; nothing here is a store table.
CREATE TABLE IF NOT EXISTS watch_meta (
    key VARCHAR PRIMARY KEY,
    value VARCHAR NOT NULL
);
-- One row per episode: a finding's identity from the run it first appeared in until a
-- run finds it gone for `resolve_after`.  `finding` is the latest finding JSON.
CREATE TABLE IF NOT EXISTS watch_episodes (
    episode_id BIGINT PRIMARY KEY,
    key VARCHAR NOT NULL,
    kind VARCHAR NOT NULL,
    service VARCHAR NOT NULL,
    version VARCHAR,
    environment VARCHAR,
    tool VARCHAR,
    code VARCHAR NOT NULL,
    field VARCHAR,
    opened_at TIMESTAMPTZ NOT NULL,
    last_seen_at TIMESTAMPTZ NOT NULL,
    resolved_at TIMESTAMPTZ,
    finding VARCHAR NOT NULL
);
-- One row per (episode, sink, event): pending until sent, refused, given up or cancelled.
-- `sink` is the sink's `ident` (a hash of its URL), never the URL.
CREATE TABLE IF NOT EXISTS watch_outbox (
    episode_id BIGINT NOT NULL,
    sink VARCHAR NOT NULL,
    event VARCHAR NOT NULL,
    status VARCHAR NOT NULL,
    attempts INTEGER NOT NULL DEFAULT 0,
    next_attempt_at TIMESTAMPTZ NOT NULL,
    done_at TIMESTAMPTZ,
    reason VARCHAR,
    PRIMARY KEY (episode_id, sink, event)
);
