"""A lake whose catalog stops answering: structured errors, no password, and recovery.

The outage is real: the test database stops accepting connections and its sessions are
ended, so every catalog read and the advisory lock have to reconnect and are refused.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path

import pytest
from click.testing import CliRunner

from errscope.collector.cli import main
from errscope.collector.errors import StoreError
from errscope.collector.store.lake import DuckLakeStore
from errscope.queries.runner import run_query
from errscope.queries.source import FileSource
from tests.factories import T0, make_call
from tests.lake.conftest import PG_PASSWORD, admin_sql

pytestmark = pytest.mark.postgres


@contextmanager
def catalog_down(database: str) -> Iterator[None]:
    """Refuse new connections to `database` and end the open ones, then let them back."""
    admin_sql(f"ALTER DATABASE {database} WITH ALLOW_CONNECTIONS false")
    admin_sql(
        "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
        f"WHERE datname = '{database}'"
    )
    try:
        yield
    finally:
        admin_sql(f"ALTER DATABASE {database} WITH ALLOW_CONNECTIONS true")


def test_reads_during_an_outage_fail_structured_and_recover(
    lake_store: DuckLakeStore, lake_db: str
) -> None:
    """cursor() and known_versions() raise StoreError without the password, then work again."""
    lake_store.append_tool_calls([make_call()])
    with catalog_down(lake_db):
        for read in (
            lambda: run_query(lake_store.cursor(), "error_rates", {}),
            lake_store.known_versions,
        ):
            with pytest.raises(StoreError) as caught:
                read()
            assert PG_PASSWORD not in caught.value.describe()
            assert PG_PASSWORD not in str(caught.value)
    # The window is pinned around the factory's fixed T0: the query's default (the last 24 h)
    # would make the answer depend on the day the suite runs.
    window = {
        "since": (T0 - timedelta(hours=1)).isoformat(),
        "until": (T0 + timedelta(hours=1)).isoformat(),
    }
    assert run_query(lake_store.cursor(), "error_rates", window).num_rows == 1


def test_a_failed_lock_attempt_does_not_break_later_prunes(
    lake_store: DuckLakeStore, lake_db: str
) -> None:
    """A prune refused during an outage leaves the lock connection usable afterwards."""
    lake_store.prune(timedelta(days=30))  # opens the lock connection
    with catalog_down(lake_db), pytest.raises(StoreError) as caught:
        lake_store.prune(timedelta(days=30))
    assert PG_PASSWORD not in caught.value.describe()
    report = lake_store.prune(timedelta(days=30))
    assert report.deleted["tool_calls"] == 0


def test_query_commands_read_a_lake(lake_store: DuckLakeStore, lake_url: str) -> None:
    """`errscope query --db ducklake:...` and FileSource read the lake; the URL is masked."""
    lake_store.append_tool_calls([make_call(code="not_found")])
    source = FileSource(lake_url)
    since = {"since": "2020-01-01T00:00:00Z"}
    assert source.run("error_rates", since).column("code").to_pylist() == ["not_found"]
    assert PG_PASSWORD not in source.describe()
    args = ["query", "error_rates", "--db", lake_url, "-p", "since=2020-01-01T00:00:00Z"]
    done = CliRunner().invoke(main, [*args, "--format", "json"])
    assert done.exit_code == 0, done.output
    assert '"code":"not_found","calls":1' in done.output


def test_query_commands_never_echo_a_lake_password(tmp_path: Path, lake_db: str) -> None:
    """A lake URL that cannot be opened is reported masked by query, findings and check."""
    url = f"ducklake:postgres:dbname={lake_db}_missing host=127.0.0.1 password={PG_PASSWORD}"
    for args in (
        ["query", "error_rates", "--db", url],
        ["findings", "--db", url],
        ["check", "--service", "s", "--version", "1", "--db", url],
    ):
        done = CliRunner().invoke(main, args)
        assert done.exit_code != 0, args
        assert "error[" in done.output, done.output
        assert PG_PASSWORD not in done.output, args
        assert "Traceback" not in done.output


def test_an_unusable_data_path_is_a_structured_error(tmp_path: Path, lake_url: str) -> None:
    """A data path under a regular file is refused naming the field, not as an internal error."""
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    with pytest.raises(StoreError) as caught:
        DuckLakeStore(lake_url, data_path=blocker / "lake")
    assert caught.value.field == "data_path"
    assert PG_PASSWORD not in caught.value.describe()
