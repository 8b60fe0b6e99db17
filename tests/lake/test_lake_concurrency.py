"""Several real OS processes writing one lake at once: nothing lost, nothing twice."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from errscope.collector.store.lake import DuckLakeStore

pytestmark = [pytest.mark.postgres, pytest.mark.slow]

WRITER = Path(__file__).with_name("lake_writer.py")
ROOT = Path(__file__).resolve().parents[2]


def _spawn(args: list[str]) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "ERRSCOPE_DUCKDB_EXTENSIONS": "wheel"}
    return subprocess.Popen(
        [sys.executable, str(WRITER), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=ROOT,
    )


def _result(proc: subprocess.Popen[str], timeout_s: float) -> dict[str, object]:
    out, err = proc.communicate(timeout=timeout_s)
    assert proc.returncode == 0, err[-2000:]
    loaded = json.loads(out.strip().splitlines()[-1])
    assert isinstance(loaded, dict)
    return loaded


@pytest.mark.parametrize(
    ("writers", "batches", "rows", "shared", "with_maintenance"),
    [
        pytest.param(3, 8, 400, 6, False, id="three-writers-overlapping-replays"),
        # Compaction, flushing and snapshot expiry run while the writers commit.
        pytest.param(3, 6, 300, 4, True, id="three-writers-with-maintenance"),
    ],
)
def test_concurrent_writers_store_each_acknowledged_span_once(
    lake_url: str,
    data_path: Path,
    tmp_path: Path,
    writers: int,
    batches: int,
    rows: int,
    shared: int,
    with_maintenance: bool,
) -> None:
    """The lake holds exactly the acknowledged rows, each key once, with writers racing."""
    t0 = (datetime.now(UTC) - timedelta(hours=1)).isoformat()
    common = [lake_url, str(data_path), "--batches", str(batches), "--rows", str(rows)]
    common += ["--t0", t0]
    stop = tmp_path / "stop"
    ready = tmp_path / "maintaining"
    keeper = None
    if with_maintenance:
        # Start the maintainer first and wait for its first pass, so that maintenance really
        # overlaps the writers (opening a lake takes seconds on a loaded machine).
        keeper = _spawn(
            [*common, "--maintain", "--stop-file", str(stop), "--ready-file", str(ready)]
        )
        deadline = time.monotonic() + 180
        while not ready.exists():
            assert keeper.poll() is None, "the maintainer exited before its first pass"
            assert time.monotonic() < deadline, "the maintainer never finished a pass"
            time.sleep(0.2)
    procs = [_spawn([*common, "--writer", str(w), "--shared", str(shared)]) for w in range(writers)]
    results = [_result(p, 240) for p in procs]
    if keeper is not None:
        stop.touch()
        assert int(str(_result(keeper, 120)["maintain_passes"])) >= 1
    acked = sum(int(str(r["acked"])) for r in results)
    expected_keys = (writers * batches + shared) * rows
    with DuckLakeStore(lake_url, read_only=True) as store:
        row = (
            store.cursor()
            .execute("SELECT count(*), count(DISTINCT (trace_id, span_id)) FROM tool_calls")
            .fetchone()
        )
    assert row is not None
    stored, distinct = row
    assert (stored, distinct, acked) == (expected_keys, expected_keys, expected_keys), results
