"""The one interface every errscope store offers, and the faults a store can report.

`Store` is what the sink, the writer thread, the CLI and the query runner are typed
against; `DuckDBStore` (a file) and `DuckLakeStore` (PostgreSQL catalog, Parquet data)
both provide all of it, so no caller asks which store it holds.  Where the two differ in
what they can promise, the protocol names the capability and each store answers for
itself: `atomically` is one transaction on a DuckDB file and each table's own commit on a
lake; `fault` and `reopen` watch a file that a lake does not have.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from datetime import datetime, timedelta
from enum import StrEnum
from typing import TYPE_CHECKING, Protocol, Self, TypeVar

if TYPE_CHECKING:
    import duckdb
    import pyarrow as pa

    from errscope.collector.record import Deploy, RedactionCount, ToolCall, TracebackSample
    from errscope.collector.store.retention import PruneReport

__all__ = ["Store", "StoreFault"]

T = TypeVar("T")


class StoreFault(StrEnum):
    """Why an open store can take no more writes; the value is the log code.

    INVALIDATED: DuckDB refused every statement after a fatal error (a checkpoint that
    failed on a full disk); `Store.reopen` recovers once the cause is gone.
    FILE_MISSING: the file at the store's path was deleted or replaced while open, so
    writes would land in an unlinked inode and vanish at exit; reopening would start an
    empty store, so only an operator can decide what to do.
    """

    INVALIDATED = "store_invalidated"
    FILE_MISSING = "store_file_missing"


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

    def atomically(self, body: Callable[[], T]) -> T:
        """Run `body`'s appends so that a failure part-way stores as little as the store can.

        A DuckDB file runs them as one transaction (every row or none; `body` may run
        twice, so it must be safe to); a DuckLake commits each append on its own and runs
        `body` once.
        """
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

    def fault(self, *, probe: bool = True) -> StoreFault | None:
        """Why the store can take no more writes, or None; `probe` may cost a statement."""
        ...

    def reopen(self) -> None:
        """Recover from `StoreFault.INVALIDATED`; raises `StoreError` while it cannot."""
        ...

    def close(self) -> None:
        """Release the store."""
        ...

    def __enter__(self) -> Self: ...

    def __exit__(self, *_: object) -> None: ...
