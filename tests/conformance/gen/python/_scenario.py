"""What every Python case's scenario shares; it runs INSIDE a framework's own venv.

Only the standard library, httpx and the OpenTelemetry SDK + OTLP exporters are imported,
so every framework venv can load it (`PYTHONPATH` points at this folder).

- `canary(case, n)`: a deterministic unique string, `CNRY-<case>-<n>-<hex>`, so a
  regenerated corpus keeps the hand-written truth.toml valid.
- `Stub`: a loopback HTTP server the tools call: `/ok` 200, `/rate` a real 429 with
  Retry-After, `/missing` a real 404, `/slow` answers after the client's timeout.
- `tracing(case)`: a TracerProvider exporting every span through BOTH the OTLP/gRPC and the
  OTLP/HTTP-protobuf exporter (`processors()`: one BatchSpanProcessor each, as users
  configure them), so each transport's payloads carry the same spans.  opentelemetry-python has no OTLP/HTTP
  JSON exporter, so Python cases have no http-json payloads.
- The tool bodies (`weather`, `job_lookup`, ...) that raise or return what real tools do.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

RETRY_AFTER_S = 7
CLIENT_TIMEOUT_S = 0.3
SLOW_S = 2.0


def canary(case: str, n: int) -> str:
    """The n-th planted string of a case: unique, greppable, the same on every run."""
    digest = hashlib.sha256(f"{case}:{n}".encode()).hexdigest()[:10]
    return f"CNRY-{case}-{n}-{digest}"


class Stub:
    """A loopback HTTP server with real 200, 429 (Retry-After), 404 and slow answers."""

    def __init__(self) -> None:
        release = threading.Event()
        self.release = release

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                path = self.path.split("?")[0]
                if path == "/slow":
                    release.wait(SLOW_S)
                status, headers, body = {
                    "/ok": (200, {}, b'{"ok": true}'),
                    "/rate": (429, {"Retry-After": str(RETRY_AFTER_S)}, b'{"error": "rate"}'),
                    "/missing": (404, {}, b'{"error": "no such document"}'),
                    "/forbidden": (403, {}, b'{"error": "forbidden"}'),
                    "/slow": (200, {}, b'{"ok": "late"}'),
                }.get(path, (500, {}, b"{}"))
                try:
                    self.send_response(status)
                    for key, value in headers.items():
                        self.send_header(key, value)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                except OSError:
                    pass  # the client gave up (the timeout case)

            def log_message(self, format: str, *args: object) -> None:
                return

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.base = f"http://127.0.0.1:{self.server.server_port}"

    def close(self) -> None:
        self.release.set()
        self.server.shutdown()


def processors() -> list[Any]:
    """One BatchSpanProcessor per OTLP exporter (gRPC and HTTP protobuf), as users add them."""
    from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import (
        OTLPSpanExporter as GrpcExporter,
    )
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import (
        OTLPSpanExporter as HttpExporter,
    )
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    grpc_target = os.environ["CAPTURE_GRPC"]
    http_target = os.environ["CAPTURE_HTTP"]
    return [
        BatchSpanProcessor(GrpcExporter(endpoint=grpc_target, insecure=True)),
        BatchSpanProcessor(HttpExporter(endpoint=f"http://{http_target}/v1/traces")),
    ]


def tracing(case: str, *, set_global: bool = True) -> Any:
    """A TracerProvider that exports every span over OTLP/gRPC and OTLP/HTTP protobuf."""
    from opentelemetry import trace
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider

    provider = TracerProvider(
        resource=Resource.create({"service.name": f"conformance-{case}", "service.version": "1"})
    )
    for processor in processors():
        provider.add_span_processor(processor)
    if set_global:
        trace.set_tracer_provider(provider)
    return provider


# ---- tool bodies shared by the frameworks' tools -------------------------------------


def weather(city: str) -> str:
    """A successful lookup."""
    return json.dumps({"city": city, "temp_c": 12})


def job_lookup(job_id: str) -> str:
    """A structured error returned as a normal result, as careful tools do."""
    return json.dumps({"error": "not_found", "message": f"no job {job_id}"})


def delete_file(path: str) -> str:
    """A denial: the OS-style PermissionError real file tools raise."""
    raise PermissionError(13, "Permission denied", path)


def http_get(url: str) -> str:
    """A real HTTP GET with a real client timeout; HTTP errors raise as httpx does."""
    import httpx

    response = httpx.get(url, timeout=CLIENT_TIMEOUT_S)
    response.raise_for_status()
    return response.text


def compute(expression: str) -> str:
    """An unexpected exception: a bug in the tool."""
    raise RuntimeError(f"division failed while evaluating {expression}")
