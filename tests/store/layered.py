"""A call recorded at two layers, and how a store must keep it: shared by the file and lake tests.

`pair()` builds what fastmcp's client records for one call: its own `tools/call` span
(outer) and, as its child, the mcp SDK's `MCP send tools/call` span (inner), which alone
carries the JSON-RPC request id.  `check_folded` states what every store must hold after
both arrived, in whatever order and however often.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from errscope.collector.record import ToolCall
from errscope.collector.store.protocol import Store
from tests.factories import T0

_pairs = itertools.count(1)


@dataclass(frozen=True)
class Pair:
    """One call's outer and inner layer."""

    outer: ToolCall
    inner: ToolCall


def pair(
    *,
    outer_code: str = "internal_error",
    inner_code: str = "ok",
    inner_service: str | None = None,
    inner_tool: str | None = None,
    inner_lag: timedelta = timedelta(milliseconds=2),
    **outer: Any,
) -> Pair:
    """An outer call and its lower layer (same trace, service and tool unless told)."""
    n = next(_pairs)
    trace = f"{0xAB000000 + n:032x}"
    ts = T0 + timedelta(minutes=n)
    values: dict[str, Any] = {
        "ts": ts,
        "received_at": ts + timedelta(seconds=1),
        "service": "mcp-client",
        "tool": "slow_report",
        "code": outer_code,
        "trace_id": trace,
        "span_id": f"{0xA0000000 + n:016x}",
        "parent_span_id": f"{0xF0000000 + n:016x}",  # the agent's span: not a tool call
        "duration_ms": 500.0,
        "convention": "mcp",
        "source": "status" if outer_code != "ok" else None,
        "mcp_session_id": None,
    }
    values.update(outer)
    top = ToolCall(**values)
    inner = ToolCall(
        ts=ts + inner_lag,
        received_at=ts + timedelta(milliseconds=900),
        service=inner_service or top.service,
        tool=inner_tool or top.tool,
        code=inner_code,
        trace_id=trace,
        span_id=f"{0xB0000000 + n:016x}",
        parent_span_id=top.span_id,
        duration_ms=498.0,
        convention="mcp",
        source="exception" if inner_code != "ok" else None,
        jsonrpc_request_id=str(n),
        mcp_session_id=f"mcp-sess-{n}",
    )
    return Pair(top, inner)


def rows(store: Store, table: str, trace_id: str) -> list[dict[str, Any]]:
    """Every row of `table` in one trace, as dicts, by span id."""
    cur = store.cursor()
    result = cur.execute(
        f"SELECT * FROM {table} WHERE trace_id = $t ORDER BY span_id",
        {"t": trace_id},
    )
    names = [d[0] for d in result.description]
    return [dict(zip(names, row, strict=True)) for row in result.fetchall()]


def check_folded(store: Store, call: Pair, *, code: str) -> dict[str, Any]:
    """One `tool_calls` row (the outer span's) with the inner's ids; the inner kept as a layer."""
    calls = rows(store, "tool_calls", call.outer.trace_id)
    assert [r["span_id"] for r in calls] == [call.outer.span_id]
    (row,) = calls
    assert row["code"] == code
    assert row["jsonrpc_request_id"] == call.inner.jsonrpc_request_id
    assert row["mcp_session_id"] == call.inner.mcp_session_id
    assert row["duration_ms"] == call.outer.duration_ms  # the call's own time, not the layer's
    (layer,) = rows(store, "tool_call_layers", call.outer.trace_id)
    assert layer["span_id"] == call.inner.span_id
    assert layer["outer_span_id"] == call.outer.span_id
    assert layer["code"] == call.inner.code  # kept as it was received
    return row
