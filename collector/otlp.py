"""receive, the decoding half: OTLP/HTTP bodies (protobuf or JSON, maybe gzip) to span views.

`read_body` enforces the size limit after decompression (a gzip bomb stops at the limit,
never expands in memory); `decode_protobuf` and `decode_json` turn an export request into
`SpanView`s.  OTLP JSON is not the proto3 JSON mapping: trace and span ids are hex strings
and enums are integers, so JSON is walked directly (orjson) rather than through
`json_format`, which is also about 35 times slower.  Both decoders raise `OtlpDecodeError`
for a body they cannot read; a single malformed span inside a readable body is counted as
rejected, not fatal (OTLP partial success).
"""

from __future__ import annotations

import zlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Final

import orjson
from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

from collector.spanview import (
    AttrValue,
    EventView,
    LinkView,
    SpanView,
    StatusView,
    from_otlp,
    otlp_resource,
)

__all__ = [
    "DEFAULT_MAX_BODY_BYTES",
    "BodyTooLargeError",
    "Decoded",
    "OtlpDecodeError",
    "decode_json",
    "decode_protobuf",
    "encode_response",
    "read_body",
]

DEFAULT_MAX_BODY_BYTES: Final = 16 * 1024 * 1024
_CHUNK: Final = 64 * 1024
_MAX_JSON_DEPTH: Final = 16


class OtlpDecodeError(ValueError):
    """The body is not a readable OTLP export request (answer 400 / INVALID_ARGUMENT)."""


class BodyTooLargeError(ValueError):
    """The body exceeds the limit after decompression (answer 413)."""


@dataclass(frozen=True, slots=True)
class Decoded:
    """The spans of one export request, the count of spans that could not be read, and bytes."""

    spans: list[SpanView]
    rejected: int
    size_bytes: int


def read_body(raw: bytes, encoding: str, max_bytes: int = DEFAULT_MAX_BODY_BYTES) -> bytes:
    """Decompress (gzip/deflate/identity) with the limit counted on the output."""
    encoding = encoding.strip().lower()
    if encoding in ("", "identity"):
        if len(raw) > max_bytes:
            raise BodyTooLargeError
        return raw
    if encoding not in ("gzip", "deflate"):
        raise OtlpDecodeError("unsupported content encoding")
    wbits = 16 + zlib.MAX_WBITS if encoding == "gzip" else zlib.MAX_WBITS
    inflater = zlib.decompressobj(wbits)
    out = bytearray()
    data = raw
    try:
        while data:
            out += inflater.decompress(data, _CHUNK)
            if len(out) > max_bytes:
                raise BodyTooLargeError
            data = inflater.unconsumed_tail
        out += inflater.flush()
    except zlib.error as exc:
        raise OtlpDecodeError("corrupt compressed body") from exc
    if len(out) > max_bytes:
        raise BodyTooLargeError
    return bytes(out)


def decode_protobuf(body: bytes) -> Decoded:
    """Decode an `ExportTraceServiceRequest` protobuf."""
    try:
        request = ExportTraceServiceRequest.FromString(body)
    except (DecodeError, ValueError, RuntimeError) as exc:
        raise OtlpDecodeError("not an OTLP protobuf export request") from exc
    return decode_request(request, len(body))


def decode_request(request: ExportTraceServiceRequest, size: int) -> Decoded:
    """Views of every span in a decoded request (the gRPC path starts here)."""
    spans: list[SpanView] = []
    rejected = 0
    for resource_spans in request.resource_spans:
        resource = otlp_resource(resource_spans.resource)
        for scope_spans in resource_spans.scope_spans:
            for span in scope_spans.spans:
                view = from_otlp(span, resource, scope_spans)
                if len(view.trace_id) == 32 and len(view.span_id) == 16:
                    spans.append(view)
                else:
                    rejected += 1
    return Decoded(spans, rejected, size)


# ------------------------------------------------------------------ OTLP JSON


def _get(obj: Mapping[str, Any], camel: str, snake: str) -> Any:
    return obj.get(camel, obj.get(snake))


def _json_value(value: Any, depth: int = 0) -> AttrValue | None:
    if not isinstance(value, dict) or depth > _MAX_JSON_DEPTH:
        return None
    if "stringValue" in value or "string_value" in value:
        text = _get(value, "stringValue", "string_value")
        return text if isinstance(text, str) else None
    if "boolValue" in value or "bool_value" in value:
        flag = _get(value, "boolValue", "bool_value")
        return flag if isinstance(flag, bool) else None
    if "intValue" in value or "int_value" in value:
        number = _get(value, "intValue", "int_value")
        try:
            return int(number)
        except (TypeError, ValueError):
            return None
    if "doubleValue" in value or "double_value" in value:
        number = _get(value, "doubleValue", "double_value")
        try:
            return float(number)
        except (TypeError, ValueError):
            return None
    if "arrayValue" in value or "array_value" in value:
        items = (_get(value, "arrayValue", "array_value") or {}).get("values") or []
        out = (_json_value(v, depth + 1) for v in items if isinstance(items, list))
        return tuple(v for v in out if v is not None)
    if "kvlistValue" in value or "kvlist_value" in value:
        pairs = (_get(value, "kvlistValue", "kvlist_value") or {}).get("values") or []
        return _json_attributes(pairs, depth + 1)
    if "bytesValue" in value or "bytes_value" in value:
        return b""  # base64 bytes carry nothing errscope keeps; never forwarded either
    return None


def _json_attributes(pairs: Any, depth: int = 0) -> dict[str, AttrValue]:
    out: dict[str, AttrValue] = {}
    if not isinstance(pairs, list):
        return out
    for pair in pairs:
        if isinstance(pair, dict) and isinstance(pair.get("key"), str):
            value = _json_value(pair.get("value"), depth)
            if value is not None:
                out[pair["key"]] = value
    return out


def _hex_id(value: Any, size: int) -> str:
    if isinstance(value, str) and len(value) == size * 2:
        lowered = value.lower()
        if all(c in "0123456789abcdef" for c in lowered):
            return lowered
    return ""


def _nanos(value: Any) -> int:
    try:
        number = int(value)
    except (TypeError, ValueError):
        return 0
    return number if 0 <= number < 2**63 else 0


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _items(value: Any) -> list[dict[str, Any]]:
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []


def _str(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _json_span(
    span: Mapping[str, Any], resource: dict[str, AttrValue], scope: Mapping[str, Any]
) -> SpanView:
    status = _dict(span.get("status"))
    code = status.get("code", 0)
    kind = span.get("kind", 1)
    start = _nanos(_get(span, "startTimeUnixNano", "start_time_unix_nano"))
    return SpanView(
        name=_str(span.get("name")),
        trace_id=_hex_id(_get(span, "traceId", "trace_id"), 16),
        span_id=_hex_id(_get(span, "spanId", "span_id"), 8),
        parent_span_id=_hex_id(_get(span, "parentSpanId", "parent_span_id"), 8) or None,
        start_ns=start,
        end_ns=_nanos(_get(span, "endTimeUnixNano", "end_time_unix_nano")) or start,
        kind=max(int(kind) - 1, 0) if isinstance(kind, int) and 0 <= kind <= 5 else 0,
        status=StatusView(
            int(code) if isinstance(code, int) and 0 <= code <= 2 else 0,
            _str(status.get("message")),
        ),
        attributes=_json_attributes(span.get("attributes")),
        events=tuple(
            EventView(
                _str(e.get("name")),
                _nanos(_get(e, "timeUnixNano", "time_unix_nano")),
                _json_attributes(e.get("attributes")),
            )
            for e in _items(span.get("events"))
        ),
        links=tuple(
            LinkView(
                _hex_id(_get(link, "traceId", "trace_id"), 16),
                _hex_id(_get(link, "spanId", "span_id"), 8),
                _json_attributes(link.get("attributes")),
            )
            for link in _items(span.get("links"))
        ),
        resource=resource,
        scope_name=_str(scope.get("name")),
        scope_version=_str(scope.get("version")),
    )


def _list(obj: Any, camel: str, snake: str) -> Iterator[Mapping[str, Any]]:
    """The objects of a repeated message field; a field of another type makes the request
    undecodable (400), as protobuf's JSON mapping says, not an empty export (200)."""
    if not isinstance(obj, dict):
        raise OtlpDecodeError("not an OTLP JSON export request")
    items = _get(obj, camel, snake)
    if items is None:
        return
    if not isinstance(items, list) or not all(isinstance(i, dict) for i in items):
        raise OtlpDecodeError(f"{camel} must be a list of objects")
    yield from items


def decode_json(body: bytes) -> Decoded:
    """Decode an OTLP/JSON export request."""
    try:
        data = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise OtlpDecodeError("not JSON") from exc
    if not isinstance(data, dict):
        raise OtlpDecodeError("not an OTLP JSON export request")
    spans: list[SpanView] = []
    rejected = 0
    for resource_spans in _list(data, "resourceSpans", "resource_spans"):
        resource_obj = resource_spans.get("resource")
        resource = (
            _json_attributes(resource_obj.get("attributes"))
            if isinstance(resource_obj, dict)
            else {}
        )
        for scope_spans in _list(resource_spans, "scopeSpans", "scope_spans"):
            scope = _dict(scope_spans.get("scope"))
            for span in _list(scope_spans, "spans", "spans"):
                view = _json_span(span, resource, scope)
                if len(view.trace_id) == 32 and len(view.span_id) == 16:
                    spans.append(view)
                else:
                    rejected += 1
    return Decoded(spans, rejected, len(body))


def encode_response(rejected: int, message: str, *, as_json: bool) -> bytes:
    """An ExportTraceServiceResponse, with partial_success only when spans were rejected."""
    if as_json:
        if not rejected:
            return b"{}"
        return orjson.dumps(
            {"partialSuccess": {"rejectedSpans": str(rejected), "errorMessage": message}}
        )
    response = ExportTraceServiceResponse()
    if rejected:
        response.partial_success.rejected_spans = rejected
        response.partial_success.error_message = message
    return response.SerializeToString()
