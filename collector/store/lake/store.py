"""The DuckLake store: many sidecars write one lake (PostgreSQL catalog, Parquet data).

`DuckLakeStore` provides the `Store` protocol (`errscope.collector.store.protocol`) with the
same results as `DuckDBStore`, so the sidecar's single writer thread, the query runner and
the CLI use either without knowing which.  The lake is attached to an in-memory DuckDB as
`lake` and made the default catalog (`USE lake`), so the named queries in `queries/*.sql`
run unchanged on `cursor()`.

Promises, as for the file store:
- an `append_*` returns only after its commit; a commit conflict with another writer is
  retried (DuckLake's own retry raised to `ducklake_max_retry_count=100`, then ours in
  `lake.retry`: jittered exponential backoff within a time budget), never dropped; when
  the budget is spent the batch fails with `StoreError(WRITE_FAILED)` and nothing was
  acknowledged;
- readers see one snapshot per query (DuckLake snapshot isolation);
- (trace_id, span_id) is unique in `tool_calls` and `tracebacks` and the count returned
  is what was newly stored, exactly, even when several writers store the same replayed
  spans at the same moment;
- a call's lower layer is folded as on a file (`errscope.collector.store.layers`), in
  commits of its own: a reader may see both rows between them.  Two sidecars that store
  a call's two layers at the same moment each miss the other's row (snapshot isolation),
  and both rows stay until one of them is replayed.

How replays stay exact without a primary key.  DuckLake has no primary keys or indexes,
and under snapshot isolation two writers that each anti-join a batch against what they
can see will both store a span that neither could see yet (write skew).  Each append
therefore runs in two steps:

1. one transaction: note the snapshot it reads (`begin`), insert the batch's rows whose
   key is absent from `tool_calls` — the anti-join is restricted to the batch's own
   `[min(ts), max(ts)]`, which DuckLake prunes to the files whose column statistics
   overlap it (a replayed span carries the same span start time, so the window always
   holds its first copy) — and commit as snapshot `mine`;
2. only when other commits landed between `begin` and `mine` (rare for one writer, common
   for three), look for keys that one of those commits also stored.  Snapshot ids are
   handed out in commit order and each is taken only after the one below it committed, so
   every copy with a lower snapshot id is visible now; the rule "the copy in the lowest
   snapshot stays, every later writer deletes its own copy and does not count it" leaves
   exactly one copy, counted by exactly one writer.  A writer that dies between the two
   steps never acknowledged its batch; `maintain()` removes any copy it left behind.

Why not force a conflict instead (every append also updating one shared row)?  That
serialises all commits and re-writes the loser's Parquet file on every retry; the scheme
above keeps concurrent inserts conflict-free, which is the path DuckLake handles best.

What DuckLake 1.5.5 gets wrong, and what this module does about it (docs/scale-out.md):
- #1094 (ids as max(id)+1): concurrent commits collide on `ducklake_snapshot_pkey` and
  DuckLake retries them internally; with its default of 10 retries three busy writers
  can exhaust it, so the retry count is raised and our own jittered loop sits on top;
- #1341 (the catalog runs in PostgreSQL REPEATABLE READ): two concurrent DELETEs on a
  data file that already has a delete file both commit, and the table then returns that
  file's rows twice — reproduced here.  So no two deletes ever run at once: every DELETE
  (the step-2 clean-up, `prune`, the `maintain` sweep) and every compaction or migration
  holds one PostgreSQL advisory lock, taken with `pg_try_advisory_xact_lock` on a
  connection of its own.  Inserts never take it;
- #1283 (concurrent CREATE OR REPLACE exhausts retries): errscope never replaces a
  table, and migrations run under the same advisory lock, so sidecars starting together
  on a new lake create the schema once.

Small files: commits below `DATA_INLINING_ROW_LIMIT` rows stay inlined in the catalog;
`maintain()` flushes them to Parquet, merges adjacent files, expires old snapshots and
deletes the files no snapshot needs.  Run it from one place (one sidecar, or cron).

Thread-safety: as `DuckDBStore` — writes are serialised by a lock, reads use their own
cursors.  Connection strings are never echoed: `mask_secrets` hides passwords.

Why this module runs past 600 lines: a tenth of it is the explanation above, and the rest
is one algorithm — the two-step append, the removal of concurrent copies and the advisory
lock that keeps every delete alone — whose halves rely on each other's invariants.  URL
parsing, extensions, retries, retention and maintenance live in their own modules.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Final, TypeVar

import duckdb
import pyarrow as pa
import pyarrow.compute as pc

from errscope.collector.errors import StoreError, StoreErrorKind
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
from errscope.collector.store.lake.extensions import new_instance
from errscope.collector.store.lake.maintain import MaintenanceReport, maintain
from errscope.collector.store.lake.retry import Retrying, RetryPolicy
from errscope.collector.store.lake.url import LakeUrl, mask_secrets, parse_lake_url, sql_literal
from errscope.collector.store.layers import fold_stored, plan_fold
from errscope.collector.store.migrations import SCHEMA_VERSION, check_schema_readable, migrations
from errscope.collector.store.protocol import StoreFault
from errscope.collector.store.replay import stored_received_at
from errscope.collector.store.retention import (
    PruneReport,
    count_rows,
    delete_older_than,
    retention_cutoff,
)

__all__ = ["DATA_INLINING_ROW_LIMIT", "DuckLakeStore"]

T = TypeVar("T")

ALIAS: Final = "lake"
# Commits below this many rows are kept in catalog tables until `maintain()` flushes them:
# a sidecar commits every 200 ms, so at up to ~5k spans/s its commits stay inlined.
DATA_INLINING_ROW_LIMIT: Final = 0
# One advisory lock key for everything that deletes or rewrites ("errscope" in ASCII).
_MUTATION_LOCK_KEY: Final = 0x65727273636F7065
_PG_ALIAS: Final = "errscope_pg"
_MIGRATION_PK_RE: Final = re.compile(r",\s*PRIMARY KEY\s*\([^)]*\)", re.IGNORECASE)


@dataclass(slots=True)
class _Stats:
    """Counters a sidecar can export: conflicts retried and cross-writer copies removed."""

    conflicts_retried: int = 0
    concurrent_copies_removed: int = 0
    extensions: dict[str, str] = field(default_factory=dict)


def _open_error(exc: duckdb.Error, lake: LakeUrl) -> StoreError:
    text = str(exc)
    if "data_path is not set" in text:
        return StoreError(
            StoreErrorKind.BAD_URL,
            "this catalog holds no lake yet and no data path was given",
            entry=lake.masked(),
            field="data_path",
            hint="pass --data-path DIR_OR_URL the first time",
        )
    reason = text.split("failed:", 1)[1] if "failed:" in text else text
    reason = " ".join(mask_secrets(reason).split())[:300]
    if "httpfs" in text:
        hint = (
            "an object-store data path needs DuckDB's httpfs: pip install "
            f"duckdb-extension-httpfs=={duckdb.__version__} (errscope[lake]), or allow network"
        )
    else:
        hint = "check the PostgreSQL connection string and that the database exists"
    return StoreError(
        StoreErrorKind.UNREADABLE,
        f"cannot attach the lake ({reason})",
        entry=lake.masked(),
        hint=hint,
    )


def _lake_sql(sql: str) -> str:
    """A migration as DuckLake takes it: no primary keys (uniqueness is kept by the store)."""
    return _MIGRATION_PK_RE.sub("", sql)


@dataclass(frozen=True, slots=True)
class _Unique:
    """How one table's key is matched and which column bounds the search for copies."""

    table: str
    match: str  # predicate over aliases {a} and {b}
    window: str | None


_SPAN_KEY: Final = "{a}.trace_id = {b}.trace_id AND {a}.span_id = {b}.span_id"
_TOOL_CALLS: Final = _Unique("tool_calls", _SPAN_KEY, "ts")
_TRACEBACKS: Final = _Unique("tracebacks", _SPAN_KEY, "ts")
_LAYERS: Final = _Unique("tool_call_layers", _SPAN_KEY, "ts")
_DEPLOYS: Final = _Unique(
    "deploys",
    "{a}.service = {b}.service AND {a}.version = {b}.version "
    "AND {a}.environment IS NOT DISTINCT FROM {b}.environment AND {a}.source = {b}.source",
    None,
)


_ONE_PER_SPAN: Final = "SELECT DISTINCT ON (trace_id, span_id) * FROM _errscope_batch"


def _window(unique: _Unique, alias: str) -> str:
    if unique.window is None:
        return ""
    return f" AND {alias}.{unique.window} BETWEEN $lo AND $hi"


class DuckLakeStore:
    """errscope's store on a DuckLake: a PostgreSQL catalog and Parquet data files."""

    def __init__(
        self,
        url: str,
        *,
        data_path: str | Path | None = None,
        read_only: bool = False,
        retry: RetryPolicy | None = None,
    ) -> None:
        self._lake = parse_lake_url(url)
        self.url = self._lake.masked()
        self.path = self.url  # what DuckDBStore callers print
        self.read_only = read_only
        self.retry = retry or RetryPolicy()
        self.stats = _Stats()
        self._retrying = Retrying(self.retry, entry=self.url, on_retry=self._count_retry)
        self._write_lock = threading.Lock()
        self._closed = False
        self._lock_con: duckdb.DuckDBPyConnection | None = None
        self._instance, self.stats.extensions = new_instance()
        self.alias = ALIAS
        self._pg_alias = _PG_ALIAS
        self._con = self._instance.cursor()
        try:
            self._configure()
            if read_only:
                self._attach(data_path)
            else:
                # DuckLake creates its catalog tables on the first ATTACH; two sidecars
                # starting together on a new catalog would both try.
                with self._mutation_lock():
                    self._attach(data_path)
            if read_only:
                self._check_version_readable()
            else:
                self.migrate()
        except BaseException:
            self.close()
            raise

    # ------------------------------------------------------------ lifecycle

    def _configure(self) -> None:
        # Session settings: DuckLake reads them from the connection that commits.
        policy = self.retry
        self._con.execute(
            f"SET SESSION ducklake_max_retry_count = {int(policy.ducklake_retry_count)}"
        )
        self._con.execute(
            f"SET SESSION ducklake_retry_wait_ms = {int(policy.ducklake_retry_wait_ms)}"
        )
        self._con.execute(
            f"SET SESSION ducklake_retry_backoff = {float(policy.ducklake_retry_backoff)}"
        )

    def _attach(self, data_path: str | Path | None) -> None:
        options: list[str] = []
        if data_path is not None:
            text = str(data_path)
            if "://" not in text:
                try:
                    Path(text).mkdir(parents=True, exist_ok=True)
                except OSError as exc:
                    raise StoreError(
                        StoreErrorKind.UNREADABLE,
                        f"cannot create the data path ({exc.strerror or type(exc).__name__})",
                        entry=self._lake.masked(),
                        field="data_path",
                        hint="pass a writable folder or an object-store URL",
                    ) from None
                text = str(Path(text).resolve())
            options.append(f"DATA_PATH {sql_literal(text.rstrip('/') + '/')}")
        if self.read_only:
            options.append("READ_ONLY")
        sql = f"ATTACH {sql_literal(self._lake.attach_path)} AS {self.alias}"
        if options:
            sql += f" ({', '.join(options)})"
        try:
            self._con.execute(sql)
        except duckdb.Error as exc:
            raise _open_error(exc, self._lake) from None
        self._con.execute(f"USE {self.alias}")

    def close(self) -> None:
        """Release the catalog connections (maintenance is `maintain()`, not close)."""
        if self._closed:
            return
        self._closed = True
        if self._lock_con is not None:
            with suppress(duckdb.Error):
                self._lock_con.close()
        self._con.close()
        self._instance.close()

    def __enter__(self) -> DuckLakeStore:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def cursor(self) -> duckdb.DuckDBPyConnection:
        """A cursor for reads on the lake (tables unqualified), one per thread."""
        cur = self._con.cursor()
        try:
            cur.execute(f"USE {self.alias}")  # reads the catalog: PostgreSQL may be down
        except duckdb.Error as exc:
            cur.close()
            raise self._read_error(exc) from None
        return cur

    # ------------------------------------------------------------ locking

    @contextmanager
    def _mutation_lock(self) -> Iterator[None]:
        """Hold errscope's PostgreSQL advisory lock: one deleter or compactor at a time.

        A transaction-scoped lock on a connection of its own: it is released by COMMIT,
        or by PostgreSQL when this process dies, so a crash never leaves it held.
        """
        if self._lock_con is None:
            con = self._con.cursor()
            try:
                con.execute(
                    f"ATTACH IF NOT EXISTS {sql_literal(self._lake.conninfo)} "
                    f"AS {self._pg_alias} (TYPE postgres)"
                )
            except duckdb.Error as exc:
                con.close()
                raise _open_error(exc, self._lake) from None
            self._lock_con = con
        con = self._lock_con
        deadline = time.monotonic() + self.retry.budget_s
        attempt = 0
        while True:
            try:
                con.execute("BEGIN TRANSACTION")
                row = con.execute(
                    f"SELECT * FROM postgres_query('{self._pg_alias}', "  # noqa: S608 - constants
                    f"'SELECT pg_try_advisory_xact_lock({_MUTATION_LOCK_KEY}) AS got')"
                ).fetchone()
            except duckdb.Error as exc:
                # Left open, the failed transaction would refuse every later lock attempt
                # ("transaction is aborted") after PostgreSQL is back.
                with suppress(duckdb.Error):
                    con.execute("ROLLBACK")
                raise self._read_error(exc) from None
            if row and row[0]:
                break
            con.execute("ROLLBACK")
            if time.monotonic() > deadline:
                raise StoreError(
                    StoreErrorKind.WRITE_FAILED,
                    "another errscope process held the lake's maintenance lock too long",
                    entry=self.url,
                    hint="is a long maintain() or prune running elsewhere?",
                )
            # A wait for the lock, not a conflict: no attempt limit, only the budget.
            time.sleep(self.retry.backoff_s(attempt))
            attempt += 1
        try:
            yield
        finally:
            with suppress(duckdb.Error):
                con.execute("COMMIT")

    def _count_retry(self) -> None:
        self.stats.conflicts_retried += 1

    # ------------------------------------------------------------ schema

    def schema_version(self) -> int:
        """The version recorded in the lake; 0 for a new one."""
        try:
            row = self._con.execute(
                f"SELECT max(version) FROM {self.alias}.errscope_schema"  # noqa: S608 - alias
            ).fetchone()
        except duckdb.CatalogException:
            return 0
        except duckdb.Error as exc:
            raise self._read_error(exc) from None
        return int(row[0]) if row and row[0] is not None else 0

    def _read_error(self, exc: duckdb.Error) -> StoreError:
        # DuckDB's message may quote the connection string: mask it, keep the reason.
        reason = " ".join(mask_secrets(str(exc)).split())[:300]
        return StoreError(
            StoreErrorKind.UNREADABLE,
            f"cannot read the lake ({type(exc).__name__}: {reason})",
            entry=self.url,
        )

    def _check_version_readable(self) -> None:
        check_schema_readable(self.schema_version(), self.url, read_only=self.read_only)

    def migrate(self) -> int:
        """Bring the lake's schema to `SCHEMA_VERSION` under the lake-wide lock; return it."""
        self._check_version_readable()
        if self.schema_version() == SCHEMA_VERSION:
            return SCHEMA_VERSION
        with self._write_lock, self._mutation_lock():
            self._retrying.run(
                "lake migration", self._migrate_locked, kind=StoreErrorKind.MIGRATION_FAILED
            )
        return self.schema_version()

    def _migrate_locked(self) -> None:
        con = self._con
        con.execute(
            "CREATE TABLE IF NOT EXISTS errscope_schema "
            "(version INTEGER NOT NULL, name VARCHAR NOT NULL, applied_at TIMESTAMPTZ NOT NULL)"
        )
        current = self.schema_version()
        if current == 0:
            limit = DATA_INLINING_ROW_LIMIT
            con.execute(f"CALL {self.alias}.set_option('data_inlining_row_limit', {limit})")
        for migration in migrations():
            if migration.version <= current:
                continue
            con.execute("BEGIN TRANSACTION")
            try:
                con.execute(_lake_sql(migration.sql))
                con.execute(
                    "INSERT INTO errscope_schema VALUES ($v, $n, now())",
                    {"v": migration.version, "n": migration.name},
                )
                con.execute("COMMIT")
            except duckdb.Error:
                self._safe_rollback()
                raise

    # ------------------------------------------------------------ transactions

    def _safe_rollback(self) -> None:
        with suppress(duckdb.Error):
            self._con.execute("ROLLBACK")

    def _require_writable(self) -> None:
        if self.read_only:
            raise StoreError(StoreErrorKind.WRITE_FAILED, "store is open read-only", entry=self.url)

    def _transaction(self, what: str, body: Callable[[duckdb.DuckDBPyConnection], T]) -> T:
        """Run `body` in one transaction on the store's connection, retrying conflicts."""
        return self._retrying.transaction(what, self._con, body)

    def _last_committed(self) -> int:
        row = self._con.execute(
            f"SELECT * FROM ducklake_last_committed_snapshot('{self.alias}')"  # noqa: S608 - constants only
        ).fetchone()
        return int(row[0]) if row and row[0] is not None else -1

    # ------------------------------------------------------------ writes

    def _append_unique(self, unique: _Unique, batch: pa.Table, source_sql: str) -> int:
        """Store the rows of `batch` whose key is not stored yet; return how many were new.

        `source_sql` selects the candidate rows (one per key) from `_errscope_batch b`.
        """
        self._require_writable()
        if batch.num_rows == 0:
            return 0
        params: dict[str, object] = {}
        if unique.window is not None:
            bounds = pc.min_max(batch.column(unique.window)).as_py()
            params = {"lo": bounds["min"], "hi": bounds["max"]}
        columns = ", ".join(batch.column_names)
        absent = unique.match.format(a="t", b="c")
        insert = (
            f"INSERT INTO {unique.table} ({columns}) SELECT {columns} FROM ({source_sql}) c "  # noqa: S608 - names from our own schemas
            f"WHERE NOT EXISTS (SELECT 1 FROM {unique.table} t WHERE {absent}"
            f"{_window(unique, 't')})"
        )

        def body(con: duckdb.DuckDBPyConnection) -> tuple[int, int]:
            # The snapshot this transaction reads, pinned before the anti-join reads it.
            begin = con.execute(f"SELECT id FROM {self.alias}.current_snapshot()").fetchone()  # noqa: S608 - constants only
            con.register("_errscope_batch", batch)
            try:
                row = con.execute(insert, params).fetchone()
            finally:
                con.unregister("_errscope_batch")
            return (int(begin[0]) if begin else -1), (int(row[0]) if row else 0)

        with self._write_lock:
            begin, inserted = self._transaction(f"append to {unique.table}", body)
            if inserted == 0:
                return 0
            mine = self._last_committed()
            if mine > begin + 1:  # other commits landed while ours was in flight
                inserted -= self._remove_concurrent_copies(unique, params, begin, mine)
        return inserted

    def _remove_concurrent_copies(
        self, unique: _Unique, params: dict[str, object], begin: int, mine: int
    ) -> int:
        """Delete our copies of keys that a commit between `begin` and `mine` also stored."""
        earlier = unique.match.format(a="o", b="t")
        where = (
            f"t.snapshot_id = $mine{_window(unique, 't')} AND EXISTS (SELECT 1 FROM "  # noqa: S608 - constants only
            f"{unique.table} o WHERE o.snapshot_id > $begin AND o.snapshot_id < $mine "
            f"AND {earlier}{_window(unique, 'o')})"
        )
        bound = {**params, "begin": begin, "mine": mine}
        found = self._con.execute(
            f"SELECT count(*) FROM {unique.table} t WHERE {where}",  # noqa: S608 - constants
            bound,
        ).fetchone()
        if not found or found[0] == 0:
            return 0

        def body(con: duckdb.DuckDBPyConnection) -> int:
            row = con.execute(
                f"DELETE FROM {unique.table} t WHERE {where}",  # noqa: S608 - constants
                bound,
            ).fetchone()
            return int(row[0]) if row else 0

        with self._mutation_lock():
            removed = self._transaction(f"remove concurrent copies from {unique.table}", body)
        self.stats.concurrent_copies_removed += removed
        return removed

    def append_tool_calls(self, calls: Iterable[ToolCall] | pa.Table) -> int:
        """Store a batch of calls in one commit; return how many were new (exact, see above)."""
        if isinstance(calls, pa.Table):
            table = calls.select(TOOL_CALLS_SCHEMA.names).cast(TOOL_CALLS_SCHEMA)
            validate_tool_calls(table)
        else:
            table = tool_calls_to_arrow(calls)
        self._require_writable()
        try:
            plan = plan_fold(self.cursor(), table)
        except duckdb.Error as exc:
            raise self._read_error(exc) from None
        if plan is None:
            return self._append_unique(_TOOL_CALLS, table, _ONE_PER_SPAN)
        # Each step commits on its own, as every lake append does; a failure part-way is not
        # acknowledged, and the retry, which finds what was stored, folds the rest.
        self._append_unique(_LAYERS, plan.layers, _ONE_PER_SPAN)
        inserted = self._append_unique(_TOOL_CALLS, plan.calls, _ONE_PER_SPAN)
        removed = 0
        if plan.moved.num_rows or plan.updates:
            # A delete and an update: alone under the lake-wide lock, as every delete (#1341).
            with self._write_lock, self._mutation_lock():
                removed = self._transaction("fold layers", lambda con: fold_stored(con, plan))
        return inserted - removed

    def append_tracebacks(self, samples: Iterable[TracebackSample]) -> int:
        """Store redacted traceback samples; a replayed (trace_id, span_id) is skipped."""
        return self._append_unique(_TRACEBACKS, tracebacks_to_arrow(samples), _ONE_PER_SPAN)

    def add_deploys(self, deploys: Iterable[Deploy]) -> int:
        """Record deploys; the same (service, version, environment, source) is kept once."""
        table = deploys_to_arrow(deploys)
        if table.num_rows == 0:
            return 0
        return self._append_unique(
            _DEPLOYS,
            table,
            "SELECT service, version, environment, min(ts) AS ts, source "
            "FROM _errscope_batch GROUP BY service, version, environment, source",
        )

    def add_redactions(self, counts: Iterable[RedactionCount]) -> int:
        """Add redaction counts (hour, service, tool, rule); queries sum them."""
        self._require_writable()
        table = redactions_to_arrow(counts)
        if table.num_rows == 0:
            return 0
        columns = ", ".join(table.column_names)

        def body(con: duckdb.DuckDBPyConnection) -> int:
            con.register("_errscope_batch", table)
            try:
                row = con.execute(
                    f"INSERT INTO redactions ({columns}) SELECT {columns} FROM _errscope_batch"  # noqa: S608
                ).fetchone()
            finally:
                con.unregister("_errscope_batch")
            return int(row[0]) if row else 0

        with self._write_lock:
            return self._transaction("append to redactions", body)

    def known_versions(self) -> set[tuple[str, str, str | None]]:
        """Every (service, version, environment) that already has a deploy row."""
        try:
            rows = (
                self.cursor()
                .execute("SELECT DISTINCT service, version, environment FROM deploys")
                .fetchall()
            )
        except duckdb.Error as exc:
            raise self._read_error(exc) from None
        return {(r[0], r[1], r[2]) for r in rows}

    def received_at_of(self, calls: Sequence[ToolCall]) -> dict[tuple[str, str], set[datetime]]:
        """The stored `received_at` of each of these calls' spans (see `stored_received_at`)."""
        try:
            return stored_received_at(self.cursor(), calls)
        except duckdb.Error as exc:
            raise self._read_error(exc) from None

    # ------------------------------------------------------------ retention and upkeep

    def prune(self, older_than: timedelta, *, now: datetime | None = None) -> PruneReport:
        """Delete rows older than `older_than` from every table, in one commit.

        The rows leave every new snapshot at once; their files are removed from storage by
        `maintain()` once no retained snapshot needs them.
        """
        self._require_writable()
        cutoff = retention_cutoff(older_than, now)
        with self._write_lock, self._mutation_lock():
            deleted = self._transaction("prune", lambda con: delete_older_than(con, cutoff))
        return PruneReport(cutoff=cutoff, deleted=deleted)

    def maintain(
        self,
        *,
        keep_snapshots: timedelta = timedelta(hours=1),
        dedupe_window: timedelta = timedelta(days=1),
        settle_margin: timedelta = timedelta(minutes=5),
        now: datetime | None = None,
    ) -> MaintenanceReport:
        """Keep queries fast and storage bounded: one pass, under the lake-wide lock.

        Removes copies a crashed writer left between its two steps (rows received in
        `dedupe_window` but not in the last `settle_margin`, which live writers may still be
        settling), flushes inlined rows to Parquet, merges adjacent small files, expires
        snapshots older than `keep_snapshots` and deletes the files only they needed.
        Readers older than `keep_snapshots` may fail and are retried by their callers.
        """
        self._require_writable()
        moment = now or datetime.now(UTC)
        with self._write_lock, self._mutation_lock():
            return maintain(
                self._con,
                self.alias,
                self._retrying,
                keys=[
                    (unique.table, unique.match) for unique in (_TOOL_CALLS, _LAYERS, _TRACEBACKS)
                ],
                keep_snapshots=keep_snapshots,
                since=moment - dedupe_window,
                until=moment - settle_margin,
            )

    def count(self, table: str) -> int:
        """Rows in one of the contract tables (for tests, benchmarks and `errscope status`)."""
        try:
            return count_rows(self.cursor, table)
        except duckdb.Error as exc:
            raise self._read_error(exc) from None

    # ------------------------------------------------------------ faults (a lake has no file)

    def fault(self, *, probe: bool = True) -> StoreFault | None:
        """Always None: a lake has no file to lose, and an outage fails each commit instead,
        which the writer reports and the client retries."""
        return None

    def reopen(self) -> None:
        """Nothing to do: a lake is never invalidated the way a DuckDB file is."""

    def atomically(self, body: Callable[[], T]) -> T:
        """Run `body` once: a lake commits each table on its own (see `StoreSink.write`)."""
        return body()
