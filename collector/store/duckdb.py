"""The DuckDB store: one database file, its migrations runner, bulk appends, de-duplication.

A `DuckDBStore` owns one DuckDB database (a file, or `:memory:` in tests) and provides the
whole `Store` protocol.  DuckDB lets one process hold a file for writing and no other
process open it at all, so the store maps that lock failure to `StoreError(kind=LOCKED)`
with a hint to read through the sidecar's query API instead.  Retention and counts are
`errscope.collector.store.retention`'s, shared with the DuckLake store.

Promises:
- the schema is created idempotently and migrated forward one file per version
  (`collector/store/migrations/NNNN_*.sql`); a database newer than this code is refused;
- appends are one Arrow `INSERT` statement per batch, which DuckDB commits as one
  transaction: a batch is stored whole or not at all, and `append_*` returns only after the commit;
- (trace_id, span_id) is the primary key of `tool_calls`: a replayed batch inserts
  nothing the second time, and the count returned is what was newly stored;
- a call's lower layer (`errscope.collector.store.layers`) is folded in the batch's own
  transaction: moved to `tool_call_layers`, its outer row enriched; the count returned
  is the calls the batch added (a stored layer it moved out counts against it);
- the write-ahead log is folded into the file every `CHECKPOINT_THRESHOLD` of log
  (DuckDB's default is 16 MiB): each checkpoint rewrites the primary-key index, so its
  cost grows with the table, while everything written since the last checkpoint stays
  in memory (at 256 MiB of log a sidecar grew past 650 MiB before checkpointing).
  32 MiB keeps that under ~50 MiB.  A killed sidecar replays up to that much log
  when it restarts (docs/operations.md has the measured time);
- `memory_limit` (the sidecar sets one) bounds DuckDB's buffer pool, which otherwise
  keeps the table's blocks cached up to 80% of the machine's memory;
- every record is validated first (`errscope.collector.record`); a bad one fails the whole batch
  with a `RecordError` naming the field, before anything is written;
- a store that fails to be created (a full disk) removes the file(s) it had just created,
  so the next start does not meet an empty file it cannot open;
- `fault()` says when the store cannot be written any more: DuckDB invalidated the
  database after a fatal error (a checkpoint failed on a full disk; `reopen()` recovers),
  or the file at `path` was deleted or replaced under the open store (writes would go to
  an unlinked inode);
- `close()` raises `StoreError(WRITE_FAILED)` when its final checkpoint fails, never
  DuckDB's own exception: what was committed stays in the write-ahead log.

Thread-safety: one `DuckDBStore` may be shared by threads; writes are serialised by a
lock, reads use their own cursors.
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager, suppress
from datetime import datetime, timedelta
from pathlib import Path
from typing import Final, TypeVar

import duckdb
import pyarrow as pa

from errscope.collector.config import STORE_PATH
from errscope.collector.errors import StoreError, StoreErrorKind
from errscope.collector.gcpause import gc_paused
from errscope.collector.record import (
    TOOL_CALLS_SCHEMA,
    Deploy,
    RedactionCount,
    ToolCall,
    TracebackSample,
    deploys_to_arrow,
    redactions_to_arrow,
    tool_calls_to_arrow,
    tracebacks_to_arrow,
    validate_tool_calls,
)
from errscope.collector.store.layers import (
    FoldPlan,
    RecentSpans,
    fold_stored,
    plan_fold,
)
from errscope.collector.store.migrations import check_schema_readable, migrations
from errscope.collector.store.protocol import StoreFault
from errscope.collector.store.replay import stored_received_at
from errscope.collector.store.retention import (
    PruneReport,
    count_rows,
    delete_older_than,
    retention_cutoff,
)

__all__ = [
    "CHECKPOINT_THRESHOLD",
    "DEFAULT_MEMORY_LIMIT",
    "MEMORY_SIZE_HINT",
    "DuckDBStore",
    "is_memory_size",
    "open_file_store",
]

T = TypeVar("T")

_LOCKED_HINT: Final = (
    "another process (a running sidecar) holds the file: read through that sidecar's query "
    "API (--api URL, 127.0.0.1:4320 by default) or a copy of the file; to write, stop it"
)


def _is_lock_error(exc: duckdb.Error, path: str) -> bool:
    # The message quotes the path: a folder named "blocklist" must not read as a lock.
    text = str(exc).replace(path, "").lower()
    return "could not set lock" in text or "conflicting lock" in text


def _map_open_error(exc: duckdb.Error, path: str, *, created: bool = False) -> StoreError:
    if _is_lock_error(exc, path):
        return StoreError(
            StoreErrorKind.LOCKED, "database file is locked", entry=path, hint=_LOCKED_HINT
        )
    if created:
        return StoreError(
            StoreErrorKind.WRITE_FAILED,
            f"cannot create the database ({type(exc).__name__})",
            entry=path,
            hint="check that the disk has free space and the folder is writable",
        )
    return StoreError(
        StoreErrorKind.UNREADABLE,
        f"cannot open database ({type(exc).__name__})",
        entry=path,
        hint="check the path and that the file is a DuckDB database",
    )


# How much write-ahead log DuckDB gathers before it checkpoints (see the module notes).
CHECKPOINT_THRESHOLD: Final = "32MiB"
# DuckDB's memory for a store written by a long-running process (the sidecar, a service's
# in-process store); without it DuckDB caches the table up to 80% of the machine's memory.
# Dashboard renders on a 10-million-row store took the same time at 64 MB as unbounded.
DEFAULT_MEMORY_LIMIT: Final = "64MB"
# A DuckDB memory size: digits, an optional fraction, a unit (`SET memory_limit` syntax).
_MEMORY_SIZE: Final = re.compile(r"[0-9]+(?:\.[0-9]+)?\s*(?:[KMGT]i?B)", re.IGNORECASE)


MEMORY_SIZE_HINT: Final = "give a number and a unit: 64MB, 512MiB, 2GB"


def is_memory_size(value: str) -> bool:
    """Whether DuckDB reads `value` as a memory size (`128MB`, `1.5GiB`)."""
    return _MEMORY_SIZE.fullmatch(value.strip()) is not None


class DuckDBStore:
    """errscope's embedded store on one DuckDB database file."""

    def __init__(
        self, path: str | Path, *, read_only: bool = False, memory_limit: str | None = None
    ) -> None:
        self.path = str(path)
        self.read_only = read_only
        if memory_limit is not None and not is_memory_size(memory_limit):
            raise StoreError(
                StoreErrorKind.BAD_SETTING,
                "not a memory size",
                field="memory_limit",
                hint=MEMORY_SIZE_HINT,
            )
        self._memory_limit = memory_limit
        on_disk = self.path != ":memory:"
        if on_disk and not read_only:
            try:
                Path(self.path).parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise StoreError(
                    StoreErrorKind.UNREADABLE,
                    f"cannot create the store's folder ({exc.strerror or type(exc).__name__})",
                    entry=self.path,
                    hint="pass a path in a writable folder",
                ) from None
        if read_only and on_disk and not Path(self.path).exists():
            raise StoreError(
                StoreErrorKind.UNREADABLE,
                "database file does not exist",
                entry=self.path,
                hint="pass the path of a store written by `errscope serve`",
            )
        # The files a new store's open creates are removed again if it fails (a full disk):
        # an empty or half-written store file would refuse every later start.
        creating = on_disk and not read_only and not Path(self.path).exists()
        new_files = [p for p in (Path(self.path), Path(f"{self.path}.wal")) if not p.exists()]
        # Re-entrant: the appends inside `atomically` take it again on the same thread.
        self._write_lock = threading.RLock()
        self._atomic_thread: int | None = None  # the thread inside `atomically`, if any
        self._replaying = False  # `atomically`'s second run: calls go in with OR IGNORE
        self._closed = False
        self._file_id: tuple[int, int] | None = None  # (device, inode) opened, for `fault`
        self._recent = RecentSpans()  # seeded by `_connect` from what the file holds
        try:
            self._connect()
        except BaseException as exc:
            # A lock error means another process made the file: it is not ours to remove.
            if creating and not (isinstance(exc, duckdb.Error) and _is_lock_error(exc, self.path)):
                for file in new_files:
                    file.unlink(missing_ok=True)
            if isinstance(exc, duckdb.Error):
                raise _map_open_error(exc, self.path, created=creating) from exc
            raise

    def _connect(self) -> None:
        """Open the database, apply the settings, then check or migrate its schema."""
        self._con = duckdb.connect(self.path, read_only=self.read_only)
        try:
            if self._memory_limit is not None:  # checked by `is_memory_size`: no quotes in it
                self._con.execute(f"SET memory_limit = '{self._memory_limit.strip()}'")
            if self.read_only:
                self._check_version_readable()
            else:
                self._con.execute(f"SET checkpoint_threshold = '{CHECKPOINT_THRESHOLD}'")
                self.migrate()
                self._recent = RecentSpans.seeded(self._con)
            if self.path != ":memory:":
                opened = os.stat(self.path)
                self._file_id = (opened.st_dev, opened.st_ino)
        except BaseException:
            self._con.close()  # else the file stays held, in this process, in this mode
            raise

    # ------------------------------------------------------------ lifecycle

    def close(self) -> None:
        """Checkpoint (when writable) and release the file.

        A failed checkpoint (a full disk) raises `StoreError(WRITE_FAILED)`; the file is
        released all the same, and what was committed stays in the write-ahead log, which
        the next open folds in.
        """
        if self._closed:
            return
        self._closed = True
        try:
            if not self.read_only:
                self._con.execute("CHECKPOINT")
        except duckdb.Error as exc:
            raise StoreError(
                StoreErrorKind.WRITE_FAILED,
                f"final checkpoint failed ({type(exc).__name__})",
                entry=self.path,
                hint="committed rows are kept in the write-ahead log: free disk space and "
                "start again to fold them in",
            ) from exc
        finally:
            with suppress(duckdb.Error):
                self._con.close()

    def fault(self, *, probe: bool = True) -> StoreFault | None:
        """Why the store can take no more writes, or None when it can (see `StoreFault`).

        A stat (~2 us), then with `probe` a `SELECT 1` (~0.2 ms) to see whether DuckDB has
        invalidated the database: the sidecar's writer probes only after a failed commit.
        """
        if self._file_id is not None:
            try:
                now = os.stat(self.path)
            except OSError:
                return StoreFault.FILE_MISSING
            if (now.st_dev, now.st_ino) != self._file_id:
                return StoreFault.FILE_MISSING
        if not probe:
            return None
        with self._write_lock:
            try:
                self._con.execute("SELECT 1")
            except duckdb.Error:
                return StoreFault.INVALIDATED
        return None

    def reopen(self) -> None:
        """Drop the connection (with no checkpoint) and open the file again.

        For a database DuckDB has invalidated after a fatal error: it refuses every
        statement until reopened.  Raises `StoreError` while the file cannot be opened
        (the disk still full); call again later.
        """
        with self._write_lock:
            with suppress(duckdb.Error):
                self._con.close()
            try:
                self._connect()
            except duckdb.Error as exc:
                raise _map_open_error(exc, self.path) from exc
            self._closed = False

    def __enter__(self) -> DuckDBStore:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def cursor(self) -> duckdb.DuckDBPyConnection:
        """A cursor for reads on this database, one per thread."""
        return self._con.cursor()

    # ------------------------------------------------------------ schema

    def schema_version(self) -> int:
        """The version recorded in the database; 0 for a new one."""
        exists = self._con.execute(
            "SELECT count(*) FROM information_schema.tables WHERE table_name = 'errscope_schema'"
        ).fetchone()
        if not exists or exists[0] == 0:
            return 0
        row = self._con.execute("SELECT max(version) FROM errscope_schema").fetchone()
        return int(row[0]) if row and row[0] is not None else 0

    def _check_version_readable(self) -> None:
        check_schema_readable(self.schema_version(), self.path, read_only=self.read_only)

    def _refuse_foreign_tables(self) -> None:
        """A database with tables but no errscope schema is someone else's: never add
        errscope's tables to it (`--db` pointed at the wrong file)."""
        row = self._con.execute(
            "SELECT count(*) FROM information_schema.tables "
            "WHERE table_catalog = current_database() AND table_schema = 'main' "
            # Ours, empty, when a first start was killed before its first migration.
            "AND table_name <> 'errscope_schema'"
        ).fetchone()
        if row and row[0]:
            raise StoreError(
                StoreErrorKind.UNREADABLE,
                "not an errscope store: the database holds other tables",
                entry=self.path,
                hint="pass a store written by `errscope serve` or `errscope run`, or a new path",
            )

    def migrate(self) -> int:
        """Bring the schema to `SCHEMA_VERSION`, one migration per transaction; return it."""
        self._check_version_readable()
        with self._write_lock:
            if self.schema_version() == 0:
                self._refuse_foreign_tables()
            self._con.execute(
                "CREATE TABLE IF NOT EXISTS errscope_schema "
                "(version INTEGER PRIMARY KEY, name VARCHAR NOT NULL, "
                "applied_at TIMESTAMPTZ NOT NULL)"
            )
            current = self.schema_version()
            for migration in migrations():
                if migration.version <= current:
                    continue
                try:
                    self._con.execute("BEGIN TRANSACTION")
                    self._con.execute(migration.sql)
                    self._con.execute(
                        "INSERT INTO errscope_schema VALUES ($v, $n, now())",
                        {"v": migration.version, "n": migration.name},
                    )
                    self._con.execute("COMMIT")
                except duckdb.Error as exc:
                    self._con.execute("ROLLBACK")
                    raise StoreError(
                        StoreErrorKind.MIGRATION_FAILED,
                        f"migration failed ({type(exc).__name__})",
                        entry=migration.name,
                    ) from exc
        return self.schema_version()

    # ------------------------------------------------------------ writes

    @contextmanager
    def _writing(self, *, transaction: bool) -> Iterator[duckdb.DuckDBPyConnection]:
        """Hold the write lock; wrap several statements in one transaction when asked.

        One statement needs no explicit transaction: DuckDB commits it whole or not at
        all, and skipping BEGIN/COMMIT saves two round trips on every batch.
        """
        if self.read_only:
            raise StoreError(
                StoreErrorKind.WRITE_FAILED, "store is open read-only", entry=self.path
            )
        with self._write_lock:
            # Inside `atomically` a statement joins its transaction, which commits or rolls
            # back the whole.
            begin = transaction and not self._in_atomic()
            try:
                if begin:
                    self._con.execute("BEGIN TRANSACTION")
                yield self._con
                if begin:
                    self._con.execute("COMMIT")
            except duckdb.Error as exc:
                if begin:
                    self._safe_rollback()
                raise self._write_failed(exc) from exc
            except BaseException:
                if begin:
                    self._safe_rollback()
                raise

    def _in_atomic(self) -> bool:
        return self._atomic_thread == threading.get_ident()

    def _write_failed(self, exc: duckdb.Error) -> StoreError:
        return StoreError(
            StoreErrorKind.WRITE_FAILED, f"write failed ({type(exc).__name__})", entry=self.path
        )

    def atomically(self, body: Callable[[], T]) -> T:
        """Run `body`'s appends as one transaction: every row is stored, or none is.

        The sidecar writes a batch's calls and its redaction counts this way, so a failure
        between the two (a full disk) cannot leave the calls stored and the counts lost:
        the export is not acknowledged, and its retry writes both.  When a replayed span
        trips the primary key (which aborts the transaction), `body` runs once more in a
        new one, with the calls inserted OR IGNORE.  `body` must be safe to run twice.
        """
        with self._write_lock:
            for replaying in (False, True):
                self._atomic_thread, self._replaying = threading.get_ident(), replaying
                try:
                    self._con.execute("BEGIN TRANSACTION")
                    result = body()
                    self._con.execute("COMMIT")
                except BaseException as exc:
                    self._safe_rollback()
                    cause = exc.__cause__ if isinstance(exc, StoreError) else exc
                    if replaying or not isinstance(cause, duckdb.ConstraintException):
                        if isinstance(exc, duckdb.Error):
                            raise self._write_failed(exc) from exc
                        raise
                else:
                    return result
                finally:
                    self._atomic_thread, self._replaying = None, False
        raise AssertionError("unreachable: the second run returns or raises")  # pragma: no cover

    def _safe_rollback(self) -> None:
        # No transaction open (it failed to begin) means nothing to undo.
        with suppress(duckdb.Error):
            self._con.execute("ROLLBACK")

    def _run_on_batch(self, batch: pa.Table, sql: str) -> int:
        """Run one INSERT that reads `_errscope_batch` (the Arrow batch), atomically.

        Returns how many rows the INSERT stored.
        """
        if batch.num_rows == 0:
            return 0
        with self._writing(transaction=False) as con:
            # DuckDB finds the batch by this local's name (its replacement scan), which
            # saves registering and unregistering a view: ~1.2 ms of a 1,000-row batch.
            # The batch goes as a bare Arrow C stream capsule, read once: for a Table
            # DuckDB builds a pyarrow dataset scanner first, ~0.6 ms of every batch.
            # Not a relation's insert_into(): at 1.5.5 that returns normally when the
            # commit fails (a full disk), so a batch could be acknowledged and lost.
            # RETURNING makes DuckDB plan its plain one-thread insert instead of the
            # order-preserving batch insert, which costs ~1 ms more on a 1,000-row batch
            # (the batch insert pays off only on far larger inputs); the rows it returns
            # are counted, one small column.
            _errscope_batch = batch.__arrow_c_stream__()
            (stored,) = con.execute(f"{sql} RETURNING 0").fetchnumpy().values()
        return len(stored)

    def _insert(self, table: str, batch: pa.Table, *, verb: str = "INSERT") -> int:
        # An explicit column list, not BY NAME: name matching costs a third of a 1,000-row
        # insert.  Table and column names come from our own Arrow schemas.
        columns = ", ".join(batch.column_names)
        sql = f"{verb} INTO {table} ({columns}) SELECT {columns} FROM _errscope_batch"  # noqa: S608
        return self._run_on_batch(batch, sql)

    def append_tool_calls(self, calls: Iterable[ToolCall] | pa.Table) -> int:
        """Store a batch of calls in one transaction; return how many were new.

        The common case, a batch with no replayed span, takes a plain INSERT; only when
        the primary key refuses it is the batch inserted again with OR IGNORE, which
        costs about twice as much and so is kept for the replays that need it.
        """
        # The conversion makes a few objects per value, all freed by reference counting:
        # with the cyclic collector running, its collections cost a third of a 1,000-row
        # append, walking every live record of the caller's.
        with gc_paused():
            if isinstance(calls, pa.Table):
                table = calls.select(TOOL_CALLS_SCHEMA.names).cast(TOOL_CALLS_SCHEMA)
                validate_tool_calls(table)
            else:
                table = tool_calls_to_arrow(calls)
            with self._write_lock:  # the search and the writes see the same rows
                stored = self._append_calls(table)
                self._recent.add_batch(table)
            return stored

    def _append_calls(self, table: pa.Table) -> int:
        plan = self._plan_fold(table)
        if plan is not None:
            return self._append_folded(plan)
        if self._replaying and self._in_atomic():
            return self._insert("tool_calls", table, verb="INSERT OR IGNORE")
        try:
            return self._insert("tool_calls", table)
        except StoreError as exc:
            # Inside `atomically` the refusal aborted its transaction: it starts over.
            if self._in_atomic() or not isinstance(exc.__cause__, duckdb.ConstraintException):
                raise
        return self._insert("tool_calls", table, verb="INSERT OR IGNORE")

    def _plan_fold(self, table: pa.Table) -> FoldPlan | None:
        """Which rows of the batch, or of the store, are a call's lower layers (`layers`)."""
        if self.read_only:
            raise StoreError(
                StoreErrorKind.WRITE_FAILED, "store is open read-only", entry=self.path
            )
        if not self._recent.may_fold(table):
            return None
        try:
            return plan_fold(self._con, table)
        except duckdb.Error as exc:
            raise self._write_failed(exc) from exc

    def _append_folded(self, plan: FoldPlan) -> int:
        """Write a batch that folds, in one transaction; return how many calls it added.

        A rare path (a framework that records a call at two layers), so every insert is
        OR IGNORE: a replayed span needs no second attempt.
        """
        with self._writing(transaction=True) as con:
            removed = fold_stored(con, plan)
            self._insert("tool_call_layers", plan.layers, verb="INSERT OR IGNORE")
            inserted = self._insert("tool_calls", plan.calls, verb="INSERT OR IGNORE")
        return inserted - removed

    def append_tracebacks(self, samples: Iterable[TracebackSample]) -> int:
        """Store redacted traceback samples; a replayed (trace_id, span_id) is skipped."""
        return self._run_on_batch(
            tracebacks_to_arrow(samples),
            "INSERT INTO tracebacks BY NAME SELECT DISTINCT ON (b.trace_id, b.span_id) b.* "
            "FROM _errscope_batch b WHERE NOT EXISTS (SELECT 1 FROM tracebacks t "
            "WHERE t.trace_id = b.trace_id AND t.span_id = b.span_id)",
        )

    def add_deploys(self, deploys: Iterable[Deploy]) -> int:
        """Record deploys; the same (service, version, environment, source) is kept once."""
        return self._run_on_batch(
            deploys_to_arrow(deploys),
            "INSERT INTO deploys BY NAME "
            "SELECT service, version, environment, min(ts) AS ts, source "
            "FROM _errscope_batch b WHERE NOT EXISTS (SELECT 1 FROM deploys d "
            "WHERE d.service = b.service AND d.version = b.version "
            "AND d.environment IS NOT DISTINCT FROM b.environment AND d.source = b.source) "
            "GROUP BY service, version, environment, source",
        )

    def add_redactions(self, counts: Iterable[RedactionCount]) -> int:
        """Add redaction counts (hour, service, tool, rule); queries sum them."""
        return self._insert("redactions", redactions_to_arrow(counts))

    def known_versions(self) -> set[tuple[str, str, str | None]]:
        """Every (service, version, environment) that already has a deploy row."""
        rows = (
            self.cursor()
            .execute("SELECT DISTINCT service, version, environment FROM deploys")
            .fetchall()
        )
        return {(r[0], r[1], r[2]) for r in rows}

    def received_at_of(self, calls: Sequence[ToolCall]) -> dict[tuple[str, str], set[datetime]]:
        """The stored `received_at` of each of these calls' spans (see `stored_received_at`)."""
        # Inside `atomically` only its own connection sees the rows it has just inserted.
        con = self._con if self._in_atomic() else self.cursor()
        try:
            return stored_received_at(con, calls)
        except duckdb.Error as exc:
            raise StoreError(
                StoreErrorKind.UNREADABLE, f"read failed ({type(exc).__name__})", entry=self.path
            ) from exc

    # ------------------------------------------------------------ retention

    def prune(self, older_than: timedelta, *, now: datetime | None = None) -> PruneReport:
        """Delete rows older than `older_than` from every table, in one transaction."""
        cutoff = retention_cutoff(older_than, now)
        with self._writing(transaction=True) as con:
            deleted = delete_older_than(con, cutoff)
        return PruneReport(cutoff=cutoff, deleted=deleted)

    def count(self, table: str) -> int:
        """Rows in one of the contract tables (for tests, benchmarks and `errscope status`)."""
        return count_rows(self.cursor, table)


def open_file_store(
    url: str, *, read_only: bool = False, memory_limit: str | None = None
) -> DuckDBStore:
    """Open a DuckDB file store by URL: a file path (the default) or `duckdb:PATH`.

    Any other scheme is refused with `StoreError(BAD_URL)`: an in-process store (the
    exporter's) is a file; `errscope.collector.store.open_store` also opens a DuckLake.
    """
    if url.startswith("duckdb:"):
        url = url.removeprefix("duckdb:").strip()
        if not url:  # DuckDB would open an in-memory store and lose every row at exit
            raise StoreError(
                StoreErrorKind.BAD_URL,
                "no file path after duckdb:",
                hint=f"give a DuckDB file path: duckdb:{STORE_PATH}",
            )
    if ":" in url.split("/", 1)[0] and not Path(url).exists() and url != ":memory:":
        raise StoreError(
            StoreErrorKind.BAD_URL,
            "unknown store scheme",
            entry=url.split(":", 1)[0],
            hint="give a DuckDB file path (data/errscope.duckdb)",
        )
    return DuckDBStore(url, read_only=read_only, memory_limit=memory_limit)
