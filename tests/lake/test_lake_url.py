"""Store URLs: parsing, dispatch, and never echoing a password."""

from __future__ import annotations

from pathlib import Path

import pytest

from errscope.collector.errors import StoreError, StoreErrorKind
from errscope.collector.store import open_store
from errscope.collector.store.duckdb import DuckDBStore
from errscope.collector.store.lake import mask_secrets, parse_lake_url


@pytest.mark.parametrize(
    ("url", "conninfo"),
    [
        pytest.param(
            "ducklake:postgres:dbname=errscope host=127.0.0.1",
            "dbname=errscope host=127.0.0.1",
            id="keywords",
        ),
        pytest.param(
            "ducklake:postgres:postgresql://u:pw@db:5432/errscope",
            "postgresql://u:pw@db:5432/errscope",
            id="uri",
        ),
        # libpq allows quoted values with spaces.
        pytest.param(
            "ducklake:postgres:dbname=e password='a b\\' c'",
            "dbname=e password='a b\\' c'",
            id="quoted-value",
        ),
    ],
)
def test_parse_lake_url_accepts(url: str, conninfo: str) -> None:
    """Well-formed DuckLake URLs keep their connection string as given."""
    parsed = parse_lake_url(url)
    assert (parsed.catalog, parsed.conninfo) == ("postgres", conninfo)


@pytest.mark.parametrize(
    ("url", "message"),
    [
        pytest.param("ducklake:postgres:", "no connection string", id="empty-conninfo"),
        pytest.param("ducklake:postgres:   ", "no connection string", id="blank-conninfo"),
        pytest.param("ducklake:sqlite:x.db", "only a PostgreSQL catalog", id="other-catalog"),
        pytest.param("ducklake:x.ducklake", "only a PostgreSQL catalog", id="duckdb-catalog"),
        pytest.param(
            "ducklake:postgres:dbname=e password=s3cret junk", "without `=`", id="bare-word"
        ),
        pytest.param(
            "ducklake:postgres:dbname=e password='s3cret", "unclosed quote", id="open-quote"
        ),
        pytest.param("ducklake:postgres:=e password=s3cret", "bad keyword", id="empty-keyword"),
        pytest.param("ducklake:postgres:dbname=e password=", "no value", id="empty-value"),
        pytest.param("ducklake:postgres:postgresql://", "no host", id="empty-uri"),
    ],
)
def test_parse_lake_url_refuses_without_echoing_password(url: str, message: str) -> None:
    """A malformed URL is a BAD_URL error that says what is wrong and hides the password."""
    with pytest.raises(StoreError) as caught:
        parse_lake_url(url)
    assert caught.value.kind is StoreErrorKind.BAD_URL
    assert message in caught.value.message
    assert "s3cret" not in caught.value.describe()


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param("host=h password=hunter2 user=u", "host=h password=*** user=u", id="kv"),
        pytest.param("password = 'a b' x=1", "password = *** x=1", id="kv-quoted"),
        pytest.param("PASSWORD=x", "PASSWORD=***", id="kv-upper"),
        pytest.param("postgresql://u:hunter2@h/db", "postgresql://u:***@h/db", id="uri"),
        pytest.param("dbname=e host=h", "dbname=e host=h", id="nothing-to-hide"),
        pytest.param("postgresql://:hunter2@h/db", "postgresql://:***@h/db", id="uri-no-user"),
        pytest.param("postgresql://u:hun@ter2@h/db", "postgresql://u:***@h/db", id="uri-at-sign"),
        pytest.param("password=hun\\ ter2 user=u", "password=*** user=u", id="kv-escaped-space"),
        pytest.param('password="hun ter2" user=u', 'password=***" user=u', id="kv-double-quoted"),
        pytest.param(
            'connect to "dbname=e password=hunter2": refused',
            'connect to "dbname=e password=***": refused',
            id="quoted-in-a-message",
        ),
    ],
)
def test_mask_secrets(text: str, expected: str) -> None:
    """Passwords in key=value and URI connection strings are replaced by ***."""
    assert mask_secrets(text) == expected


@pytest.mark.parametrize(
    ("url", "data_path", "message"),
    [
        pytest.param("", None, "empty store URL", id="empty"),
        pytest.param("postgresql://u:hunter2@h/db", None, "DuckLake catalog", id="bare-postgres"),
        pytest.param("store.duckdb", "/tmp/lake", "DuckLake store only", id="data-path-on-file"),
        pytest.param("s3://bucket/x", None, "unknown store scheme", id="unknown-scheme"),
        pytest.param("duckdb:", None, "no file path", id="duckdb-without-path"),
        pytest.param(
            "dbname=e user=u password=hunter2", None, "DuckLake catalog", id="bare-conninfo"
        ),
    ],
)
def test_open_store_refuses(url: str, data_path: str | None, message: str) -> None:
    """open_store refuses URLs it cannot serve with BAD_URL, never echoing a password."""
    with pytest.raises(StoreError) as caught:
        open_store(url, data_path=data_path)
    assert caught.value.kind is StoreErrorKind.BAD_URL
    assert message in caught.value.message
    assert "hunter2" not in caught.value.describe()


@pytest.mark.parametrize(
    "prefix", [pytest.param("", id="path"), pytest.param("duckdb:", id="duckdb")]
)
def test_open_store_opens_duckdb_files(tmp_path: Path, prefix: str) -> None:
    """A plain path or duckdb:PATH opens the embedded DuckDB store."""
    with open_store(f"{prefix}{tmp_path / 'e.duckdb'}") as store:
        assert isinstance(store, DuckDBStore)
