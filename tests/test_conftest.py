"""The suite's own hygiene: what one test changes in the pytest process does not outlive it."""

from __future__ import annotations

import signal

from tests.conftest import restored_signal_handlers


def _sentinel(_signum: int, _frame: object) -> None:
    """A handler no one else installs."""


def test_a_signal_handler_installed_inside_a_test_is_undone_after_it() -> None:
    """A SIGTERM handler installed inside the block (as an in-process CLI command does) is undone."""
    before = signal.getsignal(signal.SIGTERM)
    with restored_signal_handlers():
        signal.signal(signal.SIGTERM, _sentinel)
        assert signal.getsignal(signal.SIGTERM) is _sentinel
    assert signal.getsignal(signal.SIGTERM) is before
