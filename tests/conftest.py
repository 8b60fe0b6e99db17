"""Shared fixtures: stores on real DuckDB databases, and the record factory."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from errscope.collector.record import ToolCall
from errscope.collector.store.duckdb import DuckDBStore
from tests.factories import make_call


@pytest.fixture
def call_factory() -> Callable[..., ToolCall]:
    """The `make_call` factory, for tests that build their own tables."""
    return make_call


@pytest.fixture
def memory_store() -> Iterator[DuckDBStore]:
    """A migrated store in memory."""
    store = DuckDBStore(":memory:")
    yield store
    store.close()


@pytest.fixture
def file_store(tmp_path: Path) -> Iterator[DuckDBStore]:
    """A migrated store on a real file under tmp_path."""
    store = DuckDBStore(tmp_path / "errscope.duckdb")
    yield store
    store.close()
