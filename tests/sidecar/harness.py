"""Run a real `errscope serve` process for tests, and talk to it with real OTel SDK exporters."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

ERRSCOPE = [sys.executable, "-m", "errscope.collector.cli"]


@dataclass
class Served:
    """A running sidecar process and its bound addresses."""

    process: subprocess.Popen[str]
    grpc: str
    http: str
    api: str
    store: Path
    log: Path

    def url(self, path: str) -> str:
        """A URL on the query API."""
        return f"http://{self.api}{path}"

    def get(
        self, path: str, token: str | None = None, accept: str = "application/json"
    ) -> tuple[int, bytes]:
        """GET on the API; (status, body) whatever the status."""
        headers = {"Accept": accept}
        if token:
            headers["Authorization"] = f"Bearer {token}"
        request = urllib.request.Request(self.url(path), headers=headers)
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                return response.status, response.read()
        except urllib.error.HTTPError as exc:
            with exc:
                return exc.code, exc.read()

    def query(self, name: str, token: str | None = None, **params: str) -> list[dict[str, Any]]:
        """Run a named query through the API as JSON rows."""
        from urllib.parse import urlencode

        status, body = self.get(f"/v1/query/{name}?{urlencode(params)}", token=token)
        assert status == 200, body
        rows: list[dict[str, Any]] = json.loads(body)
        return rows

    def rss_kib(self) -> int:
        """Resident memory of the sidecar process, KiB."""
        return self._status_kib("VmRSS:")

    def peak_rss_kib(self) -> int:
        """The sidecar's peak resident memory so far (the kernel's high-water mark), KiB."""
        return self._status_kib("VmHWM:")

    def _status_kib(self, field: str) -> int:
        for line in Path(f"/proc/{self.process.pid}/status").read_text().splitlines():
            if line.startswith(field):
                return int(line.split()[1])
        return 0

    def kill9(self) -> None:
        """SIGKILL: no draining, no checkpoint."""
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(10)

    def terminate(self) -> int:
        """SIGTERM and wait; the exit code."""
        self.process.send_signal(signal.SIGTERM)
        return self.process.wait(30)


def start_sidecar(
    store: Path,
    *args: str,
    grpc: str = "127.0.0.1:0",
    http: str = "127.0.0.1:0",
    api: str = "127.0.0.1:0",
    env: dict[str, str] | None = None,
) -> Served:
    """Start `errscope serve` and wait for its ready line."""
    log = store.with_suffix(".log")
    with log.open("a") as log_file:
        process = subprocess.Popen(
            [
                *ERRSCOPE,
                "serve",
                "--otlp-grpc",
                grpc,
                "--otlp-http",
                http,
                "--api",
                api,
                "--store",
                str(store),
                *args,
            ],
            stdout=subprocess.PIPE,
            stderr=log_file,
            text=True,
            env={**os.environ, **(env or {})},
        )
    assert process.stdout is not None
    line = process.stdout.readline()
    process.stdout.close()  # the ready line is all the sidecar prints on stdout
    if not line:
        process.wait(10)
        raise RuntimeError(f"sidecar did not start: {log.read_text()}")
    ready = json.loads(line)
    return Served(process, ready["otlp_grpc"], ready["otlp_http"], ready["api"], store, log)


@contextlib.contextmanager
def sidecar(store: Path, *args: str, **kwargs: Any) -> Iterator[Served]:
    """A sidecar for the duration of a `with` block; always stopped."""
    served = start_sidecar(store, *args, **kwargs)
    try:
        yield served
    finally:
        if served.process.poll() is None:
            served.process.send_signal(signal.SIGTERM)
            try:
                served.process.wait(30)
            except subprocess.TimeoutExpired:
                served.process.kill()


def http_exporter(served: Served, token: str | None = None, timeout: float = 10) -> HttpExporter:
    """The SDK's OTLP/HTTP protobuf exporter aimed at the sidecar."""
    headers = {"Authorization": f"Bearer {token}"} if token else None
    return HttpExporter(
        endpoint=f"http://{served.http}/v1/traces", headers=headers, timeout=timeout
    )


def grpc_exporter(served: Served, token: str | None = None, timeout: float = 10) -> GrpcExporter:
    """The SDK's OTLP/gRPC exporter aimed at the sidecar."""
    headers = (("authorization", f"Bearer {token}"),) if token else None
    return GrpcExporter(endpoint=served.grpc, insecure=True, headers=headers, timeout=timeout)


def finished_spans(
    specs: Sequence[tuple[str, dict[str, Any]]],
    resource: dict[str, str],
    *,
    start_ns: int | None = None,
) -> list[ReadableSpan]:
    """Finished SDK spans (name, attributes) under one resource, for exporters to send."""
    provider = TracerProvider(resource=Resource.create(resource))
    memory = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("tests")
    for i, (name, attributes) in enumerate(specs):
        start = (start_ns or time.time_ns()) + i * 1000
        span = tracer.start_span(name, attributes=attributes, start_time=start)
        span.end(end_time=start + 500_000)
    provider.shutdown()
    return list(memory.get_finished_spans())


def otlp_json(spans: Sequence[ReadableSpan]) -> bytes:
    """The OTLP/JSON body for spans: the SDK's own protobuf encoding, rendered per the OTLP JSON rules."""
    from google.protobuf.json_format import MessageToDict

    message = MessageToDict(encode_spans(spans), use_integers_for_enums=True)

    def fix(node: Any) -> Any:
        if isinstance(node, dict):
            out = {}
            for key, value in node.items():
                if key in ("traceId", "spanId", "parentSpanId") and isinstance(value, str):
                    import base64

                    out[key] = base64.b64decode(value).hex()
                else:
                    out[key] = fix(value)
            return out
        if isinstance(node, list):
            return [fix(v) for v in node]
        return node

    return json.dumps(fix(message)).encode()


def send(exporter: SpanExporter, spans: Sequence[ReadableSpan]) -> bool:
    """Export through a real SDK exporter; True when the sidecar acknowledged."""
    from opentelemetry.sdk.trace.export import SpanExportResult

    return exporter.export(spans) is SpanExportResult.SUCCESS
