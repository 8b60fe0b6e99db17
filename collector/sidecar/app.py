"""The sidecar: OTLP in (gRPC and HTTP), acknowledged only when stored; query API; forwarding.

    receivers (gRPC :4317, HTTP :4318) → Admission → Sidecar.ingest → Pipeline
        → Writer (group commit) → store → forward
    API (:4320): GET /v1/query/{name}, POST /v1/deploys, GET /healthz, GET /metrics

`Sidecar` composes the parts (store, pipeline, writer, forwarder, metrics, admission) and
runs their lifecycle (`start`, `stop`); the receivers live in `errscope.collector.receive`,
the API in `errscope.collector.sidecar.api`, the process around it in `.process`.

Promises:
- an export is answered with success only after its spans are committed (`Writer`);
- admission is bounded in bytes (`Admission`): over the bound, clients get the retryable
  overload answer (HTTP 503 + `Retry-After: 1`, gRPC UNAVAILABLE + RetryInfo 1 s), never a
  silent drop and never RESOURCE_EXHAUSTED without RetryInfo; HTTP admission counts bytes
  as they arrive, and gRPC refuses a call the thread pool cannot take soon before its
  message is read (`receive.otlp_grpc`);
- every listener binds loopback unless told otherwise, and a non-loopback bind needs a token
  (or `--insecure`, `ServeConfig.check`); with a token, ingest and API need
  `Authorization: Bearer <token>` (the scheme in any case);
- `stop` stops the listeners, answers the requests already read, closes connections that
  have not sent a whole request within `DRAIN_GRACE_S`, drains the queue, commits, and
  closes the store, raising `StoreError` when its final checkpoint fails;
- a store DuckDB invalidates (a checkpoint failed on a full disk) is reopened while exports
  get 503, and a store file deleted under the sidecar stops every acknowledgement
  (`errscope.collector.store.writer`).

Thread-safety: `ingest` is called from every receiver thread at once; `metrics` is updated
under its lock; `start` and `stop` are called once each, from one thread.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

import grpc

from errscope.collector.catalog import load_catalog
from errscope.collector.errors import ConfigError, ConfigErrorKind
from errscope.collector.forward import Forwarder, make_exporter
from errscope.collector.pipeline import Pipeline
from errscope.collector.receive.http_server import HttpServer
from errscope.collector.receive.otlp_decode import decode_json, decode_protobuf, read_body
from errscope.collector.receive.otlp_grpc import start_grpc_server
from errscope.collector.receive.otlp_http import OtlpHttpHandler
from errscope.collector.scrub import PII_GROUPS, build_scrubber, default_scrubber
from errscope.collector.sidecar.admission import Admission, IngestResult
from errscope.collector.sidecar.api import ApiHandler
from errscope.collector.sidecar.checks import CheckRunner
from errscope.collector.sidecar.config import ServeConfig, join_address, parse_address
from errscope.collector.sidecar.metrics import Metrics
from errscope.collector.spanview import SpanView
from errscope.collector.store import open_store
from errscope.collector.store.batch import StoreBatch, StoreSink, WriteResult
from errscope.collector.store.writer import Writer

__all__ = ["PROCESSING_SLOTS", "Sidecar"]

log = logging.getLogger("errscope.serve")  # the sidecar's one logger name, in every module

# Requests decoded and processed at once (see Sidecar.ingest).  One: the pipeline holds the
# GIL but for short native calls (RE2, Hyperscan), and a second thread grabbing the GIL
# at each of them left both waiting for it: 4,300 spans/s with two, 6,500 with one.
PROCESSING_SLOTS: Final = 1


class Sidecar:
    """The running sidecar: listeners, pipeline, writer, optional forwarder, metrics."""

    def __init__(self, config: ServeConfig) -> None:
        config.check()
        self.config = config
        # Before the store: a bad catalog file stops start-up with its one-line error.
        catalog = (
            load_catalog([Path(f) for f in config.catalog_files]) if config.catalog_files else None
        )
        # Before the store too: a bad rule file stops start-up with its one-line error.
        if config.rule_files or set(config.pii_groups) != set(PII_GROUPS):
            scrubber = build_scrubber(config.rule_files, pii_groups=config.pii_groups)
        else:
            scrubber = default_scrubber()  # the defaults: the process's one compiled copy
        exporter = make_exporter(config.forward) if config.forward else None  # may refuse it
        self.store = open_store(
            config.store, data_path=config.data_path, memory_limit=config.store_memory
        )
        self.sink = StoreSink(self.store)
        # Without a forwarder no passed-on span is needed: skip building and scrubbing it.
        self.pipeline = Pipeline(
            catalog=catalog,
            non_tool=config.non_tool,
            forward=config.forward is not None,
            matchers=config.matchers,
            content=config.content,
            scrubber=scrubber,
        )
        self.metrics = Metrics()
        self.admission = Admission(
            token=config.token,
            max_body_bytes=config.max_body_bytes,
            max_inflight_bytes=config.max_inflight_bytes,
            metrics=self.metrics,
        )
        self.forwarder = Forwarder(exporter) if exporter is not None else None
        self.writer = Writer(
            self.sink,
            max_queue_bytes=max(config.max_inflight_bytes, config.max_body_bytes) * 2,
            max_delay_s=config.commit_delay_s,
            max_spans=config.commit_spans,
            on_commit=self._after_commit,
        )
        # /v1/check's worker process, started on the first request (sidecar.checks).
        self.checks = CheckRunner(
            token=config.token, trace_url=config.trace_url, catalog_files=config.catalog_files
        )
        self._processing = threading.BoundedSemaphore(PROCESSING_SLOTS)
        self._http: list[HttpServer[Sidecar]] = []
        self._grpc: grpc.Server | None = None
        self._threads: list[threading.Thread] = []
        self.addresses: dict[str, str] = {}
        self.stopped = threading.Event()

    def ingest(self, raw: bytes, *, encoding: str = "", as_json: bool = False) -> IngestResult:
        """Decode and process one export request, then wait for its commit.

        `raw` is the body as received, `encoding` its Content-Encoding ("" for none, as
        gRPC's bodies arrive: the transport has decompressed them and bounded them to
        `max_body_bytes`), `as_json` whether it is OTLP JSON rather than protobuf.
        Decoding and the pipeline run in one of `PROCESSING_SLOTS`: they hold the GIL, so
        more requests at once would not go faster (measured: slower, as two threads traded
        the GIL at every regex call), only hold more decoded spans in memory.
        The wait for the commit holds no slot, so commits still group many requests.
        OtlpDecodeError (UnsupportedEncodingError) and BodyTooLargeError pass through.
        """
        with self._processing:
            # Only the batch and a few counts leave `_process`: the decoded request (~2 MiB
            # per 512 spans) is not held through the wait for the commit, where 16 waiting
            # clients held 30 MiB of the peak RSS.
            done = self._process(raw, encoding, as_json=as_json)
        batch = done.batch
        rejected = done.undecodable + batch.rejected
        with self.metrics.lock:
            self.metrics.received += done.received
            if rejected:
                self.metrics.rejected["bad_ids"] += rejected
        ack = self.writer.submit(batch, done.forward if self.forwarder else [], done.size_bytes)
        if ack is None:
            self.admission.count_refusal("overloaded")
            return IngestResult(accepted=False, reason="overloaded")
        if not ack.wait(self.config.ack_timeout_s):
            self.admission.count_refusal("not_committed")
            return IngestResult(accepted=False, reason="not_committed")
        return IngestResult(accepted=True, rejected=rejected)

    def _process(self, raw: bytes, encoding: str, *, as_json: bool) -> _ProcessedRequest:
        """Decode one request and run its spans through the pipeline."""
        body = read_body(raw, encoding, self.config.max_body_bytes)
        decoded = decode_json(body) if as_json else decode_protobuf(body)
        received_at = datetime.now(UTC)
        batch = StoreBatch()
        forward: list[SpanView] = []
        # One request at once: a tool span reads its ancestors' ids and its HTTP child there.
        for processed in self.pipeline.process_request(decoded.spans, received_at=received_at):
            batch.add(processed)
            if processed.forward is not None:
                forward.append(processed.forward)
        return _ProcessedRequest(
            batch=batch,
            forward=forward,
            received=len(decoded.spans) + decoded.rejected,
            undecodable=decoded.rejected,
            size_bytes=decoded.size_bytes,
        )

    def _after_commit(
        self, batch: StoreBatch, result: WriteResult, forward: list[SpanView], seconds: float
    ) -> None:
        with self.metrics.lock:
            self.metrics.stored += result.calls
            self.metrics.commit_seconds_sum += seconds
            self.metrics.commit_count += 1
            self.metrics.tracebacks_kept += result.tracebacks
            for (_, _, _, rule), n in batch.redactions.items():
                self.metrics.redactions[rule] += n
            for call in batch.calls:
                self.metrics.count_tool_call(
                    call.service,
                    call.tool,
                    call.code,
                    trace_id=call.trace_id,
                    span_id=call.span_id,
                    at_s=call.received_at.timestamp(),
                )
        if self.forwarder is not None and forward:
            self.forwarder.put(forward)

    def start(self) -> dict[str, str]:
        """Bind every listener and start serving; return the bound addresses."""
        if self.config.otlp_grpc:
            host, port = parse_address(self.config.otlp_grpc, "otlp-grpc")
            self._grpc, bound = start_grpc_server(
                host,
                port,
                max_body_bytes=self.config.max_body_bytes,
                admission=self.admission,
                sidecar=self,
            )
            self.addresses["otlp_grpc"] = join_address(host, bound)
        for name, handler in (("otlp_http", OtlpHttpHandler), ("api", ApiHandler)):
            value = getattr(self.config, name)
            if not value:
                continue
            host, port = parse_address(value, name.replace("_", "-"))
            try:
                httpd = HttpServer((host, port), handler, self.admission, self)
            except OSError as exc:
                raise ConfigError(
                    ConfigErrorKind.BAD_VALUE,
                    f"cannot bind ({exc.strerror})",
                    field=name.replace("_", "-"),
                ) from None
            thread = threading.Thread(
                target=httpd.serve_forever, name=f"errscope-{name}", daemon=True
            )
            thread.start()
            self._http.append(httpd)
            self._threads.append(thread)
            self.addresses[name] = join_address(host, httpd.server_address[1])
        return dict(self.addresses)

    def stop(self) -> None:
        """Stop listening, let in-flight exports finish, drain and commit, close the store.

        A client that keeps a connection busy (an exporter sending every second) would keep
        the drain going for as long as it sends: from here on every HTTP answer closes its
        connection, and a new export on a kept-alive one gets 503 + Retry-After, which the
        client retries against the next sidecar.
        """
        self.admission.draining.set()
        for httpd in self._http:
            httpd.shutdown()
            httpd.start_drain()  # connections without a whole request close after a grace
        if self._grpc is not None:
            self._grpc.stop(grace=5).wait(6)
        self.checks.close()  # before the join: a check in flight reads the API back
        for httpd in self._http:
            httpd.server_close()  # joins in-flight handler threads
        self.writer.stop()
        if self.forwarder is not None:
            self.forwarder.stop()
        try:
            self.store.close()  # may raise StoreError: its final checkpoint failed
        finally:
            self.stopped.set()

    def health(self) -> dict[str, Any]:
        """The /healthz body."""
        problem = self.writer.problem
        return {
            "status": "ok" if problem is None else "unhealthy",
            **({"code": problem} if problem is not None else {}),
            **self.addresses,
            "commits": self.writer.commits,
            "commit_failures": self.writer.commit_failures,
            "queue_bytes": self.writer.queued_bytes,
            "inflight_bytes": self.admission.inflight_bytes,
        }

    def gauges(self) -> dict[str, float]:
        """Gauges for /metrics."""
        gauges: dict[str, float] = {
            "errscope_queue_bytes": float(self.writer.queued_bytes),
            "errscope_inflight_bytes": float(self.admission.inflight_bytes),
            "errscope_healthy": 1.0 if self.writer.healthy else 0.0,
            "errscope_pipeline_failures": float(self.pipeline.failures),
            "errscope_traceback_samples_dropped": float(self.pipeline.sampler.dropped),
        }
        if self.forwarder is not None:
            gauges["errscope_forward_sent"] = float(self.forwarder.sent)
            gauges["errscope_forward_dropped"] = float(self.forwarder.dropped)
            gauges["errscope_forward_queued"] = float(self.forwarder.queued)
        return gauges


@dataclass(frozen=True, slots=True)
class _ProcessedRequest:
    """What one request leaves after the pipeline; its decoded spans are not kept."""

    batch: StoreBatch
    forward: list[SpanView]
    received: int  # spans in the request, with those the decoder rejected
    undecodable: int  # spans the decoder rejected (ids of the wrong length)
    size_bytes: int
