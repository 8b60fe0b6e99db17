"""receive, OTLP/HTTP: POST /v1/traces, protobuf or JSON, maybe gzip, maybe chunked.

`OtlpHttpHandler` runs on `HttpServer`, whose app is the `Ingest` (the sidecar) an admitted
body is handed to.  An answer is sent only after the export's spans are committed.

Promises:
- the body's bytes are admitted as they arrive and released once answered, whatever the
  outcome; a draining sidecar answers 503 + `Retry-After`;
- errors follow the OTLP spec ("Failures"): a `google.rpc.Status` in the request's encoding,
  protobuf for protobuf and JSON otherwise, its message opening with errscope's code;
- undecodable bodies get 400, a content coding not read 415 (with `Accept-Encoding`), a body
  over the limit before or after decompression 413, a refused commit 503; spans without
  valid ids are reported in `partial_success`, never silently dropped.
"""

from __future__ import annotations

from collections.abc import Mapping
from http import HTTPStatus
from typing import Any, Final
from urllib.parse import urlsplit

import orjson
from google.rpc import code_pb2, status_pb2

from errscope.collector.receive.http_server import MEDIA_JSON, FramingError, HttpHandler, HttpServer
from errscope.collector.receive.otlp_decode import (
    BodyTooLargeError,
    OtlpDecodeError,
    UnsupportedEncodingError,
    encode_response,
)
from errscope.collector.sidecar.admission import Ingest

__all__ = ["OtlpHttpHandler"]

_PROTOBUF: Final = "application/x-protobuf"

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


class OtlpHttpHandler(HttpHandler):
    """The OTLP/HTTP traces endpoint; every other path and method gets 404 or 405."""

    server: HttpServer[Ingest]
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
            body, content_type = orjson.dumps({"code": code, "message": text}), MEDIA_JSON
        self._send_error(status, body, content_type, headers)

    def do_GET(self) -> None:  # noqa: N802 - http.server dispatches on this name
        """405 or 404 (`_not_allowed`): exports are POSTed."""
        self._not_allowed()

    def do_HEAD(self) -> None:  # noqa: N802 - http.server dispatches on this name
        """405 or 404 (`_not_allowed`): exports are POSTed."""
        self._not_allowed()

    def do_POST(self) -> None:  # noqa: N802 - http.server dispatches on this name
        """OTLP/HTTP export: protobuf or JSON, maybe gzip, maybe chunked; answer after commit."""
        admission = self.server.admission
        if urlsplit(self.path).path != "/v1/traces":
            self._not_allowed()
            return
        if not self._authorised():
            return
        if admission.draining.is_set():
            self._drain()
            admission.count_refusal("draining")
            self._error(HTTPStatus.SERVICE_UNAVAILABLE, "unavailable", "the sidecar is stopping")
            return
        content_type = self._media_type()
        if content_type not in (_PROTOBUF, MEDIA_JSON):
            self._drain()
            self._error(
                HTTPStatus.UNSUPPORTED_MEDIA_TYPE,
                "unsupported_media_type",
                "send application/x-protobuf or application/json",
            )
            return
        try:
            framing = self._framing()
        except FramingError as exc:
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
        if framing > admission.max_body_bytes:
            self._error(HTTPStatus.REQUEST_ENTITY_TOO_LARGE, "too_large", "body over the limit")
            return
        held = 0

        def reserve(size: int) -> bool:
            nonlocal held
            if not admission.admit(size):
                return False
            held += size
            return True

        try:
            raw = self._read_or_refuse(framing, admission.max_body_bytes, reserve)
            if raw is not None:
                self._export(raw, content_type)
        finally:
            admission.release(held)

    def _export(self, raw: bytes, content_type: str) -> None:
        encoding = self.headers.get("Content-Encoding") or ""
        as_json = content_type == MEDIA_JSON
        try:
            result = self.server.app.ingest(raw, encoding=encoding, as_json=as_json)
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
        self._send(
            HTTPStatus.OK, encode_response(result.rejected, message, as_json=as_json), content_type
        )
