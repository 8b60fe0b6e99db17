"""The watch's own HTTP listener: GET /metrics (Prometheus text) and GET /healthz.

Read-only and small: nothing but the two paths, no request body read, one thread per
connection (stdlib `ThreadingHTTPServer`), loopback unless told otherwise.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Final

import orjson

from errscope.collector.sidecar.metrics import PROMETHEUS_TEXT

__all__ = ["MetricsServer"]

_TIMEOUT_S: Final = 10.0


class MetricsServer:
    """Serves `render()` on /metrics and `health()` on /healthz until `stop`."""

    def __init__(
        self,
        host: str,
        port: int,
        render: Callable[[], str],
        health: Callable[[], dict[str, object]],
    ) -> None:
        class Handler(BaseHTTPRequestHandler):
            timeout = _TIMEOUT_S
            server_version = "errscope-watch"
            sys_version = ""

            def do_GET(self) -> None:
                path = self.path.split("?", 1)[0]
                if path == "/metrics":
                    self._send(HTTPStatus.OK, render().encode(), PROMETHEUS_TEXT)
                elif path == "/healthz":
                    self._send(HTTPStatus.OK, orjson.dumps(health()), "application/json")
                else:
                    self._send(HTTPStatus.NOT_FOUND, b'{"error": "not_found"}', "application/json")

            def _send(self, status: HTTPStatus, body: bytes, media: str) -> None:
                self.send_response(status)
                self.send_header("Content-Type", media)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: object) -> None:
                """Silent: one line per scrape would drown the watch's own log."""

        self._httpd = ThreadingHTTPServer((host, port), Handler)
        self._httpd.daemon_threads = True
        self.port = int(self._httpd.server_address[1])
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, name="errscope-watch-metrics", daemon=True
        )

    def start(self) -> None:
        """Start serving in a background thread."""
        self._thread.start()

    def stop(self) -> None:
        """Stop serving and close the socket."""
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=_TIMEOUT_S)
