"""`errscope watch`: detection on a schedule, findings as Prometheus metrics and webhooks.

    sinks   Sink: json / Slack / PagerDuty Events v2 bodies, one post, a closed Delivery
    state   WatchState: episodes and the outbox in the watch's own DuckDB file
    loop    Watcher: run_once (detect, fold into episodes), deliver (rate, retry), serve
    http    MetricsServer: GET /metrics and /healthz on loopback

It runs beside the sidecar as its own process, so detection's statistics (scipy) never load
into the sidecar: it reads through the sidecar's query API, or a lake or file no sidecar
holds.  Nothing is imported here: `errscope watch` imports what it runs.
"""
