"""`errscope migrate`: copy a DuckDB file store into another store, typically a lake.

    errscope migrate --from data/errscope.duckdb \\
        --to 'ducklake:postgres:dbname=errscope host=db user=errscope' --data-path s3://bucket/lake/

Rows go through the destination's own append methods, so they are validated again and
de-duplicated on the same keys: running the copy twice stores nothing the second time
(redaction counts, which are summed rather than keyed, are copied only into a store that
has none yet).  The source is opened read-only; a file held by a running sidecar is
refused with the usual LOCKED error.  Errors and interruptions end as every errscope
command's do (`errscope.collector.cli._common.handle_errors`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Final

import click
import duckdb
import pyarrow as pa
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

from errscope.collector.cli._common import handle_errors, raise_on_sigterm
from errscope.collector.errors import StoreError, StoreErrorKind
from errscope.collector.record import (
    TOOL_CALLS_SCHEMA,
    Deploy,
    RedactionCount,
    TracebackSample,
)
from errscope.collector.store import open_store
from errscope.collector.store.duckdb import DuckDBStore
from errscope.collector.store.lake import DuckLakeStore, mask_secrets

__all__ = ["CopyReport", "copy_store", "migrate"]

_CHUNK_ROWS: Final = 50_000
_PROGRESS_MIN_ROWS: Final = 100_000

CopyReport = dict[str, tuple[int, int]]
"""Per table: (rows read from the source, rows newly stored in the destination)."""


def _tool_call_chunks(source: DuckDBStore) -> Iterator[pa.Table]:
    cur = source.cursor()
    columns = {
        row[0]
        for row in cur.execute(
            "SELECT column_name FROM information_schema.columns WHERE table_name = 'tool_calls'"
        ).fetchall()
    }
    # A version-1 file has no received_at: its rows were stored when they started.
    select = ", ".join(
        name if name in columns or name != "received_at" else "ts AS received_at"
        for name in TOOL_CALLS_SCHEMA.names
    )
    reader = cur.execute(f"SELECT {select} FROM tool_calls ORDER BY ts").to_arrow_reader(  # noqa: S608 - names from our schema
        _CHUNK_ROWS
    )
    for record_batch in reader:
        yield pa.Table.from_batches([record_batch]).cast(TOOL_CALLS_SCHEMA)


def _rows(source: DuckDBStore, table: str) -> list[dict[str, object]]:
    sql = f"SELECT * FROM {table}"  # noqa: S608 - one of the contract table names
    rows: list[dict[str, object]] = source.cursor().execute(sql).to_arrow_table().to_pylist()
    return rows


def copy_store(
    source: DuckDBStore,
    dest: DuckDBStore | DuckLakeStore,
    *,
    on_rows: Callable[[int], None] | None = None,
) -> CopyReport:
    """Copy every contract table from `source` into `dest`; report rows read and stored."""
    report: CopyReport = {}
    read = stored = 0
    for chunk in _tool_call_chunks(source):
        read += chunk.num_rows
        stored += dest.append_tool_calls(chunk)
        if on_rows is not None:
            on_rows(chunk.num_rows)
    report["tool_calls"] = (read, stored)
    samples = [TracebackSample(**row) for row in _rows(source, "tracebacks")]  # type: ignore[arg-type]
    report["tracebacks"] = (len(samples), dest.append_tracebacks(samples))
    deploys = [Deploy(**row) for row in _rows(source, "deploys")]  # type: ignore[arg-type]
    report["deploys"] = (len(deploys), dest.add_deploys(deploys))
    counts = [RedactionCount(**row) for row in _rows(source, "redactions")]  # type: ignore[arg-type]
    # Redaction counts are summed by queries, so a second copy would double them.
    copied = dest.add_redactions(counts) if dest.count("redactions") == 0 else 0
    report["redactions"] = (len(counts), copied)
    return report


@click.command("migrate")
@click.option(
    "--from",
    "source_path",
    required=True,
    type=click.Path(dir_okay=False, path_type=Path),
    help="The DuckDB file store to copy (no sidecar may hold it).",
)
@click.option(
    "--to",
    "dest_url",
    required=True,
    help="The destination store: ducklake:postgres:<conninfo>, or a DuckDB file path.",
)
@click.option(
    "--data-path",
    "data_path",
    default=None,
    help="Where a new lake keeps its Parquet files (a directory or object-store URL).",
)
@handle_errors
def migrate(source_path: Path, dest_url: str, data_path: str | None) -> None:
    """Copy a DuckDB file store into a DuckLake (or another store); safe to re-run."""
    raise_on_sigterm()  # a cancelled copy says so (it is safe to re-run), never "internal"
    if not source_path.exists():
        raise StoreError(
            StoreErrorKind.UNREADABLE,
            "source file does not exist",
            entry=str(source_path),
            field="from",
            hint="pass the DuckDB file written by `errscope serve`",
        )
    try:
        source = DuckDBStore(source_path, read_only=True)
    except duckdb.Error as exc:  # pragma: no cover - DuckDBStore maps its own errors
        raise StoreError(
            StoreErrorKind.UNREADABLE, "cannot open source", entry=str(source_path)
        ) from exc
    try:
        with open_store(dest_url, data_path=data_path) as dest:
            total = source.count("tool_calls")
            with Progress(
                TextColumn("copying tool_calls"),
                BarColumn(),
                MofNCompleteColumn(),
                TimeRemainingColumn(),
                transient=True,
                disable=total < _PROGRESS_MIN_ROWS,
            ) as progress:
                task = progress.add_task("copy", total=total)
                report = copy_store(source, dest, on_rows=lambda n: progress.advance(task, n))
    finally:
        source.close()
    click.echo(f"migrated {source_path} -> {mask_secrets(dest_url)}")
    for table, (read, stored) in report.items():
        click.echo(f"  {table:<11} {read:>10,} read {stored:>10,} new")
