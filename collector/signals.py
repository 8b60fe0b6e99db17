"""Setting a threading.Event from a signal handler without the deadlock it invites.

Python runs a signal handler in the main thread between two bytecodes, which can be inside
`Event.wait()` while the main thread holds the Event's internal lock (on entry, or after
waking).  A handler that calls `event.set()` then waits for that lock, held by its own
thread: the process hangs.  The sidecar hung that way on a SIGTERM about once in twenty
test runs.  `set_soon` hands the `set()` to a short-lived thread, which takes the lock as
soon as the main thread lets it go.
"""

from __future__ import annotations

import threading

__all__ = ["set_soon"]


def set_soon(event: threading.Event) -> None:
    """Set `event` from a signal handler: in another thread, so the handler never blocks."""
    threading.Thread(target=event.set, name="errscope-signal", daemon=True).start()
