"""A call recorded at two layers is one row on a real lake too, in either order and on replay."""

from __future__ import annotations

from pathlib import Path

import pytest

from errscope.collector.store.lake import DuckLakeStore
from tests.store.layered import check_folded, pair, rows

pytestmark = pytest.mark.postgres


@pytest.mark.parametrize("order", ["inner-first", "outer-first", "one-batch"])
def test_lake_folds_two_layers_into_one_row(lake_store: DuckLakeStore, order: str) -> None:
    """The SDK's span under fastmcp's becomes a layer of it, whichever commit came first."""
    call = pair(outer_code="internal_error", inner_code="timeout")
    batches = {
        "inner-first": [[call.inner], [call.outer]],
        "outer-first": [[call.outer], [call.inner]],
        "one-batch": [[call.inner, call.outer]],
    }[order]
    assert sum(lake_store.append_tool_calls(batch) for batch in batches) == 1
    check_folded(lake_store, call, code="timeout")
    before = rows(lake_store, "tool_calls", call.outer.trace_id)
    # Replays, alone and together, add and change nothing.
    assert lake_store.append_tool_calls([call.inner]) == 0
    assert lake_store.append_tool_calls([call.outer, call.inner]) == 0
    assert rows(lake_store, "tool_calls", call.outer.trace_id) == before
    check_folded(lake_store, call, code="timeout")


def test_lake_folds_across_a_reopen(lake_url: str, data_path: Path) -> None:
    """A layer committed by one sidecar process folds with its outer row stored after a restart."""
    call = pair(outer_code="internal_error", inner_code="rate_limited")
    with DuckLakeStore(lake_url, data_path=data_path) as store:
        assert store.append_tool_calls([call.inner]) == 1
    with DuckLakeStore(lake_url, data_path=data_path) as store:
        assert store.append_tool_calls([call.outer]) == 0
        check_folded(store, call, code="rate_limited")
