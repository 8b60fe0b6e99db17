-- version 1: the storage contract of DESIGN.md as first released.
-- tool_calls had no received_at column yet; version 2 adds it.
CREATE TABLE IF NOT EXISTS tool_calls (
    ts             TIMESTAMPTZ NOT NULL,
    service        VARCHAR     NOT NULL,
    version        VARCHAR,
    environment    VARCHAR,
    tool           VARCHAR     NOT NULL,
    code           VARCHAR     NOT NULL,
    raw_code       VARCHAR,
    field          VARCHAR,
    trace_id       VARCHAR     NOT NULL,
    span_id        VARCHAR     NOT NULL,
    call_id        VARCHAR,
    session_id     VARCHAR,
    correlation_id VARCHAR,
    duration_ms    DOUBLE,
    attempt        INTEGER,
    retry_after_s  DOUBLE,
    http_status    INTEGER,
    convention     VARCHAR,
    source         VARCHAR,
    redactions     INTEGER     NOT NULL DEFAULT 0,
    PRIMARY KEY (trace_id, span_id)
);

CREATE TABLE IF NOT EXISTS deploys (
    service     VARCHAR     NOT NULL,
    version     VARCHAR     NOT NULL,
    environment VARCHAR,
    ts          TIMESTAMPTZ NOT NULL,
    source      VARCHAR     NOT NULL
);

CREATE TABLE IF NOT EXISTS tracebacks (
    ts             TIMESTAMPTZ NOT NULL,
    service        VARCHAR     NOT NULL,
    version        VARCHAR,
    tool           VARCHAR     NOT NULL,
    trace_id       VARCHAR     NOT NULL,
    span_id        VARCHAR     NOT NULL,
    correlation_id VARCHAR,
    exception_type VARCHAR     NOT NULL,
    fingerprint    VARCHAR     NOT NULL,
    text           VARCHAR     NOT NULL
);

CREATE TABLE IF NOT EXISTS redactions (
    hour    TIMESTAMPTZ NOT NULL,
    service VARCHAR     NOT NULL,
    tool    VARCHAR     NOT NULL,
    rule    VARCHAR     NOT NULL,
    count   BIGINT      NOT NULL
);
