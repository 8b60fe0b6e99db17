"""The /v1/check worker's deadline: a worker that does not answer in time is killed, and
the request gets `CheckUnavailable` (503) instead of hanging the API thread."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator

import pytest

from errscope.collector.sidecar.checks import CheckRunner, CheckUnavailable, parse_check_params


@pytest.fixture
def silent_api() -> Iterator[str]:
    """The URL of a listener that takes connections and never answers."""
    with socket.create_server(("127.0.0.1", 0)) as server:
        yield f"http://127.0.0.1:{server.getsockname()[1]}"


@pytest.mark.parametrize("timeout_s", [pytest.param(2.0, id="2s")])
def test_a_worker_past_its_deadline_is_killed(silent_api: str, timeout_s: float) -> None:
    """A judgement whose worker cannot answer (its API never replies) ends at the deadline
    with CheckUnavailable, and that worker process is gone."""
    runner = CheckRunner(token=None, trace_url=None, timeout_s=timeout_s)
    request = parse_check_params("service=billing-agent&version=2.0").request
    started = time.monotonic()
    try:
        with pytest.raises(CheckUnavailable, match="no answer in time"):
            runner.judge(silent_api, request)
        elapsed = time.monotonic() - started
        assert timeout_s <= elapsed < timeout_s + 10  # the kill and reap take a moment
        assert runner.pid is None
    finally:
        runner.close()


def test_close_without_a_worker_is_quiet() -> None:
    """A runner never asked has no worker; closed, it refuses and starts none."""
    runner = CheckRunner(token=None, trace_url=None, timeout_s=1.0)
    runner.close()
    with pytest.raises(CheckUnavailable, match="stopping"):
        runner.judge("http://127.0.0.1:9", {"service": "a", "version": "1"})
    assert runner.pid is None
