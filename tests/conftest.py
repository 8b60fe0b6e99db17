"""Shared fixtures: stores on real DuckDB databases, and the record factory."""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from errscope.collector.record import ToolCall
from errscope.collector.store.duckdb import DuckDBStore
from tests.factories import make_call

_STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


@contextlib.contextmanager
def restored_signal_handlers() -> Iterator[None]:
    """Put the stop signals' handlers back as they were when the block began."""
    saved = {signum: signal.getsignal(signum) for signum in _STOP_SIGNALS}
    try:
        yield
    finally:
        for signum, handler in saved.items():
            signal.signal(signum, handler)


@pytest.fixture(autouse=True)
def _restore_signal_handlers() -> Iterator[None]:
    """Every test leaves the stop signals' handlers as it found them.

    A CLI command invoked in-process (click's CliRunner) installs errscope's SIGTERM handler
    in the pytest process itself; left there, a SIGTERM to pytest raised `Terminated` inside
    whichever fixture ran next and the run went on instead of stopping.
    """
    with restored_signal_handlers():
        yield


@pytest.fixture
def call_factory() -> Callable[..., ToolCall]:
    """The `make_call` factory, for tests that build their own tables."""
    return make_call


@pytest.fixture
def memory_store() -> Iterator[DuckDBStore]:
    """A migrated store in memory."""
    store = DuckDBStore(":memory:")
    yield store
    store.close()


@pytest.fixture
def file_store(tmp_path: Path) -> Iterator[DuckDBStore]:
    """A migrated store on a real file under tmp_path."""
    store = DuckDBStore(tmp_path / "errscope.duckdb")
    yield store
    store.close()
