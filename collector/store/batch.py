"""Gather processed spans into one batch and commit it to a `Store`.

`StoreBatch` collects what `Pipeline.process` returned for many spans: tool-call records,
traceback samples, redaction counts (summed per hour, service, tool and rule) and the
versions seen.  `StoreSink.write` commits a batch to a store and records a deploy row the
first time a (service, version, environment) is seen.  The sidecar's single writer and the
in-process exporter both use it, so both store exactly the same rows.

`StoreSink` is typed against the `Store` protocol alone: what a store can promise about a
failure part-way (one transaction, or a commit per table) is its `atomically`, and its
faults are its `fault` and `reopen`.  Thread-safety: a sink serialises its own writes.
"""

from __future__ import annotations

import itertools
import threading
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Final

from errscope.collector.pipeline import NON_TOOL, UNKNOWN_SERVICE, Processed
from errscope.collector.record import Deploy, RedactionCount, ToolCall, TracebackSample
from errscope.collector.store.protocol import Store, StoreFault

__all__ = ["MAX_COUNTED_SPANS", "StoreBatch", "StoreSink", "WriteResult"]

MAX_COUNTED_SPANS: Final = 65_536


@dataclass
class StoreBatch:
    """Everything a group of processed spans asks the store to keep."""

    calls: list[ToolCall] = field(default_factory=list)
    tracebacks: list[TracebackSample] = field(default_factory=list)
    redactions: Counter[tuple[datetime, str, str, str]] = field(default_factory=Counter)
    # The tool calls among `calls` that carry redaction counts, with them: a replayed call
    # is stored once, and so must its counts be (see `StoreSink.write`).
    call_redactions: list[tuple[ToolCall, Mapping[str, int]]] = field(default_factory=list)
    # The same for spans that are not tool calls (no row to find them by): see `StoreSink`.
    span_redactions: list[Processed] = field(default_factory=list)
    versions: dict[tuple[str, str, str | None], datetime] = field(default_factory=dict)
    failed: int = 0
    rejected: int = 0

    def add(self, processed: Processed) -> None:
        """Fold one processed span into the batch."""
        if processed.failed:
            self.failed += 1
        if processed.rejected:
            self.rejected += 1
        record = processed.record
        if record is not None:
            self.calls.append(record)
            if record.version:
                key = (record.service, record.version, record.environment)
                seen = self.versions.get(key)
                if seen is None or record.ts < seen:
                    self.versions[key] = record.ts
        if processed.traceback is not None:
            self.tracebacks.append(processed.traceback)
        if processed.redactions:
            _add_counts(self.redactions, record or processed, processed.redactions)
            if record is not None:
                self.call_redactions.append((record, processed.redactions))
            elif processed.span_key is not None:
                self.span_redactions.append(processed)

    def extend(self, other: StoreBatch) -> None:
        """Merge another batch into this one (the writer groups commits)."""
        self.calls.extend(other.calls)
        self.tracebacks.extend(other.tracebacks)
        self.redactions.update(other.redactions)
        self.call_redactions.extend(other.call_redactions)
        self.span_redactions.extend(other.span_redactions)
        for key, ts in other.versions.items():
            if key not in self.versions or ts < self.versions[key]:
                self.versions[key] = ts
        self.failed += other.failed
        self.rejected += other.rejected

    def __len__(self) -> int:
        return len(self.calls)


@dataclass(frozen=True, slots=True)
class WriteResult:
    """How many rows a batch added to each table."""

    calls: int
    tracebacks: int
    redactions: int
    deploys: int


class StoreSink:
    """Commits batches to one store; remembers which versions already have a deploy row."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self._lock = threading.Lock()
        self._known: set[tuple[str, str, str | None]] = set(store.known_versions())
        # Hashes of the non-tool spans whose redaction counts were committed lately, oldest
        # first: a client retries an export whose answer it missed within seconds.
        self._counted_spans: dict[int, None] = {}

    def close(self) -> None:
        """Close the store (checkpointing a DuckDB file)."""
        with self._lock:
            self.store.close()

    def fault(self, *, probe: bool = True) -> StoreFault | None:
        """Why the store can take no more writes, or None (see `Store.fault`)."""
        return self.store.fault(probe=probe)

    def reopen(self) -> None:
        """Reopen the store after `StoreFault.INVALIDATED`; raises while it cannot be opened."""
        with self._lock:
            self.store.reopen()

    def write(self, batch: StoreBatch) -> WriteResult:
        """Commit the batch: calls first (the acknowledgement depends on them), then the rest.

        Redaction counts of calls that were stored before (a client's retry of an export
        that had been committed) are left out, so a replay adds nothing anywhere.  On a
        store that can (the DuckDB file), the whole batch is one transaction, so a failure
        part-way (a full disk) stores nothing and the client's retry stores it all.  A
        DuckLake commits each table on its own: should the counts fail after the calls
        were stored, the export is not acknowledged, and its retry, finding the calls
        stored, skips their counts.
        """
        with self._lock:
            new = [
                Deploy(service=s, version=v, environment=e, ts=ts, source="auto")
                for (s, v, e), ts in batch.versions.items()
                if (s, v, e) not in self._known
            ]
            counted = self._uncounted_spans(batch)
            result = self.store.atomically(lambda: self._write(batch, new))
            self._known.update((d.service, d.version, d.environment) for d in new)
            self._remember_counted(counted)
        return result

    def _uncounted_spans(self, batch: StoreBatch) -> list[int]:
        """Take out of `batch` the counts of non-tool spans already counted; the rest's keys.

        A span with no tool call leaves no row to recognise its replay by, so the sink
        remembers the last `MAX_COUNTED_SPANS` it counted (in this process: a retry after
        a restart counts twice).  Only spans with a redaction are remembered.
        """
        fresh: list[int] = []
        seen: set[int] = set()
        replayed: Counter[tuple[datetime, str, str, str]] = Counter()
        for processed in batch.span_redactions:
            key = hash(processed.span_key)
            if key in self._counted_spans or key in seen:
                _add_counts(replayed, processed, processed.redactions)
            else:
                seen.add(key)
                fresh.append(key)
        if replayed:
            batch.redactions -= replayed
        return fresh

    def _remember_counted(self, keys: list[int]) -> None:
        self._counted_spans.update(dict.fromkeys(keys))
        excess = len(self._counted_spans) - MAX_COUNTED_SPANS
        if excess > 0:
            for key in list(itertools.islice(self._counted_spans, excess)):
                del self._counted_spans[key]

    def _write(self, batch: StoreBatch, new_deploys: list[Deploy]) -> WriteResult:
        """Every append of one batch; may run twice (see `Store.atomically`)."""
        calls = self.store.append_tool_calls(batch.calls) if batch.calls else 0
        redactions = batch.redactions
        if calls < len(batch.calls) and batch.call_redactions:
            redactions = redactions - self._replayed_redactions(batch)
        counts = [
            RedactionCount(hour=hour, service=service, tool=tool, rule=rule, count=n)
            for (hour, service, tool, rule), n in redactions.items()
        ]
        stored_redactions = self.store.add_redactions(counts) if counts else 0
        tracebacks = self.store.append_tracebacks(batch.tracebacks) if batch.tracebacks else 0
        deploys = self.store.add_deploys(new_deploys) if new_deploys else 0
        return WriteResult(calls, tracebacks, stored_redactions, deploys)

    def _replayed_redactions(self, batch: StoreBatch) -> Counter[tuple[datetime, str, str, str]]:
        """The redaction counts of the batch's calls whose span another delivery stored.

        A stored row keeps the `received_at` of the export that stored it: per span, the one
        call carrying that value counts, and every other copy (an earlier delivery's retry,
        or a second delivery grouped into this batch) is a replay.
        """
        stored = self.store.received_at_of([call for call, _ in batch.call_redactions])
        replayed: Counter[tuple[datetime, str, str, str]] = Counter()
        counted: set[tuple[str, str]] = set()
        for call, counts in batch.call_redactions:
            key = (call.trace_id, call.span_id)
            if key not in counted and call.received_at in stored.get(key, ()):
                counted.add(key)
            else:
                _add_counts(replayed, call, counts)
        return replayed


def _add_counts(
    into: Counter[tuple[datetime, str, str, str]],
    origin: ToolCall | Processed,
    counts: Mapping[str, int],
) -> None:
    """Add one span's counts under (hour, service, tool, rule): how the table sums them.

    `origin` is the span's record, or for a span with none (not a tool call) what
    `Processed` says of it: the counts are filed under its service and `NON_TOOL`.
    """
    ts: datetime | None
    if isinstance(origin, ToolCall):
        ts, service, tool = origin.ts, origin.service, origin.tool
    else:
        ts, service, tool = origin.ts, origin.service or UNKNOWN_SERVICE, NON_TOOL
    hour = (ts or datetime.now(UTC)).replace(minute=0, second=0, microsecond=0)
    for rule, count in counts.items():
        into[(hour, service, tool, rule)] += count
