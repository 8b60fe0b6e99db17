"""Shared fixtures for query and detection tests: an in-memory store and a source on it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from errscope.collector.store.duckdb import DuckDBStore
from tests.queries.traffic import StoreSource


@pytest.fixture
def store() -> Iterator[DuckDBStore]:
    """A migrated in-memory store."""
    s = DuckDBStore(":memory:")
    yield s
    s.close()


@pytest.fixture
def source(store: DuckDBStore) -> StoreSource:
    """Named queries on the `store` fixture."""
    return StoreSource(store)
