"""forward: pass scrubbed spans upstream over OTLP, never blocking the store.

`Forwarder(url)` owns a bounded queue and one thread that sends batches through the
OpenTelemetry SDK's OTLP exporters (`http://HOST:PORT` → OTLP/HTTP protobuf to
/v1/traces, `grpc://HOST:PORT` → OTLP/gRPC); the exporters do their own retries with
backoff within their deadline.  When the queue is full or an export finally fails, the
spans are dropped and counted (`dropped`): an upstream that is down never slows ingest.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Sequence
from typing import Final
from urllib.parse import urlsplit

from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

from errscope.collector.errors import ConfigError, ConfigErrorKind
from errscope.collector.spanview import SpanView, to_readable

__all__ = ["Forwarder", "make_exporter"]

log = logging.getLogger("errscope.forward")

DEFAULT_MAX_QUEUE_SPANS: Final = 20_000
_BATCH: Final = 512
# How long a stop waits for the queue to go upstream, twice at most (before and after the
# exporter is shut down): with docker's 10 s stop timeout, the store's own close needs
# the rest.
STOP_TIMEOUT_S: Final = 2.0


def make_exporter(url: str, *, timeout_s: float = 10.0) -> SpanExporter:
    """An OTLP exporter for `http://HOST:PORT[/path]` or `grpc://HOST:PORT`."""
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises on a port that is not a number
    except ValueError:  # `http://[::1` and its kin
        parts = urlsplit("")
    if parts.username is not None or parts.password is not None:
        raise ConfigError(
            ConfigErrorKind.BAD_VALUE,
            "a forward target must not carry credentials: they would reach the logs",
            field="forward",
            hint="give them as OTEL_EXPORTER_OTLP_HEADERS (authorization=...), which the "
            "exporter reads",
        )
    if parts.scheme in ("http", "https") and parts.netloc:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import (  # noqa: PLC0415
            OTLPSpanExporter as HttpExporter,
        )

        path = parts.path if parts.path not in ("", "/") else "/v1/traces"
        return HttpExporter(endpoint=f"{parts.scheme}://{parts.netloc}{path}", timeout=timeout_s)
    if parts.scheme == "grpc" and parts.netloc:
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import (  # noqa: PLC0415
            OTLPSpanExporter as GrpcExporter,
        )

        return GrpcExporter(endpoint=parts.netloc, insecure=True, timeout=timeout_s)
    raise ConfigError(
        ConfigErrorKind.BAD_VALUE,
        "forward target must be http://HOST:PORT or grpc://HOST:PORT",
        field="forward",
    )


class Forwarder:
    """A bounded queue of scrubbed spans and one thread exporting them upstream."""

    def __init__(
        self, exporter: SpanExporter, *, max_queue_spans: int = DEFAULT_MAX_QUEUE_SPANS
    ) -> None:
        self.exporter = exporter
        self.max_queue_spans = max_queue_spans
        self._queue: deque[SpanView] = deque()
        self._cond = threading.Condition()
        self._stopping = False
        self.sent = 0
        self.dropped = 0
        self.failures = 0
        self._thread = threading.Thread(target=self._run, name="errscope-forward", daemon=True)
        self._thread.start()

    @property
    def queued(self) -> int:
        """Spans waiting to be forwarded."""
        return len(self._queue)

    def put(self, spans: Sequence[SpanView]) -> None:
        """Queue spans; what does not fit is dropped and counted, never blocking the caller."""
        with self._cond:
            room = max(self.max_queue_spans - len(self._queue), 0)
            self._queue.extend(spans[:room])
            self.dropped += max(len(spans) - room, 0)
            self._cond.notify()

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._queue and not self._stopping:
                    self._cond.wait()
                if not self._queue:
                    return
                batch = [self._queue.popleft() for _ in range(min(_BATCH, len(self._queue)))]
            try:
                result = self.exporter.export([to_readable(v) for v in batch])
            except Exception as exc:  # noqa: BLE001 - a broken upstream only costs the batch
                log.warning("forward failed", extra={"error_class": type(exc).__name__})
                result = SpanExportResult.FAILURE
            if result is SpanExportResult.SUCCESS:
                self.sent += len(batch)
            else:
                self.failures += 1
                self.dropped += len(batch)
                if self._stopping:  # an upstream that fails now will not be back in time
                    self._drop_queued()

    def _drop_queued(self) -> None:
        with self._cond:
            self.dropped += len(self._queue)
            self._queue.clear()

    def stop(self, timeout_s: float = STOP_TIMEOUT_S) -> None:
        """Send what is queued within `timeout_s`, drop (and count) the rest, and shut the
        exporter down; a process stop must not wait on an upstream that is down."""
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
        self._thread.join(timeout_s)
        if self._thread.is_alive():
            self._drop_queued()
        self.exporter.shutdown()  # also ends an exporter's wait between retries
        self._thread.join(timeout_s)
