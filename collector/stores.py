"""Choose a store by URL: a DuckDB file (the embedded default) or a DuckLake.

    data/errscope.duckdb                      DuckDBStore on that file
    duckdb:data/errscope.duckdb               the same, spelled out
    ducklake:postgres:<libpq conninfo>        DuckLakeStore (catalog in PostgreSQL);
                                              --data-path DIR_OR_URL for its Parquet files

`Store` is the interface both implement, so callers (the sidecar's writer thread, the CLI,
the benchmarks) are typed against it rather than against one class.  A malformed URL is
refused with `StoreError(BAD_URL)` naming what is wrong; a password in it is never echoed.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from datetime import datetime, timedelta
from pathlib import Path
from typing import Final, Protocol

import duckdb
import pyarrow as pa

from errscope.collector import store as duckdb_store
from errscope.collector.errors import StoreError, StoreErrorKind
from errscope.collector.lake import LAKE_PREFIX, DuckLakeStore, mask_secrets
from errscope.collector.record import Deploy, RedactionCount, ToolCall, TracebackSample
from errscope.collector.store import DuckDBStore, PruneReport

__all__ = ["Store", "open_store"]

# A libpq `key=value` word: a connection string given without its ducklake:postgres: prefix
# would otherwise become a DuckDB file named after it, password and all.
_CONNINFO_WORD: Final = re.compile(
    r"(?:^|\s)(?:host|hostaddr|port|dbname|user|password|sslmode|passfile|service)\s*="
)


class Store(Protocol):
    """What every errscope store offers: appends that return new-row counts, reads, upkeep."""

    read_only: bool

    def append_tool_calls(self, calls: Iterable[ToolCall] | pa.Table) -> int:
        """Store a batch in one commit; return how many rows were new."""
        ...

    def append_tracebacks(self, samples: Iterable[TracebackSample]) -> int:
        """Store traceback samples; return how many were new."""
        ...

    def add_deploys(self, deploys: Iterable[Deploy]) -> int:
        """Record deploys; return how many were new."""
        ...

    def add_redactions(self, counts: Iterable[RedactionCount]) -> int:
        """Add redaction counts; return how many rows were added."""
        ...

    def known_versions(self) -> set[tuple[str, str, str | None]]:
        """Every (service, version, environment) with a deploy row."""
        ...

    def received_at_of(self, calls: Sequence[ToolCall]) -> dict[tuple[str, str], set[datetime]]:
        """When the stored copy of each call's span was received (to recognise replays)."""
        ...

    def prune(self, older_than: timedelta, *, now: datetime | None = None) -> PruneReport:
        """Delete rows older than `older_than`."""
        ...

    def count(self, table: str) -> int:
        """Rows in one contract table."""
        ...

    def cursor(self) -> duckdb.DuckDBPyConnection:
        """A read cursor on which the named queries run unqualified."""
        ...

    def schema_version(self) -> int:
        """The schema version recorded in the store."""
        ...

    def migrate(self) -> int:
        """Bring the schema up to date; return the version."""
        ...

    def close(self) -> None:
        """Release the store."""
        ...


def open_store(
    url: str | Path,
    *,
    data_path: str | Path | None = None,
    read_only: bool = False,
    memory_limit: str | None = None,
) -> DuckDBStore | DuckLakeStore:
    """Open the store `url` names (see the module docstring).

    `memory_limit` bounds a DuckDB file store's buffer pool (a DuckLake store keeps its
    rows in Parquet files and its catalog in PostgreSQL, and ignores it).
    """
    text = str(url).strip()
    if not text:
        raise StoreError(
            StoreErrorKind.BAD_URL,
            "empty store URL",
            hint="give a DuckDB file path or ducklake:postgres:<conninfo>",
        )
    if text.startswith(LAKE_PREFIX):
        return DuckLakeStore(text, data_path=data_path, read_only=read_only)
    if data_path is not None:
        raise StoreError(
            StoreErrorKind.BAD_URL,
            "--data-path applies to a DuckLake store only",
            entry=mask_secrets(text),
            field="data_path",
            hint="drop --data-path, or use ducklake:postgres:<conninfo>",
        )
    if text.startswith(("postgres:", "postgresql:")) or _CONNINFO_WORD.search(text):
        raise StoreError(
            StoreErrorKind.BAD_URL,
            "a PostgreSQL connection string names a DuckLake catalog",
            entry=mask_secrets(text),
            hint="prefix it: ducklake:postgres:<conninfo>, and pass --data-path",
        )
    return duckdb_store.open_store(text, read_only=read_only, memory_limit=memory_limit)
