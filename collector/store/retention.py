"""Retention and row counts over the contract tables: one implementation for both stores.

A DuckDB file and a DuckLake (attached to an in-memory DuckDB and made its default
catalog) run the same SQL on a DuckDB connection, so what retention deletes and how a
table is counted is written once here.  Each store brings the connection and what only
it knows: its transaction, its locks and retries, and how its errors are mapped.

Deploy markers are never pruned: they are tiny and keep old charts labelled.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Final

import duckdb

from errscope.collector.errors import StoreError, StoreErrorKind

__all__ = ["TABLES", "PruneReport", "count_rows", "delete_older_than", "retention_cutoff"]

# The contract tables, each with the timestamp column retention looks at.
TABLES: Final = {
    "tool_calls": "ts",
    "tool_call_layers": "ts",
    "tracebacks": "ts",
    "redactions": "hour",
    "deploys": "ts",
}
_KEPT: Final = frozenset({"deploys"})


@dataclass(frozen=True, slots=True)
class PruneReport:
    """How many rows retention removed from each table."""

    cutoff: datetime
    deleted: dict[str, int]


def retention_cutoff(older_than: timedelta, now: datetime | None = None) -> datetime:
    """The moment before which rows go; `StoreError(WRITE_FAILED)` unless `older_than` > 0."""
    if older_than <= timedelta(0):
        raise StoreError(
            StoreErrorKind.WRITE_FAILED,
            "retention must be positive",
            field="older_than",
            hint="for example 30d or 12h",
        )
    return (now or datetime.now(UTC)) - older_than


def delete_older_than(con: duckdb.DuckDBPyConnection, cutoff: datetime) -> dict[str, int]:
    """Delete every pruned table's rows from before `cutoff`; rows deleted per table.

    Runs in whatever transaction the caller holds on `con`: the store decides whether the
    tables go in one commit and how a conflict is retried.
    """
    deleted: dict[str, int] = {}
    for table, column in TABLES.items():
        if table in _KEPT:
            continue
        row = con.execute(
            f"DELETE FROM {table} WHERE {column} < $cutoff",  # noqa: S608 - constants
            {"cutoff": cutoff},
        ).fetchone()
        deleted[table] = int(row[0]) if row else 0
    return deleted


def count_rows(cursor: Callable[[], duckdb.DuckDBPyConnection], table: str) -> int:
    """Rows in one contract table, read on a fresh `cursor()`; a name not in `TABLES` is
    refused with `StoreError(UNREADABLE)` before any cursor is opened."""
    if table not in TABLES:
        raise StoreError(StoreErrorKind.UNREADABLE, "not a store table", entry=table)
    row = cursor().execute(f"SELECT count(*) FROM {table}").fetchone()  # noqa: S608 - constants
    return int(row[0]) if row else 0
