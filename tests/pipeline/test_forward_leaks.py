"""Secrets in the parts of a passed-on span that are not plain strings: a command line split
into argv elements, maps nested in attribute values (OTLP kvlist), and an `errscope.field`
the record refused. None may reach a stored row or a passed-on span."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from dataclasses import asdict
from typing import Any

import pytest
from opentelemetry.proto.resource.v1.resource_pb2 import Resource as PbResource
from opentelemetry.proto.trace.v1.trace_pb2 import Span as PbSpan
from opentelemetry.proto.trace.v1.trace_pb2 import Status as PbStatus

from errscope.collector.pipeline import NonToolPolicy, Pipeline, Processed
from errscope.collector.receive.otlp_decode import decode_json
from errscope.collector.spanview import SpanView, from_otlp, from_readable, to_readable
from tests.pipeline.spans import RESOURCE, make_span

TOOL = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "get_job"}
PASSWORD = "Tr0ub4dor-and-3"  # no rule knows this shape: only its name or flag gives it away
STRIPE_KEY = "sk_live_" + "4eC39HqLyjWDarjtT1zdp7dc"
MASKED = "[REDACTED:secret-named-attribute]"


def _strings(value: Any) -> Iterator[str]:
    """Every string in a nested value, map keys and bytes (as latin-1) included."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, bytes):
        yield value.decode("latin-1")
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _strings(key)
            yield from _strings(item)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from _strings(item)


def _kept_text(out: Processed) -> str:
    parts = [asdict(part) for part in (out.record, out.forward) if part is not None]
    return "\n".join(_strings(parts))


def _any_value(value: Any) -> dict[str, Any]:
    """A Python value as an OTLP/JSON AnyValue."""
    if isinstance(value, str):
        return {"stringValue": value}
    if isinstance(value, bytes):
        return {"bytesValue": base64.b64encode(value).decode()}
    if isinstance(value, bool):
        return {"boolValue": value}
    if isinstance(value, int):
        return {"intValue": str(value)}
    if isinstance(value, dict):
        return {"kvlistValue": {"values": _key_values(value)}}
    return {"arrayValue": {"values": [_any_value(v) for v in value]}}


def _key_values(attrs: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"key": k, "value": _any_value(v)} for k, v in attrs.items()]


def _otlp_span(
    name: str,
    attributes: dict[str, Any],
    *,
    resource: dict[str, Any] | None = None,
    link_attributes: dict[str, Any] | None = None,
) -> SpanView:
    """One span decoded from an OTLP/JSON export request, as the sidecar receives it (the
    SDK cannot set a map-valued attribute; other exporters and collectors can)."""
    span: dict[str, Any] = {
        "traceId": "0af7651916cd43dd8448eb211c80319c",
        "spanId": "b7ad6b7169203331",
        "name": name,
        "startTimeUnixNano": "1700000000000000000",
        "endTimeUnixNano": "1700000000100000000",
        "attributes": _key_values(attributes),
    }
    if link_attributes is not None:
        span["links"] = [
            {
                "traceId": "1" * 32,
                "spanId": "2" * 16,
                "attributes": _key_values(link_attributes),
            }
        ]
    body = {
        "resourceSpans": [
            {
                "resource": {"attributes": _key_values(resource or dict(RESOURCE))},
                "scopeSpans": [{"scope": {"name": "tests"}, "spans": [span]}],
            }
        ]
    }
    (view,) = decode_json(json.dumps(body).encode()).spans
    return view


# ------------------------------------------------------------------ command lines


@pytest.mark.parametrize(
    ("name", "attributes", "policy"),
    [
        pytest.param("execute_tool get_job", TOOL, NonToolPolicy.SCRUB, id="tool"),
        pytest.param("db.query", {}, NonToolPolicy.SCRUB, id="non-tool-scrub"),
        pytest.param("db.query", {}, NonToolPolicy.PASS, id="non-tool-pass"),
    ],
)
def test_the_command_line_is_not_passed_on(
    name: str, attributes: dict[str, Any], policy: NonToolPolicy
) -> None:
    """`process.command_args` and `process.command_line` (the SDK's process detector) are
    dropped from every passed-on resource: a flag and its value in separate argv elements
    are each scrubbed alone, so the value would pass.  The rest of the resource stays."""
    resource = {
        **RESOURCE,
        "process.command_args": ["python", "agent.py", "--password", PASSWORD],
        "process.command_line": f"python agent.py --db-password {PASSWORD}",
        "process.pid": 4242,
    }
    out = Pipeline(non_tool=policy).process(
        from_readable(make_span(name, attributes, resource=resource))
    )
    assert out.forward is not None
    assert PASSWORD not in _kept_text(out)
    kept = out.forward.resource
    assert "process.command_args" not in kept
    assert "process.command_line" not in kept
    assert (kept["service.name"], kept["process.pid"]) == ("weather-agent", 4242)


# ------------------------------------------------------------------ nested maps

_NESTED = [
    pytest.param("app.config", {"db": {"password": PASSWORD}}, PASSWORD, id="nested-name"),
    pytest.param("app.config", {"blob": PASSWORD.encode()}, PASSWORD, id="nested-bytes"),
    pytest.param("app.config", {"keys": {STRIPE_KEY: 1}}, STRIPE_KEY, id="nested-key"),
    pytest.param(
        "app.users", ({"name": "bob", "password": PASSWORD},), PASSWORD, id="array-of-maps"
    ),
    pytest.param("app.blobs", ("ok", PASSWORD.encode()), PASSWORD, id="bytes-in-array"),
    # A map under a credential name: its keys stay, every value in it is masked.
    pytest.param("app.credentials", {"user": "bob", "pw": PASSWORD}, PASSWORD, id="map-named"),
]
_POLICIES = [NonToolPolicy.SCRUB, NonToolPolicy.PASS]


@pytest.mark.parametrize("policy", _POLICIES)
@pytest.mark.parametrize(("key", "value", "secret"), _NESTED)
def test_nested_maps_in_non_tool_attributes_are_scrubbed(
    policy: NonToolPolicy, key: str, value: Any, secret: str
) -> None:
    """A credential name, bytes or a key-shaped key at any depth of a map-valued attribute
    is found as it is at the top: the one-scan fast path must not pass the map unread."""
    out = Pipeline(non_tool=policy).process(_otlp_span("db.query", {key: value}))
    assert out.forward is not None
    assert secret not in _kept_text(out)
    assert out.redactions


@pytest.mark.parametrize("policy", _POLICIES)
@pytest.mark.parametrize(("key", "value", "secret"), _NESTED)
@pytest.mark.parametrize("name", ["execute_tool get_job", "db.query"])
@pytest.mark.parametrize("where", ["resource", "link"])
def test_nested_maps_in_resource_and_link_attributes_are_scrubbed(
    where: str, name: str, policy: NonToolPolicy, key: str, value: Any, secret: str
) -> None:
    """Resource and link attributes pass on with tool and non-tool spans alike: nested maps
    in them are scrubbed the same way."""
    attributes = TOOL if name.startswith("execute_tool") else {}
    view = (
        _otlp_span(name, attributes, resource={**RESOURCE, key: value})
        if where == "resource"
        else _otlp_span(name, attributes, link_attributes={key: value})
    )
    out = Pipeline(non_tool=policy).process(view)
    assert out.forward is not None
    assert secret not in _kept_text(out)
    assert out.redactions


def test_nested_masks_keep_the_map_shape_and_clean_maps_pass_unchanged() -> None:
    """Only the secret is masked (the map and its other entries stay); a map with nothing
    secret in it is passed on exactly as it came."""
    config = {"db": {"host": "db.internal", "port": 5432, "password": PASSWORD}, "debug": True}
    out = Pipeline().process(_otlp_span("db.query", {"app.config": config}))
    assert out.forward is not None
    assert out.forward.attributes["app.config"] == {
        "db": {"host": "db.internal", "port": 5432, "password": MASKED},
        "debug": True,
    }
    clean = {"db": {"host": "db.internal", "port": 5432}, "tags": ("a", "b")}
    out = Pipeline().process(_otlp_span("db.query", {"app.config": clean}))
    assert out.forward is not None
    assert out.forward.attributes["app.config"] == clean
    assert not out.redactions


# ------------------------------------------------------------------ errscope.field


@pytest.mark.parametrize(
    ("attributes", "field"),
    [
        # Shaped like an AWS secret key, with no name to say so: not an identifier.
        pytest.param(
            {"errscope.code": "invalid_args", "errscope.field": "wJalrXUtnFEMI/K7MDENG/bPxRfi"},
            None,
            id="refused-by-the-record",
        ),
        pytest.param({"errscope.field": "db password hunter2x"}, None, id="successful-call"),
        pytest.param(
            {"errscope.code": "invalid_args", "errscope.field": "owner"}, "owner", id="kept"
        ),
    ],
)
def test_errscope_field_is_passed_on_only_as_the_record_keeps_it(
    attributes: dict[str, Any], field: str | None
) -> None:
    """The passed-on `errscope.field` is the record's field or nothing: an incoming value
    the record refused, or any value on a call that succeeded, is not passed on."""
    span = make_span("execute_tool get_job", {**TOOL, **attributes})
    out = Pipeline().process(from_readable(span))
    assert out.record is not None
    assert out.forward is not None
    assert out.record.field == field
    assert out.forward.attributes.get("errscope.field") == field


def test_a_status_code_past_error_from_protobuf_forwards_as_unset() -> None:
    """proto3 enums are open: a sender's status code 7 must not fail the span's forwarding."""
    span = PbSpan(
        trace_id=bytes(range(1, 17)),
        span_id=bytes(range(1, 9)),
        name="db.query",
        start_time_unix_nano=1,
        end_time_unix_nano=2,
        status=PbStatus(code=7, message="odd"),  # type: ignore[arg-type]
    )
    out = Pipeline().process(from_otlp(span, PbResource()))
    assert out.forward is not None
    assert out.forward.status.code == 0
    assert to_readable(out.forward).status.is_unset
