"""`errscope catalog`: print the error catalog, or validate a user extension of it."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import click
import orjson

from errscope.collector.catalog import Catalog, load_catalog
from errscope.collector.cli._common import console, handle_errors

__all__ = ["catalog"]


def _catalog_rows(catalog: Catalog) -> list[dict[str, Any]]:
    return [
        {
            "code": entry.name,
            "retry_by": str(entry.retry_by),
            "max_tries": entry.max_tries,
            "scope": str(entry.scope),
            "on_cap": str(entry.on_cap),
            "http": list(entry.http),
            "grpc": list(entry.grpc),
            "jsonrpc": list(entry.jsonrpc),
            "meaning": entry.meaning,
            "hint": entry.hint,
            "builtin": entry.builtin,
        }
        for entry in catalog.entries.values()
    ]


@click.command()
@click.option(
    "--check",
    "check_files",
    type=click.Path(dir_okay=False, path_type=Path),
    multiple=True,
    help="Validate a user catalog file (with the built-in one) and print the result.",
)
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table")
@handle_errors
def catalog(check_files: Sequence[Path], fmt: str) -> None:
    """Print the error catalog; with --check FILE, validate a user extension."""
    loaded = load_catalog(check_files)
    rows = _catalog_rows(loaded)
    if fmt == "json":
        click.echo(orjson.dumps({"sources": loaded.sources, "codes": rows}).decode())
        return
    from rich.table import Table  # noqa: PLC0415

    table = Table(title="errscope error catalog", show_lines=True)
    for column in ("code", "retry", "on cap", "maps from", "hint"):
        table.add_column(column, overflow="fold")
    for row in rows:
        maps = "; ".join(
            part
            for part in (
                "HTTP " + ", ".join(map(str, row["http"])) if row["http"] else "",
                "gRPC " + ", ".join(row["grpc"]) if row["grpc"] else "",
                "JSON-RPC " + ", ".join(map(str, row["jsonrpc"])) if row["jsonrpc"] else "",
            )
            if part
        )
        retry = f"{row['retry_by']}, {row['max_tries']} per {row['scope']}"
        table.add_row(row["code"], retry, row["on_cap"], maps, row["hint"])
    console().print(table)
    if check_files:
        click.echo(f"ok: {', '.join(loaded.sources)} valid ({len(rows)} codes)")
