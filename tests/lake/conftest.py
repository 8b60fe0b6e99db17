"""Fixtures for the DuckLake tests: a fresh PostgreSQL catalog database per test.

The tests talk to the machine's PostgreSQL (started by `make services` /
scripts/ensure-services.sh).  When it cannot be reached they fail, never skip: CI must
run them.  Roles and databases are made with `psql` — as the `postgres` OS user when
running as root, through ERRSCOPE_TEST_PG_ADMIN (a libpq string for a role that may
create roles and databases) when set, or as the current OS user otherwise.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from errscope.collector.store.lake import DuckLakeStore

PG_HOST = os.environ.get("ERRSCOPE_TEST_PG_HOST", "127.0.0.1")
PG_PORT = os.environ.get("ERRSCOPE_TEST_PG_PORT", os.environ.get("PGPORT", "5432"))
PG_ROLE = "errscope_test"
PG_PASSWORD = "errscope-test-only"  # a throwaway role that can only create test databases


def _psql_command(sql: str) -> list[str]:
    admin = os.environ.get("ERRSCOPE_TEST_PG_ADMIN")
    psql = shutil.which("psql") or "psql"
    args = ["-X", "-v", "ON_ERROR_STOP=1", "-Atqc", sql]
    if admin:
        return [psql, admin, *args]
    if os.geteuid() == 0:
        return ["runuser", "-u", "postgres", "--", psql, "-p", PG_PORT, *args]
    return [psql, "-h", PG_HOST, "-p", PG_PORT, "-d", "postgres", *args]


def admin_sql(sql: str) -> str:
    """Run SQL as the PostgreSQL administrator; fail the test with psql's message if refused."""
    try:
        done = subprocess.run(
            _psql_command(sql), capture_output=True, text=True, timeout=60, cwd="/", check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        pytest.fail(f"cannot run psql ({type(exc).__name__}); run `make services` first")
    if done.returncode != 0:
        pytest.fail(
            "PostgreSQL refused or is unreachable (the lake tests need it; run `make services`"
            f" or set ERRSCOPE_TEST_PG_ADMIN): {done.stderr.strip()[:300]}"
        )
    return done.stdout.strip()


@pytest.fixture(scope="session")
def pg_role() -> str:
    """A login role that owns the test databases (created once, idempotently)."""
    admin_sql(
        "DO $$BEGIN IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = "
        f"'{PG_ROLE}') THEN CREATE ROLE {PG_ROLE} LOGIN PASSWORD '{PG_PASSWORD}'; "
        "END IF; END$$"
    )
    return PG_ROLE


def conninfo(database: str) -> str:
    """The libpq string for a test database over TCP with the test role's password."""
    return f"dbname={database} host={PG_HOST} port={PG_PORT} user={PG_ROLE} password={PG_PASSWORD}"


@pytest.fixture
def lake_db(pg_role: str) -> Iterator[str]:
    """A new, empty PostgreSQL database for one test's catalog; dropped afterwards."""
    name = f"errscope_t_{uuid.uuid4().hex[:12]}"
    admin_sql(f"CREATE DATABASE {name} OWNER {pg_role}")
    yield name
    admin_sql(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


@pytest.fixture
def lake_url(lake_db: str) -> str:
    """The store URL of a fresh lake."""
    return f"ducklake:postgres:{conninfo(lake_db)}"


@pytest.fixture
def data_path(tmp_path: Path) -> Path:
    """Where the fresh lake keeps its Parquet files."""
    return tmp_path / "lake-data"


@pytest.fixture
def lake_store(lake_url: str, data_path: Path) -> Iterator[DuckLakeStore]:
    """A migrated DuckLakeStore on a fresh catalog and data path."""
    store = DuckLakeStore(lake_url, data_path=data_path)
    yield store
    store.close()
