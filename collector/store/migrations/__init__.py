"""The schema's versions: one `NNNN_name.sql` file each, beside this loader.

Both stores apply the same files in order (each store runs them its own way: a DuckDB
file in one transaction per version, a DuckLake under its lake-wide lock, without the
primary keys it cannot hold).  Promises: versions are 1..N with no gap, or loading fails
with `StoreError(MIGRATION_FAILED)`; a store whose schema is newer than `SCHEMA_VERSION`
is refused, never misread.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from importlib import resources
from typing import Final

from errscope.collector.errors import StoreError, StoreErrorKind

__all__ = ["SCHEMA_VERSION", "Migration", "check_schema_readable", "migrations"]

_MIGRATION_RE: Final = re.compile(r"(\d{4})_[a-z0-9_]+\.sql")


@dataclass(frozen=True, slots=True)
class Migration:
    """One schema version: its number, file name and SQL."""

    version: int
    name: str
    sql: str


def migrations() -> tuple[Migration, ...]:
    """The schema migrations shipped with the package, in version order."""
    found: list[Migration] = []
    for item in resources.files(__name__).iterdir():
        match = _MIGRATION_RE.fullmatch(item.name)
        if match:
            found.append(Migration(int(match.group(1)), item.name, item.read_text("utf-8")))
    found.sort(key=lambda m: m.version)
    if [m.version for m in found] != list(range(1, len(found) + 1)):
        raise StoreError(StoreErrorKind.MIGRATION_FAILED, "migration versions have a gap")
    return tuple(found)


SCHEMA_VERSION: Final = len(migrations())


def check_schema_readable(current: int, entry: str, *, read_only: bool = False) -> None:
    """Refuse a store whose schema is newer than this errscope (never misread it).

    A read-only open cannot migrate, so there an older schema is refused too: the named
    queries read columns it lacks, and would fail one by one with a binder error.
    """
    if current > SCHEMA_VERSION:
        raise StoreError(
            StoreErrorKind.SCHEMA_TOO_NEW,
            f"schema version {current} is newer than this errscope ({SCHEMA_VERSION})",
            entry=entry,
            hint="upgrade errscope",
        )
    if read_only and current == 0:
        raise StoreError(
            StoreErrorKind.UNREADABLE,
            "not an errscope store: no errscope schema in it",
            entry=entry,
            hint="pass a store written by `errscope serve` or `errscope run`",
        )
    if read_only and 0 < current < SCHEMA_VERSION:
        raise StoreError(
            StoreErrorKind.SCHEMA_TOO_OLD,
            f"schema version {current} is older than this errscope ({SCHEMA_VERSION})",
            entry=entry,
            hint="open it once with a writing command (errscope serve --store FILE) to migrate",
        )
