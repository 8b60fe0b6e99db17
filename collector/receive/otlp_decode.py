"""receive, the decoding half: OTLP/HTTP bodies (protobuf or JSON, maybe gzip) to span views.

`read_body` enforces the size limit after decompression (a gzip bomb stops at the limit,
never expands in memory) and reads every member of a gzip body; a compressed body cut
short or followed by other bytes is refused, since acknowledging it would drop the spans
in the missing part without telling the client.  `decode_protobuf` and `decode_json` turn
an export request into `SpanView`s.  OTLP JSON is not the proto3 JSON mapping: trace and
span ids are hex strings and enums are integers, so JSON is walked directly (orjson) rather
than through `json_format`, which is also about 35 times slower.  Enum names are still
read, as the proto3 JSON mapping writes them.  A field of the wrong JSON type makes the
request unreadable, as in protobuf's JSON mapping; unknown fields are ignored.  A single
span inside a readable body whose ids are invalid (wrong size or all zero) is counted as
rejected, not fatal (OTLP partial success).

Exceptions (what the HTTP receiver answers)::

    ValueError
    ├── OtlpDecodeError               400 / INVALID_ARGUMENT: not a readable request
    │   └── UnsupportedEncodingError  415: a content coding errscope does not read
    └── BodyTooLargeError             413: over the limit after decompression
"""

from __future__ import annotations

import re
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
from opentelemetry.proto.trace.v1.trace_pb2 import Span as PbSpan
from opentelemetry.proto.trace.v1.trace_pb2 import Status as PbStatus

from errscope.collector.spanview import (
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
    "UnsupportedEncodingError",
    "decode_json",
    "decode_protobuf",
    "encode_response",
    "read_body",
]

DEFAULT_MAX_BODY_BYTES: Final = 16 * 1024 * 1024
_CHUNK: Final = 64 * 1024
_MAX_JSON_DEPTH: Final = 16
_GZIP_WBITS: Final = 16 + zlib.MAX_WBITS
# Senders concatenate a few members at most; each costs ~9 µs to set up however small, so
# a 16 MiB body of empty 20-byte members would take 8 s of CPU without a cap.
_MAX_GZIP_MEMBERS: Final = 1024
_ZLIB_WBITS: Final = zlib.MAX_WBITS
_RAW_DEFLATE_WBITS: Final = -zlib.MAX_WBITS
_ZERO_TRACE_ID: Final = "0" * 32
_ZERO_SPAN_ID: Final = "0" * 16
_INT64: Final = range(-(2**63), 2**63)
_DECIMAL: Final = re.compile(r"-?[0-9]{1,20}")
# Only the values OTLP defines: a receiver that does not know an enum value cannot act on
# it (opentelemetry-proto#424), and `spanview.to_readable` cannot forward it either.
_STATUS_CODES: Final[Mapping[str, int]] = dict(PbStatus.StatusCode.items())
_SPAN_KINDS: Final[Mapping[str, int]] = dict(PbSpan.SpanKind.items())


class OtlpDecodeError(ValueError):
    """The body is not a readable OTLP export request (answer 400 / INVALID_ARGUMENT)."""


class UnsupportedEncodingError(OtlpDecodeError):
    """The body is in a content coding errscope does not read (answer 415, RFC 9110 §8.4).

    A subclass of `OtlpDecodeError`, so a caller that does not tell them apart still
    refuses the body (400) rather than guessing at it.
    """


class BodyTooLargeError(ValueError):
    """The body exceeds the limit after decompression (answer 413)."""


@dataclass(frozen=True, slots=True)
class Decoded:
    """The spans of one export request, the count of spans that could not be read, and bytes."""

    spans: list[SpanView]
    rejected: int
    size_bytes: int


def read_body(raw: bytes, encoding: str, max_bytes: int = DEFAULT_MAX_BODY_BYTES) -> bytes:
    """Decompress (gzip/x-gzip/deflate/identity) with the limit counted on the output.

    Raises `UnsupportedEncodingError` for any other Content-Encoding, stacked codings
    ("gzip, identity") included, and `OtlpDecodeError` for a corrupt, truncated or
    over-long compressed body.
    """
    coding = encoding.strip().lower()
    if coding in ("", "identity"):
        if len(raw) > max_bytes:
            raise BodyTooLargeError
        return raw
    if coding in ("gzip", "x-gzip"):  # x-gzip: the old name, still to be read as gzip
        return _inflate(raw, _GZIP_WBITS, max_bytes, members=True)
    if coding == "deflate":
        # "deflate" means a zlib stream (RFC 9110 §8.4.1.2), but some clients send a raw
        # deflate stream under that name; browsers read both, and so does errscope.
        wbits = _ZLIB_WBITS if _is_zlib_header(raw) else _RAW_DEFLATE_WBITS
        return _inflate(raw, wbits, max_bytes, members=False)
    raise UnsupportedEncodingError("unsupported content encoding")


def _is_zlib_header(raw: bytes) -> bool:
    """Whether `raw` opens with a zlib header (RFC 1950 §2.2: deflate, check bits valid)."""
    return (
        len(raw) >= 2
        and raw[0] & 0x0F == 8
        and raw[0] >> 4 <= 7
        and (raw[0] << 8 | raw[1]) % 31 == 0
    )


def _inflate(raw: bytes, wbits: int, max_bytes: int, *, members: bool) -> bytes:
    """Every stream of `raw` (gzip members, RFC 1952 §2.2) or its one stream (deflate).

    The limit counts the output of all members together, and at most `_MAX_GZIP_MEMBERS`
    are read.  Input is fed in chunks so that each member costs only its own bytes
    (handing zlib the whole rest of the body made many tiny members quadratic).  An empty
    body stays empty: no span was sent, so none can be lost.
    """
    out = bytearray()
    body = memoryview(raw)
    position = 0
    try:
        for _ in range(_MAX_GZIP_MEMBERS):
            if position == len(body):
                return bytes(out)
            inflater = zlib.decompressobj(wbits)
            while position < len(body) and not inflater.eof:
                chunk = body[position : position + _CHUNK]
                out += inflater.decompress(chunk, _CHUNK)
                if len(out) > max_bytes:
                    raise BodyTooLargeError
                # At the end of a stream zlib leaves the bytes after it in unused_data (and
                # also in unconsumed_tail); before it, the input it had no room for.
                left = inflater.unused_data if inflater.eof else inflater.unconsumed_tail
                position += len(chunk) - len(left)
            if not inflater.eof:
                # All input is consumed: what is left is what zlib held back for want of
                # output room (bounded, as no input is left), then the end or a cut.
                out += inflater.flush()
            if not inflater.eof:
                raise OtlpDecodeError("compressed body ends before its stream does")
            if len(out) > max_bytes:
                raise BodyTooLargeError
            if position < len(body) and not members:
                raise OtlpDecodeError("bytes after the end of the compressed body")
    except zlib.error as exc:
        raise OtlpDecodeError("corrupt compressed body") from exc
    if position < len(body):
        raise OtlpDecodeError("too many gzip members")
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
                if _has_valid_ids(view):
                    spans.append(view)
                else:
                    rejected += 1
    return Decoded(spans, rejected, size)


def _has_valid_ids(view: SpanView) -> bool:
    """Ids of the right size and not all zero (the spec calls an all-zero id invalid)."""
    return (
        len(view.trace_id) == 32
        and len(view.span_id) == 16
        and view.trace_id != _ZERO_TRACE_ID
        and view.span_id != _ZERO_SPAN_ID
    )


# ------------------------------------------------------------------ OTLP JSON
# A field that is absent or null reads as its default; a field errscope reads that has
# another JSON type raises OtlpDecodeError.  Only ids are let through when wrong: the span
# is then counted as rejected, as the spec asks.


def _get(obj: Mapping[str, Any], camel: str, snake: str) -> Any:
    return obj.get(camel, obj.get(snake))


def _object(value: Any, field: str) -> Mapping[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise OtlpDecodeError(f"{field} must be an object")
    return value


def _objects(value: Any, field: str) -> list[Mapping[str, Any]]:
    """The objects of a repeated message field."""
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(i, dict) for i in value):
        raise OtlpDecodeError(f"{field} must be a list of objects")
    return value


def _text(value: Any, field: str) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise OtlpDecodeError(f"{field} must be a string")
    return value


def _integer(value: Any) -> int | None:
    """An integer as JSON may carry one: a number (integral if a float) or a decimal string."""
    if isinstance(value, bool):  # a bool is an int to Python, never to JSON
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return int(value) if value.is_integer() else None
    if isinstance(value, str) and _DECIMAL.fullmatch(value):
        return int(value)
    return None


def _enum(value: Any, names: Mapping[str, int], field: str) -> int:
    """An enum as its number (the OTLP form) or its name (the proto3 JSON form).

    A number OTLP does not define (yet) reads as 0, unspecified, as protobuf's open enums
    let the same span through the binary encoding; a name that is not one, or a value of
    another type, is an error.
    """
    if value is None:
        return 0
    number = names.get(value) if isinstance(value, str) else None
    if number is None:
        number = _integer(value)
    if number is None or not -(2**31) <= number < 2**31:
        raise OtlpDecodeError(f"{field} is not a known enum value")
    return number if number in names.values() else 0


def _nanos(value: Any, field: str) -> int:
    if value is None:
        return 0
    number = _integer(value)
    if number is None:
        raise OtlpDecodeError(f"{field} must be an integer")
    return number if 0 <= number < 2**63 else 0


def _json_value(value: Any, depth: int) -> AttrValue | None:
    """An AnyValue; None (the attribute is dropped) when empty, null, of an unknown kind or
    nested deeper than errscope follows."""
    if value is None or depth > _MAX_JSON_DEPTH:
        return None
    if not isinstance(value, dict):
        raise OtlpDecodeError("attribute value must be an object")
    if "stringValue" in value or "string_value" in value:
        text = _get(value, "stringValue", "string_value")
        return None if text is None else _text(text, "stringValue")
    if "boolValue" in value or "bool_value" in value:
        flag = _get(value, "boolValue", "bool_value")
        if flag is None or isinstance(flag, bool):
            return flag
        raise OtlpDecodeError("boolValue must be true or false")
    if "intValue" in value or "int_value" in value:
        raw = _get(value, "intValue", "int_value")
        if raw is None:
            return None
        number = _integer(raw)
        if number is not None and number in _INT64:
            return number
        raise OtlpDecodeError("intValue must be a 64-bit integer")
    if "doubleValue" in value or "double_value" in value:
        raw = _get(value, "doubleValue", "double_value")
        return None if raw is None else _double(raw)
    if "arrayValue" in value or "array_value" in value:
        array = _object(_get(value, "arrayValue", "array_value"), "arrayValue")
        items = array.get("values")
        if items is not None and not isinstance(items, list):
            raise OtlpDecodeError("arrayValue.values must be a list")
        out = (_json_value(v, depth + 1) for v in items or ())
        return tuple(v for v in out if v is not None)
    if "kvlistValue" in value or "kvlist_value" in value:
        kvlist = _object(_get(value, "kvlistValue", "kvlist_value"), "kvlistValue")
        return _json_attributes(kvlist.get("values"), depth + 1)
    if "bytesValue" in value or "bytes_value" in value:
        _text(_get(value, "bytesValue", "bytes_value"), "bytesValue")
        return b""  # base64 bytes carry nothing errscope keeps; never forwarded either
    return None


def _double(value: Any) -> float:
    """A number, or a string proto3 JSON allows for one ("1.5", "NaN", "Infinity")."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            pass
    raise OtlpDecodeError("doubleValue must be a number")


def _json_attributes(pairs: Any, depth: int = 0) -> dict[str, AttrValue]:
    out: dict[str, AttrValue] = {}
    for pair in _objects(pairs, "attributes"):
        key = _text(pair.get("key"), "attribute key")
        value = _json_value(pair.get("value"), depth)
        if key and value is not None:  # an empty key is invalid (OTel common spec)
            out[key] = value
    return out


def _hex_id(value: Any, size: int) -> str:
    if isinstance(value, str) and len(value) == size * 2:
        lowered = value.lower()
        if all(c in "0123456789abcdef" for c in lowered):
            return lowered
    return ""


def _json_span(
    span: Mapping[str, Any], resource: dict[str, AttrValue], scope: tuple[str, str]
) -> SpanView:
    status = _object(span.get("status"), "status")
    start = _nanos(_get(span, "startTimeUnixNano", "start_time_unix_nano"), "startTimeUnixNano")
    end = _nanos(_get(span, "endTimeUnixNano", "end_time_unix_nano"), "endTimeUnixNano")
    return SpanView(
        name=_text(span.get("name"), "name"),
        trace_id=_hex_id(_get(span, "traceId", "trace_id"), 16),
        span_id=_hex_id(_get(span, "spanId", "span_id"), 8),
        parent_span_id=_hex_id(_get(span, "parentSpanId", "parent_span_id"), 8) or None,
        start_ns=start,
        end_ns=end or start,
        # OTLP numbers kinds from 1 (INTERNAL); the SDK from 0, as in `from_otlp`.
        kind=max(_enum(span.get("kind"), _SPAN_KINDS, "kind") - 1, 0),
        status=StatusView(
            _enum(status.get("code"), _STATUS_CODES, "status.code"),
            _text(status.get("message"), "status.message"),
        ),
        attributes=_json_attributes(span.get("attributes")),
        events=tuple(
            EventView(
                _text(e.get("name"), "event name"),
                _nanos(_get(e, "timeUnixNano", "time_unix_nano"), "timeUnixNano"),
                _json_attributes(e.get("attributes")),
            )
            for e in _objects(span.get("events"), "events")
        ),
        links=tuple(
            LinkView(
                _hex_id(_get(link, "traceId", "trace_id"), 16),
                _hex_id(_get(link, "spanId", "span_id"), 8),
                _json_attributes(link.get("attributes")),
            )
            for link in _objects(span.get("links"), "links")
        ),
        resource=resource,
        scope_name=scope[0],
        scope_version=scope[1],
    )


def _list(obj: Mapping[str, Any], camel: str, snake: str) -> Iterator[Mapping[str, Any]]:
    """The objects of a repeated message field; a field of another type makes the request
    undecodable (400), as protobuf's JSON mapping says, not an empty export (200)."""
    yield from _objects(_get(obj, camel, snake), camel)


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
        resource_obj = _object(resource_spans.get("resource"), "resource")
        resource = _json_attributes(resource_obj.get("attributes"))
        for scope_spans in _list(resource_spans, "scopeSpans", "scope_spans"):
            scope_obj = _object(scope_spans.get("scope"), "scope")
            scope = (
                _text(scope_obj.get("name"), "scope name"),
                _text(scope_obj.get("version"), "scope version"),
            )
            for span in _list(scope_spans, "spans", "spans"):
                view = _json_span(span, resource, scope)
                if _has_valid_ids(view):
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
