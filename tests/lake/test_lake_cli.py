"""`errscope migrate`: a DuckDB file store copied into a lake, idempotently."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
from click.testing import CliRunner

from errscope.collector.cli.migrate import migrate
from errscope.collector.record import Deploy, RedactionCount
from errscope.collector.store.duckdb import DuckDBStore
from errscope.collector.store.lake import DuckLakeStore
from errscope.queries.runner import run_query
from tests.factories import T0, make_call

pytestmark = pytest.mark.postgres


def test_migrate_copies_a_file_store_into_a_lake_once(
    tmp_path: Path, lake_url: str, data_path: Path
) -> None:
    """Every table arrives, queries agree with the source, and a re-run adds nothing."""
    source = tmp_path / "errscope.duckdb"
    with DuckDBStore(source) as store:
        store.append_tool_calls(
            [make_call(ts=T0 + timedelta(seconds=i), code="not_found") for i in range(120)]
        )
        store.add_deploys([Deploy(service="billing-agent", version="1.4.0", ts=T0)])
        store.add_redactions(
            [RedactionCount(hour=T0, service="billing-agent", tool="get_job", rule="aws", count=3)]
        )
        expected = run_query(store.cursor(), "error_rates", {"since": "2026-01-01T00:00:00Z"})
    args = ["--from", str(source), "--to", lake_url, "--data-path", str(data_path)]
    first = CliRunner().invoke(migrate, args)
    assert first.exit_code == 0, first.output
    assert "errscope-test-only" not in first.output
    second = CliRunner().invoke(migrate, args)
    assert second.exit_code == 0, second.output
    assert "tool_calls         120 read          0 new" in second.output
    with DuckLakeStore(lake_url, read_only=True) as lake:
        counts = [lake.count(t) for t in ("tool_calls", "deploys", "redactions")]
        got = run_query(lake.cursor(), "error_rates", {"since": "2026-01-01T00:00:00Z"})
    assert counts == [120, 1, 1]
    assert got.to_pylist() == expected.to_pylist()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        pytest.param(
            ["--from", "missing.duckdb", "--to", "ducklake:postgres:dbname=x password=hunter2"],
            "error[unreadable] missing.duckdb.from: source file does not exist",
            id="missing-source",
        ),
        pytest.param(
            ["--from", "{source}", "--to", "ducklake:postgres:dbname=x password=hunter2 junk"],
            "error[bad_url]",
            id="bad-url-masked",
        ),
    ],
)
def test_migrate_errors_are_one_line(tmp_path: Path, args: list[str], message: str) -> None:
    """Bad input prints one error line without the password and exits 2."""
    source = tmp_path / "errscope.duckdb"
    DuckDBStore(source).close()
    result = CliRunner().invoke(migrate, [a.replace("{source}", str(source)) for a in args])
    assert result.exit_code == 2
    assert message in result.output
    assert "hunter2" not in result.output
    assert len(result.output.strip().splitlines()) == 1
