"""A real `errscope serve` on a real, small disk: what it does when the store fails under it.

Each fault is the real thing: a tmpfs filled up (DuckDB fails to write, and a failed
checkpoint invalidates the database), a store file removed with `rm`.  Mounting a tmpfs
needs root, as the full-disk test in test_robustness.py does.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

from errscope.collector.errors import ConfigError
from errscope.collector.sidecar.config import ServeConfig
from tests.sidecar import harness
from tests.sidecar.harness import ERRSCOPE, Served, sidecar, start_sidecar
from tests.sidecar.test_robustness import ids_of, post, stored_counts, tool_spans

# `errscope serve` with DuckDB's checkpoint threshold lowered from 32 MiB, so that the
# automatic checkpoint (the one that invalidates the database when it fails) comes after a
# few hundred KiB of log rather than after a minute of exports.
_LOW_CHECKPOINT = [
    sys.executable,
    "-c",
    "import sys, errscope.collector.store.duckdb as s; s.CHECKPOINT_THRESHOLD = sys.argv.pop(1);"
    " from errscope.collector.cli import main; main()",
    "64KiB",
]


@contextlib.contextmanager
def tmpfs(where: Path, size_kib: int) -> Iterator[Path]:
    """A tmpfs of `size_kib` mounted at `where` for the block."""
    where.mkdir()
    result = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size_kib}k", "tmpfs", str(where)],
        capture_output=True,
        text=True,
        check=False,
    )
    if result.returncode != 0:
        pytest.fail(f"cannot mount a tmpfs (these tests need root): {result.stderr.strip()}")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


def fill(disk: Path) -> Path:
    """Write a file on `disk` until it is full; the file."""
    filler = disk / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    try:
        with contextlib.suppress(OSError):  # ENOSPC: the disk is full
            while True:
                os.write(fd, b"\0" * 65536)
        with contextlib.suppress(OSError):  # the last few bytes, below 64 KiB
            while True:
                os.write(fd, b"\0" * 512)
    finally:
        os.close(fd)
    return filler


def serve_command(store: Path, *flags: str) -> list[str]:
    """`errscope serve` on `store` with every listener on a free loopback port."""
    listeners = ("--otlp-grpc", "--otlp-http", "--api")
    return [
        *ERRSCOPE,
        "serve",
        "--store",
        str(store),
        *(f"{f}=127.0.0.1:0" for f in listeners),
        *flags,
    ]


def health(served: Served) -> tuple[int, str]:
    """(HTTP status, status field) of /healthz."""
    status, body = served.get("/healthz")
    return status, json.loads(body)["status"]


def health_code(served: Served) -> str | None:
    """The code /healthz gives for being unhealthy; None while healthy."""
    _, body = served.get("/healthz")
    code: str | None = json.loads(body).get("code")
    return code


def copy_out(disk: Path, to: Path) -> Path:
    """Copy the store files off a small disk: DuckDB needs room to replay the log."""
    to.mkdir()
    for path in disk.glob("*.duckdb*"):
        shutil.copy(path, to / path.name)
    return to


def test_an_invalidated_store_is_reopened_and_stores_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """When a checkpoint fails on a full disk, DuckDB invalidates the database: that export
    gets 503, the sidecar reopens the store (the reopening folds the log into the file and
    returns its free blocks) and stores again without a restart, every acknowledged span
    kept.  Before, every later export got 503 until someone restarted the sidecar."""
    monkeypatch.setattr(harness, "ERRSCOPE", _LOW_CHECKPOINT)
    with tmpfs(tmp_path / "disk", 4096) as disk:
        ballast = disk / "ballast"
        ballast.write_bytes(b"\0" * 1024 * 1024)  # deleted later to make room
        store = disk / "s.duckdb"
        acked: set[tuple[str, str]] = set()
        with sidecar(store) as served:
            for n in range(100):
                spans = tool_spans(f"fill{n}", 200, failing=True)
                status, _ = post(served, encode_spans(spans).SerializeToString())
                if status != 200:
                    break
                acked |= ids_of(spans)
            assert status == 503, "the disk never filled"

            ballast.unlink()
            deadline = time.monotonic() + 30
            spans = tool_spans("after", 50)
            while time.monotonic() < deadline:
                status, _ = post(served, encode_spans(spans).SerializeToString())
                if status == 200:
                    acked |= ids_of(spans)
                    break
                time.sleep(0.2)
            assert status == 200, "the sidecar never stored again"
            assert health(served) == (200, "ok")
            assert health_code(served) is None
            assert served.terminate() == 0
        log = store.with_suffix(".log").read_text()
        assert log.index("code=store_invalidated") < log.index("code=store_reopened")
        copy = copy_out(disk, tmp_path / "copy")
    assert acked - stored_counts(copy / store.name).keys() == set()


def test_sigterm_when_the_final_checkpoint_fails_exits_74_with_one_line(tmp_path: Path) -> None:
    """SIGTERM on a full disk: the final checkpoint fails, the sidecar logs `store_io_error`
    on one line (no traceback, no DuckDB message) and exits 74, and every acknowledged span
    is still in the store (its write-ahead log) when it is opened with room to spare."""
    with tmpfs(tmp_path / "disk", 2048) as disk:
        store = disk / "s.duckdb"
        served = start_sidecar(store)
        acked: set[tuple[str, str]] = set()
        try:
            for n in range(5):
                spans = tool_spans(f"term{n}", 200, failing=True)
                status, _ = post(served, encode_spans(spans).SerializeToString())
                assert status == 200
                acked |= ids_of(spans)
            fill(disk)
            code = served.terminate()
        finally:
            if served.process.poll() is None:
                served.process.kill()
        log = served.log.read_text()
        assert code == 74, log  # collector.sidecar.process.EXIT_STORE_IO
        assert "Traceback" not in log
        assert "error[internal]" not in log
        assert "Fatal" not in log
        (line,) = [entry for entry in log.splitlines() if "store_io_error" in entry]
        assert line.split(" ", 2)[1] == "error"
        (disk / "filler").unlink()
        copy = copy_out(disk, tmp_path / "copy")
    assert acked - stored_counts(copy / store.name).keys() == set()


def test_a_start_on_a_full_disk_leaves_no_file_behind(tmp_path: Path) -> None:
    """A new store that cannot be created (a full disk) refuses to start with one line and
    exit 2, and removes the empty file it made, so a start once there is room succeeds."""
    with tmpfs(tmp_path / "disk", 2048) as disk:
        filler = fill(disk)
        store = disk / "s.duckdb"
        result = subprocess.run(
            serve_command(store),
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert result.returncode == 2
        assert result.stderr.strip().startswith(
            f"error[write_failed] {store}: cannot create the database"
        ), result.stderr
        assert "\n" not in result.stderr.strip()
        assert sorted(p.name for p in disk.iterdir()) == ["filler"]

        filler.unlink()
        with sidecar(store) as served:
            spans = tool_spans("roomy", 5)
            status, _ = post(served, encode_spans(spans).SerializeToString())
            assert status == 200
            assert served.terminate() == 0


def test_a_deleted_store_file_stops_acknowledgements(tmp_path: Path) -> None:
    """`rm` of the store file under a running sidecar: the next export gets 503 rather than
    an acknowledgement for rows written to an unlinked inode, /healthz says unhealthy, and
    the log and /healthz say why with `store_file_missing`, and a SIGTERM then exits 74:
    what was written since the deletion is gone, and a supervisor must see it."""
    store = tmp_path / "s.duckdb"
    with sidecar(store) as served:
        spans = tool_spans("before", 20)
        assert post(served, encode_spans(spans).SerializeToString())[0] == 200
        store.unlink()
        spans = tool_spans("after", 20)
        assert post(served, encode_spans(spans).SerializeToString())[0] == 503
        assert post(served, encode_spans(spans).SerializeToString())[0] == 503
        assert health(served) == (503, "unhealthy")
        assert health_code(served) == "store_file_missing"
        assert served.terminate() == 74  # collector.sidecar.process.EXIT_STORE_IO
    assert "code=store_file_missing" in served.log.read_text()


@pytest.mark.parametrize(
    ("body_bytes", "inflight_bytes", "refused"),
    [
        pytest.param(2_000_000, 1_000_000, True, id="inflight-below-body"),
        pytest.param(2_000_000, 2_000_000, False, id="inflight-equal-body"),
        pytest.param(1_024, 64 * 1024 * 1024, False, id="defaults-like"),
    ],
)
def test_inflight_bound_below_the_body_bound_is_refused(
    body_bytes: int, inflight_bytes: int, *, refused: bool
) -> None:
    """`max_inflight_bytes` under `max_body_bytes` is refused: a body of the largest size
    could never be admitted while anything else is in flight."""
    config = ServeConfig(max_body_bytes=body_bytes, max_inflight_bytes=inflight_bytes)
    if not refused:
        config.check()
        return
    with pytest.raises(ConfigError) as caught:
        config.check()
    assert caught.value.describe() == (
        "error[bad_value] max-inflight-bytes: must be at least --max-body-bytes (2,000,000)"
        " — raise --max-inflight-bytes or lower --max-body-bytes"
    )


def test_the_cli_refuses_an_inflight_bound_below_the_body_bound(tmp_path: Path) -> None:
    """`errscope serve` with such flags exits 2 with the one line, before opening a store."""
    result = subprocess.run(
        serve_command(
            tmp_path / "s.duckdb", "--max-body-bytes", "2000000", "--max-inflight-bytes", "1000000"
        ),
        capture_output=True,
        text=True,
        timeout=20,
        check=False,
    )
    assert result.returncode == 2
    assert result.stderr.startswith("error[bad_value] max-inflight-bytes: must be at least")
    assert not (tmp_path / "s.duckdb").exists()
