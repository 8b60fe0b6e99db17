"""receive, HTTP/1.1: a thread-per-connection server whose deadlines a slow client cannot stretch.

    HttpServer[App]  a listener: connection cap, phases per connection, a reaper thread
    HttpHandler      the base of the OTLP/HTTP and API handlers: framing, body reading,
                     100-continue, answers and errors, 405 with `Allow`, the bearer token

Nothing here knows OTLP or the API: a handler subclass reaches its application through
`self.server.app` and admission (token, bytes in flight, drain) through
`self.server.admission`.

Promises:
- bodies come with Content-Length or chunked (RFC 9112 §7.1); framing a proxy could read
  differently gets 400 and a close (RFC 9112 §6), another transfer coding 501; a body is
  limited as it arrives (413), its bytes are admitted as they arrive, not as promised (503);
- a request's headers must arrive within `HEAD_DEADLINE_S` and its body within
  `BODY_DEADLINE_S` (408); past `MAX_HTTP_CONNECTIONS` a connection gets 503 and a close;
- "100 Continue" is sent only once the body is wanted, after the token and media type;
- a failure of ours answers 500 with a code and closes; logs carry the error class, never
  the exception text, and access logs are off (paths may carry query values);
- once draining, every answer closes its connection, and the reaper closes connections
  that have not sent a whole request `DRAIN_GRACE_S` after the drain began.

Thread-safety: each connection runs on its own thread; the phase table is locked, and the
reaper only shuts sockets down (which wakes a handler blocked in recv).
"""

from __future__ import annotations

import contextlib
import enum
import io
import logging
import socket
import sys
import threading
import time
from collections.abc import Callable, Mapping
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Final, Generic, TypeVar, cast
from urllib.parse import urlsplit

import orjson

from errscope.collector.sidecar.admission import RETRY_AFTER_S, Admission

__all__ = [
    "BODY_DEADLINE_S",
    "DRAIN_GRACE_S",
    "HEAD_DEADLINE_S",
    "LISTEN_BACKLOG",
    "MAX_HTTP_CONNECTIONS",
    "MEDIA_JSON",
    "FramingError",
    "HttpHandler",
    "HttpServer",
]

log = logging.getLogger("errscope.serve")  # the sidecar's one logger name, in every module

MEDIA_JSON: Final = "application/json"
AppT = TypeVar("AppT")

# Body framing and deadlines.  A client that declares a body and sends it a byte at a
# time must not hold a thread, a connection or admission budget for longer than this.
BODY_DEADLINE_S: Final = 30.0
# From the end of one request (or the connection's start) to the end of the next one's
# headers; an idle keep-alive connection is closed sooner, after `HttpHandler.timeout`.
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
_CHUNKED: Final = -1  # `HttpHandler._framing`: the body is chunked (RFC 9112 §7.1)


class _Phase(enum.Enum):
    """Where a connection is in its current request (see `HttpServer`)."""

    HEAD = "head"  # waiting for, or reading, a request line and headers
    BODY = "body"  # headers read, body not yet read in full
    BUSY = "busy"  # the whole request read: it is being answered
    CLOSED = "closed"  # closed by the reaper; its handler stops at its next step


class FramingError(Exception):
    """A request whose body cannot be read as framed: answered with `status`, then closed."""

    def __init__(self, status: HTTPStatus, kind: str, message: str) -> None:
        super().__init__(message)
        self.status, self.kind, self.message = status, kind, message


class _ClientGone(Exception):  # noqa: N818 - not an error of ours: the peer went away
    """The client closed its connection before its request was whole."""


class HttpServer(ThreadingHTTPServer, Generic[AppT]):
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
        self,
        address: tuple[str, int],
        handler: type[BaseHTTPRequestHandler],
        admission: Admission,
        app: AppT,
    ) -> None:
        self.admission = admission
        self.app = app  # what the handlers serve: `self.server.app`
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
        self.admission.count_refused_connection()

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


class HttpHandler(BaseHTTPRequestHandler):
    server: HttpServer[Any]
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
        if self.server.admission.draining.is_set() or self._continue_pending:
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
        self._send_error(status, body, MEDIA_JSON, headers)

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

    def _refuse_framing(self, exc: FramingError) -> None:
        """Answer a request whose body cannot be trusted, and close: where it ends is unknown."""
        self.close_connection = True
        self._error(exc.status, exc.kind, exc.message)

    def _authorised(self) -> bool:
        if self.server.admission.authorised(self.headers.get("Authorization")):
            return True
        self._error(HTTPStatus.UNAUTHORIZED, "unauthorized", "missing or wrong bearer token")
        return False

    def _framing(self) -> int | None:
        """The body's length, `_CHUNKED`, or None when the request declares no body.

        RFC 9112 §6: Transfer-Encoding with Content-Length, a transfer coding other than
        chunked, and a Content-Length that is not one decimal number (duplicates that
        disagree, `-5`, `1e3`, `²`, which `str.isdigit` accepts) raise `FramingError`.
        """
        codings = self.headers.get_all("Transfer-Encoding") or []
        lengths = self.headers.get_all("Content-Length") or []
        if codings:
            if lengths:
                raise FramingError(
                    HTTPStatus.BAD_REQUEST,
                    "bad_framing",
                    "Transfer-Encoding and Content-Length together",
                )
            names = [c.strip().lower() for text in codings for c in text.split(",")]
            if names != ["chunked"]:
                raise FramingError(
                    HTTPStatus.NOT_IMPLEMENTED,
                    "unsupported_transfer_encoding",
                    "only the chunked transfer coding is supported",
                )
            return _CHUNKED
        if not lengths:
            return None
        values = {v.strip() for text in lengths for v in text.split(",")}
        if len(values) != 1:
            raise FramingError(
                HTTPStatus.BAD_REQUEST, "bad_framing", "conflicting Content-Length values"
            )
        text = values.pop()
        if not (text.isascii() and text.isdigit()):
            raise FramingError(
                HTTPStatus.BAD_REQUEST, "bad_framing", "Content-Length must be a decimal number"
            )
        return int(text)

    def _read_or_refuse(
        self, framing: int, limit: int, reserve: Callable[[int], bool] | None = None
    ) -> bytes | None:
        """The body; None once a bad framing was answered or the client went away.

        `reserve` admits each piece as it arrives (`_BodyReader`); None admits every piece.
        """
        if self._continue_pending:
            self._continue_pending = False
            self.send_response_only(HTTPStatus.CONTINUE)
            self.end_headers()
        try:
            return self._read_body(framing, limit, reserve or _discard)
        except FramingError as exc:
            self.server.admission.count_refusal(exc.kind)  # overloaded, too_large, timeout...
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
        except FramingError:
            self.close_connection = True
            return
        if framing is None:
            return
        if framing > self.server.admission.max_body_bytes:
            self.close_connection = True
            return
        try:
            self._read_body(framing, self.server.admission.max_body_bytes, _discard)
        except (FramingError, _ClientGone):
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
    `FramingError` (400 bad chunks, 408, 413 over the limit, 503) or `_ClientGone`.
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
            raise FramingError(
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
                raise FramingError(
                    HTTPStatus.REQUEST_ENTITY_TOO_LARGE, "too_large", "body over the limit"
                )
            if not self.reserve(len(piece)):
                raise FramingError(
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


def _bad_chunk() -> FramingError:
    return FramingError(HTTPStatus.BAD_REQUEST, "bad_framing", "malformed chunked body")


def _discard(_size: int) -> bool:
    return True
