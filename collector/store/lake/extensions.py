"""The DuckDB extensions a lake needs, and the S3 secret an object-store data path needs.

`new_instance` gives each `DuckLakeStore` its own in-memory DuckDB with postgres_scanner
and ducklake loaded (httpfs too when it can be), and an S3 secret built from the AWS
variables when the environment has keys.  A required extension that cannot be loaded
raises `StoreError(UNREADABLE)` with the package to install; an S3 secret's values never
appear in an error.
"""

from __future__ import annotations

import os
import tempfile
import uuid
from collections.abc import Mapping
from contextlib import suppress
from importlib import util as importlib_util
from pathlib import Path
from typing import Final

import duckdb

from errscope.collector.errors import StoreError, StoreErrorKind
from errscope.collector.store.lake.url import sql_literal

__all__ = ["load_extensions", "new_instance", "s3_secret_options"]

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
            con.execute(f"LOAD {sql_literal(str(_named_link(wheel, name)))}")
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
        f"{key} {value}" if key == "USE_SSL" else f"{key} {sql_literal(value)}"
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


def new_instance() -> tuple[duckdb.DuckDBPyConnection, dict[str, str]]:
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
