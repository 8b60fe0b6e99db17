"""receive, OTLP/gRPC: `TraceService.Export` on raw bytes, refused early when overloaded.

    start_grpc_server(host, port, ...) → a started grpc.Server on 32 threads
    _ExportRouter   routes Export, or refuses it unread when too many calls wait
    _TraceService   token → admission by size → `Ingest.ingest` → answer after the commit

Promises:
- bytes in, bytes out: the message is admitted by its size before it is parsed, and parsed
  by the same decoder as OTLP/HTTP, so garbage gets INVALID_ARGUMENT (a generated servicer
  would parse first and answer INTERNAL);
- every refusal for load (admission over its bound, too many calls waiting for a thread,
  not committed in time) is UNAVAILABLE with RetryInfo `RETRY_AFTER_S`, never
  RESOURCE_EXHAUSTED, which OTLP clients must not retry;
- a port another process holds is refused at start with a `ConfigError` naming
  `otlp-grpc`, and gRPC's SO_REUSEPORT is off, so two sidecars never share a port.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Final

import grpc
from google.protobuf.duration_pb2 import Duration
from google.rpc import code_pb2, error_details_pb2, status_pb2

from errscope.collector.errors import ConfigError, ConfigErrorKind
from errscope.collector.ports import bind_refusal
from errscope.collector.receive.otlp_decode import OtlpDecodeError, encode_response
from errscope.collector.sidecar.admission import RETRY_AFTER_S, Admission, Ingest
from errscope.collector.sidecar.config import join_address

__all__ = ["GRPC_MAX_WAITING", "GRPC_WORKERS", "start_grpc_server"]

# Concurrent gRPC exports; admission bounds their bytes.  Each waits for its group commit
# (up to `commit_delay_s`), so a rate needs rate x latency of them in flight: with 8,
# 100-span requests capped at 8 / 0.24 s = 3,300 spans/s, though the CPU was half idle.
GRPC_WORKERS: Final = 32
# gRPC exports waiting for one of the GRPC_WORKERS threads before new ones are refused
# (UNAVAILABLE + RetryInfo, see _ExportRouter): each holds its message in the transport.
GRPC_MAX_WAITING: Final = 4
_GRPC_SERVICE: Final = "opentelemetry.proto.collector.trace.v1.TraceService"
_EXPORT_METHOD: Final = f"/{_GRPC_SERVICE}/Export"


def start_grpc_server(
    host: str, port: int, *, max_body_bytes: int, admission: Admission, sidecar: Ingest
) -> tuple[grpc.Server, int]:
    """Bind `host:port` and start serving Export; the server and the port it bound.

    A port that cannot be bound raises `ConfigError` naming `otlp-grpc`.
    """
    executor = _CountingExecutor(max_workers=GRPC_WORKERS, thread_name_prefix="errscope-grpc")
    server = grpc.server(
        executor,
        options=[
            ("grpc.max_receive_message_length", max_body_bytes),
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
    service = _TraceService(admission, sidecar)
    server.add_generic_rpc_handlers((_ExportRouter(service, executor),))
    _check_free(host, port, "otlp-grpc")
    try:
        bound = server.add_insecure_port(join_address(host, port))
    except RuntimeError:  # taken between the check and here
        bound = 0
    if bound == 0:
        raise ConfigError(ConfigErrorKind.BAD_VALUE, "cannot bind", field="otlp-grpc")
    server.start()
    return server, int(bound)


def _check_free(host: str, port: int, name: str) -> None:
    """Refuse a port another process holds, as the HTTP listeners' bind does.

    gRPC would report it only as a log line and a RuntimeError; this names the flag.
    """
    if port == 0:
        return
    refusal = bind_refusal(host, port)
    if refusal is not None:
        raise ConfigError(ConfigErrorKind.BAD_VALUE, f"cannot bind ({refusal})", field=name)


def _retry_info_metadata() -> list[tuple[str, bytes]]:
    info = error_details_pb2.RetryInfo(retry_delay=Duration(seconds=RETRY_AFTER_S))
    status = status_pb2.Status(code=code_pb2.UNAVAILABLE, message="overloaded, retry shortly")
    status.details.add().Pack(info)
    return [
        ("google.rpc.retryinfo-bin", info.SerializeToString()),
        ("grpc-status-details-bin", status.SerializeToString()),
    ]


class _TraceService:
    """OTLP/gRPC `TraceService.Export` on raw bytes (an ExportTraceServiceRequest)."""

    def __init__(self, admission: Admission, sidecar: Ingest) -> None:
        self.admission = admission
        self.sidecar = sidecar

    def Export(self, body: bytes, context: grpc.ServicerContext) -> bytes:  # noqa: N802 - the OTLP method name
        """Admit by size, decode, store, answer after the commit (or with a retryable refusal)."""
        metadata = dict(context.invocation_metadata())
        if not self.admission.authorised(_str(metadata.get("authorization"))):
            context.abort(grpc.StatusCode.UNAUTHENTICATED, "missing or wrong bearer token")
        size = len(body)
        if not self.admission.admit(size):
            self.admission.count_refusal("overloaded")
            context.set_trailing_metadata(_retry_info_metadata())
            context.abort(grpc.StatusCode.UNAVAILABLE, "overloaded, retry shortly")
        try:
            try:
                result = self.sidecar.ingest(body)
            except OtlpDecodeError:
                context.abort(
                    grpc.StatusCode.INVALID_ARGUMENT, "not a readable OTLP export request"
                )
        finally:
            self.admission.release(size)
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
    `start_grpc_server`).  `service` runs on gRPC's own thread as each call arrives.  Past
    `GRPC_MAX_WAITING` waiting calls the answer is UNAVAILABLE with RetryInfo, from a
    handler that never reads the request, on a pool of its own so it is not queued behind
    the exports; gRPC's `maximum_concurrent_rpcs` would answer RESOURCE_EXHAUSTED without
    RetryInfo, which OTLP clients must not retry.
    """

    def __init__(self, service: _TraceService, executor: _CountingExecutor) -> None:
        self._executor = executor
        self._export = grpc.unary_unary_rpc_method_handler(service.Export)

        def refuse(requests: Iterator[bytes], context: grpc.ServicerContext) -> bytes:
            service.admission.count_refusal("overloaded")
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
