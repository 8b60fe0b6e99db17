"""A neutral view of one span, and adapters to and from the two shapes spans arrive in.

The pipeline sees only `SpanView`: name, kind, ids (lower-case hex), times (ns), status,
attributes, events, links, resource and scope.  `from_readable` adapts the OpenTelemetry
SDK's `ReadableSpan` (in-process use); `from_otlp` adapts an OTLP protobuf span with its
resource and scope (the sidecar).  `to_readable` turns a (scrubbed) view back into a
`ReadableSpan`, which every SDK exporter — the OTLP exporters included — accepts, so the
in-process exporter and the sidecar's forwarder pass on the same thing.

Attribute values keep their OTLP shape: primitives, tuples for arrays, dicts for
key-value lists.  Adapters never raise on odd input; they drop what they cannot read.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Final, TypeAlias

import orjson
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.resource.v1.resource_pb2 import Resource as PbResource
from opentelemetry.proto.trace.v1.trace_pb2 import ScopeSpans
from opentelemetry.proto.trace.v1.trace_pb2 import Span as PbSpan
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import Event, ReadableSpan
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import Link, SpanContext, SpanKind, TraceFlags, TraceState
from opentelemetry.trace.status import Status, StatusCode

__all__ = [
    "AttrValue",
    "EventView",
    "LinkView",
    "SpanView",
    "StatusView",
    "from_otlp",
    "from_readable",
    "to_readable",
]

AttrValue: TypeAlias = (
    "str | bool | int | float | bytes | tuple[AttrValue, ...] | dict[str, AttrValue]"
)
Attributes: TypeAlias = Mapping[str, AttrValue]

STATUS_UNSET: Final = 0
STATUS_OK: Final = 1
STATUS_ERROR: Final = 2
_MAX_DEPTH: Final = 16  # nested OTLP values deeper than this are cut (no stack overflow)


@dataclass(frozen=True, slots=True)
class StatusView:
    """Span status: 0 unset, 1 ok, 2 error (the OTLP numbering), and its description."""

    code: int = STATUS_UNSET
    message: str = ""


@dataclass(frozen=True, slots=True)
class EventView:
    """A span event: name, time and attributes."""

    name: str
    time_ns: int
    attributes: Attributes = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class LinkView:
    """A link to another span, with its attributes."""

    trace_id: str
    span_id: str
    attributes: Attributes = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class SpanView:
    """The one shape of a span the pipeline reads; ids are lower-case hex strings."""

    name: str
    trace_id: str
    span_id: str
    start_ns: int
    end_ns: int
    kind: int = SpanKind.INTERNAL.value
    parent_span_id: str | None = None
    status: StatusView = StatusView()
    attributes: Attributes = field(default_factory=dict)
    events: tuple[EventView, ...] = ()
    links: tuple[LinkView, ...] = ()
    resource: Attributes = field(default_factory=dict)
    scope_name: str = ""
    scope_version: str = ""
    trace_flags: int = 1
    trace_state: str = ""


# ------------------------------------------------------------------ SDK ReadableSpan


_SDK_SCALARS: Final = (str, bool, int, float, bytes)


def _sdk_value(value: Any) -> AttrValue:
    if isinstance(value, _SDK_SCALARS):
        return value
    if isinstance(value, Iterable):
        return tuple(v for v in (_sdk_value(x) for x in value) if v is not None)
    return str(value)


def _sdk_attributes(attributes: Mapping[str, Any] | None) -> dict[str, AttrValue]:
    return {str(k): _sdk_value(v) for k, v in (attributes or {}).items()}


class _ResourceMemo(threading.local):
    """The last resource adapted on this thread: a provider's spans all share one."""

    resource: object = None
    attributes: Mapping[str, AttrValue] = MappingProxyType({})


_RESOURCE_MEMO: Final = _ResourceMemo()


def _sdk_resource(resource: Any) -> Mapping[str, AttrValue]:
    memo = _RESOURCE_MEMO
    if resource is not memo.resource:
        # Read-only, since every span of the provider will share the one mapping.
        memo.attributes = MappingProxyType(
            _sdk_attributes(resource.attributes if resource else None)
        )
        memo.resource = resource
    return memo.attributes


def from_readable(span: ReadableSpan) -> SpanView:
    """Adapt an SDK `ReadableSpan` (what a SpanExporter receives)."""
    context = span.context
    parent = span.parent
    scope = span.instrumentation_scope
    status = span.status
    return SpanView(
        name=span.name,
        trace_id=f"{context.trace_id:032x}" if context else "0" * 32,
        span_id=f"{context.span_id:016x}" if context else "0" * 16,
        parent_span_id=f"{parent.span_id:016x}" if parent else None,
        start_ns=span.start_time or 0,
        end_ns=span.end_time or span.start_time or 0,
        kind=span.kind.value,
        status=StatusView(status.status_code.value, status.description or ""),
        attributes=_sdk_attributes(span.attributes),
        events=tuple(
            EventView(e.name, e.timestamp or 0, _sdk_attributes(e.attributes)) for e in span.events
        ),
        links=tuple(
            LinkView(
                f"{link.context.trace_id:032x}",
                f"{link.context.span_id:016x}",
                _sdk_attributes(link.attributes),
            )
            for link in span.links
        ),
        resource=_sdk_resource(span.resource),
        scope_name=scope.name if scope else "",
        scope_version=(scope.version or "") if scope else "",
        trace_flags=int(context.trace_flags) if context else 1,
        trace_state=context.trace_state.to_header() if context and context.trace_state else "",
    )


def _to_sdk_value(value: AttrValue) -> Any:
    """SDK attributes hold primitives or flat sequences; nested values travel as JSON text."""
    if isinstance(value, dict):
        return orjson.dumps(value, default=str).decode()
    if isinstance(value, tuple):
        flat = [v for v in value if isinstance(v, str | bool | int | float)]
        if len({type(v) for v in flat}) > 1:
            return [str(v) for v in flat]
        return flat
    if isinstance(value, bytes):
        return value.hex()
    return value


def to_readable(view: SpanView) -> ReadableSpan:
    """Build an SDK `ReadableSpan` from a view, for SDK exporters (OTLP included)."""
    flags = TraceFlags(view.trace_flags & 0xFF)
    state = TraceState.from_header([view.trace_state]) if view.trace_state else TraceState()
    context = SpanContext(int(view.trace_id, 16), int(view.span_id, 16), False, flags, state)
    parent = (
        SpanContext(int(view.trace_id, 16), int(view.parent_span_id, 16), False, flags)
        if view.parent_span_id
        else None
    )
    return ReadableSpan(
        name=view.name,
        context=context,
        parent=parent,
        resource=Resource({k: _to_sdk_value(v) for k, v in view.resource.items()}),
        attributes={k: _to_sdk_value(v) for k, v in view.attributes.items()},
        events=[
            Event(e.name, {k: _to_sdk_value(v) for k, v in e.attributes.items()}, e.time_ns)
            for e in view.events
        ],
        links=[
            Link(
                SpanContext(int(link.trace_id, 16), int(link.span_id, 16), False),
                {k: _to_sdk_value(v) for k, v in link.attributes.items()},
            )
            for link in view.links
        ],
        kind=SpanKind(view.kind) if view.kind in {k.value for k in SpanKind} else SpanKind.INTERNAL,
        status=Status(StatusCode(view.status.code), view.status.message or None)
        if view.status.code == STATUS_ERROR
        else Status(StatusCode(view.status.code)),
        start_time=view.start_ns,
        end_time=view.end_ns,
        instrumentation_scope=InstrumentationScope(view.scope_name, view.scope_version or None),
    )


# ------------------------------------------------------------------ OTLP protobuf


def _pb_value(value: AnyValue, depth: int = 0) -> AttrValue | None:
    kind = value.WhichOneof("value")
    match kind:
        case "string_value":
            return value.string_value
        case "bool_value":
            return value.bool_value
        case "int_value":
            return value.int_value
        case "double_value":
            return value.double_value
        case "bytes_value":
            return value.bytes_value
        case "array_value" if depth < _MAX_DEPTH:
            items = (_pb_value(v, depth + 1) for v in value.array_value.values)
            return tuple(v for v in items if v is not None)
        case "kvlist_value" if depth < _MAX_DEPTH:
            return _pb_attributes(value.kvlist_value.values, depth + 1)
        case _:
            return None


def _pb_attributes(pairs: Iterable[KeyValue], depth: int = 0) -> dict[str, AttrValue]:
    out: dict[str, AttrValue] = {}
    for pair in pairs:
        value = _pb_value(pair.value, depth)
        if value is not None:
            out[pair.key] = value
    return out


def _hex(raw: bytes, size: int) -> str:
    return raw.hex() if len(raw) == size else ""


def otlp_resource(resource: PbResource) -> Attributes:
    """A resource's attributes, read once for all the spans that share it (read-only)."""
    return MappingProxyType(_pb_attributes(resource.attributes))


def from_otlp(
    span: PbSpan,
    resource: PbResource | Attributes,
    scope: ScopeSpans | None = None,
) -> SpanView:
    """Adapt one OTLP protobuf span with its resource and scope (what the sidecar receives).

    `resource` may be what `otlp_resource` made of it, so a request's spans share one.
    A span whose trace or span id is not the right size keeps an empty id; the pipeline
    rejects it (the OTLP answer counts it in partial_success).
    """
    status = span.status
    return SpanView(
        name=span.name,
        trace_id=_hex(span.trace_id, 16),
        span_id=_hex(span.span_id, 8),
        parent_span_id=_hex(span.parent_span_id, 8) or None,
        start_ns=span.start_time_unix_nano,
        end_ns=span.end_time_unix_nano or span.start_time_unix_nano,
        kind=max(span.kind - 1, 0),  # OTLP numbers kinds from 1 (INTERNAL); the SDK from 0
        # proto3 enums are open: a code past ERROR reaches here as a number; read it as unset.
        status=StatusView(status.code if 0 <= status.code <= STATUS_ERROR else 0, status.message),
        attributes=_pb_attributes(span.attributes),
        events=tuple(
            EventView(e.name, e.time_unix_nano, _pb_attributes(e.attributes)) for e in span.events
        ),
        links=tuple(
            LinkView(
                _hex(link.trace_id, 16), _hex(link.span_id, 8), _pb_attributes(link.attributes)
            )
            for link in span.links
        ),
        resource=otlp_resource(resource) if isinstance(resource, PbResource) else resource,
        scope_name=scope.scope.name if scope is not None else "",
        scope_version=scope.scope.version if scope is not None else "",
        trace_flags=span.flags & 0xFF if span.flags else 1,
        trace_state=span.trace_state,
    )
