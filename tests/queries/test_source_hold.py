"""`FileSource` holds one read-only store for a command's pass, and only for that pass.

A one-shot command (`findings`, one look of `check`) runs tens of named queries; opening the
file for each cost about a second on a 17M-row store.  `held(source)` keeps one connection
for the block.  The promise that a reading command never keeps a sidecar from starting for
longer than its pass is checked with a second, real process that tries to open the file
for writing, as `errscope serve` does.
"""

from __future__ import annotations

import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from errscope.collector.store.duckdb import DuckDBStore
from errscope.queries.source import ApiSource, FileSource, SourceError, held

_TRY_WRITE = """
import sys
from errscope.collector.errors import StoreError
from errscope.collector.store.duckdb import DuckDBStore
try:
    DuckDBStore(sys.argv[1]).close()
except StoreError as exc:
    print(exc.kind.value)
else:
    print("opened")
"""


def _writer_can_open(path: Path) -> str:
    done = subprocess.run(
        [sys.executable, "-c", _TRY_WRITE, str(path)],
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    return done.stdout.strip()


def _window() -> dict[str, object]:
    now = datetime.now(UTC)
    return {"service": "svc", "since": now - timedelta(hours=1), "until": now}


def test_a_held_pass_keeps_the_file_and_releases_it_after(tmp_path: Path) -> None:
    """Inside the block a writer is refused (locked); after it, the writer opens the file."""
    path = tmp_path / "s.duckdb"
    DuckDBStore(path).close()
    source = FileSource(path)
    with held(source):
        first = source.run("versions_serving", _window())
        with held(source):  # re-entrant: an inner pass reuses the outer store
            second = source.run("versions_serving", _window())
        assert _writer_can_open(path) == "locked"
    assert first.num_rows == second.num_rows == 0
    assert _writer_can_open(path) == "opened"


def test_without_a_hold_each_query_releases_the_file(tmp_path: Path) -> None:
    """The default stays: a lone query closes the file before it returns."""
    path = tmp_path / "s.duckdb"
    DuckDBStore(path).close()
    source = FileSource(path)
    source.run("versions_serving", _window())
    assert _writer_can_open(path) == "opened"


def test_a_hold_is_released_when_the_pass_fails(tmp_path: Path) -> None:
    """A pass that raises still lets go of the file, and the source works afterwards."""
    path = tmp_path / "s.duckdb"
    DuckDBStore(path).close()
    source = FileSource(path)

    def failing_pass() -> None:
        with held(source):
            source.run("versions_serving", _window())
            raise RuntimeError("the pass failed")

    with pytest.raises(RuntimeError, match="the pass failed"):
        failing_pass()
    assert _writer_can_open(path) == "opened"
    assert source.run("versions_serving", _window()).num_rows == 0


def test_holding_an_api_source_is_a_no_op() -> None:
    """An API source has nothing to hold: entering the block reaches no address, and a
    query inside it still goes to the API (nothing listens here, so it is refused)."""
    source = ApiSource("http://127.0.0.1:9", timeout_s=5)
    with held(source), pytest.raises(SourceError, match="cannot reach the query API"):
        source.run("versions_serving", _window())
