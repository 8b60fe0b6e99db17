"""The sidecar (`errscope serve`): receivers, pipeline, writer and API, composed and run.

    config      ServeConfig (what `errscope serve` can be told) and listener addresses
    admission   Admission (token, bytes in flight, drain) and Ingest: what receivers call
    metrics     Metrics and their Prometheus text
    app         Sidecar: composition, ingest, lifecycle
    api         the query, deploy, health and metrics API
    process     logging, memory tuning, the run loop with its signals and exit status

Nothing is imported here: the receivers import `admission` while `app` imports the
receivers, and an eager import of `app` would make that a cycle.
"""
