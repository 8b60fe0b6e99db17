"""A real webhook receiver on loopback for the watch tests: records posts, answers as scripted."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass(frozen=True)
class Post:
    """One request the receiver took: its path (with query), headers and JSON body."""

    path: str
    headers: dict[str, str]
    body: dict[str, Any]


@dataclass
class Receiver:
    """Posts received so far; `answers` are the statuses (and headers) to give first, then 200."""

    port: int = 0
    answers: list[tuple[int, dict[str, str]]] = field(default_factory=list)
    posts: list[Post] = field(default_factory=list)
    changed: threading.Condition = field(default_factory=threading.Condition)

    def url(self, path: str, userinfo: str = "") -> str:
        """A webhook URL on this receiver."""
        at = f"{userinfo}@" if userinfo else ""
        return f"http://{at}127.0.0.1:{self.port}{path}"

    def wait_for(self, count: int, timeout_s: float = 60.0) -> list[Post]:
        """Block until at least `count` posts arrived (or the deadline passed); all of them."""
        deadline = time.monotonic() + timeout_s
        with self.changed:
            while len(self.posts) < count:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self.changed.wait(left)
            return list(self.posts)


@contextmanager
def receiver(answers: Sequence[tuple[int, dict[str, str]]] = ()) -> Iterator[Receiver]:
    """A receiver on 127.0.0.1 for the duration of a `with` block."""
    state = Receiver(answers=list(answers))

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length)
            with state.changed:
                status, headers = state.answers.pop(0) if state.answers else (200, {})
                state.posts.append(Post(self.path, dict(self.headers.items()), json.loads(raw)))
                state.changed.notify_all()
            body = b"ok" if status < 300 else b'{"error": "scripted"}'
            self.send_response(status)
            for key, value in headers.items():
                self.send_header(key, value)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            """Quiet."""

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.daemon_threads = True
    state.port = int(httpd.server_address[1])
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(timeout=10)
