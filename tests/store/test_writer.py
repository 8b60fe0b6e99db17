"""The writer's group commit and fault states, against an in-memory sink the test scripts.

`ScriptedSink` is a real `Sink`: it keeps committed batches in a list and fails, faults
or refuses to reopen when the test says so.  Every wait is on an `Ack` or an event with
a deadline; no test sleeps to let the writer thread run.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from errscope.collector.store.batch import StoreBatch, WriteResult
from errscope.collector.store.protocol import StoreFault
from errscope.collector.store.writer import Ack, Writer
from tests.factories import make_call

_DEADLINE_S = 10.0
# Long enough that a test never reaches it: only `max_spans` or `stop()` ends a group.
_NEVER_S = 60.0


class ScriptedSink:
    """An in-memory sink whose next failures, faults and reopen outcome the test sets."""

    def __init__(self) -> None:
        self.committed: list[StoreBatch] = []
        self.failing_writes = 0
        self.fault_on_failure: StoreFault | None = None
        self.lose_file_on_write = False
        self.reopen_allowed = threading.Event()
        self.reopened = threading.Event()
        self.reopen_attempts = 0
        self._standing: StoreFault | None = None

    def write(self, batch: StoreBatch) -> WriteResult:
        """Keep the batch, or raise as scripted (a full disk: nothing kept)."""
        if self.failing_writes:
            self.failing_writes -= 1
            self._standing = self.fault_on_failure
            raise OSError("no space left on device")
        self.committed.append(batch)
        if self.lose_file_on_write:
            self._standing = StoreFault.FILE_MISSING
        return WriteResult(calls=len(batch), tracebacks=0, redactions=0, deploys=0)

    def fault(self, *, probe: bool = True) -> StoreFault | None:
        """As DuckDBStore: an invalidated store shows only to a probe, a lost file to a stat."""
        if self._standing is StoreFault.INVALIDATED and not probe:
            return None
        return self._standing

    def reopen(self) -> None:
        """Fail until the test allows it; then clear the fault and say so."""
        self.reopen_attempts += 1
        if not self.reopen_allowed.is_set():
            raise OSError("still no space left on device")
        self._standing = None
        self.reopened.set()

    def calls_committed(self) -> list[str]:
        """The span ids committed so far, in commit order."""
        return [call.span_id for batch in self.committed for call in batch.calls]


@dataclass
class Submitted:
    """One batch handed to the writer: its span id and its acknowledgement."""

    span_id: str
    ack: Ack


def submit_one(writer: Writer, size_bytes: int = 100) -> Submitted:
    """Submit a batch of one tool call; fail the test if the writer refused it."""
    call = make_call()
    ack = writer.submit(StoreBatch(calls=[call]), [], size_bytes)
    assert ack is not None, "the writer refused a batch it had room for"
    return Submitted(call.span_id, ack)


def resolved(ack: Ack) -> bool:
    """Wait for the writer's answer; True only for a commit (fails the test on no answer)."""
    ok = ack.wait(_DEADLINE_S)
    assert ack.done, "the writer never answered"
    return ok


@pytest.fixture
def sink() -> ScriptedSink:
    """A sink that commits everything until told otherwise."""
    return ScriptedSink()


@pytest.fixture
def writer(sink: ScriptedSink) -> Iterator[Writer]:
    """A writer that commits each batch at once (one span fills a group)."""
    w = Writer(sink, max_spans=1)
    yield w
    w.stop(_DEADLINE_S)


@pytest.mark.parametrize(
    "batches",
    [
        pytest.param(3, id="three-batches"),
        pytest.param(5, id="five-batches"),
    ],
)
def test_one_commit_resolves_every_waiting_ack(sink: ScriptedSink, batches: int) -> None:
    """Batches queued while a group fills are merged into one commit that acks them all."""
    writer = Writer(sink, max_spans=batches, max_delay_s=_NEVER_S)
    try:
        sent = [submit_one(writer) for _ in range(batches)]
        assert [resolved(s.ack) for s in sent] == [True] * batches
        assert len(sink.committed) == 1
        assert sink.calls_committed() == [s.span_id for s in sent]
        assert (writer.commits, writer.healthy, writer.queued_bytes) == (1, True, 0)
    finally:
        writer.stop(_DEADLINE_S)


def test_failed_commit_is_not_acknowledged_and_the_next_one_heals(
    sink: ScriptedSink, writer: Writer
) -> None:
    """A commit that raises with no standing fault fails its acks and marks the writer
    unhealthy ("store_write_failed"); the next commit that succeeds makes it healthy."""
    sink.failing_writes = 1
    failed = submit_one(writer)
    assert resolved(failed.ack) is False
    assert (writer.healthy, writer.problem, writer.fault) == (False, "store_write_failed", None)
    assert writer.commit_failures == 1

    healed = submit_one(writer)
    assert resolved(healed.ack) is True
    assert (writer.healthy, writer.problem, writer.commits) == (True, None, 1)
    assert sink.calls_committed() == [healed.span_id]


def test_invalidated_store_refuses_batches_until_it_reopens(
    sink: ScriptedSink, writer: Writer
) -> None:
    """After a commit leaves the store invalidated, every batch is refused and reopening
    is retried; once a reopen succeeds the writer is healthy and commits again."""
    sink.failing_writes, sink.fault_on_failure = 1, StoreFault.INVALIDATED
    failed = submit_one(writer)
    assert resolved(failed.ack) is False
    assert (writer.fault, writer.problem) == (StoreFault.INVALIDATED, "store_invalidated")

    refused = submit_one(writer)
    assert resolved(refused.ack) is False  # refused at once, never written

    sink.reopen_allowed.set()
    assert sink.reopened.wait(_DEADLINE_S), "the writer never reopened the store"
    after = submit_one(writer)
    assert resolved(after.ack) is True
    assert (writer.fault, writer.healthy) == (None, True)
    assert sink.calls_committed() == [after.span_id]
    assert sink.reopen_attempts >= 1


def test_lost_store_file_is_never_reopened(sink: ScriptedSink, writer: Writer) -> None:
    """A commit into a store whose file was deleted is not acknowledged, and the writer
    refuses every later batch without reopening (that would start an empty store)."""
    sink.lose_file_on_write = True
    lost = submit_one(writer)
    assert resolved(lost.ack) is False
    assert (writer.fault, writer.healthy) == (StoreFault.FILE_MISSING, False)

    refused = submit_one(writer)
    assert resolved(refused.ack) is False
    assert sink.reopen_attempts == 0
    assert sink.calls_committed() == [lost.span_id]  # written to the lost inode only


def test_stop_commits_what_is_queued(sink: ScriptedSink) -> None:
    """`stop()` ends a group that is still filling, commits it, acks it, and refuses more."""
    writer = Writer(sink, max_spans=1_000, max_delay_s=_NEVER_S)
    sent = [submit_one(writer) for _ in range(4)]
    writer.stop(_DEADLINE_S)
    assert [s.ack.wait(0) for s in sent] == [True] * 4  # resolved before stop() returned
    assert sink.calls_committed() == [s.span_id for s in sent]
    assert writer.submit(StoreBatch(calls=[make_call()]), [], 100) is None


def test_full_queue_refuses_and_nothing_is_lost(sink: ScriptedSink) -> None:
    """A batch that would overfill the byte-bounded queue is refused (None), and what was
    queued before it is still committed."""
    writer = Writer(sink, max_spans=1_000, max_delay_s=_NEVER_S, max_queue_bytes=150)
    try:
        queued = submit_one(writer, size_bytes=100)
        assert writer.submit(StoreBatch(calls=[make_call()]), [], 100) is None
    finally:
        writer.stop(_DEADLINE_S)
    assert queued.ack.wait(0) is True
    assert sink.calls_committed() == [queued.span_id]


def test_empty_batch_is_acknowledged_without_a_commit(sink: ScriptedSink, writer: Writer) -> None:
    """A batch with nothing to store or forward is acknowledged at once, with no commit."""
    ack = writer.submit(StoreBatch(), [], 100)
    assert ack is not None
    assert ack.wait(0) is True
    assert sink.committed == []
