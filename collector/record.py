"""The records errscope keeps: one definition, used by the pipeline, the store and the tests.

`ToolCall` has exactly the `tool_calls` columns of the storage contract (DESIGN.md); the
other records mirror `deploys`, `tracebacks` and `redactions`.  `validate()` is the single
gate a record passes before it is stored: an over-long or non-identifier name is refused
with a typed `RecordError`, never truncated, so a stored value always means what it says.
The Arrow schemas here are what the store appends in bulk.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Final

import pyarrow as pa

from collector.errors import RecordError, RecordErrorKind

__all__ = [
    "DEPLOYS_SCHEMA",
    "REDACTIONS_SCHEMA",
    "TOOL_CALLS_SCHEMA",
    "TRACEBACKS_SCHEMA",
    "Deploy",
    "RedactionCount",
    "ToolCall",
    "TracebackSample",
    "deploys_to_arrow",
    "is_identifier",
    "is_safe_id",
    "redactions_to_arrow",
    "tool_calls_to_arrow",
    "tracebacks_to_arrow",
]

MAX_NAME_CHARS: Final = 128
MAX_ID_CHARS: Final = 128
MAX_TRACEBACK_BYTES: Final = 8192

# Tool names in the wild: `get_job`, `search.web`, `github/create_issue`, `fs:read-file`.
_TOOL_RE: Final = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.:/-]*")
# A field is a path of identifiers (`job_id`, `filters.status`, `items[0].id`): never a value.
_FIELD_RE: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*|\[\d{1,6}\])*")
# Catalog code names and safe raw codes: short lower-case identifiers.
_CODE_RE: Final = re.compile(r"[a-z][a-z0-9_]{0,47}")
_RAW_CODE_RE: Final = re.compile(r"[A-Za-z][A-Za-z0-9_.-]{0,47}")
# Correlation ids: opaque tokens without spaces or quotes (`call_mszu…`, UUIDs, `run-17`).
_ID_RE: Final = re.compile(r"[A-Za-z0-9_.:/+=@-]+")
_HEX32_RE: Final = re.compile(r"[0-9a-f]{32}")
_HEX16_RE: Final = re.compile(r"[0-9a-f]{16}")
_LABEL_RE: Final = re.compile(r"[^\x00-\x1f\x7f]+")


def is_identifier(value: str) -> bool:
    """True when `value` is a field path of identifiers, short enough to store."""
    return len(value) <= MAX_NAME_CHARS and _FIELD_RE.fullmatch(value) is not None


def is_safe_id(value: str) -> bool:
    """True when `value` has the shape of an opaque id (no spaces, quotes or controls)."""
    return 0 < len(value) <= MAX_ID_CHARS and _ID_RE.fullmatch(value) is not None


def is_safe_raw_code(value: str) -> bool:
    """True when an unknown code is short and identifier-shaped enough to keep verbatim."""
    return _RAW_CODE_RE.fullmatch(value) is not None


def _check(ok: bool, kind: RecordErrorKind, entry: str, field: str, message: str) -> None:
    if not ok:
        raise RecordError(kind, message, entry=entry, field=field)


def _check_name(entry: str, field: str, value: str | None, pattern: re.Pattern[str]) -> None:
    if value is None:
        return
    _check(
        len(value) <= MAX_NAME_CHARS,
        RecordErrorKind.TOO_LONG,
        entry,
        field,
        f"longer than {MAX_NAME_CHARS} characters ({len(value)})",
    )
    _check(
        pattern.fullmatch(value) is not None,
        RecordErrorKind.BAD_IDENTIFIER,
        entry,
        field,
        "not an identifier",
    )


def _check_id(entry: str, field: str, value: str | None) -> None:
    if value is None:
        return
    _check(
        len(value) <= MAX_ID_CHARS,
        RecordErrorKind.TOO_LONG,
        entry,
        field,
        f"longer than {MAX_ID_CHARS} characters ({len(value)})",
    )
    _check(_ID_RE.fullmatch(value) is not None, RecordErrorKind.BAD_ID, entry, field, "not an id")


def _check_label(entry: str, field: str, value: str | None) -> None:
    if value is None:
        return
    _check(
        0 < len(value) <= MAX_NAME_CHARS,
        RecordErrorKind.TOO_LONG,
        entry,
        field,
        f"empty or longer than {MAX_NAME_CHARS} characters",
    )
    _check(
        _LABEL_RE.fullmatch(value) is not None,
        RecordErrorKind.BAD_VALUE,
        entry,
        field,
        "contains control characters",
    )


def _check_trace_ids(entry: str, trace_id: str, span_id: str) -> None:
    _check(
        _HEX32_RE.fullmatch(trace_id) is not None,
        RecordErrorKind.BAD_ID,
        entry,
        "trace_id",
        "not 32 lower-case hex digits",
    )
    _check(
        _HEX16_RE.fullmatch(span_id) is not None,
        RecordErrorKind.BAD_ID,
        entry,
        "span_id",
        "not 16 lower-case hex digits",
    )


@dataclass(frozen=True, slots=True)
class ToolCall:
    """One tool-call span as errscope keeps it: a code and the ids to find the call again.

    Column for column the `tool_calls` table.  Nothing here may hold an argument, an output,
    a message or a traceback: `field` is a name, `raw_code` a short identifier kept only for
    `unknown` codes.
    """

    ts: datetime
    received_at: datetime
    service: str
    tool: str
    code: str
    trace_id: str
    span_id: str
    version: str | None = None
    environment: str | None = None
    raw_code: str | None = None
    field: str | None = None
    call_id: str | None = None
    session_id: str | None = None
    correlation_id: str | None = None
    duration_ms: float | None = None
    attempt: int | None = None
    retry_after_s: float | None = None
    http_status: int | None = None
    convention: str | None = None
    source: str | None = None
    redactions: int = 0

    def validate(self) -> None:
        """Raise `RecordError` naming the field when this record may not be stored as is."""
        entry = "tool_calls"
        _check_label(entry, "service", self.service)
        _check_label(entry, "version", self.version)
        _check_label(entry, "environment", self.environment)
        _check_name(entry, "tool", self.tool, _TOOL_RE)
        _check_name(entry, "code", self.code, _CODE_RE)
        _check_name(entry, "field", self.field, _FIELD_RE)
        if self.raw_code is not None:
            _check(
                self.code == "unknown",
                RecordErrorKind.BAD_CODE,
                entry,
                "raw_code",
                "raw_code is kept only for unknown codes",
            )
            _check(
                is_safe_raw_code(self.raw_code),
                RecordErrorKind.BAD_IDENTIFIER,
                entry,
                "raw_code",
                "not a short identifier",
            )
        _check_trace_ids(entry, self.trace_id, self.span_id)
        _check_id(entry, "call_id", self.call_id)
        _check_id(entry, "session_id", self.session_id)
        _check_id(entry, "correlation_id", self.correlation_id)
        _check_name(entry, "convention", self.convention, _CODE_RE)
        _check_name(entry, "source", self.source, _CODE_RE)
        for name, number in (
            ("duration_ms", self.duration_ms),
            ("retry_after_s", self.retry_after_s),
            ("attempt", self.attempt),
            ("http_status", self.http_status),
        ):
            _check(
                number is None or number >= 0,
                RecordErrorKind.BAD_VALUE,
                entry,
                name,
                "must not be negative",
            )
        _check(self.redactions >= 0, RecordErrorKind.BAD_VALUE, entry, "redactions", "negative")


@dataclass(frozen=True, slots=True)
class Deploy:
    """A version of a service seen (`auto`) or marked (`api`, `cli`) in an environment."""

    service: str
    version: str
    ts: datetime
    environment: str | None = None
    source: str = "auto"

    def validate(self) -> None:
        """Raise `RecordError` naming the field when this deploy may not be stored."""
        _check_label("deploys", "service", self.service)
        _check_label("deploys", "version", self.version)
        _check_label("deploys", "environment", self.environment)
        _check_name("deploys", "source", self.source, _CODE_RE)


@dataclass(frozen=True, slots=True)
class TracebackSample:
    """A redacted traceback kept for humans, linked to its call by ids."""

    ts: datetime
    service: str
    tool: str
    trace_id: str
    span_id: str
    exception_type: str
    fingerprint: str
    text: str
    version: str | None = None
    correlation_id: str | None = None

    def validate(self) -> None:
        """Raise `RecordError` naming the field when this sample may not be stored."""
        entry = "tracebacks"
        _check_label(entry, "service", self.service)
        _check_label(entry, "version", self.version)
        _check_name(entry, "tool", self.tool, _TOOL_RE)
        _check_trace_ids(entry, self.trace_id, self.span_id)
        _check_id(entry, "correlation_id", self.correlation_id)
        _check_name(entry, "exception_type", self.exception_type, _RAW_CODE_RE)
        _check_id(entry, "fingerprint", self.fingerprint)
        _check(
            len(self.text.encode()) <= MAX_TRACEBACK_BYTES,
            RecordErrorKind.TOO_LONG,
            entry,
            "text",
            f"longer than {MAX_TRACEBACK_BYTES} bytes",
        )


@dataclass(frozen=True, slots=True)
class RedactionCount:
    """How many values one scrub rule masked for one tool in one hour: a count, never a value."""

    hour: datetime
    service: str
    tool: str
    rule: str
    count: int

    def validate(self) -> None:
        """Raise `RecordError` naming the field when this count may not be stored."""
        _check_label("redactions", "service", self.service)
        _check_name("redactions", "tool", self.tool, _TOOL_RE)
        _check_name("redactions", "rule", self.rule, _RAW_CODE_RE)
        _check(self.count >= 0, RecordErrorKind.BAD_VALUE, "redactions", "count", "negative")


_TS = pa.timestamp("us", tz="UTC")

TOOL_CALLS_SCHEMA: Final = pa.schema(
    [
        ("ts", _TS),
        ("received_at", _TS),
        ("service", pa.string()),
        ("version", pa.string()),
        ("environment", pa.string()),
        ("tool", pa.string()),
        ("code", pa.string()),
        ("raw_code", pa.string()),
        ("field", pa.string()),
        ("trace_id", pa.string()),
        ("span_id", pa.string()),
        ("call_id", pa.string()),
        ("session_id", pa.string()),
        ("correlation_id", pa.string()),
        ("duration_ms", pa.float64()),
        ("attempt", pa.int32()),
        ("retry_after_s", pa.float64()),
        ("http_status", pa.int32()),
        ("convention", pa.string()),
        ("source", pa.string()),
        ("redactions", pa.int32()),
    ]
)

DEPLOYS_SCHEMA: Final = pa.schema(
    [
        ("service", pa.string()),
        ("version", pa.string()),
        ("environment", pa.string()),
        ("ts", _TS),
        ("source", pa.string()),
    ]
)

TRACEBACKS_SCHEMA: Final = pa.schema(
    [
        ("ts", _TS),
        ("service", pa.string()),
        ("version", pa.string()),
        ("tool", pa.string()),
        ("trace_id", pa.string()),
        ("span_id", pa.string()),
        ("correlation_id", pa.string()),
        ("exception_type", pa.string()),
        ("fingerprint", pa.string()),
        ("text", pa.string()),
    ]
)

REDACTIONS_SCHEMA: Final = pa.schema(
    [
        ("hour", _TS),
        ("service", pa.string()),
        ("tool", pa.string()),
        ("rule", pa.string()),
        ("count", pa.int64()),
    ]
)


def _columns(records: Sequence[object], schema: pa.Schema) -> pa.Table:
    arrays = [
        pa.array([getattr(r, name) for r in records], type=schema.field(name).type)
        for name in schema.names
    ]
    return pa.Table.from_arrays(arrays, schema=schema)


def tool_calls_to_arrow(calls: Iterable[ToolCall]) -> pa.Table:
    """Validate every call and build one Arrow table in `tool_calls` column order."""
    batch = list(calls)
    for call in batch:
        call.validate()
    return _columns(batch, TOOL_CALLS_SCHEMA)


def deploys_to_arrow(deploys: Iterable[Deploy]) -> pa.Table:
    """Validate every deploy and build one Arrow table in `deploys` column order."""
    batch = list(deploys)
    for deploy in batch:
        deploy.validate()
    return _columns(batch, DEPLOYS_SCHEMA)


def tracebacks_to_arrow(samples: Iterable[TracebackSample]) -> pa.Table:
    """Validate every sample and build one Arrow table in `tracebacks` column order."""
    batch = list(samples)
    for sample in batch:
        sample.validate()
    return _columns(batch, TRACEBACKS_SCHEMA)


def redactions_to_arrow(counts: Iterable[RedactionCount]) -> pa.Table:
    """Validate every count and build one Arrow table in `redactions` column order."""
    batch = list(counts)
    for count in batch:
        count.validate()
    return _columns(batch, REDACTIONS_SCHEMA)
