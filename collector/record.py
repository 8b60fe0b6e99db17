"""The records errscope keeps: one definition, used by the pipeline, the store and the tests.

Over 600 lines on purpose: each record and the column rules that validate it in bulk must
change together (a field's limit is stated once, for the row and for the Arrow column).


`ToolCall` has exactly the `tool_calls` columns of the storage contract (DESIGN.md); the
other records mirror `deploys`, `tracebacks` and `redactions`.  `validate()` is the single
gate a record passes before it is stored: an over-long or non-identifier name is refused
with a typed `RecordError`, never truncated, so a stored value always means what it says.
The Arrow schemas here are what the store appends in bulk.
"""

from __future__ import annotations

import operator
import re
import string
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Final

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from errscope.collector.errors import RecordError, RecordErrorKind

__all__ = [
    "DEPLOYS_SCHEMA",
    "ID_COLUMNS",
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
    "validate_tool_calls",
]

MAX_NAME_CHARS: Final = 128
MAX_ID_CHARS: Final = 128
MAX_TRACEBACK_BYTES: Final = 8192

# Tool names in the wild: `get_job`, `search.web`, `github/create_issue`, `fs:read-file`.
_TOOL_RE: Final = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.:/-]*")
# A field is a path of identifiers (`job_id`, `filters.status`, `items[0].id`): never a value.
# ([0-9], not \d: Python's \d takes any Unicode digit, RE2's only ASCII ones.)
_FIELD_RE: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*|\[[0-9]{1,6}\])*")
# Catalog code names and safe raw codes: short lower-case identifiers.
_CODE_RE: Final = re.compile(r"[a-z][a-z0-9_]{0,47}")
_RAW_CODE_RE: Final = re.compile(r"[A-Za-z][A-Za-z0-9_.-]{0,47}")
# Correlation ids: opaque tokens without spaces or quotes (`call_mszu…`, UUIDs, `run-17`).
_ID_RE: Final = re.compile(r"[A-Za-z0-9_.:/+=@-]+")
# Redaction rule names: a scrub rule's id, or `content:<attribute family>`.
_RULE_RE: Final = re.compile(r"[A-Za-z][A-Za-z0-9_.-]{0,47}(?::[A-Za-z0-9_.-]{1,64})?")
_HEX32_RE: Final = re.compile(r"[0-9a-f]{32}")
_HEX16_RE: Final = re.compile(r"[0-9a-f]{16}")
# The same three patterns as a set of ASCII characters, for the batch check on raw bytes.
_ID_CHARS: Final = string.ascii_letters + string.digits + "_.:/+=@-"
_HEX_CHARS: Final = "0123456789abcdef"
_LABEL_RE: Final = re.compile(r"[^\x00-\x1f\x7f]+")
# Half of a UTF-16 pair on its own: Python holds it (an undecodable byte read with
# surrogateescape becomes one), but UTF-8, Arrow and DuckDB cannot.
_SURROGATE_RE: Final = re.compile("[\ud800-\udfff]")


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
    _check(
        value.isascii() or _SURROGATE_RE.search(value) is None,
        RecordErrorKind.BAD_VALUE,
        entry,
        field,
        "is not valid Unicode text (a lone surrogate, or a byte that is not UTF-8)",
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
    conversation_id: str | None = None  # gen_ai.conversation.id
    thread_id: str | None = None  # LangGraph's thread (OpenLLMetry, OpenInference metadata)
    agent_run_id: str | None = None  # one agent run: gen_ai.agent.call.id and equivalents
    mcp_session_id: str | None = None
    jsonrpc_request_id: str | None = None
    # The span's parent: a call whose parent is a stored call of the same trace, service
    # and tool is that call's lower layer (errscope.collector.store.layers).
    parent_span_id: str | None = None

    def validate(self) -> None:
        """Raise `RecordError` naming the field when this record may not be stored as is.

        The same column rules as `validate_tool_calls`, run on one record with compiled
        regexes (microseconds), so the pipeline can check every record it builds.
        """
        _validate_one(self)


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
        _check_name("redactions", "rule", self.rule, _RULE_RE)
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
        ("conversation_id", pa.string()),
        ("thread_id", pa.string()),
        ("agent_run_id", pa.string()),
        ("mcp_session_id", pa.string()),
        ("jsonrpc_request_id", pa.string()),
        ("parent_span_id", pa.string()),
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


@dataclass(frozen=True, slots=True)
class _ColumnRule:
    """One check on one `tool_calls` column, applied to a whole Arrow batch at once."""

    column: str
    kind: RecordErrorKind
    message: str
    pattern: str | None = None  # RE2 syntax, anchored by the validator
    max_chars: int | None = None
    non_negative: bool = False
    # When the pattern is exactly `[chars]{min,max}` over ASCII `chars`: the same check
    # done on a batch's bytes (see `_charset_passes`), about four times faster than RE2.
    chars: str | None = None
    lengths: tuple[int, int | None] = (0, None)


def _text_rules(
    column: str, pattern: re.Pattern[str], kind: RecordErrorKind, limit: int
) -> list[_ColumnRule]:
    return [
        _ColumnRule(
            column, RecordErrorKind.TOO_LONG, f"longer than {limit} characters", max_chars=limit
        ),
        _ColumnRule(column, kind, _KIND_MESSAGES[kind], pattern=pattern.pattern),
    ]


def _hex_rule(column: str, pattern: re.Pattern[str], digits: int) -> _ColumnRule:
    return _ColumnRule(
        column,
        RecordErrorKind.BAD_ID,
        f"not {digits} lower-case hex digits",
        pattern=pattern.pattern,
        chars=_HEX_CHARS,
        lengths=(digits, digits),
    )


def _id_rules(column: str) -> list[_ColumnRule]:
    too_long, pattern = _text_rules(column, _ID_RE, RecordErrorKind.BAD_ID, MAX_ID_CHARS)
    return [too_long, replace(pattern, chars=_ID_CHARS, lengths=(1, None))]


# The free-form id columns: the same rules, checked as one array per batch.
ID_COLUMNS: Final = (
    "call_id",
    "session_id",
    "correlation_id",
    "conversation_id",
    "thread_id",
    "agent_run_id",
    "mcp_session_id",
    "jsonrpc_request_id",
)

_KIND_MESSAGES: Final = {
    RecordErrorKind.BAD_IDENTIFIER: "not an identifier",
    RecordErrorKind.BAD_ID: "not an id",
    RecordErrorKind.BAD_VALUE: "empty or contains control characters",
}

# The rules in the order they are checked; the first failing (rule, row) is reported.
_TOOL_CALL_RULES: Final = (
    *_text_rules("service", _LABEL_RE, RecordErrorKind.BAD_VALUE, MAX_NAME_CHARS),
    *_text_rules("version", _LABEL_RE, RecordErrorKind.BAD_VALUE, MAX_NAME_CHARS),
    *_text_rules("environment", _LABEL_RE, RecordErrorKind.BAD_VALUE, MAX_NAME_CHARS),
    *_text_rules("tool", _TOOL_RE, RecordErrorKind.BAD_IDENTIFIER, MAX_NAME_CHARS),
    *_text_rules("code", _CODE_RE, RecordErrorKind.BAD_IDENTIFIER, MAX_NAME_CHARS),
    *_text_rules("field", _FIELD_RE, RecordErrorKind.BAD_IDENTIFIER, MAX_NAME_CHARS),
    *_text_rules("raw_code", _RAW_CODE_RE, RecordErrorKind.BAD_IDENTIFIER, MAX_NAME_CHARS),
    _hex_rule("trace_id", _HEX32_RE, 32),
    _hex_rule("span_id", _HEX16_RE, 16),
    _hex_rule("parent_span_id", _HEX16_RE, 16),
    *(rule for column in ID_COLUMNS for rule in _id_rules(column)),
    *_text_rules("convention", _CODE_RE, RecordErrorKind.BAD_IDENTIFIER, MAX_NAME_CHARS),
    *_text_rules("source", _CODE_RE, RecordErrorKind.BAD_IDENTIFIER, MAX_NAME_CHARS),
    *(
        _ColumnRule(name, RecordErrorKind.BAD_VALUE, "must not be negative", non_negative=True)
        for name in ("duration_ms", "retry_after_s", "attempt", "http_status", "redactions")
    ),
)
# Columns with few distinct values per batch: validated on their distinct values.
_LABEL_COLUMNS: Final = frozenset(
    (
        "service",
        "version",
        "environment",
        "tool",
        "code",
        "field",
        "raw_code",
        "convention",
        "source",
    )
)
_REQUIRED_COLUMNS: Final = ("ts", "received_at", "service", "tool", "code", "trace_id", "span_id")


@dataclass(frozen=True, slots=True)
class _RuleGroup:
    """Non-label columns of one Arrow type under the same rules, checked in one pass."""

    columns: tuple[str, ...]
    rules: tuple[_ColumnRule, ...]  # the first column's rules stand for all of them


def _rule_groups() -> tuple[_RuleGroup, ...]:
    by_column: dict[str, list[_ColumnRule]] = {}
    for rule in _TOOL_CALL_RULES:
        if rule.column not in _LABEL_COLUMNS:
            by_column.setdefault(rule.column, []).append(rule)
    groups: dict[tuple[object, ...], list[str]] = {}
    for column, rules in by_column.items():
        signature = (
            TOOL_CALLS_SCHEMA.field(column).type,
            *((r.pattern, r.max_chars, r.non_negative) for r in rules),
        )
        groups.setdefault(signature, []).append(column)
    return tuple(
        _RuleGroup(tuple(columns), tuple(by_column[columns[0]])) for columns in groups.values()
    )


_ARRAY_GROUPS: Final = _rule_groups()  # the non-label columns, checked in Arrow


_SCALAR_PATTERNS: Final = {
    rule.pattern: re.compile(rule.pattern) for rule in _TOOL_CALL_RULES if rule.pattern is not None
}


def _validate_one(call: ToolCall) -> None:
    entry = "tool_calls"
    for name in _REQUIRED_COLUMNS:
        if getattr(call, name) is None:
            raise RecordError(RecordErrorKind.BAD_VALUE, "is required", entry=entry, field=name)
    for rule in _TOOL_CALL_RULES:
        value = getattr(call, rule.column)
        if value is None:
            continue
        if rule.max_chars is not None:
            ok = len(value) <= rule.max_chars
        elif rule.pattern is not None:
            ok = _SCALAR_PATTERNS[rule.pattern].fullmatch(value) is not None
        else:
            ok = value >= 0
        if not ok:
            raise RecordError(rule.kind, rule.message, entry=entry, field=rule.column)
    if call.raw_code is not None and call.code != "unknown":
        raise RecordError(
            RecordErrorKind.BAD_CODE,
            "raw_code is kept only for unknown codes",
            entry=entry,
            field="raw_code",
        )


def _all_pass(ok: pa.ChunkedArray | pa.Array) -> bool:
    """True when a boolean mask has no False (nulls, absent optional values, pass)."""
    return bool(pc.all(ok, skip_nulls=True, min_count=0).as_py())


def validate_tool_calls(
    table: pa.Table, labels: Mapping[str, Iterable[str | None]] | None = None
) -> None:
    """Check a whole batch column by column; raise `RecordError` for the first bad value.

    The same rules serve one record (`ToolCall.validate`) and a batch of thousands.  Label
    columns (service, tool, code, ...) hold a handful of distinct values per batch, so
    their rules run in Python on those values only (`labels`, when the caller already has
    them; else Arrow finds them).  The other columns are checked with one vectorised pass
    per rule (RE2 regexes through Arrow compute), columns under the same rules (the three
    free-form ids, say) as one array, so a batch costs about a microsecond per row.  Only
    when a pass finds a bad value are the columns checked one by one, to name the field.
    """
    entry = "tool_calls"
    for name in _REQUIRED_COLUMNS:
        if table.column(name).null_count:
            raise RecordError(RecordErrorKind.BAD_VALUE, "is required", entry=entry, field=name)
    if labels is None:
        labels = {name: pc.unique(table.column(name)).to_pylist() for name in _LABEL_COLUMNS}
    for rule in _TOOL_CALL_RULES:
        if rule.column in _LABEL_COLUMNS and not _label_rule_passes(rule, labels[rule.column]):
            raise RecordError(rule.kind, rule.message, entry=entry, field=rule.column)
    if not all(_group_passes(table, group) for group in _ARRAY_GROUPS):
        for rule in _TOOL_CALL_RULES:
            if rule.column not in _LABEL_COLUMNS and not _rule_passes(
                rule, table.column(rule.column)
            ):
                raise RecordError(rule.kind, rule.message, entry=entry, field=rule.column)
    raw_codes = any(value is not None for value in labels["raw_code"])
    if raw_codes and any(code != "unknown" for code in labels["code"]):
        misplaced = pc.and_(
            pc.is_valid(table.column("raw_code")), pc.not_equal(table.column("code"), "unknown")
        )
        if pc.any(misplaced).as_py():
            raise RecordError(
                RecordErrorKind.BAD_CODE,
                "raw_code is kept only for unknown codes",
                entry=entry,
                field="raw_code",
            )


def _label_rule_passes(rule: _ColumnRule, values: Iterable[str | None]) -> bool:
    present = [value for value in values if value is not None]
    if rule.max_chars is not None:
        return all(len(value) <= rule.max_chars for value in present)
    fullmatch = _SCALAR_PATTERNS[str(rule.pattern)].fullmatch  # a length, else a pattern
    return all(fullmatch(value) is not None for value in present)


def _rule_passes(rule: _ColumnRule, values: pa.ChunkedArray) -> bool:
    if values.null_count == len(values):
        return True  # nothing to check: optional columns are often empty in a whole batch
    if rule.max_chars is not None:
        ok = pc.less_equal(pc.utf8_length(values), rule.max_chars)
    elif rule.chars is not None and pa.types.is_string(values.type):
        return _charset_passes(values.drop_null(), rule.chars, rule.lengths)
    elif rule.pattern is not None:
        ok = pc.match_substring_regex(values, f"^(?:{rule.pattern})$")
    else:
        ok = pc.greater_equal(values, 0)
    return _all_pass(ok)


def _charset_passes(values: pa.ChunkedArray, chars: str, lengths: tuple[int, int | None]) -> bool:
    """True when every value is `lengths` long and made only of the ASCII `chars`.

    Works on each chunk's offsets and character bytes: deleting the allowed bytes must
    leave nothing.  Byte lengths stand for character lengths because a value that passes
    is ASCII, and one that is not fails on its other bytes whatever its length.
    """
    shortest, longest = lengths
    allowed = chars.encode("ascii")
    for chunk in values.chunks:
        if not len(chunk):
            continue
        offsets = np.frombuffer(
            chunk.buffers()[1], dtype=np.int32, count=len(chunk) + 1, offset=chunk.offset * 4
        )
        sizes = np.diff(offsets)
        if sizes.min() < shortest or (longest is not None and sizes.max() > longest):
            return False
        body = chunk.buffers()[2]
        if body is not None and body[int(offsets[0]) : int(offsets[-1])].to_pybytes().translate(
            None, allowed
        ):
            return False
    return True


def _group_passes(table: pa.Table, group: _RuleGroup) -> bool:
    chunks = [chunk for column in group.columns for chunk in table.column(column).chunks]
    values = pa.chunked_array(chunks, type=table.schema.field(group.columns[0]).type)
    return all(_rule_passes(rule, values) for rule in group.rules)


def _column_values(records: Sequence[object], names: Sequence[str]) -> list[Sequence[object]]:
    # One attrgetter pass gives each record's row; zip turns the rows into columns.
    rows = map(operator.attrgetter(*names), records)
    return list(zip(*rows, strict=True)) if records else [() for _ in names]


def _to_table(columns: Sequence[Sequence[object]], schema: pa.Schema) -> pa.Table:
    arrays = [
        pa.array(column, type=type_) for column, type_ in zip(columns, schema.types, strict=True)
    ]
    return pa.Table.from_arrays(arrays, schema=schema)


def _columns(records: Sequence[object], schema: pa.Schema) -> pa.Table:
    return _to_table(_column_values(records, schema.names), schema)


def tool_calls_to_arrow(calls: Iterable[ToolCall]) -> pa.Table:
    """Build one Arrow table in `tool_calls` column order and validate it as a batch."""
    columns = _column_values(list(calls), TOOL_CALLS_SCHEMA.names)
    table = _to_table(columns, TOOL_CALLS_SCHEMA)
    by_name = dict(zip(TOOL_CALLS_SCHEMA.names, columns, strict=True))
    validate_tool_calls(table, {name: set(by_name[name]) for name in _LABEL_COLUMNS})
    return table


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
