"""How the demo's spans leave: one SDK TracerProvider per service version, real OTLP exporters.

Each (service, version) gets a `TracerProvider` whose resource names the service, version
and environment — a version change is a deploy, as it is for a real service — with a
`BatchSpanProcessor` and the OpenTelemetry OTLP/HTTP exporter pointed at the sidecar.
Services marked `scrub_in_process` get what `errscope.collector.export.instrument()` builds:
errscope's `ScrubbingSpanExporter` around the OTLP exporter, so only scrubbed spans leave the
process; the others send raw spans, as any language's OTLP exporter does, and the sidecar
scrubs.  A counting wrapper records what the sidecar accepted, so the back-fill can report
(and a test can assert) that nothing was dropped.

`mark_deploy` posts the deploy to the sidecar's API with its exact time.  Failures are
returned as False with a reason, never raised: the auto-detected deploy still exists.
"""

from __future__ import annotations

import json
import threading
import urllib.error
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Final

from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

from errscope.collector import semconv as sc
from errscope.collector.config import API_URL, OTLP_HTTP_URL
from errscope.collector.export import ScrubbingSpanExporter

__all__ = ["DEFAULT_API", "DEFAULT_ENDPOINT", "Counts", "Senders", "Target", "mark_deploy"]

DEFAULT_ENDPOINT: Final = OTLP_HTTP_URL
DEFAULT_API: Final = API_URL
_EXPORT_TIMEOUT_S: Final = 30.0
_API_TIMEOUT_S: Final = 10.0
# Back-fill hands the processor a chunk at a time and flushes it; the queue holds a chunk.
_MAX_QUEUE: Final = 65_536
_BATCH: Final = 1024


@dataclass(frozen=True, slots=True)
class Target:
    """Where to send: the sidecar's OTLP/HTTP base URL, its API, and the bearer token."""

    endpoint: str = DEFAULT_ENDPOINT
    api: str | None = DEFAULT_API
    token: str | None = None

    @property
    def traces_url(self) -> str:
        """The OTLP/HTTP traces URL (`/v1/traces` appended unless given)."""
        base = self.endpoint.rstrip("/")
        return base if base.endswith("/v1/traces") else f"{base}/v1/traces"

    @property
    def headers(self) -> dict[str, str]:
        """The authorization header when a token is set."""
        return {"authorization": f"Bearer {self.token}"} if self.token else {}


@dataclass
class Counts:
    """Spans handed to the exporters, accepted by the sidecar, and failed (thread-safe)."""

    exported: int = 0
    failed: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def add(self, n: int, *, ok: bool) -> None:
        """Count one export call's spans."""
        with self._lock:
            if ok:
                self.exported += n
            else:
                self.failed += n


class _CountingExporter(SpanExporter):
    """Passes spans on and counts the result of every export."""

    def __init__(self, inner: SpanExporter, counts: Counts) -> None:
        self.inner = inner
        self.counts = counts

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        try:
            result = self.inner.export(spans)
        except Exception:  # noqa: BLE001 - an exporter returns a result, never raises
            result = SpanExportResult.FAILURE
        self.counts.add(len(spans), ok=result is SpanExportResult.SUCCESS)
        return result

    def shutdown(self) -> None:
        self.inner.shutdown()

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        return self.inner.force_flush(timeout_millis)


class Senders:
    """The SDK tracer providers of the fleet, one per (service, version), made on first use."""

    def __init__(
        self,
        target: Target,
        *,
        environment: str = "prod",
        scrub_in_process: frozenset[str] = frozenset(),
        schedule_delay_millis: int = 500,
    ) -> None:
        self.target = target
        self.environment = environment
        self.scrub_in_process = scrub_in_process
        self.schedule_delay_millis = schedule_delay_millis
        self.counts = Counts()
        self._providers: dict[tuple[str, str], TracerProvider] = {}

    def provider(self, service: str, version: str) -> TracerProvider:
        """The provider of one service version."""
        key = (service, version)
        if key not in self._providers:
            resource = Resource.create(
                {
                    sc.SERVICE_NAME: service,
                    sc.SERVICE_VERSION: version,
                    sc.DEPLOYMENT_ENVIRONMENT: self.environment,
                }
            )
            exporter: SpanExporter = OTLPSpanExporter(
                endpoint=self.target.traces_url,
                headers=self.target.headers,
                timeout=_EXPORT_TIMEOUT_S,
            )
            if service in self.scrub_in_process:
                exporter = ScrubbingSpanExporter(exporter)
            provider = TracerProvider(resource=resource)
            provider.add_span_processor(
                BatchSpanProcessor(
                    _CountingExporter(exporter, self.counts),
                    max_queue_size=_MAX_QUEUE,
                    max_export_batch_size=_BATCH,
                    schedule_delay_millis=self.schedule_delay_millis,
                    export_timeout_millis=int(_EXPORT_TIMEOUT_S * 1000),
                )
            )
            self._providers[key] = provider
        return self._providers[key]

    def flush(self, timeout_millis: int = 120_000) -> bool:
        """Export everything queued; True when every provider finished in time."""
        return all(p.force_flush(timeout_millis) for p in self._providers.values())

    def shutdown(self) -> None:
        """Flush and shut every provider down (idempotent)."""
        for provider in self._providers.values():
            provider.shutdown()
        self._providers.clear()


def mark_deploy(
    target: Target, service: str, version: str, environment: str, ts: datetime
) -> tuple[bool, str]:
    """POST /v1/deploys with the exact deploy time; (ok, reason)."""
    if not target.api:
        return False, "no API address"
    body = json.dumps(
        {"service": service, "version": version, "environment": environment, "ts": ts.isoformat()}
    ).encode()
    request = urllib.request.Request(  # noqa: S310 - the URL is the operator's sidecar address
        f"{target.api.rstrip('/')}/v1/deploys",
        data=body,
        headers={"content-type": "application/json", **target.headers},
        method="POST",
    )
    try:
        with urllib.request.urlopen(request, timeout=_API_TIMEOUT_S) as response:  # noqa: S310
            return 200 <= response.status < 300, f"HTTP {response.status}"
    except urllib.error.HTTPError as exc:
        return False, f"HTTP {exc.code}"
    except (urllib.error.URLError, OSError) as exc:
        return False, type(exc).__name__
