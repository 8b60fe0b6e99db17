"""The store stage: where processed spans are kept, behind one `Store` protocol.

    data/errscope.duckdb                      DuckDBStore on that file
    duckdb:data/errscope.duckdb               the same, spelled out
    ducklake:postgres:<libpq conninfo>        DuckLakeStore (catalog in PostgreSQL);
                                              --data-path DIR_OR_URL for its Parquet files

`open_store` chooses the store a URL names.  A malformed URL is refused with
`StoreError(BAD_URL)` naming what is wrong; a password in it is never echoed.

The package, in the order data flows through it:

    writer.py     the sidecar's one writer thread: group commit, then the acknowledgement
    batch.py      StoreBatch (what spans ask to keep) and StoreSink (commits it to a Store)
    protocol.py   Store, the one interface, and StoreFault
    duckdb.py     DuckDBStore: a file, and its migrations runner
    lake/         DuckLakeStore: many writers, a PostgreSQL catalog, Parquet data
    retention.py  prune and counts, written once for both stores
    replay.py     the received_at lookup both stores use to recognise a replayed export
    migrations/   the schema, one NNNN_name.sql per version, and its loader
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING, Final

from errscope.collector.errors import StoreError, StoreErrorKind
from errscope.collector.store.duckdb import DuckDBStore, open_file_store
from errscope.collector.store.lake import LAKE_PREFIX, DuckLakeStore, mask_secrets
from errscope.collector.store.protocol import Store, StoreFault
from errscope.collector.store.retention import PruneReport

__all__ = ["PruneReport", "Store", "StoreFault", "open_store"]

if TYPE_CHECKING:
    # Both stores provide the whole protocol: mypy fails here when one falls behind.
    _DUCKDB: type[Store] = DuckDBStore
    _LAKE: type[Store] = DuckLakeStore

# A libpq `key=value` word: a connection string given without its ducklake:postgres: prefix
# would otherwise become a DuckDB file named after it, password and all.
_CONNINFO_WORD: Final = re.compile(
    r"(?:^|\s)(?:host|hostaddr|port|dbname|user|password|sslmode|passfile|service)\s*="
)


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
    return open_file_store(text, read_only=read_only, memory_limit=memory_limit)
