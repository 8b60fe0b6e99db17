"""The sidecar: OTLP in (gRPC and HTTP), acknowledged only when stored; query API; forwarding.

    receivers (gRPC :4317, HTTP :4318) → Pipeline → Writer (group commit) → store → forward
    API (:4320): GET /v1/query/{name}, POST /v1/deploys, GET /healthz, GET /metrics

Promises:
- an export is answered with success only after its spans are committed (`Writer`);
- admission is bounded in bytes: over the bound, clients get the retryable overload answer
  (HTTP 503 + `Retry-After: 1`, gRPC UNAVAILABLE + RetryInfo 1 s), never a silent drop and
  never RESOURCE_EXHAUSTED without RetryInfo;
- HTTP admission counts bytes as they arrive, not the Content-Length a client promises, and
  gRPC refuses (UNAVAILABLE + RetryInfo) a call the thread pool cannot take soon before its
  message is read, so slow or numerous clients cannot hold the budget or pile up memory;
- bodies come with Content-Length or chunked (as Node's exporter sends them); framing a
  proxy could read differently gets 400 and a close (RFC 9112 §6); bodies are limited as
  they arrive and again after decompression (413); undecodable bodies get
  400/INVALID_ARGUMENT, a content coding not read 415; spans without valid ids are
  reported in `partial_success`;
- a request's headers must arrive within `HEAD_DEADLINE_S` and its body within
  `BODY_DEADLINE_S`; other methods on a served path get 405 with `Allow`;
- every listener binds loopback unless told otherwise, and a non-loopback bind needs a token
  (or `--insecure`); with a token, ingest and API need `Authorization: Bearer <token>`
  (the scheme in any case);
- logs carry codes, counts and correlation ids, never payload contents nor tracebacks;
- SIGTERM/SIGINT (and SIGHUP, a closed terminal; from start-up on) stop the listeners,
  answer the requests already read, close connections that have not sent a whole request
  within `DRAIN_GRACE_S`, drain the queue, commit, and exit 0; when the store's final
  checkpoint fails (a full disk), it logs `store_io_error` and exits `EXIT_STORE_IO` (74,
  sysexits' EX_IOERR): the acknowledged spans are in the store's write-ahead log, which
  the next start folds in;
- a store DuckDB invalidates (a checkpoint failed on a full disk) is reopened while exports
  get 503, and a store file deleted under the sidecar stops every acknowledgement
  (`errscope.collector.writer`).
"""

from __future__ import annotations

import contextlib
import ctypes
import enum
import hmac
import importlib.abc
import io
import ipaddress
import json
import logging
import os
import re
import signal
import socket
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Final, cast
from urllib.parse import parse_qsl, unquote, urlsplit

import grpc
import orjson
import pyarrow as pa
import pyarrow.ipc
from google.protobuf.duration_pb2 import Duration
from google.rpc import code_pb2, error_details_pb2, status_pb2

from errscope.collector.catalog import load_catalog
from errscope.collector.errors import (
    ConfigError,
    ConfigErrorKind,
    ErrscopeError,
    QueryError,
    QueryErrorKind,
    RecordError,
    RecordErrorKind,
    StoreError,
)
from errscope.collector.forward import Forwarder, make_exporter
from errscope.collector.otlp import (
    DEFAULT_MAX_BODY_BYTES,
    BodyTooLargeError,
    Decoded,
    OtlpDecodeError,
    UnsupportedEncodingError,
    decode_json,
    decode_protobuf,
    encode_response,
    read_body,
)
from errscope.collector.pipeline import NonToolPolicy, Pipeline
from errscope.collector.ports import bind_refusal
from errscope.collector.record import Deploy
from errscope.collector.scrub import Scrubber, default_scrubber
from errscope.collector.signals import set_soon
from errscope.collector.sink import StoreBatch, StoreSink, WriteResult
from errscope.collector.spanview import SpanView
from errscope.collector.store import (
    DEFAULT_MEMORY_LIMIT,
    MEMORY_SIZE_HINT,
    StoreFault,
    is_memory_size,
)
from errscope.collector.stores import open_store
from errscope.collector.units import parse_time
from errscope.collector.writer import Writer
from errscope.queries.runner import json_value, run_query
from errscope.queries.source import ARROW_STREAM

__all__ = ["EXIT_STORE_IO", "ServeConfig", "Sidecar", "parse_address", "refuse_secret_labels"]

log = logging.getLogger("errscope.serve")

RETRY_AFTER_S: Final = 1
# `errscope serve`'s exit status when the store cannot be closed cleanly (sysexits EX_IOERR).
EXIT_STORE_IO: Final = 74
DEFAULT_MAX_INFLIGHT_BYTES: Final = 64 * 1024 * 1024
MIN_LIMIT_BYTES: Final = 1024  # a smaller body or in-flight limit would refuse every export
DEFAULT_STORE_MEMORY: Final = DEFAULT_MEMORY_LIMIT
# Concurrent gRPC exports; admission bounds their bytes.  Each waits for its group commit
# (up to `commit_delay_s`), so a rate needs rate x latency of them in flight: with 8,
# 100-span requests capped at 8 / 0.24 s = 3,300 spans/s, though the CPU was half idle.
GRPC_WORKERS: Final = 32
# Requests decoded and processed at once (see Sidecar.ingest).  One: the pipeline holds the
# GIL but for short native calls (RE2, Hyperscan), and a second thread grabbing the GIL
# at each of them left both waiting for it: 4,300 spans/s with two, 6,500 with one.
PROCESSING_SLOTS: Final = 1
# Distinct (service, tool, code) series in /metrics; the names are the clients' own, and
# 20,000 tool names made 20,000 series.  Beyond this, new ones count under OTHER_LABEL.
MAX_TOOL_CALL_SERIES: Final = 2000
OTHER_LABEL: Final = "other"
# What a bearer token may hold: visible ASCII, as every client can send it in a header.
_TOKEN_RE: Final = re.compile(r"[\x21-\x7e]+")
_GRPC_SERVICE: Final = "opentelemetry.proto.collector.trace.v1.TraceService"
_EXPORT_METHOD: Final = f"/{_GRPC_SERVICE}/Export"
# gRPC exports waiting for one of the GRPC_WORKERS threads before new ones are refused
# (UNAVAILABLE + RetryInfo, see _ExportRouter): each holds its message in the transport.
GRPC_MAX_WAITING: Final = 4
_PROTOBUF: Final = "application/x-protobuf"
_JSON: Final = "application/json"
_LOG_FIELDS: Final = (
    "code",
    "error_class",
    "trace_id",
    "span_id",
    "spans",
    "rejected",
    "reason",
    "address",
)


_DEFAULT_PORTS: Final = {"otlp-grpc": 4317, "otlp-http": 4318, "api": 4320}


def parse_address(text: str, name: str) -> tuple[str, int]:
    """`HOST:PORT` (IPv6 as `[::1]:PORT`) as a (host, port) pair; ConfigError naming the flag."""
    host, sep, port = text.rpartition(":")
    host = host.strip("[]")
    if not sep or not host or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ConfigError(
            ConfigErrorKind.BAD_VALUE,
            "must be HOST:PORT",
            field=name,
            hint=f"for example 127.0.0.1:{_DEFAULT_PORTS.get(name, 4318)}",
        )
    return host, int(port)


def join_address(host: str, port: int) -> str:
    """`host:port`, an IPv6 host in brackets: what `parse_address` reads back."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _check_free(host: str, port: int, name: str) -> None:
    """Refuse a port another process holds, as the HTTP listeners' bind does.

    gRPC would report it only as a log line and a RuntimeError; this names the flag.
    """
    if port == 0:
        return
    refusal = bind_refusal(host, port)
    if refusal is not None:
        raise ConfigError(ConfigErrorKind.BAD_VALUE, f"cannot bind ({refusal})", field=name)


def is_loopback(host: str) -> bool:
    """True for localhost and loopback addresses."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@dataclass
class ServeConfig:
    """Everything `errscope serve` can be told; defaults are safe (loopback, no forwarding)."""

    otlp_grpc: str | None = "127.0.0.1:4317"
    otlp_http: str | None = "127.0.0.1:4318"
    api: str | None = "127.0.0.1:4320"
    store: str = "data/errscope.duckdb"
    data_path: str | None = None  # DuckLake stores only: where the Parquet files go
    # DuckDB's buffer pool for a file store; without a bound it caches the table's blocks
    # up to 80% of the machine's memory.  None: DuckDB's default.
    store_memory: str | None = DEFAULT_STORE_MEMORY
    token: str | None = None
    insecure: bool = False
    forward: str | None = None
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    max_inflight_bytes: int = DEFAULT_MAX_INFLIGHT_BYTES
    ack_timeout_s: float = 8.0
    commit_delay_s: float = 0.2
    commit_spans: int = 5000
    non_tool: NonToolPolicy = NonToolPolicy.SCRUB
    # User catalog files: their codes are stored as themselves, not as `unknown`.
    catalog_files: tuple[str, ...] = ()

    def check(self) -> None:
        """Refuse unsafe or unusable settings with a ConfigError naming the flag."""
        for name in ("otlp_grpc", "otlp_http", "api"):
            value = getattr(self, name)
            if value is None:
                continue
            host, _ = parse_address(value, name.replace("_", "-"))
            if not is_loopback(host) and not self.token and not self.insecure:
                raise ConfigError(
                    ConfigErrorKind.BAD_VALUE,
                    "binding a non-loopback address needs a token",
                    field=name.replace("_", "-"),
                    hint="set --token (or ERRSCOPE_TOKEN), or pass --insecure on a trusted network",
                )
        if self.store_memory is not None and not is_memory_size(self.store_memory):
            raise ConfigError(
                ConfigErrorKind.BAD_VALUE,
                "not a memory size",
                field="store-memory",
                hint=MEMORY_SIZE_HINT,
            )
        if self.token is not None and len(self.token) < 16:
            raise ConfigError(
                ConfigErrorKind.BAD_VALUE, "must be at least 16 characters", field="token"
            )
        if self.token is not None and not _TOKEN_RE.fullmatch(self.token):
            # A client sends the header as ASCII, and strips the space or newline a file's
            # token ends in: the sidecar would refuse every export for ever.
            raise ConfigError(
                ConfigErrorKind.BAD_VALUE,
                "must be visible ASCII characters only (no spaces, newlines or accents)",
                field="token",
                hint="a token from a file: strip its trailing newline",
            )
        if not any((self.otlp_grpc, self.otlp_http, self.api)):
            raise ConfigError(
                ConfigErrorKind.BAD_VALUE,
                "every listener is off: nothing to serve",
                field="otlp-grpc",
                hint="give at least one of --otlp-grpc, --otlp-http, --api an address",
            )
        for name, value in (
            ("max-body-bytes", self.max_body_bytes),
            ("max-inflight-bytes", self.max_inflight_bytes),
        ):
            if value < MIN_LIMIT_BYTES:
                raise ConfigError(
                    ConfigErrorKind.BAD_VALUE,
                    f"must be at least {MIN_LIMIT_BYTES:,} bytes",
                    field=name,
                    hint="the defaults are 16 MiB per body and 64 MiB in flight",
                )
        if self.max_inflight_bytes < self.max_body_bytes:
            # A body of the largest size would never be admitted once anything else is in
            # flight: under steady load its client would get 503 for ever.
            raise ConfigError(
                ConfigErrorKind.BAD_VALUE,
                f"must be at least --max-body-bytes ({self.max_body_bytes:,})",
                field="max-inflight-bytes",
                hint="raise --max-inflight-bytes or lower --max-body-bytes",
            )


# ------------------------------------------------------------------ metrics


@dataclass
class Metrics:
    """Counters for /metrics (Prometheus text format); values only, never payloads."""

    received: int = 0
    stored: int = 0
    rejected: Counter[str] = field(default_factory=Counter)  # spans, by reason
    refused: Counter[str] = field(default_factory=Counter)  # requests or connections
    redactions: Counter[str] = field(default_factory=Counter)
    tool_calls: Counter[tuple[str, str, str]] = field(default_factory=Counter)
    tool_call_series_overflow: int = 0  # calls counted under OTHER_LABEL (`count_tool_call`)
    commit_seconds_sum: float = 0.0
    commit_count: int = 0
    tracebacks_kept: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def count_tool_call(self, service: str, tool: str, code: str) -> None:
        """Count one stored call; hold the lock.

        Service and tool names come from clients: past `MAX_TOOL_CALL_SERIES` series a new
        (service, tool) is counted as (`OTHER_LABEL`, `OTHER_LABEL`, code), and the call in
        `tool_call_series_overflow`, so /metrics stays bounded (codes are a closed set).
        """
        key = (service, tool, code)
        if key not in self.tool_calls and len(self.tool_calls) >= MAX_TOOL_CALL_SERIES:
            key = (OTHER_LABEL, OTHER_LABEL, code)
            self.tool_call_series_overflow += 1
        self.tool_calls[key] += 1

    def render(self, extra: Mapping[str, float]) -> str:
        """The exposition text."""

        def esc(value: str) -> str:
            return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", " ")

        lines = [
            "# TYPE errscope_spans_received_total counter",
            f"errscope_spans_received_total {self.received}",
            "# TYPE errscope_tool_calls_stored_total counter",
            f"errscope_tool_calls_stored_total {self.stored}",
            "# TYPE errscope_spans_rejected_total counter",
        ]
        lines += [
            f'errscope_spans_rejected_total{{reason="{esc(r)}"}} {n}'
            for r, n in self.rejected.items()
        ]
        lines += ["# TYPE errscope_exports_refused_total counter"]
        lines += [
            f'errscope_exports_refused_total{{reason="{esc(r)}"}} {n}'
            for r, n in self.refused.items()
        ]
        lines += ["# TYPE errscope_redactions_total counter"]
        lines += [
            f'errscope_redactions_total{{rule="{esc(r)}"}} {n}' for r, n in self.redactions.items()
        ]
        lines += ["# TYPE errscope_tool_calls_total counter"]
        lines += [
            f'errscope_tool_calls_total{{service="{esc(s)}",tool="{esc(t)}",code="{esc(c)}"}} {n}'
            for (s, t, c), n in self.tool_calls.items()
        ]
        lines += [
            "# TYPE errscope_tool_call_series_overflow_total counter",
            f"errscope_tool_call_series_overflow_total {self.tool_call_series_overflow}",
            "# TYPE errscope_commit_seconds summary",
            f"errscope_commit_seconds_sum {self.commit_seconds_sum:.6f}",
            f"errscope_commit_seconds_count {self.commit_count}",
            "# TYPE errscope_traceback_samples_kept_total counter",
            f"errscope_traceback_samples_kept_total {self.tracebacks_kept}",
        ]
        for name, value in extra.items():
            lines += [f"# TYPE {name} gauge", f"{name} {value}"]
        return "\n".join(lines) + "\n"


# ------------------------------------------------------------------ the sidecar


@dataclass(frozen=True, slots=True)
class IngestResult:
    """What an export request came to: accepted (with rejected spans) or refused."""

    accepted: bool
    rejected: int = 0
    reason: str = ""


class Sidecar:
    """The running sidecar: listeners, pipeline, writer, optional forwarder, metrics."""

    def __init__(self, config: ServeConfig) -> None:
        config.check()
        self.config = config
        # Before the store: a bad catalog file stops start-up with its one-line error.
        catalog = (
            load_catalog([Path(f) for f in config.catalog_files]) if config.catalog_files else None
        )
        exporter = make_exporter(config.forward) if config.forward else None  # may refuse it
        self.store = open_store(
            config.store, data_path=config.data_path, memory_limit=config.store_memory
        )
        self.sink = StoreSink(self.store)
        # Without a forwarder no passed-on span is needed: skip building and scrubbing it.
        self.pipeline = Pipeline(
            catalog=catalog, non_tool=config.non_tool, forward=config.forward is not None
        )
        self.metrics = Metrics()
        self.forwarder = Forwarder(exporter) if exporter is not None else None
        self.writer = Writer(
            self.sink,
            max_queue_bytes=max(config.max_inflight_bytes, config.max_body_bytes) * 2,
            max_delay_s=config.commit_delay_s,
            max_spans=config.commit_spans,
            on_commit=self._after_commit,
        )
        self._inflight = 0
        self._inflight_lock = threading.Lock()
        self._processing = threading.BoundedSemaphore(PROCESSING_SLOTS)
        self.draining = threading.Event()  # set by stop(): answers close their connections
        self._http: list[_Server] = []
        self._grpc: grpc.Server | None = None
        self._threads: list[threading.Thread] = []
        self.addresses: dict[str, str] = {}
        self.stopped = threading.Event()

    # ---------------------------------------------------------------- ingest

    def _admit(self, size: int) -> bool:
        with self._inflight_lock:
            if self._inflight and self._inflight + size > self.config.max_inflight_bytes:
                return False
            self._inflight += size
            return True

    def _release(self, size: int) -> None:
        with self._inflight_lock:
            self._inflight -= size

    def ingest(self, decode: Callable[[], Decoded]) -> IngestResult:
        """Decode and process one export request, then wait for its commit.

        Decoding and the pipeline run in one of `PROCESSING_SLOTS`: they hold the GIL, so
        more requests at once would not go faster (measured: slower, as two threads traded
        the GIL at every regex call), only hold more decoded spans in memory.
        The wait for the commit holds no slot, so commits still group many requests.
        `decode` may raise OtlpDecodeError or BodyTooLargeError; they pass through.
        """
        with self._processing:
            # Only the batch and a few counts leave `_process`: the decoded request (~2 MiB
            # per 512 spans) is not held through the wait for the commit, where 16 waiting
            # clients held 30 MiB of the peak RSS.
            done = self._process(decode)
        batch = done.batch
        rejected = done.undecodable + batch.rejected
        with self.metrics.lock:
            self.metrics.received += done.received
            if rejected:
                self.metrics.rejected["bad_ids"] += rejected
        ack = self.writer.submit(batch, done.forward if self.forwarder else [], done.size_bytes)
        if ack is None:
            self._count_refusal("overloaded")
            return IngestResult(accepted=False, reason="overloaded")
        if not ack.wait(self.config.ack_timeout_s):
            self._count_refusal("not_committed")
            return IngestResult(accepted=False, reason="not_committed")
        return IngestResult(accepted=True, rejected=rejected)

    def _process(self, decode: Callable[[], Decoded]) -> _ProcessedRequest:
        """Decode one request and run its spans through the pipeline."""
        decoded = decode()
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

    def _count_refusal(self, reason: str) -> None:
        with self.metrics.lock:
            self.metrics.refused[reason] += 1
        log.warning("export refused", extra={"code": "unavailable", "reason": reason})

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
                self.metrics.count_tool_call(call.service, call.tool, call.code)
        if self.forwarder is not None and forward:
            self.forwarder.put(forward)

    # ---------------------------------------------------------------- auth

    def authorised(self, header: str | None) -> bool:
        """True when no token is configured or the bearer token matches (constant time)."""
        token = self.config.token
        if not token:
            return True
        # The scheme is case-insensitive (RFC 9110 §11.1): SDKs send `bearer` as well.
        scheme, _, credentials = (header or "").strip().partition(" ")
        if scheme.lower() != "bearer":
            return False
        return hmac.compare_digest(credentials.strip().encode(), token.encode())

    # ---------------------------------------------------------------- lifecycle

    def start(self) -> dict[str, str]:
        """Bind every listener and start serving; return the bound addresses."""
        if self.config.otlp_grpc:
            host, port = parse_address(self.config.otlp_grpc, "otlp-grpc")
            executor = _CountingExecutor(
                max_workers=GRPC_WORKERS, thread_name_prefix="errscope-grpc"
            )
            server = grpc.server(
                executor,
                options=[
                    ("grpc.max_receive_message_length", self.config.max_body_bytes),
                    ("grpc.max_send_message_length", 4 * 1024 * 1024),
                    # gRPC sets SO_REUSEPORT by default: a second sidecar on a taken port
                    # would start, and the kernel would split clients between two stores.
                    ("grpc.so_reuseport", 0),
                    # Each stream's receive window stays at HTTP/2's 64 KiB instead of growing
                    # with the measured bandwidth-delay product (to 4 MiB and more): the
                    # window is what the transport buffers for a call nobody reads yet, and
                    # 400 concurrent 4 MiB exports grew RSS by 470-565 MiB with it grown,
                    # 180-205 MiB without.  A call being read still gets a window for its
                    # whole message, so throughput was the same (6,432 vs 6,246 spans/s,
                    # bench/ingest.py --quick).
                    ("grpc.http2.bdp_probe", 0),
                ],
            )
            # Bytes in, bytes out: the body is admitted by its size before it is parsed, and
            # parsed by the same decoder as OTLP/HTTP, so garbage gets INVALID_ARGUMENT (a
            # generated servicer would parse first and answer INTERNAL).
            server.add_generic_rpc_handlers((_ExportRouter(_TraceService(self), executor),))
            _check_free(host, port, "otlp-grpc")
            try:
                bound = server.add_insecure_port(join_address(host, port))
            except RuntimeError:  # taken between the check and here
                bound = 0
            if bound == 0:
                raise ConfigError(ConfigErrorKind.BAD_VALUE, "cannot bind", field="otlp-grpc")
            server.start()
            self._grpc = server
            self.addresses["otlp_grpc"] = join_address(host, bound)
        for name, handler in (("otlp_http", _OtlpHandler), ("api", _ApiHandler)):
            value = getattr(self.config, name)
            if not value:
                continue
            host, port = parse_address(value, name.replace("_", "-"))
            try:
                httpd = _Server((host, port), handler, self)
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
        self.draining.set()
        for httpd in self._http:
            httpd.shutdown()
            httpd.start_drain()  # connections without a whole request close after a grace
        if self._grpc is not None:
            self._grpc.stop(grace=5).wait(6)
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
            "inflight_bytes": self._inflight,
        }

    def gauges(self) -> dict[str, float]:
        """Gauges for /metrics."""
        gauges: dict[str, float] = {
            "errscope_queue_bytes": float(self.writer.queued_bytes),
            "errscope_inflight_bytes": float(self._inflight),
            "errscope_healthy": 1.0 if self.writer.healthy else 0.0,
            "errscope_pipeline_failures": float(self.pipeline.failures),
            "errscope_traceback_samples_dropped": float(self.pipeline.sampler.dropped),
        }
        if self.forwarder is not None:
            gauges["errscope_forward_sent"] = float(self.forwarder.sent)
            gauges["errscope_forward_dropped"] = float(self.forwarder.dropped)
            gauges["errscope_forward_queued"] = float(self.forwarder.queued)
        return gauges


# ------------------------------------------------------------------ gRPC


def _retry_info_metadata() -> list[tuple[str, bytes]]:
    info = error_details_pb2.RetryInfo(retry_delay=Duration(seconds=RETRY_AFTER_S))
    status = status_pb2.Status(code=code_pb2.UNAVAILABLE, message="overloaded, retry shortly")
    status.details.add().Pack(info)
    return [
        ("google.rpc.retryinfo-bin", info.SerializeToString()),
        ("grpc-status-details-bin", status.SerializeToString()),
    ]


@dataclass(frozen=True, slots=True)
class _ProcessedRequest:
    """What one request leaves after the pipeline; its decoded spans are not kept."""

    batch: StoreBatch
    forward: list[SpanView]
    received: int  # spans in the request, with those the decoder rejected
    undecodable: int  # spans the decoder rejected (ids of the wrong length)
    size_bytes: int


class _TraceService:
    """OTLP/gRPC `TraceService.Export` on raw bytes (an ExportTraceServiceRequest)."""

    def __init__(self, sidecar: Sidecar) -> None:
        self.sidecar = sidecar

    def Export(self, body: bytes, context: grpc.ServicerContext) -> bytes:  # noqa: N802 - the OTLP method name
        """Admit by size, decode, store, answer after the commit (or with a retryable refusal)."""
        metadata = dict(context.invocation_metadata())
        if not self.sidecar.authorised(_str(metadata.get("authorization"))):
            context.abort(grpc.StatusCode.UNAUTHENTICATED, "missing or wrong bearer token")
        size = len(body)
        if not self.sidecar._admit(size):
            self.sidecar._count_refusal("overloaded")
            context.set_trailing_metadata(_retry_info_metadata())
            context.abort(grpc.StatusCode.UNAVAILABLE, "overloaded, retry shortly")
        try:
            try:
                result = self.sidecar.ingest(lambda: decode_protobuf(body))
            except OtlpDecodeError:
                context.abort(
                    grpc.StatusCode.INVALID_ARGUMENT, "not a readable OTLP export request"
                )
        finally:
            self.sidecar._release(size)
        if not result.accepted:
            context.set_trailing_metadata(_retry_info_metadata())
            context.abort(grpc.StatusCode.UNAVAILABLE, "not stored, retry shortly")
        message = "spans without valid trace or span ids" if result.rejected else ""
        return encode_response(result.rejected, message, as_json=False)


class _CountingExecutor(ThreadPoolExecutor):
    """A thread pool that knows how many submitted calls wait for a thread."""

    def __init__(self, max_workers: int, thread_name_prefix: str) -> None:
        super().__init__(max_workers=max_workers, thread_name_prefix=thread_name_prefix)
        self.waiting = 0
        self._waiting_lock = threading.Lock()

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        """Submit `fn`, counted as waiting until a thread starts it (or it is cancelled)."""
        with self._waiting_lock:
            self.waiting += 1
        started = threading.Event()

        def run() -> Any:
            started.set()
            self._done_waiting()
            return fn(*args, **kwargs)

        def cancelled(future: Future[Any]) -> None:
            if future.cancelled() and not started.is_set():
                self._done_waiting()

        future = super().submit(run)
        future.add_done_callback(cancelled)
        return future

    def _done_waiting(self) -> None:
        with self._waiting_lock:
            self.waiting -= 1


class _ExportRouter(grpc.GenericRpcHandler):  # type: ignore[misc]  # grpc is untyped
    """Routes `Export`, refusing a call before its message is read when the pool is full.

    gRPC reads a unary request on the pool thread that runs it, but the transport buffers
    each waiting call's message meanwhile: 400 concurrent 4 MiB exports waiting for 32
    threads took RSS from 157 to 967 MiB, before admission (inside `Export`) could refuse
    any; with this refusal the same burst grew RSS by 470-565 MiB, and by 180-205 MiB once
    each stream's receive window was kept at 64 KiB (`grpc.http2.bdp_probe` off, in
    `start`).  `service` runs on gRPC's own thread as each call arrives.  Past
    `GRPC_MAX_WAITING` waiting calls the answer is UNAVAILABLE with RetryInfo, from a
    handler that never reads the request, on a pool of its own so it is not queued behind
    the exports; gRPC's `maximum_concurrent_rpcs` would answer RESOURCE_EXHAUSTED without
    RetryInfo, which OTLP clients must not retry.
    """

    def __init__(self, service: _TraceService, executor: _CountingExecutor) -> None:
        self._executor = executor
        self._export = grpc.unary_unary_rpc_method_handler(service.Export)

        def refuse(requests: Iterator[bytes], context: grpc.ServicerContext) -> bytes:
            service.sidecar._count_refusal("overloaded")
            return _refuse_overloaded(requests, context)

        # gRPC runs a behaviour on the pool this (experimental) attribute names, if any.
        refuse.experimental_thread_pool = ThreadPoolExecutor(  # type: ignore[attr-defined]
            max_workers=1, thread_name_prefix="errscope-grpc-refuse"
        )
        self._refuse = grpc.stream_unary_rpc_method_handler(refuse)

    def service(
        self, handler_call_details: grpc.HandlerCallDetails
    ) -> grpc.RpcMethodHandler | None:
        """The Export handler, or the refusal when too many calls wait; None for others."""
        if handler_call_details.method != _EXPORT_METHOD:
            return None
        if self._executor.waiting >= GRPC_MAX_WAITING:
            return self._refuse
        return self._export


def _refuse_overloaded(_requests: Iterator[bytes], context: grpc.ServicerContext) -> bytes:
    """UNAVAILABLE + RetryInfo, without reading the request."""
    context.set_trailing_metadata(_retry_info_metadata())
    context.abort(grpc.StatusCode.UNAVAILABLE, "overloaded, retry shortly")
    return b""  # not reached: abort raises


def _str(value: object) -> str | None:
    return value if isinstance(value, str) else None


# ------------------------------------------------------------------ HTTP

# Body framing and deadlines.  A client that declares a body and sends it a byte at a
# time must not hold a thread, a connection or admission budget for longer than this.
BODY_DEADLINE_S: Final = 30.0
# From the end of one request (or the connection's start) to the end of the next one's
# headers; an idle keep-alive connection is closed sooner, after `_Handler.timeout`.
HEAD_DEADLINE_S: Final = 10.0
# On SIGTERM, how long a connection that has not yet sent a whole request may go on
# sending it before it is closed; requests already read are answered whatever this is.
DRAIN_GRACE_S: Final = 2.0
# A burst of 300 exporters connecting at once overflowed the default backlog of 5 (96
# resets); the kernel caps this at net.core.somaxconn.
LISTEN_BACKLOG: Final = 1024
# Connections one listener serves at once, a thread each; one more is answered 503 +
# Retry-After and closed at once, so a flood of idle or slow clients cannot exhaust
# threads or memory (each is also bounded in time by the deadlines above).
MAX_HTTP_CONNECTIONS: Final = 512
_TOO_MANY_CONNECTIONS_BODY: Final = (
    b'{"error":"overloaded","message":"too many connections, retry shortly"}'
)
_TOO_MANY_CONNECTIONS: Final = (
    b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\n"
    b"Retry-After: %d\r\nConnection: close\r\nContent-Length: %d\r\n\r\n"
    % (RETRY_AFTER_S, len(_TOO_MANY_CONNECTIONS_BODY))
) + _TOO_MANY_CONNECTIONS_BODY
_REAP_INTERVAL_S: Final = 0.5
_READ_CHUNK_BYTES: Final = 256 * 1024
_MAX_CHUNK_LINE_BYTES: Final = 4096  # a chunk-size line or a trailer line
_MAX_TRAILER_LINES: Final = 64
_CHUNKED: Final = -1  # `_Handler._framing`: the body is chunked (RFC 9112 §7.1)
_MAX_DEPLOY_BYTES: Final = 64 * 1024


class _Phase(enum.Enum):
    """Where a connection is in its current request (see `_Server`)."""

    HEAD = "head"  # waiting for, or reading, a request line and headers
    BODY = "body"  # headers read, body not yet read in full
    BUSY = "busy"  # the whole request read: it is being answered
    CLOSED = "closed"  # closed by the reaper; its handler stops at its next step


class _FramingError(Exception):
    """A request whose body cannot be read as framed: answered with `status`, then closed."""

    def __init__(self, status: HTTPStatus, kind: str, message: str) -> None:
        super().__init__(message)
        self.status, self.kind, self.message = status, kind, message


class _ClientGone(Exception):  # noqa: N818 - not an error of ours: the peer went away
    """The client closed its connection before its request was whole."""


class _Server(ThreadingHTTPServer):
    """A thread per connection, with deadlines a slow client cannot stretch.

    Every connection's phase is tracked; a reaper thread closes (shutdown, which wakes a
    handler blocked in recv) those whose headers took longer than `HEAD_DEADLINE_S` and,
    once draining, those that have not sent a whole request `DRAIN_GRACE_S` after it
    began.  `server_close` then joins only handlers that are answering a request.
    """

    daemon_threads = False
    block_on_close = True
    allow_reuse_address = True
    request_queue_size = LISTEN_BACKLOG

    def __init__(
        self, address: tuple[str, int], handler: type[BaseHTTPRequestHandler], sidecar: Sidecar
    ) -> None:
        self.sidecar = sidecar
        if ":" in address[0]:
            self.address_family = socket.AF_INET6
        self._phases: dict[socket.socket, tuple[_Phase, float]] = {}
        self._phases_lock = threading.Lock()
        self._drain_started: float | None = None
        self._reaper_stop = threading.Event()
        super().__init__(address, handler)
        self._reaper = threading.Thread(target=self._reap, name="errscope-http-reaper", daemon=True)
        self._reaper.start()

    def enter(self, conn: socket.socket, phase: _Phase) -> bool:
        """Record that `conn` entered `phase`; False if the reaper has closed it."""
        with self._phases_lock:
            current = self._phases.get(conn)
            if current is not None and current[0] is _Phase.CLOSED:
                return False
            self._phases[conn] = (phase, time.monotonic())
            return True

    def process_request(self, request: Any, client_address: Any) -> None:
        """Serve a new connection on a thread of its own, or refuse it when at the cap."""
        with self._phases_lock:
            full = len(self._phases) >= MAX_HTTP_CONNECTIONS
            if not full:
                self._phases[request] = (_Phase.HEAD, time.monotonic())
        if not full:
            super().process_request(request, client_address)
            return
        with contextlib.suppress(OSError):
            request.setblocking(False)  # a fresh socket's send buffer takes this whole
            request.send(_TOO_MANY_CONNECTIONS)
        self.shutdown_request(request)
        with self.sidecar.metrics.lock:
            self.sidecar.metrics.refused["too_many_connections"] += 1

    def start_drain(self) -> None:
        """Begin the drain's grace period for connections without a whole request."""
        self._drain_started = time.monotonic()

    def shutdown_request(self, request: Any) -> None:
        """Forget the connection, then close it."""
        with self._phases_lock:
            self._phases.pop(request, None)
        super().shutdown_request(request)

    def server_close(self) -> None:
        """Close the listener, join the handlers still answering, stop the reaper."""
        super().server_close()
        self._reaper_stop.set()

    def handle_error(self, request: Any, client_address: Any) -> None:
        """One log line with the error class; never socketserver's traceback on stderr."""
        exc = sys.exc_info()[1]
        if isinstance(exc, (ConnectionError, TimeoutError)):
            log.info(
                "client connection lost",
                extra={"code": "client_disconnected", "error_class": type(exc).__name__},
            )
            return
        log.error(
            "HTTP handler failed", extra={"code": "internal", "error_class": type(exc).__name__}
        )

    def _reap(self) -> None:
        while not self._reaper_stop.wait(_REAP_INTERVAL_S):
            now = time.monotonic()
            drain_over = (
                self._drain_started is not None and now - self._drain_started > DRAIN_GRACE_S
            )
            overdue: list[socket.socket] = []
            with self._phases_lock:
                for conn, (phase, since) in self._phases.items():
                    if (phase is _Phase.HEAD and now - since > HEAD_DEADLINE_S) or (
                        drain_over and phase in (_Phase.HEAD, _Phase.BODY)
                    ):
                        overdue.append(conn)
                for conn in overdue:
                    self._phases[conn] = (_Phase.CLOSED, now)
            for conn in overdue:
                with contextlib.suppress(OSError):
                    conn.shutdown(socket.SHUT_RDWR)


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"
    server_version = "errscope"
    sys_version = ""
    # An idle keep-alive connection is closed after this long.  Without it a client that
    # holds its connection open (every OTLP exporter does) would block shutdown forever.
    timeout = 5
    # Path -> the methods it answers; another method gets 405 with `Allow`.
    allowed: Mapping[str, tuple[str, ...]] = {}
    # The client sent `Expect: 100-continue` and has not been told to send its body yet.
    _continue_pending: bool = False
    _answered: bool = False  # a response to the current request has been started
    _drained: bool = False  # the current request's body was read and dropped

    def log_message(self, format: str, *args: Any) -> None:
        """Access logs are off: paths may carry query values."""

    def handle_one_request(self) -> None:
        """One request, its head and body timed by the server's reaper.

        A failure of ours (a bug) still gets an answer, 500 with a code, and a close: a
        client left without one retries into the same failure, and a proxy in front of the
        sidecar reads the dropped connection as the network's fault.
        """
        if not self.server.enter(self.connection, _Phase.HEAD):
            self.close_connection = True
            return
        self._answered = False
        try:
            super().handle_one_request()
        except (ConnectionError, TimeoutError):
            raise
        except Exception as exc:
            if self._answered:
                raise
            self.close_connection = True
            with contextlib.suppress(OSError):
                self._error(
                    HTTPStatus.INTERNAL_SERVER_ERROR,
                    "internal_error",
                    "the sidecar failed on this request; its log has the code",
                )
            log.error(  # noqa: TRY400 - the class only: the exception text may carry payload
                "HTTP handler failed",
                extra={"code": "internal", "error_class": type(exc).__name__},
            )

    def parse_request(self) -> bool:
        """Parse the head; a request without a body is whole once its head is read."""
        self._continue_pending = False
        self._drained = False
        if not super().parse_request():
            return False
        if not self.server.enter(self.connection, _Phase.BODY if self._has_body() else _Phase.BUSY):
            self.close_connection = True
            return False
        return True

    def handle_expect_100(self) -> bool:
        """`Expect: 100-continue`: answer "100 Continue" only once the body is wanted.

        The standard library sends it as soon as the head is parsed, before the token and
        the content type are checked, so a client refused anyway sent its body for nothing.
        """
        self._continue_pending = self._has_body()
        return True

    def _has_body(self) -> bool:
        """Whether the request's head declares a body (of any length or framing)."""
        return "Content-Length" in self.headers or "Transfer-Encoding" in self.headers

    def _media_type(self) -> str:
        """The request's Content-Type without parameters, lower-case; "" when none."""
        headers = getattr(self, "headers", None)  # none yet if the head never parsed
        text = (headers.get("Content-Type") if headers is not None else None) or ""
        return text.split(";")[0].strip().lower()

    def _send(
        self, status: int, body: bytes, content_type: str, headers: Mapping[str, str] | None = None
    ) -> None:
        self._answered = True
        if self.server.sidecar.draining.is_set() or self._continue_pending:
            # Draining: end every kept-alive connection after this answer (see Sidecar.stop).
            # A body never asked for may still come, and would be read as the next request.
            headers = {**(headers or {}), "Connection": "close"}
            self.close_connection = True
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _error(
        self,
        status: HTTPStatus,
        kind: str,
        message: str,
        headers: Mapping[str, str] | None = None,
        **extra: Any,
    ) -> None:
        body = orjson.dumps({"error": kind, "message": message, **extra})
        self._send_error(status, body, _JSON, headers)

    def _send_error(
        self,
        status: HTTPStatus,
        body: bytes,
        content_type: str,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        """Send an error answer: `Retry-After` on 503, and a close where one is due."""
        headers = dict(headers or {})
        if status == HTTPStatus.SERVICE_UNAVAILABLE:
            headers["Retry-After"] = str(RETRY_AFTER_S)
        if self.close_connection or status in (
            HTTPStatus.REQUEST_ENTITY_TOO_LARGE,
            HTTPStatus.UNAUTHORIZED,
        ):
            headers["Connection"] = "close"
            self.close_connection = True
        self._send(status, body, content_type, headers)

    def _refuse_framing(self, exc: _FramingError) -> None:
        """Answer a request whose body cannot be trusted, and close: where it ends is unknown."""
        self.close_connection = True
        self._error(exc.status, exc.kind, exc.message)

    def _authorised(self) -> bool:
        if self.server.sidecar.authorised(self.headers.get("Authorization")):
            return True
        self._error(HTTPStatus.UNAUTHORIZED, "unauthorized", "missing or wrong bearer token")
        return False

    def _framing(self) -> int | None:
        """The body's length, `_CHUNKED`, or None when the request declares no body.

        RFC 9112 §6: Transfer-Encoding with Content-Length, a transfer coding other than
        chunked, and a Content-Length that is not one decimal number (duplicates that
        disagree, `-5`, `1e3`, `²`, which `str.isdigit` accepts) raise `_FramingError`.
        """
        codings = self.headers.get_all("Transfer-Encoding") or []
        lengths = self.headers.get_all("Content-Length") or []
        if codings:
            if lengths:
                raise _FramingError(
                    HTTPStatus.BAD_REQUEST,
                    "bad_framing",
                    "Transfer-Encoding and Content-Length together",
                )
            names = [c.strip().lower() for text in codings for c in text.split(",")]
            if names != ["chunked"]:
                raise _FramingError(
                    HTTPStatus.NOT_IMPLEMENTED,
                    "unsupported_transfer_encoding",
                    "only the chunked transfer coding is supported",
                )
            return _CHUNKED
        if not lengths:
            return None
        values = {v.strip() for text in lengths for v in text.split(",")}
        if len(values) != 1:
            raise _FramingError(
                HTTPStatus.BAD_REQUEST, "bad_framing", "conflicting Content-Length values"
            )
        text = values.pop()
        if not (text.isascii() and text.isdigit()):
            raise _FramingError(
                HTTPStatus.BAD_REQUEST, "bad_framing", "Content-Length must be a decimal number"
            )
        return int(text)

    def _read_or_refuse(
        self, framing: int, limit: int, reserve: Callable[[int], bool]
    ) -> bytes | None:
        """The body; None once a bad framing was answered or the client went away."""
        if self._continue_pending:
            self._continue_pending = False
            self.send_response_only(HTTPStatus.CONTINUE)
            self.end_headers()
        try:
            return self._read_body(framing, limit, reserve)
        except _FramingError as exc:
            self.server.sidecar._count_refusal(exc.kind)  # overloaded, too_large, timeout...
            self._refuse_framing(exc)
        except _ClientGone:
            self.close_connection = True
        return None

    def _read_body(self, framing: int, limit: int, reserve: Callable[[int], bool]) -> bytes:
        """Read the body (see `_BodyReader`); the request is then whole, and being answered."""
        body = _BodyReader(cast(io.BufferedReader, self.rfile), limit, reserve).read(framing)
        if not self.server.enter(self.connection, _Phase.BUSY):
            raise _ClientGone
        return body

    def _drain(self) -> None:
        """Read and drop a body we will not use (a refused request must not cost its size in
        memory, nor budget); one we cannot frame or that is over the limit closes the
        connection instead, as does one whose client still waits for "100 Continue" (it may
        never send the body, or send it after its own timeout).  Once per request: a second
        call would read the next request's bytes as this one's body."""
        if self._drained:
            return
        self._drained = True
        if self._continue_pending:
            self.close_connection = True
            return
        try:
            framing = self._framing()
        except _FramingError:
            self.close_connection = True
            return
        if framing is None:
            return
        if framing > self.server.sidecar.config.max_body_bytes:
            self.close_connection = True
            return
        try:
            self._read_body(framing, self.server.sidecar.config.max_body_bytes, _discard)
        except (_FramingError, _ClientGone):
            self.close_connection = True

    def _not_allowed(self) -> None:
        """405 with `Allow` for a known path, 404 for an unknown one."""
        path = urlsplit(self.path).path
        allowed = self.allowed.get(path) or next(
            (m for p, m in self.allowed.items() if p.endswith("/") and path.startswith(p)), None
        )
        self._drain()
        if allowed is None:
            self._error(HTTPStatus.NOT_FOUND, "not_found", "unknown path")
            return
        self._error(
            HTTPStatus.METHOD_NOT_ALLOWED,
            "method_not_allowed",
            f"{self.command} is not served on this path",
            headers={"Allow": ", ".join(allowed)},
        )

    def do_PUT(self) -> None:
        """405 or 404 (`_not_allowed`)."""
        self._not_allowed()

    def do_DELETE(self) -> None:
        """405 or 404 (`_not_allowed`)."""
        self._not_allowed()

    def do_PATCH(self) -> None:
        """405 or 404 (`_not_allowed`)."""
        self._not_allowed()

    def do_OPTIONS(self) -> None:
        """405 or 404 (`_not_allowed`)."""
        self._not_allowed()


class _BodyReader:
    """Reads one request body framed by length or chunks, within a size limit and a deadline.

    `reserve` is called with each piece's size as it arrives (admission counts bytes
    received, not bytes promised); a False from it ends the read with 503.  Every read is
    one recv at most, so a client trickling bytes meets `BODY_DEADLINE_S` (408).  Raises
    `_FramingError` (400 bad chunks, 408, 413 over the limit, 503) or `_ClientGone`.
    """

    def __init__(
        self, rfile: io.BufferedReader, limit: int, reserve: Callable[[int], bool]
    ) -> None:
        self.rfile, self.limit, self.reserve = rfile, limit, reserve
        self.deadline = time.monotonic() + BODY_DEADLINE_S
        self.parts: list[bytes] = []
        self.total = 0

    def read(self, framing: int) -> bytes:
        """The whole body: `framing` bytes, or chunks (RFC 9112 §7.1) when `_CHUNKED`."""
        if framing != _CHUNKED:
            self._take(framing)
            return b"".join(self.parts)
        while size := self._chunk_size():
            self._take(size)
            if self._line():
                raise _bad_chunk()  # chunk data must end with CRLF
        for _ in range(_MAX_TRAILER_LINES):  # trailer fields are read and ignored
            if not self._line():
                return b"".join(self.parts)
        raise _bad_chunk()

    def _chunk_size(self) -> int:
        text = self._line().split(b";", 1)[0].strip()  # chunk extensions are ignored
        if not 0 < len(text) <= 16 or text.strip(b"0123456789abcdefABCDEF"):
            raise _bad_chunk()
        return int(text, 16)

    def _check_deadline(self) -> None:
        if time.monotonic() > self.deadline:
            raise _FramingError(
                HTTPStatus.REQUEST_TIMEOUT, "timeout", "the body took too long to send"
            )

    def _take(self, size: int) -> None:
        while size > 0:
            self._check_deadline()
            piece = self.rfile.read1(min(size, _READ_CHUNK_BYTES))
            if not piece:
                raise _ClientGone
            self.total += len(piece)
            if self.total > self.limit:
                raise _FramingError(
                    HTTPStatus.REQUEST_ENTITY_TOO_LARGE, "too_large", "body over the limit"
                )
            if not self.reserve(len(piece)):
                raise _FramingError(
                    HTTPStatus.SERVICE_UNAVAILABLE, "overloaded", "overloaded, retry shortly"
                )
            self.parts.append(piece)
            size -= len(piece)

    def _line(self) -> bytes:
        """One line without its CRLF, read a recv at a time (`readline` would wait for it)."""
        text = b""
        while True:
            self._check_deadline()
            buffered = self.rfile.peek(1)
            if not buffered:
                raise _ClientGone
            end = buffered.find(b"\n")
            text += self.rfile.read(end + 1 if end >= 0 else len(buffered))
            if len(text) > _MAX_CHUNK_LINE_BYTES:
                raise _bad_chunk()
            if end >= 0:
                return text.rstrip(b"\r\n")


def _bad_chunk() -> _FramingError:
    return _FramingError(HTTPStatus.BAD_REQUEST, "bad_framing", "malformed chunked body")


def _discard(_size: int) -> bool:
    return True


# The gRPC code an OTLP/HTTP error's Status carries for each HTTP status errscope sends.
_STATUS_CODES_FOR_HTTP: Final = {
    HTTPStatus.BAD_REQUEST: code_pb2.INVALID_ARGUMENT,
    HTTPStatus.UNAUTHORIZED: code_pb2.UNAUTHENTICATED,
    HTTPStatus.NOT_FOUND: code_pb2.NOT_FOUND,
    HTTPStatus.METHOD_NOT_ALLOWED: code_pb2.UNIMPLEMENTED,
    HTTPStatus.REQUEST_TIMEOUT: code_pb2.DEADLINE_EXCEEDED,
    HTTPStatus.LENGTH_REQUIRED: code_pb2.INVALID_ARGUMENT,
    HTTPStatus.REQUEST_ENTITY_TOO_LARGE: code_pb2.INVALID_ARGUMENT,
    HTTPStatus.UNSUPPORTED_MEDIA_TYPE: code_pb2.INVALID_ARGUMENT,
    HTTPStatus.NOT_IMPLEMENTED: code_pb2.UNIMPLEMENTED,
    HTTPStatus.SERVICE_UNAVAILABLE: code_pb2.UNAVAILABLE,
}


class _OtlpHandler(_Handler):
    allowed: Mapping[str, tuple[str, ...]] = {"/v1/traces": ("POST",)}

    def _error(
        self,
        status: HTTPStatus,
        kind: str,
        message: str,
        headers: Mapping[str, str] | None = None,
        **extra: Any,
    ) -> None:
        """An OTLP/HTTP error: a `google.rpc.Status` in the request's encoding (OTLP spec,
        "Failures"), protobuf for a protobuf request and JSON otherwise; its message starts
        with errscope's code (`too_large: body over the limit`)."""
        del extra  # only the API's errors carry fields of their own
        code = _STATUS_CODES_FOR_HTTP.get(status, code_pb2.INTERNAL)
        text = f"{kind}: {message}"
        content_type = self._media_type()
        if content_type == _PROTOBUF:
            body = status_pb2.Status(code=code, message=text).SerializeToString()
        else:
            body, content_type = orjson.dumps({"code": code, "message": text}), _JSON
        self._send_error(status, body, content_type, headers)

    def do_GET(self) -> None:
        """405 or 404 (`_not_allowed`): exports are POSTed."""
        self._not_allowed()

    def do_HEAD(self) -> None:
        """405 or 404 (`_not_allowed`): exports are POSTed."""
        self._not_allowed()

    def do_POST(self) -> None:
        """OTLP/HTTP export: protobuf or JSON, maybe gzip, maybe chunked; answer after commit."""
        sidecar = self.server.sidecar
        if urlsplit(self.path).path != "/v1/traces":
            self._not_allowed()
            return
        if not self._authorised():
            return
        if sidecar.draining.is_set():
            self._drain()
            sidecar._count_refusal("draining")
            self._error(HTTPStatus.SERVICE_UNAVAILABLE, "unavailable", "the sidecar is stopping")
            return
        content_type = self._media_type()
        if content_type not in (_PROTOBUF, _JSON):
            self._drain()
            self._error(
                HTTPStatus.UNSUPPORTED_MEDIA_TYPE,
                "unsupported_media_type",
                "send application/x-protobuf or application/json",
            )
            return
        try:
            framing = self._framing()
        except _FramingError as exc:
            self._refuse_framing(exc)
            return
        if framing is None:
            self.close_connection = True
            self._error(
                HTTPStatus.LENGTH_REQUIRED,
                "length_required",
                "send Content-Length or Transfer-Encoding: chunked",
            )
            return
        if framing > sidecar.config.max_body_bytes:
            self._error(HTTPStatus.REQUEST_ENTITY_TOO_LARGE, "too_large", "body over the limit")
            return
        held = 0

        def reserve(size: int) -> bool:
            nonlocal held
            if not sidecar._admit(size):
                return False
            held += size
            return True

        try:
            raw = self._read_or_refuse(framing, sidecar.config.max_body_bytes, reserve)
            if raw is not None:
                self._export(raw, content_type)
        finally:
            sidecar._release(held)

    def _export(self, raw: bytes, content_type: str) -> None:
        sidecar = self.server.sidecar
        encoding = self.headers.get("Content-Encoding") or ""

        def decode() -> Decoded:
            body = read_body(raw, encoding, sidecar.config.max_body_bytes)
            return decode_json(body) if content_type == _JSON else decode_protobuf(body)

        try:
            result = sidecar.ingest(decode)
        except BodyTooLargeError:
            self._error(
                HTTPStatus.REQUEST_ENTITY_TOO_LARGE,
                "too_large",
                "body over the limit after decompression",
            )
            return
        except UnsupportedEncodingError:
            self._error(
                HTTPStatus.UNSUPPORTED_MEDIA_TYPE,
                "unsupported_encoding",
                "send the body uncompressed, gzip or deflate",
                headers={"Accept-Encoding": "gzip, deflate"},  # RFC 9110 §12.5.3
            )
            return
        except OtlpDecodeError:
            self._error(HTTPStatus.BAD_REQUEST, "bad_request", "not a readable OTLP export request")
            return
        if not result.accepted:
            self._error(HTTPStatus.SERVICE_UNAVAILABLE, result.reason, "not stored, retry shortly")
            return
        message = "spans without valid trace or span ids" if result.rejected else ""
        as_json = content_type == _JSON
        self._send(
            HTTPStatus.OK, encode_response(result.rejected, message, as_json=as_json), content_type
        )


class _ApiHandler(_Handler):
    allowed: Mapping[str, tuple[str, ...]] = {
        "/healthz": ("GET", "HEAD"),
        "/metrics": ("GET", "HEAD"),
        "/v1/queries": ("GET", "HEAD"),
        "/v1/query/": ("GET", "HEAD"),
        "/v1/deploys": ("POST",),
    }

    def do_HEAD(self) -> None:
        """As GET, without the body (`_send` leaves it out)."""
        self.do_GET()

    def do_GET(self) -> None:
        """/healthz, /metrics, /v1/queries, /v1/query/{name}."""
        sidecar = self.server.sidecar
        parts = urlsplit(self.path)
        # Not read, a body would be taken for the next request on this connection: a proxy
        # reusing it would hand one client's answer to another.
        self._drain()
        if parts.path == "/healthz":
            health = sidecar.health()
            status = HTTPStatus.OK if health["status"] == "ok" else HTTPStatus.SERVICE_UNAVAILABLE
            self._send(status, orjson.dumps(health), _JSON)
            return
        if not self._authorised():
            return
        if parts.path == "/metrics":
            with sidecar.metrics.lock:
                text = sidecar.metrics.render(sidecar.gauges())
            self._send(HTTPStatus.OK, text.encode(), "text/plain; version=0.0.4")
            return
        if parts.path == "/v1/queries":
            from errscope.queries.runner import default_queries  # noqa: PLC0415

            listing = [
                {
                    "name": q.name,
                    "returns": q.returns,
                    "params": [
                        {
                            "name": p.name,
                            "type": str(p.type),
                            "required": p.required,
                            "default": p.shown_default,
                        }
                        for p in q.params
                    ],
                }
                for q in default_queries().values()
            ]
            self._send(HTTPStatus.OK, orjson.dumps(listing), _JSON)
            return
        if parts.path.startswith("/v1/query/"):
            self._query(unquote(parts.path.removeprefix("/v1/query/")), parts.query)
            return
        self._not_allowed()

    def _query(self, name: str, query_string: str) -> None:
        pairs = parse_qsl(query_string, keep_blank_values=True)
        params = dict(pairs)
        if len(params) < len(pairs):
            # `since=1h&since=2h`: which one was meant is unknown, and a proxy may keep the
            # other; refused, as an unknown parameter is.
            twice = sorted(k for k, n in Counter(k for k, _ in pairs).items() if n > 1)
            self._error(
                HTTPStatus.BAD_REQUEST,
                "bad_param_value",
                f"given more than once: {', '.join(twice)}",
            )
            return
        try:
            table = run_query(self.server.sidecar.store.cursor(), name, params)
        except QueryError as exc:
            status = (
                HTTPStatus.NOT_FOUND
                if exc.kind is QueryErrorKind.UNKNOWN_QUERY
                else HTTPStatus.BAD_REQUEST
            )
            self._send(status, orjson.dumps(exc.as_dict()), _JSON)
            return
        except ErrscopeError as exc:
            self._send(HTTPStatus.SERVICE_UNAVAILABLE, orjson.dumps(exc.as_dict()), _JSON)
            return
        vary = {"Vary": "Accept"}
        answer = negotiate(self.headers.get_all("Accept") or [], (_JSON, ARROW_STREAM))
        if answer is None:
            self._error(
                HTTPStatus.NOT_ACCEPTABLE,
                "not_acceptable",
                f"this answers {_JSON} or {ARROW_STREAM}",
                headers=vary,
            )
            return
        if answer == ARROW_STREAM:
            sink = pa.BufferOutputStream()
            with pyarrow.ipc.new_stream(sink, table.schema) as writer:
                writer.write_table(table)
            self._send(HTTPStatus.OK, sink.getvalue().to_pybytes(), ARROW_STREAM, vary)
            return
        body = orjson.dumps(table.to_pylist(), default=json_value, option=orjson.OPT_NAIVE_UTC)
        self._send(HTTPStatus.OK, body, _JSON, vary)

    def do_POST(self) -> None:
        """POST /v1/deploys: mark a deploy (service, version, environment, optional ts)."""
        if urlsplit(self.path).path != "/v1/deploys":
            self._not_allowed()
            return
        if not self._authorised():
            return
        content_type = self._media_type()
        if content_type != _JSON:
            # Only JSON: a web page can POST text/plain to loopback without asking, and
            # application/json makes the browser ask first (CORS), which is never granted.
            self._drain()
            self._error(
                HTTPStatus.UNSUPPORTED_MEDIA_TYPE,
                "unsupported_media_type",
                "send application/json",
            )
            return
        try:
            framing = self._framing()
        except _FramingError as exc:
            self._refuse_framing(exc)
            return
        if framing is not None and framing > _MAX_DEPLOY_BYTES:
            self._error(HTTPStatus.REQUEST_ENTITY_TOO_LARGE, "too_large", "deploy marks are small")
            return
        raw = b"" if framing is None else self._read_or_refuse(framing, _MAX_DEPLOY_BYTES, _discard)
        if raw is None:
            return
        try:
            deploy = _deploy_from(
                json.loads(raw or b"{}"),
                source="api",
                scrubber=self.server.sidecar.pipeline.scrubber,
            )
        except (ValueError, TypeError) as exc:
            self._error(
                HTTPStatus.BAD_REQUEST,
                "bad_request",
                str(exc) if isinstance(exc, _DeployError) else "body must be JSON",
            )
            return
        except ErrscopeError as exc:  # a label refused by validation: the client's to fix
            self._send(HTTPStatus.BAD_REQUEST, orjson.dumps(exc.as_dict()), _JSON)
            return
        try:
            self.server.sidecar.store.add_deploys([deploy])
        except ErrscopeError as exc:  # the store failed (a full disk): ours, and retryable
            log.warning(
                "deploy mark not stored",
                extra={"code": str(exc.kind), "error_class": type(exc).__name__},
            )
            self._send(
                HTTPStatus.SERVICE_UNAVAILABLE,
                orjson.dumps(exc.as_dict()),
                _JSON,
                {"Retry-After": str(RETRY_AFTER_S)},
            )
            return
        self._send(
            HTTPStatus.CREATED,
            orjson.dumps(
                {
                    "service": deploy.service,
                    "version": deploy.version,
                    "environment": deploy.environment,
                    "ts": deploy.ts.isoformat(),
                }
            ),
            _JSON,
        )


def negotiate(accept: Sequence[str], offered: Sequence[str]) -> str | None:
    """The media type of `offered` that `Accept` prefers (RFC 9110 §12.5.1); None if none.

    q-values, `type/*` and `*/*` count, a more specific range wins over a wider one, and
    on a tie the first offered wins; no header means anything, so the first.
    """
    ranges: list[tuple[str, str, float]] = []
    for header in accept:
        for item in header.split(","):
            media, *params = (part.strip() for part in item.split(";"))
            if not media:
                continue
            kind, _, sub = media.lower().partition("/")
            q = 1.0
            for param in params:
                key, _, value = param.partition("=")
                if key.strip().lower() == "q":
                    try:
                        q = min(max(float(value), 0.0), 1.0)
                    except ValueError:
                        q = 0.0
            ranges.append((kind, sub or "*", q))
    if not ranges:
        return offered[0] if offered else None
    scored: list[tuple[float, int, str]] = []
    for position, media in enumerate(offered):
        kind, _, sub = media.lower().partition("/")
        matches = [
            (specificity, q)
            for r_kind, r_sub, q in ranges
            if (specificity := _specificity(kind, sub, r_kind, r_sub)) >= 0
        ]
        if matches:
            q = max(matches)[1]  # the most specific range that matches decides
            if q > 0:
                scored.append((q, -position, media))
    return max(scored)[2] if scored else None


def _specificity(kind: str, sub: str, r_kind: str, r_sub: str) -> int:
    """2 for an exact range, 1 for `type/*`, 0 for `*/*`, -1 when it does not match."""
    if r_kind == "*" and r_sub == "*":
        return 0
    if r_kind != kind:
        return -1
    if r_sub == "*":
        return 1
    return 2 if r_sub == sub else -1


class _DeployError(ValueError):
    """A deploy mark is missing a field or has a bad one (the message names the field)."""


# A deploy marked "now" by a machine whose clock runs a little ahead is still accepted.
_DEPLOY_CLOCK_SKEW: Final = timedelta(minutes=5)


def _required_text(data: dict[str, Any], name: str) -> str:
    value = data.get(name)
    if value is None or value == "":
        raise _DeployError(f"{name} is required")
    if not isinstance(value, str):
        raise _DeployError(f"{name} must be text")
    return value


def refuse_secret_labels(deploy: Deploy, scrubber: Scrubber) -> None:
    """Raise `RecordError` naming the first label of a deploy mark a scrub rule matches.

    The span path keeps no such label (`Pipeline._label`); a mark is refused whole instead,
    since a deploy without its service or version means nothing.  The error never holds
    the value.
    """
    for name in ("service", "version", "environment"):
        value = getattr(deploy, name)
        if value is not None and scrubber.contains_secret(value):
            raise RecordError(
                RecordErrorKind.BAD_VALUE,
                "looks like a secret; not stored",
                entry="deploys",
                field=name,
                hint="pass a plain label, without credentials, tokens or keys",
            )


def _deploy_from(data: Any, *, source: str, scrubber: Scrubber | None = None) -> Deploy:
    if not isinstance(data, dict):
        raise _DeployError("body must be a JSON object")
    service, version = _required_text(data, "service"), _required_text(data, "version")
    environment = data.get("environment")
    if environment is not None and not isinstance(environment, str):
        raise _DeployError("environment must be text")
    ts_raw = data.get("ts")
    if ts_raw is not None and not isinstance(ts_raw, str):
        raise _DeployError("ts must be text: ISO 8601 or a duration ago")
    now = datetime.now(UTC)
    try:
        ts = parse_time(ts_raw, now=now) if ts_raw else now
    except ValueError as exc:
        raise _DeployError(f"ts: {exc}") from None
    if ts > now + _DEPLOY_CLOCK_SKEW:
        raise _DeployError("ts is in the future")
    marked_by = data.get("source", source)
    if marked_by not in ("api", "cli"):
        raise _DeployError("source must be api or cli")
    deploy = Deploy(
        service=service, version=version, environment=environment or None, ts=ts, source=marked_by
    )
    deploy.validate()
    refuse_secret_labels(deploy, scrubber or default_scrubber())
    return deploy


# ------------------------------------------------------------------ logging and main loop


class JsonLogFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, message and whitelisted fields only."""

    def format(self, record: logging.LogRecord) -> str:
        """Render a record without its exception text (which may carry payload)."""
        entry: dict[str, Any] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        for key in _LOG_FIELDS:
            if key in record.__dict__:
                entry[key] = record.__dict__[key]
        return orjson.dumps(entry, default=str).decode()


class TextLogFormatter(logging.Formatter):
    """`time level logger: message key=value ...`, whitelisted fields only, no exception text."""

    def format(self, record: logging.LogRecord) -> str:
        """Render a record without its exception text."""
        fields = " ".join(f"{k}={record.__dict__[k]}" for k in _LOG_FIELDS if k in record.__dict__)
        stamp = datetime.fromtimestamp(record.created, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        head = f"{stamp} {record.levelname.lower()} {record.name}: {record.getMessage()}"
        return f"{head} {fields}".rstrip()


# `scheme://user:password@` and a bare `user:password@host` (how gRPC names a target).
# Greedy to the last "@" of the word: a password may hold "@" and "/" itself.
_USERINFO_RE: Final = re.compile(r"((?:[a-zA-Z][a-zA-Z0-9+.-]*://)?)[^\s/@:]+:\S*@")
_LIBRARY_MESSAGE_CHARS: Final = 300


class _LibraryLogFilter(logging.Filter):
    """A library's message (the OTLP exporters', gRPC's) as one short line with no secret.

    Their text is not ours: an exporter names its target, userinfo included, and quotes its
    upstream's answers.  Userinfo and anything the secret rules find are masked, the line
    is cut to `_LIBRARY_MESSAGE_CHARS`, and the exception and stack are dropped.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        """Rewrite a non-errscope record in place; always keep it."""
        if record.name == "errscope" or record.name.startswith("errscope."):
            return True
        try:
            text = record.getMessage()
        except Exception:  # noqa: BLE001 - a library's bad format string: keep its name only
            text = "unformattable message"
        text = _USERINFO_RE.sub(r"\1***@", " ".join(text.split()))
        text = default_scrubber().scrub_secrets(text).text[:_LIBRARY_MESSAGE_CHARS]
        record.msg, record.args = text, ()
        record.exc_info, record.exc_text, record.stack_info = None, None, None
        return True


def configure_logging(fmt: str) -> None:
    """Send the process's logs to stderr as text or JSON lines: errscope's from INFO, the
    libraries' (the OTLP exporters of --forward, gRPC) from WARNING and masked
    (`_LibraryLogFilter`), all in one format, so a collector reading JSON lines never meets
    a plain-text line."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonLogFormatter() if fmt == "json" else TextLogFormatter())
    handler.addFilter(_LibraryLogFilter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(logging.WARNING)
    ours = logging.getLogger("errscope")
    ours.handlers[:] = []
    ours.setLevel(logging.INFO)
    ours.propagate = True


_M_ARENA_MAX: Final = -8  # glibc's mallopt() parameter number
MALLOC_ARENAS: Final = 2


def limit_malloc_arenas(arenas: int = MALLOC_ARENAS) -> bool:
    """Cap glibc's malloc arenas before the sidecar starts its threads; True if applied.

    glibc gives busy threads arenas of their own, up to eight per core, and each keeps
    freed memory: with gRPC's, the HTTP server's and the writer's threads the sidecar's
    peak RSS under load measured 299 MiB, and 263 MiB with two arenas at the same rate.
    A user's MALLOC_ARENA_MAX wins; another C library (musl) is left alone.
    """
    if os.environ.get("MALLOC_ARENA_MAX") or not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        return bool(libc.mallopt(_M_ARENA_MAX, arenas))
    except (OSError, AttributeError):
        return False


class _NoPandas(importlib.abc.MetaPathFinder):
    """Answer every import of pandas with ImportError, as if it were not installed."""

    def find_spec(self, fullname: str, path: object, target: object = None) -> None:
        if fullname == "pandas" or fullname.startswith("pandas."):
            raise ImportError("the errscope sidecar does not load pandas")


def keep_pandas_out() -> bool:
    """Stop this process from loading pandas; True if it was not loaded yet.

    Nothing in the sidecar uses pandas, but DuckDB's client imports it on the first bound
    parameter and pyarrow's on the first `pa.array`, only to ask whether a value is a
    pandas object. Loaded, it costs ~33 MiB of RSS, a ninth of the 300 MB budget. Both
    clients treat a failed import as "pandas is not installed" and carry on (DuckDB asks
    again at each bound parameter: ~20 us per statement, against ~4 ms per commit).
    """
    if "pandas" in sys.modules:
        return False
    if not any(isinstance(finder, _NoPandas) for finder in sys.meta_path):
        sys.meta_path.insert(0, _NoPandas())
    return True


def run(config: ServeConfig) -> int:
    """Start the sidecar, print the ready line, serve until SIGTERM/SIGINT, drain; the exit
    status: 0, or `EXIT_STORE_IO` when the store could not be closed cleanly."""
    limit_malloc_arenas()
    keep_pandas_out()
    stop = threading.Event()

    def on_signal(signum: int, _frame: object) -> None:
        set_soon(stop)  # not stop.set(): it can deadlock inside stop.wait() (collector.signals)

    # Before the store opens: a stop asked for during start-up (or a closed terminal's
    # SIGHUP at any time) drains and checkpoints like SIGTERM, instead of killing the
    # process with the store open.
    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, on_signal)
    sidecar = Sidecar(config)
    try:
        addresses = sidecar.start()
    except BaseException:
        sidecar.stop()
        raise
    try:
        print(orjson.dumps({"event": "ready", **addresses}).decode(), flush=True)
    except OSError:  # stdout is gone (a closed terminal): serve, or drain, all the same
        log.warning("cannot print the ready line", extra={"code": "stdout_closed"})
    log.info("serving", extra={"address": " ".join(f"{k}={v}" for k, v in addresses.items())})
    while not stop.wait(0.5):
        pass  # wake twice a second so the signal handler's flag is seen promptly
    log.info("draining")
    started = time.monotonic()
    try:
        sidecar.stop()
    except StoreError as exc:
        log.error(  # noqa: TRY400 - one line with the code, never a traceback
            "store not closed cleanly; acknowledged spans stay in its write-ahead log",
            extra={"code": "store_io_error", "reason": str(exc.kind)},
        )
        return EXIT_STORE_IO
    if sidecar.writer.fault is StoreFault.FILE_MISSING:
        # Closed cleanly, but into an unlinked inode: what was stored since is gone.  A
        # supervisor must see that, not a clean exit.
        log.error(
            "stopped; the store file was deleted or replaced while serving",
            extra={"code": str(StoreFault.FILE_MISSING)},
        )
        return EXIT_STORE_IO
    log.info(
        "stopped",
        extra={
            "spans": sidecar.metrics.stored,
            "reason": f"drained in {time.monotonic() - started:.2f}s",
        },
    )
    return 0
