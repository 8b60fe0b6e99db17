"""One call recorded at two layers is one row: find a batch's lower layers and fold them.

Some frameworks record one tool call twice: their own span and, as its child, the span of
the library they make the call through (fastmcp's `tools/call x` CLIENT span over the mcp
SDK's `MCP send tools/call x`).  Both are tool spans, and a BatchSpanProcessor often exports
the child in another request than its parent, so the pipeline, which reads one request at a
time, cannot fold them.  The store can: a row whose `parent_span_id` is a row of the same
trace, service and tool is that call's lower layer.  (Another service's child, such as the
server's span of a client's call, is that service's own call and is never folded.)

Both stores run the same SQL on a DuckDB connection (`plan_fold` reads, `fold_stored`
writes); each brings its own transaction and locks.

Promises:
- a lower layer is never a `tool_calls` row: it is kept whole in `tool_call_layers`, with
  the span id of the row it was folded into (`outer_span_id`), whichever of the two
  arrived first: in one batch, in two, or across a restart (the search reads the store);
- the outer row is enriched by `merge_layer`: ids it lacks come from the layer, and a code
  that says little (internal_error, unknown) gives way to the layer's more specific error;
- folding is idempotent: folding a replayed layer or outer again changes nothing, and a
  replayed layer is recognised by the key `tool_call_layers` holds;
- the search costs one query per batch, bounded by `FOLD_WINDOW` around the batch's span
  start times, so DuckDB's zone maps (a lake's file statistics) skip all but the newest
  row groups.  A lower layer that starts more than `FOLD_WINDOW` after its outer layer
  is stored as a call of its own: the layers of one call start milliseconds apart.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Final

import duckdb
import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from errscope.collector.catalog import Code
from errscope.collector.record import ID_COLUMNS, TOOL_CALLS_SCHEMA

__all__ = [
    "FOLD_WINDOW",
    "LAYERS_SCHEMA",
    "FoldPlan",
    "RecentSpans",
    "fold_stored",
    "merge_layer",
    "plan_fold",
    "span_ids",
]

FOLD_WINDOW: Final = timedelta(minutes=1)
# How long, and how many, received spans `RecentSpans` remembers: 16 bytes each.
RECENT_KEEP: Final = timedelta(minutes=10)
RECENT_MAX_ROWS: Final = 500_000
_LEVEL_ROWS: Final = 16_384  # the unsorted newest spans, before they are sorted into a level

LAYERS_SCHEMA: Final = TOOL_CALLS_SCHEMA.append(pa.field("outer_span_id", pa.string()))

# Codes that say the least about a failure: the catch-all and the handler-bug marker.
_VAGUE_CODES: Final = frozenset({Code.INTERNAL_ERROR.value, Code.UNKNOWN.value})
# What a code brings with it: the layer whose code wins brings these too.
_CODE_COLUMNS: Final = ("code", "raw_code", "field", "retry_after_s", "http_status", "source")
# Details of the same failure, taken from the layer when the outer row lacks them.
_DETAIL_COLUMNS: Final = ("field", "retry_after_s", "http_status")
_FILLED_COLUMNS: Final = (*ID_COLUMNS, "version", "environment", "attempt")
_KEY_COLUMNS: Final = ("trace_id", "span_id", "parent_span_id", "service", "tool")
_COLUMNS: Final = ", ".join(TOOL_CALLS_SCHEMA.names)

# Pairs (inner, outer) with the inner or the outer in the batch (`_errscope_keys`); the
# stored side is read only within the window.  Joined on the span id alone (one hashed
# column), the rest checked on the few rows that match.
_FIND_SQL: Final = """
WITH k AS MATERIALIZED (SELECT * FROM _errscope_keys)
SELECT c.trace_id, c.span_id, p.span_id FROM k c JOIN k p ON p.span_id = c.parent_span_id
WHERE p.trace_id = c.trace_id AND p.service = c.service AND p.tool = c.tool
UNION
SELECT c.trace_id, c.span_id, p.span_id FROM k c JOIN tool_calls p ON p.span_id = c.parent_span_id
WHERE p.ts BETWEEN $lo AND $hi
  AND p.trace_id = c.trace_id AND p.service = c.service AND p.tool = c.tool
UNION
SELECT c.trace_id, c.span_id, p.span_id FROM k p JOIN tool_calls c ON c.parent_span_id = p.span_id
WHERE c.ts BETWEEN $lo AND $hi
  AND c.trace_id = p.trace_id AND c.service = p.service AND c.tool = p.tool
"""

_STORED_SQL: Final = f"""
SELECT {_COLUMNS} FROM tool_calls t JOIN _errscope_keys k USING (trace_id, span_id)
WHERE t.ts BETWEEN $lo AND $hi
"""  # noqa: S608 - names from our own schema

_LAYER_KEYS_SQL: Final = """
SELECT l.trace_id, l.span_id FROM tool_call_layers l JOIN _errscope_keys k USING (trace_id, span_id)
WHERE l.ts BETWEEN $lo AND $hi
"""

Key = tuple[str, str]
Row = dict[str, Any]


@dataclass(frozen=True, slots=True)
class FoldPlan:
    """What one batch changes when some of its rows, or stored ones, are lower layers.

    `calls` is what the batch adds to `tool_calls` (its lower layers taken out, its outer
    rows enriched); `layers` what it adds to `tool_call_layers`; `moved` the stored calls
    that turned out to be lower layers (trace_id, span_id, outer_span_id), and `updates`
    the stored outer rows, enriched, whole.
    """

    calls: pa.Table
    layers: pa.Table
    moved: pa.Table
    updates: tuple[Row, ...]


def merge_layer(outer: Mapping[str, Any], inner: Mapping[str, Any]) -> Row:
    """The outer row of a call enriched by one of its lower layers.

    The layer's code replaces the outer one only when the outer one says little
    (internal_error, unknown) and the layer's is another error: the SDK's own timeout
    under a framework's generic failure.  An outer `ok` stays: a failure the outer layer
    recovered from (a retried request) is not the call's.  Ids, labels and the attempt
    the outer row lacks are taken from the layer; so are the failure's details (field,
    retry_after_s, http_status) when both say the same code.  Everything else (times,
    tool, convention, redaction count) stays the outer row's.
    """
    merged = dict(outer)
    inner_code = inner["code"]
    if merged["code"] in _VAGUE_CODES and inner_code not in _VAGUE_CODES | {Code.OK.value}:
        for column in _CODE_COLUMNS:
            merged[column] = inner[column]
    elif inner_code == merged["code"]:
        for column in _DETAIL_COLUMNS:
            if merged[column] is None:
                merged[column] = inner[column]
    for column in _FILLED_COLUMNS:
        if merged[column] is None:
            merged[column] = inner[column]
    return merged


def _bounds(table: pa.Table) -> dict[str, datetime]:
    span = pc.min_max(table.column("ts")).as_py()
    return {"lo": span["min"] - FOLD_WINDOW, "hi": span["max"] + FOLD_WINDOW}


def _read(con: duckdb.DuckDBPyConnection, sql: str, keys: pa.Table, bounds: dict[str, Any]) -> Any:
    _errscope_keys = keys.__arrow_c_stream__()  # read once by DuckDB's replacement scan
    return con.execute(sql, bounds)


def _keys_table(keys: list[Key]) -> pa.Table:
    return pa.table({"trace_id": [k[0] for k in keys], "span_id": [k[1] for k in keys]})


def plan_fold(con: duckdb.DuckDBPyConnection, batch: pa.Table) -> FoldPlan | None:
    """How `batch` (validated, `TOOL_CALLS_SCHEMA`) folds with itself and the store.

    None, after one bounded query, when no row of the batch is a lower layer of a row
    of the batch or the store and none is the outer layer of a stored row: the common case.
    `con` must see the transaction the batch will be written in.
    """
    if batch.num_rows == 0:
        return None
    bounds = _bounds(batch)
    pairs: list[tuple[str, str, str]] = _read(
        con, _FIND_SQL, batch.select(_KEY_COLUMNS), bounds
    ).fetchall()
    if not pairs:
        return None
    outer_of: dict[Key, Key] = {(t, inner): (t, outer) for t, inner, outer in pairs}
    involved = sorted({k for pair in outer_of.items() for k in pair})
    stored: dict[Key, Row] = {
        (r["trace_id"], r["span_id"]): r
        for r in _read(con, _STORED_SQL, _keys_table(involved), bounds).to_arrow_table().to_pylist()
    }
    in_layers = {
        (t, s) for t, s in _read(con, _LAYER_KEYS_SQL, _keys_table(involved), bounds).fetchall()
    }
    in_batch = pc.is_in(
        pc.binary_join_element_wise(batch.column("trace_id"), batch.column("span_id"), ":"),
        value_set=pa.array([f"{t}:{s}" for t, s in involved]),
    )
    batch_rows: dict[Key, Row] = {
        (r["trace_id"], r["span_id"]): r for r in batch.filter(in_batch).to_pylist()
    }

    def root(key: Key) -> Key:
        seen = {key}
        while key in outer_of and outer_of[key] not in seen:
            key = outer_of[key]
            seen.add(key)
        return key

    def row_of(key: Key) -> Row:
        return stored.get(key) or batch_rows[key]

    merged: dict[Key, Row] = {}
    # Each root's layers in start order, so that the first layer to offer an id gives it.
    for inner in sorted(outer_of, key=lambda k: (row_of(k)["ts"], k)):
        top = root(inner)
        merged[top] = merge_layer(merged.get(top) or row_of(top), row_of(inner))
    layers: list[Row] = []
    moved: list[Row] = []
    for inner in outer_of:
        top = root(inner)
        if inner in stored:
            moved.append({"trace_id": inner[0], "span_id": inner[1], "outer_span_id": top[1]})
        elif inner not in in_layers and inner in batch_rows:
            layers.append({**batch_rows[inner], "outer_span_id": top[1]})
    updates = tuple(row for key, row in merged.items() if key in stored and row != stored[key])
    fresh_outers = [row for key, row in merged.items() if key not in stored]
    calls = pa.concat_tables(
        [
            batch.filter(pc.invert(in_batch)),
            pa.Table.from_pylist(fresh_outers, schema=TOOL_CALLS_SCHEMA),
        ]
    )
    return FoldPlan(
        calls=calls,
        layers=pa.Table.from_pylist(layers, schema=LAYERS_SCHEMA),
        moved=pa.Table.from_pylist(
            moved,
            schema=pa.schema(
                [(name, pa.string()) for name in ("trace_id", "span_id", "outer_span_id")]
            ),
        ),
        updates=updates,
    )


def fold_stored(con: duckdb.DuckDBPyConnection, plan: FoldPlan) -> int:
    """Move the stored calls that are lower layers, update their outer rows; return how
    many rows `tool_calls` lost.  Runs in the caller's transaction, with its locks."""
    if plan.moved.num_rows:
        _errscope_moved = plan.moved.__arrow_c_stream__()
        con.execute(
            f"INSERT INTO tool_call_layers ({_COLUMNS}, outer_span_id) "  # noqa: S608 - schema names
            f"SELECT {', '.join('t.' + c for c in TOOL_CALLS_SCHEMA.names)}, m.outer_span_id "
            "FROM tool_calls t JOIN _errscope_moved m USING (trace_id, span_id) "
            "WHERE NOT EXISTS (SELECT 1 FROM tool_call_layers l "
            "WHERE l.trace_id = t.trace_id AND l.span_id = t.span_id)"
        )
        _errscope_moved = plan.moved.__arrow_c_stream__()  # a stream is read once
        # The count row, not RETURNING: a DuckLake refuses RETURNING on a delete.
        counted = con.execute(
            "DELETE FROM tool_calls t WHERE EXISTS (SELECT 1 FROM _errscope_moved m "
            "WHERE m.trace_id = t.trace_id AND m.span_id = t.span_id)"
        ).fetchone()
        removed = int(counted[0]) if counted else 0
    else:
        removed = 0
    changed = [c for c in TOOL_CALLS_SCHEMA.names if c not in ("trace_id", "span_id", "ts")]
    for row in plan.updates:
        assignments = ", ".join(f"{c} = ${c}" for c in changed)
        con.execute(
            f"UPDATE tool_calls SET {assignments} "  # noqa: S608 - schema names
            "WHERE trace_id = $trace_id AND span_id = $span_id AND ts = $ts",
            {c: row[c] for c in (*changed, "trace_id", "span_id", "ts")},
        )
    return removed


Ids = npt.NDArray[np.uint64]
_NIBBLE_SHIFTS: Final = np.arange(60, -4, -4, dtype=np.uint64)


def span_ids(column: pa.ChunkedArray | pa.Array) -> Ids:
    """A column of 16-hex-digit span ids (validated, nulls allowed) as 64-bit integers.

    Read from the column's bytes: a batch's thousand ids cost microseconds, not the
    hundreds a Python `int(x, 16)` each would.
    """
    array = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    array = array.drop_null()
    n = len(array)
    if n == 0:
        return np.empty(0, dtype=np.uint64)
    offsets = np.frombuffer(
        array.buffers()[1], dtype=np.int32, count=n + 1, offset=array.offset * 4
    )
    start = int(offsets[0])
    chars = np.frombuffer(array.buffers()[2], dtype=np.uint8)[start : start + 16 * n]
    chars = chars.reshape(n, 16)
    # '0'-'9' are 0x30-0x39 and 'a'-'f' 0x61-0x66: the low four bits, plus 9 for a letter.
    nibbles = ((chars & 0x0F) + 9 * (chars >> 6)).astype(np.uint64)
    ids: Ids = np.bitwise_or.reduce(nibbles << _NIBBLE_SHIFTS, axis=1)
    return ids


def _sorted_contains(level: Ids, values: Ids) -> bool:
    if not len(level) or not len(values):
        return False
    at = np.searchsorted(level, values).clip(max=len(level) - 1)
    return bool(np.any(level[at] == values))


@dataclass(slots=True)
class _Level:
    spans: Ids  # sorted
    parents: Ids  # sorted
    newest: datetime


def _merged(older: Ids, newer: Ids) -> Ids:
    # Two sorted runs: the stable sort (timsort) merges them in one linear pass.
    return np.sort(np.concatenate((older, newer)), kind="stable")


class RecentSpans:
    """The span ids and parent span ids one writer stored lately: a cheap "no" for `plan_fold`.

    `plan_fold`'s query reads the newest row groups of `tool_calls` (milliseconds on a
    busy store) and most batches fold nothing; this says so first, from memory:
    `may_fold` is False only when no parent of the batch's spans is a remembered span or
    a span of the batch, and no span of the batch is a remembered span's parent.  A false
    "maybe" (the same span id in another trace) only costs the query.

    It remembers the spans stored in the last `RECENT_KEEP`, at most about
    `RECENT_MAX_ROWS` of them (16 bytes each; the oldest are forgotten first), so on a busy
    store a lower layer that arrives much later than its outer one is stored as a call of
    its own.  It is exact only for a store with one writer (a DuckDB file): a lake's other
    writers store spans it never sees.  Each batch's ids are a sorted level; levels are
    merged as in a binary counter, so a lookup reads a logarithmic number of sorted
    arrays.  Not thread-safe: the store calls it under its write lock.
    """

    def __init__(self, *, keep: timedelta = RECENT_KEEP, max_rows: int = RECENT_MAX_ROWS) -> None:
        self.keep = keep
        self.max_rows = max_rows
        self._levels: deque[_Level] = deque()  # oldest (largest) first
        self._rows = 0

    def __len__(self) -> int:
        return self._rows

    @classmethod
    def seeded(cls, con: duckdb.DuckDBPyConnection) -> RecentSpans:
        """Remembering what a store received last before it was opened (a restart)."""
        recent = cls()
        newest = con.execute("SELECT max(received_at) FROM tool_calls").fetchone()
        if not newest or newest[0] is None:
            return recent
        table = con.execute(
            "SELECT span_id, parent_span_id FROM tool_calls WHERE received_at >= $since "
            "ORDER BY received_at DESC LIMIT $rows",
            {"since": newest[0] - recent.keep, "rows": recent.max_rows},
        ).to_arrow_table()
        recent.add(
            span_ids(table.column("span_id").cast(pa.string())),
            span_ids(table.column("parent_span_id").cast(pa.string())),
            newest[0],
        )
        return recent

    def add(self, spans: Ids, parents: Ids, newest: datetime) -> None:
        """Remember stored spans (after storing them: a rollback leaves only an extra "maybe")."""
        if not len(spans):
            return
        level = _Level(np.sort(spans), np.sort(parents), newest)
        self._rows += len(spans)
        while self._levels and len(self._levels[-1].spans) <= len(level.spans):
            older = self._levels.pop()
            level = _Level(
                _merged(older.spans, level.spans),
                _merged(older.parents, level.parents),
                max(older.newest, level.newest),
            )
        self._levels.append(level)
        while self._levels and (
            self._levels[0].newest < newest - self.keep or self._rows > self.max_rows
        ):
            self._rows -= len(self._levels.popleft().spans)

    def add_batch(self, batch: pa.Table) -> None:
        """Remember a stored batch (`TOOL_CALLS_SCHEMA`)."""
        if batch.num_rows:
            self.add(
                span_ids(batch.column("span_id")),
                span_ids(batch.column("parent_span_id")),
                pc.max(batch.column("received_at")).as_py(),
            )

    def may_fold(self, batch: pa.Table) -> bool:
        """False when no row of `batch` can fold with another of it or a remembered one."""
        spans = span_ids(batch.column("span_id"))
        parents = span_ids(batch.column("parent_span_id"))
        if len(parents) and bool(np.isin(parents, spans).any()):
            return True
        return any(
            _sorted_contains(level.spans, parents) or _sorted_contains(level.parents, spans)
            for level in self._levels
        )
