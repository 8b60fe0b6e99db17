"""Pause Python's cyclic collector around short bursts of short-lived objects.

A batch (a scrubbed export, a store append) creates thousands of objects that live only
until the batch is done and are freed by reference counting.  Their allocations fill the
collector's counters, and the collection then runs on whichever thread allocates next
and walks every live object of the young generations (or of the whole heap): measured,
that was most of `instrument()`'s overhead on the application thread, and a third of a
1,000-row store append.  Pausing the collector while the batch lives leaves it little
to catch up on.  Pauses nest across threads; a collector the application has disabled
stays disabled.  One limit: an application that disables the collector *while* a pause
runs (the flag is already off then, so nothing can tell its call from ours) finds it
re-enabled when the pause ends; disable it before errscope starts, or call
`gc.disable()` again after a flush.
"""

from __future__ import annotations

import gc
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["gc_paused"]

_LOCK = threading.Lock()
_pausers = 0  # bursts running with the collector paused (guarded by _LOCK)


def _after_fork_in_child() -> None:
    """A fork copies the counter but not the threads whose pauses it counts: started
    during a pause, the child would run with the collector off for good."""
    global _LOCK, _pausers  # noqa: PLW0603 - the child's fresh copy of the process state
    _LOCK = threading.Lock()  # another thread may have held it at the fork
    if _pausers > 0:
        _pausers = 0
        gc.enable()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


@contextmanager
def gc_paused() -> Iterator[None]:
    """Run the body with the cyclic collector off; turn it back on when the last pause ends."""
    global _pausers  # noqa: PLW0603 - one counter shared by every thread in the process
    with _LOCK:
        pause = _pausers > 0 or gc.isenabled()
        if pause:
            _pausers += 1
            gc.disable()
    try:
        yield
    finally:
        if pause:
            with _LOCK:
                _pausers -= 1
                if _pausers == 0:
                    gc.enable()
