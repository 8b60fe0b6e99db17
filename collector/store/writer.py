"""The writing half of the sidecar: one writer thread, group commits, ack after commit.

Receivers `submit` a processed batch and wait on its `Ack`.  The single writer thread takes
everything queued, waits up to `max_delay_s` for more (or until `max_spans`), merges it into
one `StoreBatch`, commits once, and only then resolves every waiting `Ack` — so a client is
told "stored" only for spans that are committed, and a kill -9 loses nothing acknowledged.

A batch with nothing to store (no tool call, traceback, redaction count or new version) and
nothing to forward is acknowledged at once.  The queue is bounded in bytes: `submit` returns
None when it is full, and the receiver answers with the retryable overload status.  A failed
commit (full disk, I/O error) resolves the waiting acks as failed, marks the writer unhealthy
until a later commit succeeds, and never acknowledges what was not written.  `stop()` drains
the queue and commits it.

After every commit, failed or not, the writer asks the sink for a `StoreFault` (a stat of
the file; after a failure also a probe of the connection); while one stands, every batch is
refused at once (the receiver answers 503) and the writer is unhealthy.  An invalidated
store (DuckDB after a fatal error, such as a checkpoint failing on a full disk) is
reopened, retried with backoff from `REOPEN_FIRST_DELAY_S` up to `REOPEN_MAX_DELAY_S`
until it opens; the writer is healthy again once it has.  A store file deleted or replaced
under the sidecar is not reopened (that would start an empty store):
the writer stays unhealthy until an operator restarts it.

Thread-safety: `submit` and `stop` may be called from any thread; the sink (`Sink`:
write, fault, reopen) is called from the writer thread alone.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Final, Protocol, assert_never

from errscope.collector.spanview import SpanView
from errscope.collector.store.batch import StoreBatch, WriteResult
from errscope.collector.store.protocol import StoreFault

__all__ = ["Ack", "Sink", "Writer"]

log = logging.getLogger("errscope.writer")

DEFAULT_MAX_QUEUE_BYTES: Final = 64 * 1024 * 1024
DEFAULT_MAX_DELAY_S: Final = 0.2
DEFAULT_MAX_SPANS: Final = 5000
REOPEN_FIRST_DELAY_S: Final = 0.2
REOPEN_MAX_DELAY_S: Final = 10.0


class Sink(Protocol):
    """What the writer needs of where batches go (`StoreSink` in the sidecar)."""

    def write(self, batch: StoreBatch) -> WriteResult:
        """Commit the batch; raise when it was not written."""
        ...

    def fault(self, *, probe: bool = True) -> StoreFault | None:
        """Why the store can take no more writes, or None (`Store.fault`)."""
        ...

    def reopen(self) -> None:
        """Recover from `StoreFault.INVALIDATED`; raise while the store cannot be opened."""
        ...


class Ack:
    """Resolved by the writer once the batch is committed (ok) or failed to commit."""

    __slots__ = ("_done", "ok")

    def __init__(self) -> None:
        self._done = threading.Event()
        self.ok = False

    def resolve(self, ok: bool) -> None:
        """Record the outcome and wake the waiting receiver."""
        self.ok = ok
        self._done.set()

    def wait(self, timeout_s: float) -> bool:
        """True only when the batch was committed within `timeout_s`."""
        return self._done.wait(timeout_s) and self.ok

    @property
    def done(self) -> bool:
        """Whether the writer has answered (committed or failed)."""
        return self._done.is_set()


@dataclass
class _Item:
    batch: StoreBatch
    forward: list[SpanView]
    size_bytes: int
    ack: Ack = field(default_factory=Ack)


def _has_rows(batch: StoreBatch) -> bool:
    return bool(batch.calls or batch.tracebacks or batch.redactions or batch.versions)


class Writer:
    """The sidecar's single writer: bounded queue in, grouped commits to a sink out."""

    def __init__(
        self,
        sink: Sink,
        *,
        max_queue_bytes: int = DEFAULT_MAX_QUEUE_BYTES,
        max_delay_s: float = DEFAULT_MAX_DELAY_S,
        max_spans: int = DEFAULT_MAX_SPANS,
        on_commit: Callable[[StoreBatch, WriteResult, list[SpanView], float], None] | None = None,
    ) -> None:
        self.sink = sink
        self.max_queue_bytes = max_queue_bytes
        self.max_delay_s = max_delay_s
        self.max_spans = max_spans
        self.on_commit = on_commit
        self._queue: deque[_Item] = deque()
        self._cond = threading.Condition()
        self._queued_bytes = 0
        self._stopping = False
        self.healthy = True
        self.commits = 0
        self.commit_failures = 0
        self.fault: StoreFault | None = None  # set by the writer thread only
        self._reopen_at = 0.0  # monotonic time of the next reopen attempt
        self._reopen_delay_s = REOPEN_FIRST_DELAY_S
        self._thread = threading.Thread(target=self._run, name="errscope-writer", daemon=True)
        self._thread.start()

    @property
    def problem(self) -> str | None:
        """Why exports are refused, as a log code (`StoreFault`, or `store_write_failed` for
        a commit that failed without one); None while healthy."""
        if self.healthy:
            return None
        return str(self.fault) if self.fault is not None else "store_write_failed"

    @property
    def queued_bytes(self) -> int:
        """Bytes of requests waiting for the writer."""
        return self._queued_bytes

    def submit(self, batch: StoreBatch, forward: list[SpanView], size_bytes: int) -> Ack | None:
        """Queue a batch for the next commit; None when the queue is full or stopping."""
        item = _Item(batch, forward, max(size_bytes, 1))
        with self._cond:
            if self._stopping:
                return None
            if not forward and not _has_rows(batch):
                # Nothing to commit: waiting for the next commit would only add latency.
                item.ack.resolve(True)
                return item.ack
            if self._queued_bytes + item.size_bytes > self.max_queue_bytes and self._queue:
                return None
            self._queue.append(item)
            self._queued_bytes += item.size_bytes
            self._cond.notify()
        return item.ack

    def _take(self) -> list[_Item] | None:
        """The next group of queued batches; [] when a reopen is due; None when stopped."""
        with self._cond:
            while not self._queue and not self._stopping:
                if self.fault is not StoreFault.INVALIDATED:
                    self._cond.wait()
                    continue
                remaining = self._reopen_at - time.monotonic()
                if remaining <= 0:
                    return []
                self._cond.wait(remaining)
            if not self._queue:
                return None
            deadline = time.monotonic() + self.max_delay_s
            spans = sum(len(i.batch) for i in self._queue)
            # No grouping while the store is faulted: the refusal might as well be prompt.
            while spans < self.max_spans and not self._stopping and self.fault is None:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                self._cond.wait(remaining)
                spans = sum(len(i.batch) for i in self._queue)
            items = list(self._queue)
            self._queue.clear()
            return items

    def _run(self) -> None:
        while (items := self._take()) is not None:
            if self.fault is StoreFault.INVALIDATED and time.monotonic() >= self._reopen_at:
                self._reopen()
            if self.fault is not None:
                self._finish(items, ok=False)  # never acknowledged: the store cannot keep it
            elif items:
                self._commit(items)

    def _commit(self, items: list[_Item]) -> None:
        merged = StoreBatch()
        forward: list[SpanView] = []
        for item in items:
            merged.extend(item.batch)
            forward.extend(item.forward)
        started = time.perf_counter()
        try:
            result = self.sink.write(merged)
        except Exception as exc:  # noqa: BLE001 - any failure means "not written": never ack
            self.healthy = False
            self.commit_failures += 1
            fault = self.sink.fault()
            log.error(  # noqa: TRY400 - the exception text may carry payload: class only
                "commit failed; not acknowledging",
                extra={
                    "code": fault or "store_write_failed",
                    "error_class": type(exc).__name__,
                    "spans": len(merged),
                },
            )
            if fault is not None:
                self._set_fault(fault)
            self._finish(items, ok=False)
            return
        # A successful commit cannot have invalidated the store: only the file is checked.
        fault = self.sink.fault(probe=False)
        if fault is not None:
            # Committed, but to a store that cannot keep it (a deleted file's inode).
            self.commit_failures += 1
            self._set_fault(fault)
            self._finish(items, ok=False)
            return
        self.healthy = True
        self.commits += 1
        self._reopen_delay_s = REOPEN_FIRST_DELAY_S
        self._finish(items, ok=True)
        if self.on_commit is not None:
            try:
                self.on_commit(merged, result, forward, time.perf_counter() - started)
            except Exception as exc:  # noqa: BLE001 - metrics/forwarding never stop the writer
                log.warning("after-commit hook failed", extra={"error_class": type(exc).__name__})

    def _set_fault(self, fault: StoreFault) -> None:
        """Refuse every batch from now on; for an invalidated store, plan its reopening."""
        self.healthy = False
        self.fault = fault
        match fault:
            case StoreFault.INVALIDATED:
                self._plan_reopen()
                log.error("store invalidated; reopening it", extra={"code": fault})
            case StoreFault.FILE_MISSING:
                log.error(
                    "store file deleted or replaced; refusing exports until restarted",
                    extra={"code": fault},
                )
            case _:
                assert_never(fault)

    def _plan_reopen(self) -> None:
        # The delay doubles until a commit succeeds: a store that reopens but fails again at
        # its next checkpoint (the disk still full) is not reopened in a tight loop.
        self._reopen_at = time.monotonic() + self._reopen_delay_s
        self._reopen_delay_s = min(self._reopen_delay_s * 2, REOPEN_MAX_DELAY_S)

    def _reopen(self) -> None:
        """One attempt at reopening an invalidated store; on failure, the next is planned."""
        error_class = "StoreFault"
        try:
            self.sink.reopen()
            fault = self.sink.fault()
        except Exception as exc:  # noqa: BLE001 - still unusable (a full disk): try again later
            fault, error_class = StoreFault.INVALIDATED, type(exc).__name__
        match fault:
            case None:
                self.fault = None
                self.healthy = True
                log.info("store reopened", extra={"code": "store_reopened"})
            case StoreFault.INVALIDATED:
                self._plan_reopen()
                log.warning(
                    "store reopen failed; retrying",
                    extra={"code": "store_reopen_failed", "error_class": error_class},
                )
            case StoreFault.FILE_MISSING:
                self._set_fault(fault)
            case _:
                assert_never(fault)

    def _finish(self, items: list[_Item], *, ok: bool) -> None:
        with self._cond:
            self._queued_bytes -= sum(i.size_bytes for i in items)
        for item in items:
            item.ack.resolve(ok)

    def stop(self, timeout_s: float = 30.0) -> None:
        """Refuse new batches, commit what is queued, and stop the thread."""
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
        self._thread.join(timeout_s)
