"""`errscope run` (what `make run` calls): everything comes up, Ctrl-C leaves nothing running."""

from __future__ import annotations

import os
import signal
import sys
import time
import uuid
from pathlib import Path

import pytest

from tests.demo.procs import http_ok, processes_with_env, start, stop

pytestmark = pytest.mark.slow


def test_run_brings_everything_up_and_ctrl_c_stops_it_all(tmp_path: Path) -> None:
    """Sidecar, back-fill and dashboard come up; SIGINT exits 0, no leftovers."""
    token = uuid.uuid4().hex
    marker = f"ERRSCOPE_RUN_TEST={token}"
    env = {**os.environ, "ERRSCOPE_RUN_TEST": token}
    env.pop("ERRSCOPE_TOKEN", None)
    data = tmp_path / "data"
    # The real entry point: `run` must find `dashboard` among errscope's lazy commands.
    argv = [
        sys.executable,
        "-m",
        "errscope.collector.cli",
        "run",
        "--data-dir",
        str(data),
        "--hours",
        "3",
    ]
    argv += ["--otlp-grpc", "127.0.0.1:0", "--otlp-http", "127.0.0.1:0", "--api", "127.0.0.1:0"]
    argv += ["--dashboard-port", "0"]
    proc = start(argv, tmp_path / "run.log", env)
    try:
        proc.wait_line("errscope is running", timeout_s=240)
        board = proc.wait_line("dashboard", timeout_s=5).split()[-1]  # banner order
        api = proc.wait_line("query API", timeout_s=5).split()[-1]
        assert http_ok(f"{api}/healthz", timeout_s=10)
        assert board.startswith("http"), proc.tail()  # "(not started)" is a failure
        assert http_ok(f"{board}/_stcore/health", timeout_s=60)
        assert (data / "errscope.duckdb").exists()
        assert (data / "logs" / "sidecar.log").exists()
        assert processes_with_env(marker)  # the children really are running
        time.sleep(2)  # some live traffic
        os.kill(proc.process.pid, signal.SIGINT)  # what Ctrl-C sends to the foreground job
        proc.process.wait(timeout=90)
        assert proc.process.returncode == 0, proc.tail()
        deadline = time.monotonic() + 10
        while processes_with_env(marker) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert processes_with_env(marker) == []
    finally:
        stop(proc)
        for pid in processes_with_env(marker):
            os.kill(pid, signal.SIGKILL)
