"""A call recorded at two layers is one row, in a real DuckDB file store, whatever the order."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace
from datetime import timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from errscope.collector.pipeline import Processed
from errscope.collector.record import tool_calls_to_arrow
from errscope.collector.store.batch import StoreBatch, StoreSink
from errscope.collector.store.duckdb import DuckDBStore
from errscope.collector.store.layers import FOLD_WINDOW, RecentSpans, merge_layer, span_ids
from tests.store.layered import check_folded, pair, rows

_BASE: dict[str, Any] = {
    "code": "ok",
    "raw_code": None,
    "field": None,
    "retry_after_s": None,
    "http_status": None,
    "source": None,
    "version": None,
    "environment": None,
    "attempt": None,
    "call_id": None,
    "session_id": None,
    "correlation_id": None,
    "conversation_id": None,
    "thread_id": None,
    "agent_run_id": None,
    "mcp_session_id": None,
    "jsonrpc_request_id": None,
    "duration_ms": 500.0,
}


@pytest.mark.parametrize(
    ("outer", "inner", "expected"),
    [
        pytest.param(
            {"code": "internal_error", "source": "status"},
            {"code": "timeout", "source": "exception"},
            {"code": "timeout", "source": "exception"},
            id="vague-outer-takes-the-layers-code",
        ),
        pytest.param(
            {"code": "unknown", "raw_code": "E_WEIRD"},
            {"code": "rate_limited", "retry_after_s": 2.0, "source": "http"},
            {"code": "rate_limited", "raw_code": None, "retry_after_s": 2.0, "source": "http"},
            id="unknown-outer-takes-the-layers-code-and-details",
        ),
        pytest.param(
            {"code": "not_found", "source": "observation"},
            {"code": "timeout", "source": "exception"},
            {"code": "not_found", "source": "observation"},
            id="specific-outer-keeps-its-code",
        ),
        # A failure the outer layer recovered from (a retried request) is not the call's.
        pytest.param(
            {"code": "ok"},
            {"code": "timeout", "source": "exception"},
            {"code": "ok", "source": None},
            id="ok-outer-stays-ok",
        ),
        pytest.param(
            {"code": "internal_error"},
            {"code": "ok"},
            {"code": "internal_error"},
            id="ok-layer-never-hides-a-failure",
        ),
        pytest.param(
            {"code": "invalid_args", "field": None},
            {"code": "invalid_args", "field": "city", "http_status": 422},
            {"code": "invalid_args", "field": "city", "http_status": 422},
            id="same-code-details-filled",
        ),
        pytest.param(
            {"code": "invalid_args", "field": "city"},
            {"code": "not_found", "field": "job_id"},
            {"code": "invalid_args", "field": "city"},
            id="other-codes-details-not-mixed-in",
        ),
        pytest.param(
            {"call_id": "call_1", "jsonrpc_request_id": None},
            {"call_id": "call_2", "jsonrpc_request_id": "7", "mcp_session_id": "s-1"},
            {"call_id": "call_1", "jsonrpc_request_id": "7", "mcp_session_id": "s-1"},
            id="ids-filled-never-replaced",
        ),
        pytest.param(
            {"duration_ms": 500.0},
            {"duration_ms": 3.0, "version": "2.0"},
            {"duration_ms": 500.0, "version": "2.0"},
            id="times-stay-labels-filled",
        ),
    ],
)
def test_merge_layer(
    outer: dict[str, Any], inner: dict[str, Any], expected: dict[str, Any]
) -> None:
    """The outer row keeps what it knows and takes from its layer what says more."""
    merged = merge_layer({**_BASE, **outer}, {**_BASE, **inner})
    assert {k: merged[k] for k in expected} == expected
    # Folding the same layer again changes nothing (a replay).
    assert merge_layer(merged, {**_BASE, **inner}) == merged


@pytest.mark.parametrize("order", ["inner-first", "outer-first", "one-batch"])
def test_two_layers_are_one_row_in_either_order(file_store: DuckDBStore, order: str) -> None:
    """The SDK's span under fastmcp's is folded into it, whichever export brought it first."""
    call = pair(outer_code="internal_error", inner_code="timeout")
    match order:
        case "inner-first":
            counts = [
                file_store.append_tool_calls([call.inner]),
                file_store.append_tool_calls([call.outer]),
            ]
        case "outer-first":
            counts = [
                file_store.append_tool_calls([call.outer]),
                file_store.append_tool_calls([call.inner]),
            ]
        case _:
            counts = [file_store.append_tool_calls([call.inner, call.outer])]
    assert sum(counts) == 1  # one call, counted once however it arrived
    row = check_folded(file_store, call, code="timeout")
    assert row["source"] == "exception"
    assert file_store.count("tool_calls") == 1


def test_fold_across_a_restart(tmp_path: Path) -> None:
    """A layer stored before the sidecar stopped folds with its outer row received after."""
    path = tmp_path / "restart.duckdb"
    call = pair(outer_code="internal_error", inner_code="timeout")
    with DuckDBStore(path) as store:
        assert store.append_tool_calls([call.inner]) == 1
    with DuckDBStore(path) as store:
        assert store.append_tool_calls([call.outer]) == 0
        check_folded(store, call, code="timeout")


@pytest.mark.parametrize("order", ["inner-first", "outer-first"])
def test_replays_change_nothing(file_store: DuckDBStore, order: str) -> None:
    """Every span sent again, alone and together, adds no row and changes no row."""
    call = pair(outer_code="denied", inner_code="ok")
    first = [call.inner, call.outer] if order == "inner-first" else [call.outer, call.inner]
    for one in first:
        file_store.append_tool_calls([one])
    before = rows(file_store, "tool_calls", call.outer.trace_id)
    layers = rows(file_store, "tool_call_layers", call.outer.trace_id)
    assert file_store.append_tool_calls([call.inner]) == 0
    assert file_store.append_tool_calls([call.outer]) == 0
    assert file_store.append_tool_calls([call.outer, call.inner, call.inner]) == 0
    assert rows(file_store, "tool_calls", call.outer.trace_id) == before
    assert rows(file_store, "tool_call_layers", call.outer.trace_id) == layers
    check_folded(file_store, call, code="denied")


@pytest.mark.parametrize(
    "difference",
    [
        pytest.param({"inner_service": "mcp-server"}, id="another-service"),
        pytest.param({"inner_tool": "other_tool"}, id="another-tool"),
        # Layers of one call start milliseconds apart; this is a later call's span.
        pytest.param({"inner_lag": FOLD_WINDOW + timedelta(minutes=1)}, id="beyond-the-window"),
    ],
)
def test_unrelated_children_stay_calls(file_store: DuckDBStore, difference: dict[str, Any]) -> None:
    """A child span of another service (the server's view), another tool, or far later is
    a call of its own."""
    call = pair(**difference)
    assert file_store.append_tool_calls([call.inner]) == 1
    assert file_store.append_tool_calls([call.outer]) == 1
    assert len(rows(file_store, "tool_calls", call.outer.trace_id)) == 2
    assert rows(file_store, "tool_call_layers", call.outer.trace_id) == []


def test_three_layers_fold_into_the_top(file_store: DuckDBStore) -> None:
    """A layer's own layer in the same batch folds into the topmost row."""
    call = pair(outer_code="internal_error", inner_code="ok")
    middle = call.inner
    bottom = pair(outer_code="ok", inner_code="timeout").inner
    bottom = replace(
        bottom,
        trace_id=middle.trace_id,
        parent_span_id=middle.span_id,
        service=middle.service,
        tool=middle.tool,
        ts=middle.ts + timedelta(milliseconds=1),
    )
    assert file_store.append_tool_calls([bottom, middle, call.outer]) == 1
    (row,) = rows(file_store, "tool_calls", call.outer.trace_id)
    assert row["span_id"] == call.outer.span_id
    assert row["code"] == "timeout"
    layers = rows(file_store, "tool_call_layers", call.outer.trace_id)
    assert {r["span_id"]: r["outer_span_id"] for r in layers} == {
        middle.span_id: call.outer.span_id,
        bottom.span_id: call.outer.span_id,
    }


def _processed(call: Any, redactions: dict[str, int]) -> Processed:
    return Processed(record=call, redactions=redactions)


def test_sink_counts_a_layers_redactions_once(file_store: DuckDBStore) -> None:
    """Through the sidecar's sink (one transaction per batch): a layer's redaction counts
    are stored once, and its replay (before and after the fold) adds none."""
    call = pair(outer_code="internal_error", inner_code="timeout")
    sink = StoreSink(file_store)

    def write(*items: Processed) -> int:
        batch = StoreBatch()
        for item in items:
            batch.add(item)
        return sink.write(batch).calls

    def delivery(n: int) -> tuple[Processed, Processed]:
        # Each delivery is received anew: a replay carries a later received_at.
        later = timedelta(seconds=10 * n)
        return (
            _processed(
                replace(call.inner, received_at=call.inner.received_at + later),
                {"content:gen_ai.input": 2},
            ),
            _processed(
                replace(call.outer, received_at=call.outer.received_at + later), {"api_key": 1}
            ),
        )

    inner, outer = delivery(0)
    assert write(inner) == 1
    assert write(delivery(1)[0]) == 0  # a replay before the fold
    assert write(outer) == 0  # the call was counted with its layer
    assert write(*delivery(2)) == 0  # a replay of both after it
    assert write(delivery(3)[0]) == 0  # and of the layer alone
    check_folded(file_store, call, code="timeout")
    counts = Counter(
        dict(
            file_store.cursor()
            .execute("SELECT rule, sum(count) FROM redactions GROUP BY rule")
            .fetchall()
        )
    )
    assert counts == Counter({"content:gen_ai.input": 2, "api_key": 1})


def test_prune_removes_old_layers(file_store: DuckDBStore) -> None:
    """Retention covers the layers table as it does the calls."""
    call = pair()
    file_store.append_tool_calls([call.inner, call.outer])
    report = file_store.prune(timedelta(days=1), now=call.outer.ts + timedelta(days=2))
    assert report.deleted["tool_call_layers"] == 1
    assert file_store.count("tool_call_layers") == 0


def test_span_ids_read_hex_bytes() -> None:
    """Span ids become the 64-bit integers they spell; nulls (roots) are left out."""
    column = pa.chunked_array(
        [["00000000000000ff", None], ["ffffffffffffffff", "0123456789abcdef"]]
    ).slice(1)
    assert span_ids(column).tolist() == [0xFFFFFFFFFFFFFFFF, 0x0123456789ABCDEF]


def test_recent_spans_says_no_only_when_nothing_can_fold() -> None:
    """`may_fold` is "maybe" for a batch holding a remembered span's parent or child, and
    for one whose spans are parent and child; "no" otherwise, and once forgotten."""
    recent = RecentSpans(max_rows=3)
    call = pair()
    other = pair()
    outer = tool_calls_to_arrow([call.outer])
    inner = tool_calls_to_arrow([call.inner])
    assert not recent.may_fold(outer)
    assert recent.may_fold(tool_calls_to_arrow([call.outer, call.inner]))
    recent.add_batch(inner)
    assert recent.may_fold(outer)  # the outer of a remembered layer
    assert not recent.may_fold(tool_calls_to_arrow([other.outer]))
    recent.add_batch(outer)
    assert recent.may_fold(inner)  # the layer of a remembered outer (a replay)
    for _ in range(3):  # three newer spans push the first two out
        recent.add_batch(tool_calls_to_arrow([pair().outer]))
    assert not recent.may_fold(outer)
    assert len(recent) <= 3
