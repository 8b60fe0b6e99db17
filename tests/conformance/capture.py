"""A loopback OTLP capture server: records every trace export request byte for byte.

    python tests/conformance/capture.py --out DIR [--grpc-port 0] [--http-port 0]

It answers OTLP/gRPC (`TraceService/Export`) and OTLP/HTTP (`POST /v1/traces`, protobuf or
JSON, gzip inflated) with success and writes each request body, as the exporter sent it
(after gzip), to `DIR/<seq>.<transport>.<ext>`: transport is `grpc`, `http-protobuf` or
`http-json`; ext is `bin` or `json`.  On start it prints one line,
`capture grpc=127.0.0.1:PORT http=127.0.0.1:PORT`, and it stops on SIGTERM or SIGINT after
flushing what it holds.  It is what tests/conformance's generators point real frameworks'
exporters at; it interprets nothing, so the corpus is exactly what those exporters send.
"""

from __future__ import annotations

import argparse
import gzip
import itertools
import signal
import sys
import threading
from concurrent import futures
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import grpc

_EXPORT = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"
_LOCK = threading.Lock()
_SEQ = itertools.count(1)


def _save(out: Path, transport: str, body: bytes) -> None:
    ext = "json" if transport == "http-json" else "bin"
    with _LOCK:
        path = out / f"{next(_SEQ):04d}.{transport}.{ext}"
        path.write_bytes(body)


def _grpc_server(out: Path, port: int) -> tuple[grpc.Server, int]:
    def export(request: bytes, _context: grpc.ServicerContext) -> bytes:
        _save(out, "grpc", request)
        return b""  # an empty ExportTraceServiceResponse: full success

    handler = grpc.method_handlers_generic_handler(
        "opentelemetry.proto.collector.trace.v1.TraceService",
        {"Export": grpc.unary_unary_rpc_method_handler(export)},
    )
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    server.add_generic_rpc_handlers((handler,))
    bound = server.add_insecure_port(f"127.0.0.1:{port}")
    server.start()
    return server, bound


def _http_server(out: Path, port: int) -> ThreadingHTTPServer:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self._read_body()
            if self.headers.get("Content-Encoding", "").lower() == "gzip":
                body = gzip.decompress(body)
            kind = self.headers.get("Content-Type", "").split(";")[0].strip().lower()
            is_json = kind == "application/json"
            if self.path.split("?")[0] == "/v1/traces":
                _save(out, "http-json" if is_json else "http-protobuf", body)
            answer = b"{}" if is_json else b""
            self.send_response(200)
            self.send_header(
                "Content-Type", "application/json" if is_json else kind or "application/x-protobuf"
            )
            self.send_header("Content-Length", str(len(answer)))
            self.end_headers()
            self.wfile.write(answer)

        def _read_body(self) -> bytes:
            # Node's OTLP exporters stream the body (Transfer-Encoding: chunked, no length).
            if "chunked" not in self.headers.get("Transfer-Encoding", "").lower():
                return self.rfile.read(int(self.headers.get("Content-Length") or 0))
            chunks = []
            while size := int(self.rfile.readline().split(b";")[0].strip() or b"0", 16):
                chunks.append(self.rfile.read(size))
                self.rfile.readline()  # the CRLF after each chunk
            while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                pass  # trailers, if any, end with an empty line
            return b"".join(chunks)

        def log_message(self, format: str, *args: object) -> None:
            return

    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--grpc-port", type=int, default=0)
    parser.add_argument("--http-port", type=int, default=0)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    grpc_server, grpc_port = _grpc_server(args.out, args.grpc_port)
    http_server = _http_server(args.out, args.http_port)
    print(
        f"capture grpc=127.0.0.1:{grpc_port} http=127.0.0.1:{http_server.server_port}",
        flush=True,
    )
    stop.wait()
    grpc_server.stop(grace=2).wait()
    http_server.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
