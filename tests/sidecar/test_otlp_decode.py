"""The OTLP/HTTP decoding layer on its own: bodies in, spans or one of its own errors out."""

from __future__ import annotations

import copy
import gzip
import json
import zlib
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from errscope.collector.receive.otlp_decode import (
    BodyTooLargeError,
    Decoded,
    OtlpDecodeError,
    UnsupportedEncodingError,
    decode_json,
    decode_protobuf,
    read_body,
)

PAYLOAD = b"an OTLP export request, or any bytes" * 200


def _raw_deflate(data: bytes) -> bytes:
    compressor = zlib.compressobj(wbits=-zlib.MAX_WBITS)
    return compressor.compress(data) + compressor.flush()


def _pb_request(*trace_ids: bytes, span_id: bytes = b"\x01" * 8) -> bytes:
    """A protobuf export request with one resource (and one span) per trace id."""
    request = ExportTraceServiceRequest()
    for trace_id in trace_ids:
        span = request.resource_spans.add().scope_spans.add().spans.add()
        span.trace_id, span.span_id, span.name = trace_id, span_id, "execute_tool get_job"
    return request.SerializeToString()


# ------------------------------------------------------------------ read_body


@pytest.mark.parametrize(
    ("raw", "encoding"),
    [
        pytest.param(PAYLOAD, "", id="no-encoding"),
        pytest.param(PAYLOAD, "identity", id="identity"),
        pytest.param(gzip.compress(PAYLOAD), "gzip", id="gzip"),
        pytest.param(gzip.compress(PAYLOAD), " GZIP ", id="gzip-case-and-space"),
        pytest.param(gzip.compress(PAYLOAD), "x-gzip", id="x-gzip"),
        # RFC 1952 §2.2: a gzip body is a series of members, all of which are the body.
        pytest.param(
            gzip.compress(PAYLOAD[:1000]) + gzip.compress(PAYLOAD[1000:]), "gzip", id="two-members"
        ),
        pytest.param(zlib.compress(PAYLOAD), "deflate", id="deflate-zlib"),
        # Some clients send raw deflate as "deflate"; browsers read it too.
        pytest.param(_raw_deflate(PAYLOAD), "deflate", id="deflate-raw"),
    ],
)
def test_read_body_reads_every_supported_coding(raw: bytes, encoding: str) -> None:
    """Every supported coding yields the whole original body."""
    assert read_body(raw, encoding) == PAYLOAD


@pytest.mark.parametrize("encoding", ["gzip", "deflate"])
def test_read_body_keeps_an_empty_compressed_body_empty(encoding: str) -> None:
    """An empty body under a coding is an empty request: nothing was sent, nothing is lost."""
    assert read_body(b"", encoding) == b""


@pytest.mark.parametrize(
    ("raw", "encoding"),
    [
        pytest.param(gzip.compress(PAYLOAD)[:-9], "gzip", id="gzip-cut-in-trailer"),
        pytest.param(gzip.compress(PAYLOAD)[:-1], "gzip", id="gzip-cut-by-one-byte"),
        pytest.param(gzip.compress(PAYLOAD)[:40], "gzip", id="gzip-cut-in-data"),
        pytest.param(gzip.compress(PAYLOAD)[:5], "gzip", id="gzip-cut-in-header"),
        pytest.param(
            gzip.compress(PAYLOAD) + gzip.compress(PAYLOAD)[:30], "gzip", id="second-member-cut"
        ),
        pytest.param(gzip.compress(PAYLOAD) + b"GARBAGE", "gzip", id="gzip-trailing-garbage"),
        # GNU gzip skips trailing zeros with a warning; a request has no tape blocks to pad.
        pytest.param(gzip.compress(PAYLOAD) + b"\x00" * 8, "gzip", id="gzip-trailing-zeros"),
        pytest.param(zlib.compress(PAYLOAD)[:-3], "deflate", id="deflate-cut"),
        pytest.param(zlib.compress(PAYLOAD) + b"x", "deflate", id="deflate-trailing-garbage"),
        pytest.param(zlib.compress(PAYLOAD) * 2, "deflate", id="deflate-has-one-stream"),
        pytest.param(b"not gzip at all", "gzip", id="not-gzip"),
        pytest.param(gzip.compress(b"x") * 1025, "gzip", id="too-many-members"),
    ],
)
def test_read_body_refuses_a_cut_or_padded_stream(raw: bytes, encoding: str) -> None:
    """A compressed body that is cut short, corrupt or followed by other bytes is 400, not a
    200 that silently drops the spans in the missing part."""
    with pytest.raises(OtlpDecodeError) as caught:
        read_body(raw, encoding)
    assert not isinstance(caught.value, UnsupportedEncodingError)


@pytest.mark.parametrize(
    "encoding", ["br", "zstd", "compress", "gzip, identity", "deflate, gzip", "gzip;q=1"]
)
def test_read_body_refuses_an_unsupported_coding_distinctly(encoding: str) -> None:
    """A coding errscope does not read raises UnsupportedEncodingError (HTTP 415), still an
    OtlpDecodeError so an older caller answers 400 rather than guess."""
    with pytest.raises(UnsupportedEncodingError):
        read_body(gzip.compress(PAYLOAD), encoding)
    assert issubclass(UnsupportedEncodingError, OtlpDecodeError)


def test_read_body_limit_counts_all_gzip_members() -> None:
    """The decompressed-size limit holds across members: a bomb split in two still stops."""
    member = gzip.compress(b"\x00" * 600_000)
    assert len(read_body(member, "gzip", max_bytes=1_000_000)) == 600_000
    with pytest.raises(BodyTooLargeError):
        read_body(member + member, "gzip", max_bytes=1_000_000)


def test_no_span_of_a_multi_member_gzip_body_is_dropped() -> None:
    """Each gzip member's spans are decoded: members concatenate to one protobuf request."""
    first, second = _pb_request(b"\x0a" * 16), _pb_request(b"\x0b" * 16)
    decoded = decode_protobuf(read_body(gzip.compress(first) + gzip.compress(second), "gzip"))
    assert [s.trace_id for s in decoded.spans] == ["0a" * 16, "0b" * 16]


@settings(max_examples=300, deadline=None)
@given(
    raw=st.binary(max_size=512) | st.sampled_from([gzip.compress(PAYLOAD), zlib.compress(PAYLOAD)]),
    cut=st.integers(0, 600),
    encoding=st.sampled_from(["gzip", "deflate", "x-gzip", "identity", "br"]),
)
def test_read_body_only_returns_bytes_or_raises_its_own_errors(
    raw: bytes, cut: int, encoding: str
) -> None:
    """Random and truncated bodies give bytes, OtlpDecodeError or BodyTooLargeError."""
    try:
        out = read_body(raw[:cut], encoding, max_bytes=4096)
    except (OtlpDecodeError, BodyTooLargeError):
        return
    assert len(out) <= 4096


# ------------------------------------------------------------------ ids


def test_all_zero_span_id_is_rejected_in_protobuf() -> None:
    """An all-zero span id is invalid (as an all-zero trace id is): counted as rejected."""
    decoded = decode_protobuf(_pb_request(b"\x0a" * 16, span_id=b"\x00" * 8))
    assert (decoded.spans, decoded.rejected) == ([], 1)


def test_all_zero_trace_id_is_rejected_in_protobuf() -> None:
    """An all-zero trace id is rejected at decode time, on the gRPC path too."""
    decoded = decode_protobuf(_pb_request(b"\x00" * 16))
    assert (decoded.spans, decoded.rejected) == ([], 1)


# ------------------------------------------------------------------ OTLP/JSON


def _json_span(**fields: Any) -> dict[str, Any]:
    span: dict[str, Any] = {
        "traceId": "5b8efff798038103d269b633813fc60c",
        "spanId": "eee19b7ec3c1b174",
        "name": "execute_tool get_job",
        "kind": 3,
        "startTimeUnixNano": "1700000000000000000",
        "endTimeUnixNano": "1700000000100000000",
        "attributes": [{"key": "gen_ai.tool.name", "value": {"stringValue": "get_job"}}],
        "status": {"code": 2, "message": "boom"},
        "events": [{"name": "exception", "timeUnixNano": "1700000000050000000"}],
        "links": [],
    }
    span.update(fields)
    return span


def _json_request(*spans: dict[str, Any]) -> dict[str, Any]:
    return {
        "resourceSpans": [
            {
                "resource": {
                    "attributes": [{"key": "service.name", "value": {"stringValue": "agent"}}]
                },
                "scopeSpans": [{"scope": {"name": "h3", "version": "1"}, "spans": list(spans)}],
            }
        ]
    }


def _decode(document: Any) -> Decoded:
    return decode_json(json.dumps(document).encode())


def _with_attribute(value: Any) -> dict[str, Any]:
    span = _json_span()
    span["attributes"].append({"key": "k", "value": value})
    return _json_request(span)


@pytest.mark.parametrize(
    ("code", "expected"),
    [
        pytest.param(2, 2, id="integer"),
        pytest.param(2.0, 2, id="integral-float"),
        pytest.param("2", 2, id="numeric-string"),
        # The proto3 JSON mapping writes names; OTLP forbids senders them but they arrive.
        pytest.param("STATUS_CODE_ERROR", 2, id="name-error"),
        pytest.param("STATUS_CODE_OK", 1, id="name-ok"),
        pytest.param("STATUS_CODE_UNSET", 0, id="name-unset"),
        pytest.param(None, 0, id="null-is-unset"),
    ],
)
def test_json_status_code_forms(code: Any, expected: int) -> None:
    """status.code is read as an integer, integral float, numeric string or enum name."""
    decoded = _decode(_json_request(_json_span(status={"code": code})))
    assert decoded.spans[0].status.code == expected


@pytest.mark.parametrize(
    ("kind", "expected"),
    [
        pytest.param(3, 2, id="integer"),
        pytest.param(3.0, 2, id="integral-float"),
        pytest.param("3", 2, id="numeric-string"),
        pytest.param("SPAN_KIND_CLIENT", 2, id="name-client"),  # SDK numbering: CLIENT is 2
        pytest.param("SPAN_KIND_SERVER", 1, id="name-server"),
        pytest.param("SPAN_KIND_UNSPECIFIED", 0, id="name-unspecified"),
        pytest.param(None, 0, id="null-is-internal"),
    ],
)
def test_json_span_kind_forms(kind: Any, expected: int) -> None:
    """kind is read in the same forms as status.code, as the SDK numbers it."""
    decoded = _decode(_json_request(_json_span(kind=kind)))
    assert decoded.spans[0].kind == expected


@pytest.mark.parametrize(
    "value",
    [
        pytest.param(True, id="bool"),  # a bool is an int to Python, not to JSON
        pytest.param(2.5, id="fraction"),
        pytest.param("2.0", id="float-string"),
        pytest.param(" 2", id="padded-string"),
        pytest.param("STATUS_CODE_BOGUS", id="unknown-name"),
        pytest.param("status_code_error", id="name-wrong-case"),
        pytest.param(2**31, id="past-int32"),
        pytest.param([2], id="list"),
        pytest.param({"code": 2}, id="object"),
    ],
)
@pytest.mark.parametrize("field", ["status.code", "kind"])
def test_json_enum_refuses_anything_else(field: str, value: Any) -> None:
    """Any other enum value makes the request unreadable, never a silent unset status."""
    span = _json_span(status={"code": value}) if field == "status.code" else _json_span(kind=value)
    with pytest.raises(OtlpDecodeError):
        _decode(_json_request(span))


@pytest.mark.parametrize("value", [7, -1, "7"])
def test_a_json_enum_number_otlp_does_not_define_reads_as_unspecified(value: Any) -> None:
    """An enum number OTLP does not define (yet) reads as 0, as protobuf's open enums let
    the same span through in the binary encoding: one such span does not cost the batch
    (a 400 is not retried) and both encodings answer alike."""
    good = _json_span()
    odd_kind = _json_span(spanId="00000000000000b1", kind=value)
    odd_status = _json_span(spanId="00000000000000b2", status={"code": value})
    decoded = _decode(_json_request(good, odd_kind, odd_status))
    assert len(decoded.spans) == 3
    assert decoded.spans[1].kind == 0
    assert decoded.spans[2].status.code == 0


def test_json_all_zero_span_id_is_rejected() -> None:
    """An all-zero span id in JSON is counted as rejected, as an all-zero trace id is."""
    decoded = _decode(
        _json_request(_json_span(spanId="0" * 16), _json_span(traceId="0" * 32), _json_span())
    )
    assert (len(decoded.spans), decoded.rejected) == (1, 2)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        pytest.param({"arrayValue": {"values": [{"stringValue": "a"}]}}, ("a",), id="array"),
        pytest.param({"arrayValue": {}}, (), id="array-empty"),
        pytest.param({"arrayValue": {"values": [None, {"intValue": 1}]}}, (1,), id="array-null"),
        pytest.param(
            {"kvlistValue": {"values": [{"key": "a", "value": {"boolValue": True}}]}},
            {"a": True},
            id="kvlist",
        ),
        pytest.param({"intValue": "503"}, 503, id="int-string"),
        pytest.param({"intValue": 503}, 503, id="int-number"),
        pytest.param({"doubleValue": "NaN"}, None, id="double-nan"),  # NaN != NaN: checked below
        pytest.param({"doubleValue": 1}, 1.0, id="double-integer"),
        pytest.param({"bytesValue": "AAE="}, b"", id="bytes"),
        pytest.param({"futureValue": 3}, None, id="unknown-kind-dropped"),
        pytest.param({}, None, id="empty-dropped"),
        pytest.param(None, None, id="null-dropped"),
        pytest.param({"stringValue": None}, None, id="null-string-dropped"),
    ],
)
def test_json_attribute_values_that_read(value: Any, expected: Any) -> None:
    """Well-formed AnyValues read to their value; empty or unknown kinds drop the attribute."""
    attributes = _decode(_with_attribute(value)).spans[0].attributes
    if value == {"doubleValue": "NaN"}:
        assert attributes["k"] != attributes["k"]
    elif expected is None:
        assert "k" not in attributes
    else:
        assert attributes["k"] == expected


@pytest.mark.parametrize(
    "document",
    [
        # The shapes the review found killing the handler (AttributeError, no answer).
        pytest.param(_with_attribute({"arrayValue": "x"}), id="arrayValue-string"),
        pytest.param(_with_attribute({"arrayValue": []}), id="arrayValue-empty-list"),
        pytest.param(_with_attribute({"arrayValue": [{"stringValue": "a"}]}), id="arrayValue-list"),
        pytest.param(_with_attribute({"arrayValue": 1}), id="arrayValue-int"),
        pytest.param(_with_attribute({"kvlistValue": 5}), id="kvlistValue-int"),
        pytest.param(_with_attribute({"kvlistValue": "x"}), id="kvlistValue-string"),
        pytest.param(_with_attribute({"arrayValue": {"values": "x"}}), id="array-values-string"),
        pytest.param(_with_attribute({"arrayValue": {"values": [1]}}), id="array-item-int"),
        pytest.param(_with_attribute({"kvlistValue": {"values": {}}}), id="kvlist-values-object"),
        pytest.param(_with_attribute("x"), id="value-string"),
        pytest.param(_with_attribute({"stringValue": 5}), id="stringValue-number"),
        pytest.param(_with_attribute({"boolValue": "true"}), id="boolValue-string"),
        pytest.param(_with_attribute({"intValue": "abc"}), id="intValue-text"),
        pytest.param(_with_attribute({"intValue": 1.5}), id="intValue-fraction"),
        pytest.param(_with_attribute({"intValue": str(2**63)}), id="intValue-over-int64"),
        pytest.param(_with_attribute({"doubleValue": "x"}), id="doubleValue-text"),
        pytest.param(_with_attribute({"bytesValue": 1}), id="bytesValue-number"),
        pytest.param(_json_request(_json_span(attributes={})), id="attributes-object"),
        pytest.param(_json_request(_json_span(attributes=[1])), id="attribute-int"),
        pytest.param(
            _json_request(_json_span(attributes=[{"key": 1, "value": {}}])), id="key-number"
        ),
        pytest.param(_json_request(_json_span(events="x")), id="events-string"),
        pytest.param(_json_request(_json_span(events=[1])), id="event-int"),
        pytest.param(_json_request(_json_span(events=[{"name": 5}])), id="event-name-number"),
        pytest.param(
            _json_request(_json_span(events=[{"timeUnixNano": "soon"}])), id="event-time-text"
        ),
        pytest.param(
            _json_request(_json_span(events=[{"attributes": "x"}])), id="event-attributes-string"
        ),
        pytest.param(_json_request(_json_span(links={})), id="links-object"),
        pytest.param(_json_request(_json_span(links=[{"attributes": 3}])), id="link-attributes"),
        pytest.param(_json_request(_json_span(status="ERROR")), id="status-string"),
        pytest.param(_json_request(_json_span(status=[])), id="status-list"),
        pytest.param(_json_request(_json_span(status={"message": 5})), id="status-message"),
        pytest.param(_json_request(_json_span(name=5)), id="name-number"),
        pytest.param(_json_request(_json_span(startTimeUnixNano="x")), id="start-text"),
        pytest.param(_json_request(_json_span(endTimeUnixNano=1.5)), id="end-fraction"),
        pytest.param(_json_request(_json_span(endTimeUnixNano=[])), id="end-list"),
        pytest.param({"resourceSpans": [{"resource": "x"}]}, id="resource-string"),
        pytest.param({"resourceSpans": [{"resource": {"attributes": 1}}]}, id="resource-attrs"),
        pytest.param({"resourceSpans": [{"scopeSpans": [{"scope": 1}]}]}, id="scope-int"),
        pytest.param(
            {"resourceSpans": [{"scopeSpans": [{"scope": {"name": 1}}]}]}, id="scope-name"
        ),
        pytest.param(
            {"resourceSpans": [{"scopeSpans": [{"scope": {"version": []}}]}]}, id="scope-version"
        ),
        pytest.param({"resourceSpans": {}}, id="resourceSpans-object"),
        pytest.param({"resourceSpans": [{"scopeSpans": "x"}]}, id="scopeSpans-string"),
        pytest.param({"resourceSpans": [{"scopeSpans": [{"spans": {}}]}]}, id="spans-object"),
        pytest.param({"resourceSpans": [{"scopeSpans": [{"spans": [1]}]}]}, id="span-int"),
        pytest.param([], id="top-level-list"),
    ],
)
def test_json_wrong_shapes_are_unreadable(document: Any) -> None:
    """A field of the wrong JSON type makes the request a 400, never an uncaught exception
    (no answer, retried forever) nor a silently emptied field."""
    with pytest.raises(OtlpDecodeError):
        _decode(document)


def test_json_null_and_unknown_fields_read_as_defaults() -> None:
    """Null fields read as their defaults and unknown fields are ignored (OTLP/JSON rules)."""
    span = _json_span(
        status=None, events=None, links=None, attributes=None, name=None, someFutureField=[1]
    )
    document = _json_request(span)
    document["resourceSpans"][0]["resource"] = None
    document["resourceSpans"][0]["scopeSpans"][0]["scope"] = None
    (view,) = _decode(document).spans
    assert (view.status.code, view.events, view.attributes, view.name) == (0, (), {}, "")


def test_json_times_may_be_numbers() -> None:
    """int64 times as JSON numbers (integers or integral floats) read like strings."""
    (view,) = _decode(_json_request(_json_span(startTimeUnixNano=1.7e18, endTimeUnixNano=2))).spans
    assert (view.start_ns, view.end_ns) == (1_700_000_000_000_000_000, 2)


# ------------------------------------------------------------------ property

_KEYS = [
    "resourceSpans",
    "scopeSpans",
    "spans",
    "resource",
    "scope",
    "attributes",
    "key",
    "value",
    "values",
    "stringValue",
    "intValue",
    "doubleValue",
    "boolValue",
    "bytesValue",
    "arrayValue",
    "kvlistValue",
    "traceId",
    "spanId",
    "name",
    "kind",
    "status",
    "code",
    "message",
    "events",
    "links",
    "timeUnixNano",
    "startTimeUnixNano",
]
JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=12)
    | st.sampled_from(["STATUS_CODE_ERROR", "SPAN_KIND_CLIENT", "2", "0" * 16, "0" * 32]),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(st.sampled_from(_KEYS) | st.text(max_size=6), inner, max_size=5)
    ),
    max_leaves=25,
)
VALID = _json_request(
    _json_span(
        attributes=[
            {"key": "a", "value": {"arrayValue": {"values": [{"intValue": "1"}]}}},
            {"key": "m", "value": {"kvlistValue": {"values": [{"key": "x", "value": {}}]}}},
        ],
        links=[{"traceId": "5b8efff798038103d269b633813fc60c", "spanId": "eee19b7ec3c1b174"}],
    )
)


def _paths(node: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every place in a JSON document a value sits, the root included."""
    found = [path]
    if isinstance(node, dict):
        for key, child in node.items():
            found += _paths(child, (*path, key))
    elif isinstance(node, list):
        for index, child in enumerate(node):
            found += _paths(child, (*path, index))
    return found


_VALID_PATHS = _paths(VALID)


def _mutated(edits: list[tuple[tuple[Any, ...], Any]]) -> Any:
    """VALID with the value at each path replaced (a root path replaces the document)."""
    document: Any = copy.deepcopy(VALID)
    for path, value in edits:
        if not path:
            return value
        parent = document
        try:
            for step in path[:-1]:
                parent = parent[step]
            parent[path[-1]] = value
        except (KeyError, IndexError, TypeError):
            continue  # an earlier edit replaced this path's parent
    return document


MUTATED = st.lists(st.tuples(st.sampled_from(_VALID_PATHS), JSON), min_size=1, max_size=3).map(
    _mutated
)


@settings(max_examples=1500, deadline=None)
@given(document=JSON | MUTATED)
def test_json_decoder_only_returns_decoded_or_raises_otlp_decode_error(document: Any) -> None:
    """Random JSON, and valid OTLP/JSON with values replaced anywhere by random JSON, only
    ever decode or raise OtlpDecodeError: nothing else reaches the request handler."""
    try:
        decoded = _decode(document)
    except OtlpDecodeError:
        return
    assert isinstance(decoded, Decoded)
    assert all(len(s.trace_id) == 32 and s.span_id != "0" * 16 for s in decoded.spans)
