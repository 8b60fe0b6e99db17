"""`errscope prune` (retention) and `errscope maintain` (DuckLake compaction), in place.

Both take `--db`, a DuckDB file that exists or a `ducklake:` URL; the store modules load
only when one of them runs.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import click

from errscope.collector.cli._common import duration_flag, handle_errors, raise_on_sigterm

__all__ = ["maintain", "prune"]


def _existing_store(db: str) -> Any:
    """A store to change in place: a DuckDB file that exists, or a `ducklake:` URL."""
    from errscope.collector.store import open_store  # noqa: PLC0415
    from errscope.collector.store.lake import LAKE_PREFIX  # noqa: PLC0415

    if not db.startswith(LAKE_PREFIX) and not Path(db).is_file():
        raise click.BadParameter("no such file (or a ducklake:postgres:... URL)", param_hint="--db")
    return open_store(db)


@click.command()
@click.option("--db", required=True, help="A store file, or a ducklake:postgres:... URL.")
@click.option("--older-than", "older_than", required=True, help="For example 30d, 12h.")
@handle_errors
def prune(db: str, older_than: str) -> None:
    """Delete rows older than a duration (retention)."""
    raise_on_sigterm()  # a Ctrl-C inside DuckDB's DELETE is an interruption, not a bug
    age = duration_flag(older_than, "--older-than")
    store = _existing_store(db)
    try:
        report = store.prune(age, now=datetime.now(UTC))
    finally:
        store.close()
    parts = ", ".join(f"{table} {count}" for table, count in report.deleted.items())
    click.echo(f"pruned rows older than {report.cutoff.isoformat()}: {parts}")


@click.command()
@click.option("--db", required=True, help="A ducklake:postgres:... URL.")
@click.option(
    "--keep-snapshots",
    default="1h",
    show_default=True,
    help="Snapshots older than this are expired (readers older than it must retry).",
)
@handle_errors
def maintain(db: str, keep_snapshots: str) -> None:
    """Compact a DuckLake store: merge small files, expire old snapshots, delete unused files.

    Run it from one place (one sidecar host, or cron), not from every pod.  A DuckDB file
    needs no maintenance (DuckDB checkpoints it).
    """
    raise_on_sigterm()  # a Ctrl-C inside DuckLake's compaction is an interruption, not a bug
    from errscope.collector.store.lake import LAKE_PREFIX  # noqa: PLC0415

    if not db.startswith(LAKE_PREFIX):
        raise click.BadParameter(
            "maintenance is for a DuckLake store (ducklake:postgres:...); a DuckDB file needs none",
            param_hint="--db",
        )
    keep = duration_flag(keep_snapshots, "--keep-snapshots")
    store = _existing_store(db)
    try:
        report = store.maintain(keep_snapshots=keep)
    finally:
        store.close()
    click.echo(
        f"maintained: {report.merged_files} files merged, {report.expired_snapshots} snapshots "
        f"expired, {report.deleted_files} files deleted, {report.flushed_rows} inlined rows "
        f"flushed, {report.duplicates_removed} duplicate rows removed; "
        f"{report.data_files} data files"
    )
