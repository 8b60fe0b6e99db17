"""The DuckLake store: many sidecars write one lake (PostgreSQL catalog, Parquet data).

`DuckLakeStore` has the public methods of `errscope.collector.store.DuckDBStore` with the same
signatures and results, so the sidecar's single writer thread, the query runner and the
CLI use either without knowing which.  The lake is attached to an in-memory DuckDB as
`lake` and made the default catalog (`USE lake`), so the named queries in `queries/*.sql`
run unchanged on `cursor()`.

Promises, as for the file store:
- an `append_*` returns only after its commit; a commit conflict with another writer is
  retried (DuckLake's own retry raised to `ducklake_max_retry_count=100`, then ours:
  jittered exponential backoff within a time budget), never dropped; when the budget is
  spent the batch fails with `StoreError(WRITE_FAILED)` and nothing was acknowledged;
- readers see one snapshot per query (DuckLake snapshot isolation);
- (trace_id, span_id) is unique in `tool_calls` and `tracebacks` and the count returned
  is what was newly stored, exactly, even when several writers store the same replayed
  spans at the same moment.

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
"""

from __future__ import annotations

import os
import random
import re
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from importlib import util as importlib_util
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
from errscope.collector.store import (
    SCHEMA_VERSION,
    PruneReport,
    check_schema_readable,
    migrations,
    stored_received_at,
)

__all__ = [
    "DATA_INLINING_ROW_LIMIT",
    "DuckLakeStore",
    "LakeUrl",
    "MaintenanceReport",
    "RetryPolicy",
    "load_extensions",
    "mask_secrets",
    "parse_lake_url",
]

T = TypeVar("T")

LAKE_PREFIX: Final = "ducklake:"
ALIAS: Final = "lake"
# Commits below this many rows are kept in catalog tables until `maintain()` flushes them:
# a sidecar commits every 200 ms, so at up to ~5k spans/s its commits stay inlined.
DATA_INLINING_ROW_LIMIT: Final = 0
# One advisory lock key for everything that deletes or rewrites ("errscope" in ASCII).
_MUTATION_LOCK_KEY: Final = 0x65727273636F7065
_PG_ALIAS: Final = "errscope_pg"
_AGE_COLUMNS: Final = {
    "tool_calls": "ts",
    "tracebacks": "ts",
    "redactions": "hour",
    "deploys": "ts",
}
_CONFLICT_MARKERS: Final = (
    "conflict",
    "duplicate key",
    "could not serialize",
    "maximum retry count",
    "deadlock detected",
)
# A libpq password: single-quoted with backslash escapes, or a run of characters where `\ `
# escapes a space, and then any further words up to the next `key=`: a malformed string
# (`password="two words"`) must not show its second half.  Over-masking is harmless.
_PASSWORD_KV_RE: Final = re.compile(
    r"""(password\s*=\s*)('(?:[^'\\]|\\.)*'?|"?(?:\\.|[^\s\\"])+(?:\s+(?![A-Za-z_]+\s*=)[^\s"]+)*)""",
    re.IGNORECASE,
)
# userinfo `user:password@` (the user may be empty); greedy to the token's last `@`, so a
# password holding an unescaped `@` is hidden whole.
_PASSWORD_URI_RE: Final = re.compile(r"(://[^:/@\s]*:)(\S*)(@)")
_KEYWORD_RE: Final = re.compile(r"[a-z_]+")
_MIGRATION_PK_RE: Final = re.compile(r",\s*PRIMARY KEY\s*\([^)]*\)", re.IGNORECASE)


# ------------------------------------------------------------------ URLs


def mask_secrets(text: str) -> str:
    """`text` with every libpq password (`password=...`, `user:pw@`) replaced by `***`, and
    the S3 credentials of the environment too (an object store's error may quote them)."""
    text = _PASSWORD_KV_RE.sub(r"\1***", text)
    text = _PASSWORD_URI_RE.sub(r"\1***\3", text)
    for name in ("AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_ACCESS_KEY_ID"):
        value = os.environ.get(name) or ""
        if len(value) >= 8 and value in text:
            text = text.replace(value, "***")
    return text


@dataclass(frozen=True, slots=True)
class LakeUrl:
    """A parsed `ducklake:postgres:<libpq connection string>` store URL."""

    catalog: str
    conninfo: str

    @property
    def attach_path(self) -> str:
        """What DuckDB's ATTACH takes."""
        return f"{LAKE_PREFIX}{self.catalog}:{self.conninfo}"

    def masked(self) -> str:
        """The URL with its password hidden, for messages and banners."""
        return mask_secrets(self.attach_path)


def _bad_url(message: str, url: str, hint: str) -> StoreError:
    return StoreError(StoreErrorKind.BAD_URL, message, entry=mask_secrets(url), hint=hint)


_URL_HINT: Final = (
    "ducklake:postgres:dbname=errscope host=db.internal user=errscope "
    "(a libpq key=value string or postgresql:// URI)"
)


def _check_keyword_conninfo(url: str, conninfo: str) -> None:
    """Tokenise a libpq key=value string well enough to refuse obvious mistakes."""
    i, n = 0, len(conninfo)
    while i < n:
        while i < n and conninfo[i].isspace():
            i += 1
        if i >= n:
            break
        eq = conninfo.find("=", i)
        if eq < 0:
            raise _bad_url("connection string has a word without `=`", url, _URL_HINT)
        key = conninfo[i:eq].strip()
        if not _KEYWORD_RE.fullmatch(key):
            raise _bad_url("connection string has a bad keyword", url, _URL_HINT)
        i = eq + 1
        while i < n and conninfo[i].isspace():
            i += 1
        if i < n and conninfo[i] == "'":
            i += 1
            while i < n and conninfo[i] != "'":
                i += 2 if conninfo[i] == "\\" else 1
            if i >= n:
                raise _bad_url("connection string has an unclosed quote", url, _URL_HINT)
            i += 1
        else:
            start = i
            while i < n and not conninfo[i].isspace():
                i += 1
            if i == start:
                raise _bad_url(f"connection string gives `{key}` no value", url, _URL_HINT)


def parse_lake_url(url: str) -> LakeUrl:
    """Parse `ducklake:postgres:<conninfo>`; raise `StoreError(BAD_URL)` saying what is wrong."""
    if not url.startswith(LAKE_PREFIX):
        raise _bad_url("not a DuckLake URL", url, _URL_HINT)
    catalog, sep, conninfo = url.removeprefix(LAKE_PREFIX).partition(":")
    if not sep or catalog != "postgres":
        raise _bad_url(
            "only a PostgreSQL catalog is supported (many writers need one)", url, _URL_HINT
        )
    conninfo = conninfo.strip()
    if not conninfo:
        raise _bad_url("no connection string after ducklake:postgres:", url, _URL_HINT)
    if conninfo.startswith(("postgres://", "postgresql://")):
        if not conninfo.split("://", 1)[1]:
            raise _bad_url("connection URI has no host or database", url, _URL_HINT)
    else:
        _check_keyword_conninfo(url, conninfo)
    return LakeUrl(catalog=catalog, conninfo=conninfo)


def _sql_literal(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


# ------------------------------------------------------------------ extensions

_network_failed = False  # one failed INSTALL per process is enough to know
_EXTENSIONS: Final = (
    # (name DuckDB loads it as, wheel package, file name inside the wheel)
    ("postgres_scanner", "duckdb_extension_postgres", "postgres"),
    ("ducklake", "duckdb_extension_ducklake", "ducklake"),
)
_HTTPFS: Final = ("httpfs", "duckdb_extension_httpfs", "httpfs")


def _wheel_file(package: str, stem: str) -> Path | None:
    spec = importlib_util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        return None
    folder = Path(next(iter(spec.submodule_search_locations)))
    found = folder / "extensions" / f"v{duckdb.__version__}" / f"{stem}.duckdb_extension"
    return found if found.is_file() else None


def _named_link(target: Path, name: str) -> Path:
    """A path ending in `<name>.duckdb_extension` for `target`: DuckDB names an extension
    after its file, and the postgres wheel's file is not called postgres_scanner."""
    if target.stem == name:
        return target
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    folder = cache / "errscope" / "duckdb-extensions" / f"v{duckdb.__version__}"
    try:
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    except OSError:
        folder = Path(tempfile.mkdtemp(prefix="errscope-ext-"))
    link = folder / f"{name}.duckdb_extension"
    with suppress(OSError):
        if link.resolve() == target.resolve():
            return link
    staging = folder / f".{name}.{uuid.uuid4().hex}"
    staging.symlink_to(target)
    os.replace(staging, link)  # atomic: concurrent sidecars never see a half-made link
    return link


def _load_one(
    con: duckdb.DuckDBPyConnection, name: str, package: str, stem: str, *, required: bool = True
) -> str:
    """Load one extension; how it came: installed, network or wheel.  One that cannot be
    loaded raises `StoreError`, or, when not `required`, comes back "absent"."""
    global _network_failed  # noqa: PLW0603 - a process-wide memo of one fact
    with suppress(duckdb.Error):
        con.execute(f"LOAD {name}")
        return "installed"
    if not _network_failed and os.environ.get("ERRSCOPE_DUCKDB_EXTENSIONS") != "wheel":
        try:
            con.execute(f"INSTALL {name}")
            con.execute(f"LOAD {name}")
        except duckdb.Error:
            _network_failed = True
        else:
            return "network"
    wheel = _wheel_file(package, stem)
    if wheel is not None:
        try:
            con.execute(f"LOAD {_sql_literal(str(_named_link(wheel, name)))}")
        except (duckdb.Error, OSError) as exc:
            if not required:
                return "absent"
            raise StoreError(
                StoreErrorKind.UNREADABLE,
                f"cannot load the DuckDB {name} extension from its wheel ({type(exc).__name__})",
                entry=package,
                hint=f"reinstall {package.replace('_', '-')}=={duckdb.__version__}",
            ) from exc
        return "wheel"
    if not required:
        return "absent"
    raise StoreError(
        StoreErrorKind.UNREADABLE,
        f"cannot load the DuckDB {name} extension",
        entry=name,
        hint="allow network access for INSTALL, or pip install 'errscope[lake]' "
        f"(duckdb-extension-ducklake and duckdb-extension-postgres =={duckdb.__version__})",
    )


def load_extensions(con: duckdb.DuckDBPyConnection) -> dict[str, str]:
    """Load postgres_scanner and ducklake; return how each came: installed, network or wheel.

    Already-installed extensions load first; otherwise `INSTALL` from the network is
    tried once per process (set ERRSCOPE_DUCKDB_EXTENSIONS=wheel to skip it), and then
    the files shipped in the duckdb-extension-* wheels of the same DuckDB version.
    httpfs (an object-store data path) is loaded the same way but is optional: "absent"
    when it cannot be, as only an `s3://` data path needs it.
    """
    loaded = {name: _load_one(con, name, package, stem) for name, package, stem in _EXTENSIONS}
    loaded[_HTTPFS[0]] = _load_one(con, *_HTTPFS, required=False)
    return loaded


# The AWS SDKs' own variables, so a pod configured for any S3 client works unchanged.
_S3_ENV: Final = (
    ("KEY_ID", ("AWS_ACCESS_KEY_ID",)),
    ("SECRET", ("AWS_SECRET_ACCESS_KEY",)),
    ("SESSION_TOKEN", ("AWS_SESSION_TOKEN",)),
    ("REGION", ("AWS_REGION", "AWS_DEFAULT_REGION")),
)
_S3_ENDPOINT_ENV: Final = ("AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL")


def s3_secret_options(env: Mapping[str, str]) -> dict[str, str] | None:
    """The options of a DuckDB S3 secret from the AWS variables in `env`; None without keys.

    `AWS_ENDPOINT_URL_S3` or `AWS_ENDPOINT_URL` (MinIO, R2, a local S3) gives the endpoint,
    path-style, with TLS as its scheme says.
    """
    options: dict[str, str] = {}
    for option, names in _S3_ENV:
        value = next((env[n] for n in names if env.get(n)), None)
        if value is not None:
            options[option] = value
    if "KEY_ID" not in options or "SECRET" not in options:
        return None
    endpoint = next((env[n] for n in _S3_ENDPOINT_ENV if env.get(n)), None)
    if endpoint:
        scheme, _, rest = endpoint.partition("://")
        options["ENDPOINT"] = rest.rstrip("/") if rest else endpoint.rstrip("/")
        options["URL_STYLE"] = "path"
        options["USE_SSL"] = "false" if scheme.lower() == "http" else "true"
    return options


def _create_s3_secret(con: duckdb.DuckDBPyConnection, options: Mapping[str, str]) -> None:
    """A DuckDB S3 secret for this instance; its values never appear in an error."""
    rendered = ", ".join(
        f"{key} {value}" if key == "USE_SSL" else f"{key} {_sql_literal(value)}"
        for key, value in options.items()
    )
    try:
        con.execute(f"CREATE OR REPLACE SECRET errscope_s3 (TYPE s3, PROVIDER config, {rendered})")
    except duckdb.Error:
        raise StoreError(
            StoreErrorKind.UNREADABLE,
            "cannot use the S3 credentials from the environment",
            entry="AWS_ACCESS_KEY_ID",
            hint="check AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_REGION and AWS_ENDPOINT_URL",
        ) from None


def _new_instance() -> tuple[duckdb.DuckDBPyConnection, dict[str, str]]:
    """A private in-memory DuckDB with its extensions loaded (and an S3 secret from the
    AWS variables, when the environment has keys: `s3_secret_options`).

    One per store, not one per process: DuckLake 1.5.5 keeps state about a detached lake
    in the instance (its `__ducklake_metadata_<alias>` catalog), so a second lake attached
    to the same instance fails.  Loading costs about a second per store.
    """
    con = duckdb.connect(":memory:")
    try:
        loaded = load_extensions(con)
        options = s3_secret_options(os.environ)
        if options is not None and loaded[_HTTPFS[0]] != "absent":
            _create_s3_secret(con, options)
    except BaseException:
        con.close()
        raise
    return con, loaded


# ------------------------------------------------------------------ policy and reports


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How hard a commit is retried before its batch fails.

    DuckLake retries a conflicting commit itself `ducklake_retry_count` times (its default
    is 10, without jitter); when that is spent, the whole transaction — anti-join included —
    is run again up to `attempts` times with full-jitter backoff from `base_delay_s` to
    `max_delay_s`, and never past `budget_s` in all.
    """

    attempts: int = 12
    base_delay_s: float = 0.05
    max_delay_s: float = 2.0
    budget_s: float = 120.0
    ducklake_retry_count: int = 100
    ducklake_retry_wait_ms: int = 20
    ducklake_retry_backoff: float = 1.2


@dataclass(frozen=True, slots=True)
class MaintenanceReport:
    """What one `maintain()` pass did."""

    duplicates_removed: int
    flushed_rows: int
    merged_files: int
    expired_snapshots: int
    deleted_files: int
    data_files: int


@dataclass(slots=True)
class _Stats:
    """Counters a sidecar can export: conflicts retried and cross-writer copies removed."""

    conflicts_retried: int = 0
    concurrent_copies_removed: int = 0
    extensions: dict[str, str] = field(default_factory=dict)


def _is_conflict(exc: duckdb.Error) -> bool:
    if isinstance(exc, duckdb.TransactionException):
        return True
    text = str(exc).lower()
    return any(marker in text for marker in _CONFLICT_MARKERS)


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


def _third_column_sum(rows: list[tuple[object, ...]]) -> int:
    """Sum the per-table counts DuckLake's flush and merge calls return (schema, table, n)."""
    return sum(int(str(r[2])) for r in rows if len(r) > 2 and r[2] is not None)


def _lake_sql(sql: str) -> str:
    """A migration as DuckLake takes it: no primary keys (uniqueness is kept by the store)."""
    return _MIGRATION_PK_RE.sub("", sql)


# ------------------------------------------------------------------ unique appends


@dataclass(frozen=True, slots=True)
class _Unique:
    """How one table's key is matched and which column bounds the search for copies."""

    table: str
    match: str  # predicate over aliases {a} and {b}
    window: str | None


_SPAN_KEY: Final = "{a}.trace_id = {b}.trace_id AND {a}.span_id = {b}.span_id"
_TOOL_CALLS: Final = _Unique("tool_calls", _SPAN_KEY, "ts")
_TRACEBACKS: Final = _Unique("tracebacks", _SPAN_KEY, "ts")
_DEPLOYS: Final = _Unique(
    "deploys",
    "{a}.service = {b}.service AND {a}.version = {b}.version "
    "AND {a}.environment IS NOT DISTINCT FROM {b}.environment AND {a}.source = {b}.source",
    None,
)


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
        self._write_lock = threading.Lock()
        self._closed = False
        self._lock_con: duckdb.DuckDBPyConnection | None = None
        self._instance, self.stats.extensions = _new_instance()
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
            options.append(f"DATA_PATH {_sql_literal(text.rstrip('/') + '/')}")
        if self.read_only:
            options.append("READ_ONLY")
        sql = f"ATTACH {_sql_literal(self._lake.attach_path)} AS {self.alias}"
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
                    f"ATTACH IF NOT EXISTS {_sql_literal(self._lake.conninfo)} "
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
            self._sleep(attempt)
            attempt += 1
        try:
            yield
        finally:
            with suppress(duckdb.Error):
                con.execute("COMMIT")

    def _sleep(self, attempt: int) -> None:
        cap = min(self.retry.max_delay_s, self.retry.base_delay_s * 2**attempt)
        time.sleep(random.uniform(0, cap))  # noqa: S311 - jitter, not security

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
            for attempt in range(self.retry.attempts):
                try:
                    self._migrate_locked()
                    break
                except duckdb.Error as exc:
                    self._safe_rollback()
                    if not _is_conflict(exc) or attempt + 1 == self.retry.attempts:
                        raise StoreError(
                            StoreErrorKind.MIGRATION_FAILED,
                            f"lake migration failed ({type(exc).__name__})",
                            entry=self.url,
                        ) from exc
                    self._sleep(attempt)
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

    def _retrying(self, what: str, body: Callable[[duckdb.DuckDBPyConnection], T]) -> T:
        """Run `body` in one transaction; on a commit conflict run it again, with jitter."""
        deadline = time.monotonic() + self.retry.budget_s
        attempt = 0
        while True:
            try:
                self._con.execute("BEGIN TRANSACTION")
                result = body(self._con)
                self._con.execute("COMMIT")
            except duckdb.Error as exc:
                self._safe_rollback()
                attempt += 1
                if (
                    not _is_conflict(exc)
                    or attempt >= self.retry.attempts
                    or time.monotonic() > deadline
                ):
                    raise StoreError(
                        StoreErrorKind.WRITE_FAILED,
                        f"{what} failed after {attempt} attempt(s) ({type(exc).__name__})",
                        entry=self.url,
                    ) from exc
                self.stats.conflicts_retried += 1
                self._sleep(attempt)
            except BaseException:
                self._safe_rollback()
                raise
            else:
                return result

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
            begin, inserted = self._retrying(f"append to {unique.table}", body)
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
            removed = self._retrying(f"remove concurrent copies from {unique.table}", body)
        self.stats.concurrent_copies_removed += removed
        return removed

    def append_tool_calls(self, calls: Iterable[ToolCall] | pa.Table) -> int:
        """Store a batch of calls in one commit; return how many were new (exact, see above)."""
        if isinstance(calls, pa.Table):
            table = calls.select(TOOL_CALLS_SCHEMA.names).cast(TOOL_CALLS_SCHEMA)
            validate_tool_calls(table)
        else:
            table = tool_calls_to_arrow(calls)
        return self._append_unique(
            _TOOL_CALLS,
            table,
            "SELECT DISTINCT ON (trace_id, span_id) * FROM _errscope_batch",
        )

    def append_tracebacks(self, samples: Iterable[TracebackSample]) -> int:
        """Store redacted traceback samples; a replayed (trace_id, span_id) is skipped."""
        return self._append_unique(
            _TRACEBACKS,
            tracebacks_to_arrow(samples),
            "SELECT DISTINCT ON (trace_id, span_id) * FROM _errscope_batch",
        )

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
            return self._retrying("append to redactions", body)

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
        if older_than <= timedelta(0):
            raise StoreError(
                StoreErrorKind.WRITE_FAILED,
                "retention must be positive",
                field="older_than",
                hint="for example 30d or 12h",
            )
        cutoff = (now or datetime.now(UTC)) - older_than

        def body(con: duckdb.DuckDBPyConnection) -> dict[str, int]:
            deleted: dict[str, int] = {}
            for table, column in _AGE_COLUMNS.items():
                if table == "deploys":
                    continue  # deploy markers are tiny and keep old charts labelled
                row = con.execute(
                    f"DELETE FROM {table} WHERE {column} < $cutoff",  # noqa: S608 - constants
                    {"cutoff": cutoff},
                ).fetchone()
                deleted[table] = int(row[0]) if row else 0
            return deleted

        with self._write_lock, self._mutation_lock():
            deleted = self._retrying("prune", body)
        return PruneReport(cutoff=cutoff, deleted=deleted)

    def _call(self, what: str, sql: str) -> list[tuple[object, ...]]:
        """Run one maintenance CALL outside an explicit transaction, retrying conflicts."""
        attempt = 0
        while True:
            try:
                return self._con.execute(sql).fetchall()
            except duckdb.Error as exc:
                attempt += 1
                if not _is_conflict(exc) or attempt >= self.retry.attempts:
                    raise StoreError(
                        StoreErrorKind.WRITE_FAILED,
                        f"{what} failed ({type(exc).__name__})",
                        entry=self.url,
                    ) from exc
                self.stats.conflicts_retried += 1
                self._sleep(attempt)

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
        since, until = moment - dedupe_window, moment - settle_margin
        with self._write_lock, self._mutation_lock():
            removed = 0
            for unique in (_TOOL_CALLS, _TRACEBACKS):
                removed += self._dedupe(unique, since, until)
            flushed = self._call("flush", f"CALL ducklake_flush_inlined_data('{self.alias}')")
            merged = self._call("merge", f"CALL ducklake_merge_adjacent_files('{self.alias}')")
            # Evaluated when each CALL runs: files scheduled by the expiry just before count.
            older = f"now() - INTERVAL '{int(keep_snapshots.total_seconds())} seconds'"
            expired = self._call(
                "expire", f"CALL ducklake_expire_snapshots('{self.alias}', older_than => {older})"
            )
            cleaned = self._call(
                "cleanup", f"CALL ducklake_cleanup_old_files('{self.alias}', older_than => {older})"
            )
            files = self._con.execute(
                f"SELECT count(*) FROM ducklake_list_files('{self.alias}', 'tool_calls')"  # noqa: S608 - constants only
            ).fetchone()
        return MaintenanceReport(
            duplicates_removed=removed,
            flushed_rows=_third_column_sum(flushed),
            merged_files=_third_column_sum(merged),
            expired_snapshots=len(expired),
            deleted_files=len(cleaned),
            data_files=int(files[0]) if files else 0,
        )

    def _dedupe(self, unique: _Unique, since: datetime, until: datetime) -> int:
        """Delete every copy of a key but the one in the lowest (snapshot, row id).

        Only copies committed before `until` are touched: a live writer may still be
        between its two steps for anything newer, and would miscount if its copy vanished.
        """
        settled = self._con.execute(
            f"SELECT max(snapshot_id) FROM {self.alias}.snapshots() WHERE snapshot_time < $until",  # noqa: S608 - constants only
            {"until": until},
        ).fetchone()
        if not settled or settled[0] is None:
            return 0
        earlier = unique.match.format(a="o", b="t")
        where = (
            "t.ts >= $since AND t.snapshot_id <= $settled AND EXISTS (SELECT 1 FROM "  # noqa: S608 - constants only
            f"{unique.table} o WHERE o.ts >= $since AND {earlier} "
            "AND (o.snapshot_id < t.snapshot_id "
            "OR (o.snapshot_id = t.snapshot_id AND o.rowid < t.rowid)))"
        )

        def body(con: duckdb.DuckDBPyConnection) -> int:
            row = con.execute(
                f"DELETE FROM {unique.table} t WHERE {where}",  # noqa: S608 - constants
                {"since": since, "settled": int(settled[0])},
            ).fetchone()
            return int(row[0]) if row else 0

        return self._retrying(f"dedupe {unique.table}", body)

    def count(self, table: str) -> int:
        """Rows in one of the contract tables (for tests, benchmarks and `errscope status`)."""
        if table not in _AGE_COLUMNS:
            raise StoreError(StoreErrorKind.UNREADABLE, "not a store table", entry=table)
        try:
            row = self.cursor().execute(f"SELECT count(*) FROM {table}").fetchone()  # noqa: S608
        except duckdb.Error as exc:
            raise self._read_error(exc) from None
        return int(row[0]) if row else 0
