"""Lake maintenance: one pass that keeps queries fast and storage bounded.

`maintain` removes the copies a crashed writer left between the two steps of an append
(see `errscope.collector.store.lake.store`: the copy in the lowest snapshot stays),
flushes inlined rows to Parquet, merges adjacent small files, expires old snapshots and
deletes the files only they needed.  The caller holds the lake-wide mutation lock and
the store's write lock: a pass never runs beside a delete or another pass.  Every
statement goes through the store's one retry loop.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta

import duckdb

from errscope.collector.store.lake.retry import Retrying

__all__ = ["MaintenanceReport", "maintain"]


@dataclass(frozen=True, slots=True)
class MaintenanceReport:
    """What one `maintain()` pass did."""

    duplicates_removed: int
    flushed_rows: int
    merged_files: int
    expired_snapshots: int
    deleted_files: int
    data_files: int


def maintain(
    con: duckdb.DuckDBPyConnection,
    alias: str,
    retrying: Retrying,
    *,
    keys: Iterable[tuple[str, str]],
    keep_snapshots: timedelta,
    since: datetime,
    until: datetime,
) -> MaintenanceReport:
    """One maintenance pass over the lake attached as `alias` (see the module docstring).

    `keys` are (table, match) pairs: the match is a predicate over aliases `{a}` and
    `{b}` saying two rows are copies.  Only copies received after `since` and committed
    before `until` are touched: a live writer may still be settling anything newer.
    """
    removed = sum(
        _dedupe(con, alias, retrying, table=table, match=match, since=since, until=until)
        for table, match in keys
    )

    def call(what: str, sql: str) -> list[tuple[object, ...]]:
        # A CALL commits by itself: no explicit transaction to roll back when it fails.
        return retrying.run(what, lambda: con.execute(sql).fetchall())

    flushed = call("flush", f"CALL ducklake_flush_inlined_data('{alias}')")
    merged = call("merge", f"CALL ducklake_merge_adjacent_files('{alias}')")
    # Evaluated when each CALL runs: files scheduled by the expiry just before count.
    older = f"now() - INTERVAL '{int(keep_snapshots.total_seconds())} seconds'"
    expired = call("expire", f"CALL ducklake_expire_snapshots('{alias}', older_than => {older})")
    cleaned = call("cleanup", f"CALL ducklake_cleanup_old_files('{alias}', older_than => {older})")
    files = con.execute(
        f"SELECT count(*) FROM ducklake_list_files('{alias}', 'tool_calls')"  # noqa: S608 - constants only
    ).fetchone()
    return MaintenanceReport(
        duplicates_removed=removed,
        flushed_rows=_third_column_sum(flushed),
        merged_files=_third_column_sum(merged),
        expired_snapshots=len(expired),
        deleted_files=len(cleaned),
        data_files=int(files[0]) if files else 0,
    )


def _dedupe(
    con: duckdb.DuckDBPyConnection,
    alias: str,
    retrying: Retrying,
    *,
    table: str,
    match: str,
    since: datetime,
    until: datetime,
) -> int:
    """Delete every copy of a key but the one in the lowest (snapshot, row id).

    Only copies committed before `until` are touched: a live writer may still be between
    its two steps for anything newer, and would miscount if its copy vanished.
    """
    settled = con.execute(
        f"SELECT max(snapshot_id) FROM {alias}.snapshots() WHERE snapshot_time < $until",  # noqa: S608 - constants only
        {"until": until},
    ).fetchone()
    if not settled or settled[0] is None:
        return 0
    earlier = match.format(a="o", b="t")
    where = (
        "t.ts >= $since AND t.snapshot_id <= $settled AND EXISTS (SELECT 1 FROM "  # noqa: S608 - constants only
        f"{table} o WHERE o.ts >= $since AND {earlier} "
        "AND (o.snapshot_id < t.snapshot_id "
        "OR (o.snapshot_id = t.snapshot_id AND o.rowid < t.rowid)))"
    )
    params = {"since": since, "settled": int(settled[0])}

    def delete(c: duckdb.DuckDBPyConnection) -> int:
        row = c.execute(f"DELETE FROM {table} t WHERE {where}", params).fetchone()  # noqa: S608 - constants
        return int(row[0]) if row else 0

    return retrying.transaction(f"dedupe {table}", con, delete)


def _third_column_sum(rows: list[tuple[object, ...]]) -> int:
    """Sum the per-table counts DuckLake's flush and merge calls return (schema, table, n)."""
    return sum(int(str(r[2])) for r in rows if len(r) > 2 and r[2] is not None)
