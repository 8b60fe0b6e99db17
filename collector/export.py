"""In-process use for Python services: a scrubbing SpanExporter wrapper and `instrument()`.

`ScrubbingSpanExporter(inner)` wraps any SDK `SpanExporter`.  It runs the pipeline in the
exporter's own thread (the BatchSpanProcessor worker), never at span end, so the
application thread pays only the SDK's enqueue (Python's cyclic collector is paused
while a batch is scrubbed, so the application thread does not run the collections the
batch's objects would set off); it passes the scrubbed spans to `inner`
and, when given a sink, stores the records locally.  It never raises: a span the pipeline
cannot process is reduced to its ids (fail closed) and counted.

`instrument(service, version=..., environment=..., endpoint=... | store=...)` builds a
`TracerProvider` whose spans go through that wrapper to a sidecar over OTLP, or to a local
store file, and (by default) installs it as the global provider (when none is set yet:
OpenTelemetry allows one per process; a second call warns and returns a provider that is
not global).
"""

from __future__ import annotations

import ctypes
import gc
import logging
import os
import threading
import weakref
from collections.abc import Sequence
from typing import Final
from urllib.parse import urlsplit, urlunsplit

from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

from errscope.collector import semconv as sc
from errscope.collector.catalog import Catalog
from errscope.collector.config import OTLP_GRPC_URL, OTLP_HTTP_URL
from errscope.collector.gcpause import gc_paused
from errscope.collector.pipeline import ContentPolicy, NonToolPolicy, Pipeline
from errscope.collector.spanview import from_readable, to_readable
from errscope.collector.store.batch import StoreBatch, StoreSink

__all__ = ["ScrubbingSpanExporter", "instrument"]

log = logging.getLogger("errscope.export")

DEFAULT_HTTP_ENDPOINT: Final = f"{OTLP_HTTP_URL}/v1/traces"
DEFAULT_GRPC_ENDPOINT: Final = OTLP_GRPC_URL
# Per export attempt: the SDK's 10 s held an application's exit 8-31 s when the sidecar
# was down (every remaining batch waits it out at shutdown).
EXPORT_TIMEOUT_S: Final = 3.0


class ScrubbingSpanExporter(SpanExporter):
    """Wraps a SpanExporter: only scrubbed spans reach it; records may go to a store."""

    def __init__(
        self,
        inner: SpanExporter | None,
        *,
        pipeline: Pipeline | None = None,
        sink: StoreSink | None = None,
    ) -> None:
        self.inner = inner
        self.pipeline = pipeline or Pipeline()
        self.sink = sink
        self._lock = threading.Lock()
        self.exported = 0
        self.failed = 0
        self.forked = False  # a forked child of the process that opened `sink`
        if sink is not None and hasattr(os, "register_at_fork"):
            this = weakref.ref(self)
            os.register_at_fork(after_in_child=lambda: _after_fork(this))

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        """Process each span, store the records (if a sink is set), pass on the rest."""
        # The pause covers the pipeline and a local store write, never the network
        # export (which may retry for a minute).
        with gc_paused():
            forward, batch = self._process(spans)
            result = self._store(batch)
        # The passed-on spans outlive the pause: collect the young generation here, on
        # this thread, rather than leave a full one to the application's next allocation.
        if gc.isenabled():
            gc.collect(0)
        if self.inner is not None and forward:
            try:
                if self.inner.export(forward) is not SpanExportResult.SUCCESS:
                    result = SpanExportResult.FAILURE
            except Exception as exc:  # noqa: BLE001
                log.warning("inner export failed", extra={"error_class": type(exc).__name__})
                result = SpanExportResult.FAILURE
        with self._lock:
            self.exported += len(spans)
            self.failed += batch.failed
        return result

    def _process(self, spans: Sequence[ReadableSpan]) -> tuple[list[ReadableSpan], StoreBatch]:
        forward: list[ReadableSpan] = []
        batch = StoreBatch()
        views = []
        for span in spans:
            try:
                views.append(from_readable(span))
            except Exception as exc:  # noqa: BLE001 - fail closed: the span is not passed on
                self.failed += 1
                log.warning("span dropped", extra={"error_class": type(exc).__name__})
        # One export at once: a tool span reads its ancestors' ids and its HTTP child there.
        related = self.pipeline.context(views)
        for view in views:
            try:
                processed = self.pipeline.process(view, related=related.get(id(view)))
                if processed.forward is not None:
                    forward.append(to_readable(processed.forward))
                batch.add(processed)
            except Exception as exc:  # noqa: BLE001 - fail closed: the span is not passed on
                self.failed += 1
                log.warning("span dropped", extra={"error_class": type(exc).__name__})
        for processed in self.pipeline.unrun(views):  # calls rejected before any tool ran
            batch.add(processed)
        return forward, batch

    def _store(self, batch: StoreBatch) -> SpanExportResult:
        if self.forked and (batch.calls or batch.tracebacks or batch.redactions):
            self.failed += len(batch.calls)
            return SpanExportResult.FAILURE
        if self.sink is None or not (batch.calls or batch.tracebacks or batch.redactions):
            return SpanExportResult.SUCCESS
        try:
            self.sink.write(batch)
        except Exception as exc:  # noqa: BLE001 - exporters return a result, never raise
            log.warning("store write failed", extra={"error_class": type(exc).__name__})
            self.failed += len(batch.calls)
            return SpanExportResult.FAILURE
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        """Shut the inner exporter down and close the sink's store (the exporter owns both).

        Never raises: it runs at the application's exit (a full disk fails the store's last
        checkpoint), and an exception would stop the processors registered after it.
        """
        if self.inner is not None:
            try:
                self.inner.shutdown()
            except Exception as exc:  # noqa: BLE001 - see above
                log.warning("inner shutdown failed", extra={"error_class": type(exc).__name__})
        if self.sink is not None:
            try:
                self.sink.close()
            except Exception as exc:  # noqa: BLE001 - see above
                log.warning("store close failed", extra={"error_class": type(exc).__name__})

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        """Flush the inner exporter."""
        return self.inner.force_flush(timeout_millis) if self.inner is not None else True


def _after_fork(ref: weakref.ref[ScrubbingSpanExporter]) -> None:
    """In a forked child: the store belongs to the parent (DuckDB allows one writing
    process per file), so the child stores nothing and says so once, rather than write
    through the parent's connection or lose its calls without a word."""
    exporter = ref()
    if exporter is None or exporter.sink is None:
        return
    # Never closed, never freed: freeing the child's last reference would close the
    # connection, and closing checkpoints the parent's file, deletes its WAL and temp
    # files under it.  A leaked reference keeps the destructor from ever running here.
    ctypes.pythonapi.Py_IncRef(ctypes.py_object(exporter.sink))
    exporter.sink = None
    exporter.forked = True
    log.error(
        "store_after_fork: this forked process stores no tool calls; a DuckDB store is "
        "written by one process, so give each worker its own store path (instrument() "
        "after the fork), or send spans to `errscope serve` (endpoint=...)",
        extra={"code": "store_after_fork"},
    )


_ENDPOINT_ENV: Final = ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")
_PROTOCOL_ENV: Final = ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL")


def _protocol(protocol: str | None) -> str:
    """ "http" or "grpc": the argument, else the standard OTEL_* variables, else http."""
    if protocol is None:
        named = next((os.environ[k] for k in _PROTOCOL_ENV if os.environ.get(k)), "")
        protocol = "grpc" if named.strip().lower() == "grpc" else "http"
    if protocol not in ("http", "grpc"):
        raise ValueError(f"protocol must be 'http' or 'grpc', not {protocol!r}")
    return protocol


def _endpoint(endpoint: str | None, protocol: str) -> str | None:
    """The exporter's endpoint; None lets the SDK read the standard OTEL_* variables.

    A base URL (no path) gets `/v1/traces` for OTLP/HTTP, as the variables' base form does:
    posting to `/` was answered 404 and every span was lost.
    """
    if endpoint is None:
        if any(os.environ.get(k) for k in _ENDPOINT_ENV):
            return None
        return DEFAULT_GRPC_ENDPOINT if protocol == "grpc" else DEFAULT_HTTP_ENDPOINT
    parts = urlsplit(endpoint)
    if protocol == "http" and parts.path in ("", "/"):
        return urlunsplit(parts._replace(path="/v1/traces"))
    return endpoint


def _otlp_exporter(
    endpoint: str | None, protocol: str, headers: dict[str, str] | None
) -> SpanExporter:
    if protocol == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import (  # noqa: PLC0415
            OTLPSpanExporter as GrpcExporter,
        )

        metadata = tuple((k.lower(), v) for k, v in (headers or {}).items()) or None
        return GrpcExporter(
            endpoint=endpoint,
            insecure=_grpc_insecure(endpoint),
            headers=metadata,
            timeout=EXPORT_TIMEOUT_S,
        )
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import (  # noqa: PLC0415
        OTLPSpanExporter as HttpExporter,
    )

    return HttpExporter(endpoint=endpoint, headers=headers, timeout=EXPORT_TIMEOUT_S)


def _grpc_insecure(endpoint: str | None) -> bool | None:
    """Plaintext for http:// and for a bare loopback host:port (the local sidecar speaks no
    TLS: the exporter's default for a bare address, TLS, lost every span); TLS for https://
    and for a bare remote host; None lets the SDK read OTEL_EXPORTER_OTLP_INSECURE."""
    if endpoint is None:
        return None
    if "://" in endpoint:
        return endpoint.startswith("http://")
    host = endpoint.rsplit(":", 1)[0].strip("[]")
    return host in ("localhost", "127.0.0.1", "::1") or host.startswith("127.")


def instrument(
    service: str,
    *,
    version: str | None = None,
    environment: str | None = None,
    endpoint: str | None = None,
    protocol: str | None = None,
    store: str | None = None,
    headers: dict[str, str] | None = None,
    exporter: SpanExporter | None = None,
    non_tool: NonToolPolicy = NonToolPolicy.SCRUB,
    content: ContentPolicy = ContentPolicy.DROP,
    catalog: Catalog | None = None,
    set_global: bool = True,
    schedule_delay_millis: int = 1000,
) -> TracerProvider:
    """A TracerProvider whose spans are scrubbed in the export thread, then sent or stored.

    Give `endpoint` (a sidecar or any OTLP receiver; a base URL gets `/v1/traces` over
    HTTP; `protocol` "http" or "grpc"; `headers` such as {"Authorization": "Bearer <token>"}),
    or any SDK `exporter` of your own, and/or `store` (a DuckDB file path written
    in-process).  With none of them, the standard OTEL_EXPORTER_OTLP_* variables decide
    (endpoint, protocol, headers), and without those spans go to the sidecar's default
    OTLP/HTTP address on 127.0.0.1:4318.  `catalog` (from `load_catalog([...])`) makes the
    codes of your own catalog files count as themselves rather than as `unknown`.  `content`
    drops conversation content (messages, prompts, tool arguments and results) from every
    exported span by default; `ContentPolicy.KEEP` keeps it, scrubbed.
    """
    attributes: dict[str, str] = {sc.SERVICE_NAME: service}
    if version:
        attributes[sc.SERVICE_VERSION] = version
    if environment:
        attributes[sc.DEPLOYMENT_ENVIRONMENT] = environment
    provider = TracerProvider(resource=Resource.create(attributes))
    inner: SpanExporter | None = exporter
    if inner is None and (endpoint is not None or store is None):
        chosen = _protocol(protocol)
        inner = _otlp_exporter(_endpoint(endpoint, chosen), chosen, headers)
    sink = None
    if store is not None:
        from errscope.collector.errors import StoreError  # noqa: PLC0415
        from errscope.collector.store.duckdb import (  # noqa: PLC0415 - only services that store locally
            DEFAULT_MEMORY_LIMIT,
            open_file_store,
        )

        # The service's own process: DuckDB must not grow it by caching the whole table.
        try:
            sink = StoreSink(open_file_store(store, memory_limit=DEFAULT_MEMORY_LIMIT))
        except StoreError as exc:
            # Telemetry must not stop the service from starting: say why, store nothing.
            log.error(  # noqa: TRY400 - a code line, never a traceback
                "store_unavailable: %s; this process stores no tool calls",
                exc.describe(),
                extra={"code": "store_unavailable", "store_error": exc.kind.value},
            )
    pipeline = Pipeline(catalog=catalog, non_tool=non_tool, content=content)
    exporter = ScrubbingSpanExporter(inner, pipeline=pipeline, sink=sink)
    provider.add_span_processor(
        BatchSpanProcessor(exporter, schedule_delay_millis=schedule_delay_millis)
    )
    if set_global:
        if isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider):
            trace.set_tracer_provider(provider)
        else:
            # OpenTelemetry sets the global provider once per process; it would only log a
            # warning of its own and keep the first one, so say what that means here.
            log.warning(
                "global_provider_taken: a global tracer provider is already set, so this "
                "one is not global; spans from the global tracer keep going to the first "
                "(service, version). Use the returned provider, or call instrument() once",
                extra={"code": "global_provider_taken"},
            )
    return provider
