"""receive: OTLP in, over gRPC and HTTP/1.1, decoded into span views.

    otlp_decode    OTLP/HTTP bodies and gRPC messages (protobuf or JSON, maybe gzip) → SpanView
    http_server    the generic HTTP/1.1 server: framing, chunked bodies, 100-continue,
                   deadlines, a reaper; the base handler the OTLP/HTTP and API handlers share
    otlp_http      POST /v1/traces
    otlp_grpc      TraceService/Export on raw bytes, refused unread when overloaded

The receivers pass every request through `errscope.collector.sidecar.admission.Admission`
and hand admitted bodies to an `Ingest` (the sidecar).  Nothing is imported here, so
loading the decoder does not load the servers.
"""
