"""How a replayed export is recognised from what is stored: one implementation for both stores.

A stored `tool_calls` (or `tool_call_layers`) row keeps the `received_at` of the export
that stored it, so a call whose own `received_at` is not among its span's stored ones is
a replay (see `StoreSink.write`).  Both stores read it with the same SQL on a DuckDB connection.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

import duckdb
import pyarrow as pa

from errscope.collector.record import ToolCall

__all__ = ["stored_received_at"]


def stored_received_at(
    con: duckdb.DuckDBPyConnection, calls: Sequence[ToolCall]
) -> dict[tuple[str, str], set[datetime]]:
    """Every stored `received_at` of each call's (trace_id, span_id) that is stored.

    A DuckLake may hold two copies of a span for a moment (two sidecars committed it at
    once; the later removes its own), hence a set.  A replay repeats its spans' times, so
    the search is bounded by them and DuckDB's zone maps skip every row group outside that
    stretch.
    """
    if not calls:
        return {}
    keys = pa.table(
        {"trace_id": [c.trace_id for c in calls], "span_id": [c.span_id for c in calls]}
    )
    bounds = {"lo": min(c.ts for c in calls), "hi": max(c.ts for c in calls)}
    _errscope_keys = keys.__arrow_c_stream__()  # read by DuckDB's replacement scan
    # A call's lower layer is stored too, in tool_call_layers (errscope.collector.store.layers).
    rows = con.execute(
        "WITH k AS MATERIALIZED (SELECT * FROM _errscope_keys) "
        "SELECT t.trace_id, t.span_id, t.received_at FROM tool_calls t "
        "JOIN k ON t.trace_id = k.trace_id AND t.span_id = k.span_id "
        "WHERE t.ts BETWEEN $lo AND $hi UNION ALL "
        "SELECT t.trace_id, t.span_id, t.received_at FROM tool_call_layers t "
        "JOIN k ON t.trace_id = k.trace_id AND t.span_id = k.span_id "
        "WHERE t.ts BETWEEN $lo AND $hi",
        bounds,
    ).fetchall()
    stored: dict[tuple[str, str], set[datetime]] = {}
    for trace_id, span_id, received_at in rows:
        stored.setdefault((trace_id, span_id), set()).add(received_at)
    return stored
