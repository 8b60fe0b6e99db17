"""The DuckDB store: bulk append, replay, validation, prune, migration and the file lock."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import duckdb
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from errscope.collector.errors import RecordError, RecordErrorKind, StoreError, StoreErrorKind
from errscope.collector.pipeline import Processed
from errscope.collector.record import (
    TOOL_CALLS_SCHEMA,
    Deploy,
    RedactionCount,
    TracebackSample,
    validate_tool_calls,
)
from errscope.collector.store import open_store
from errscope.collector.store.batch import StoreBatch, StoreSink
from errscope.collector.store.duckdb import DuckDBStore
from errscope.collector.store.migrations import SCHEMA_VERSION, migrations
from tests.factories import T0, held_by_another_process, make_call


def test_append_stores_every_column(memory_store: DuckDBStore) -> None:
    """A batch appended is read back column for column."""
    calls = [
        make_call(code="invalid_args", field="job_id", attempt=2, http_status=400) for _ in range(3)
    ]
    assert memory_store.append_tool_calls(calls) == 3
    rows = (
        memory_store.cursor()
        .execute("SELECT trace_id, code, field, attempt, http_status FROM tool_calls ORDER BY ts")
        .fetchall()
    )
    assert rows == [(c.trace_id, "invalid_args", "job_id", 2, 400) for c in calls]


def test_replayed_batch_is_not_counted_twice(file_store: DuckDBStore) -> None:
    """Sending the same batch again stores nothing new, and duplicates inside a batch collapse."""
    batch = [make_call() for _ in range(100)]
    assert file_store.append_tool_calls(batch) == 100
    assert file_store.append_tool_calls(batch) == 0
    assert file_store.append_tool_calls([*batch[:5], make_call(), batch[0]]) == 1
    assert file_store.count("tool_calls") == 101


def test_bad_record_fails_the_whole_batch(memory_store: DuckDBStore) -> None:
    """One invalid record refuses the batch before anything is written."""
    batch = [make_call(), make_call(tool="x" * 200)]
    with pytest.raises(RecordError) as caught:
        memory_store.append_tool_calls(batch)
    assert caught.value.kind is RecordErrorKind.TOO_LONG
    assert caught.value.field == "tool"
    assert memory_store.count("tool_calls") == 0


BAD_RECORDS = [
    pytest.param(
        {"tool": "get job; drop"}, RecordErrorKind.BAD_IDENTIFIER, "tool", id="tool-with-spaces"
    ),
    pytest.param({"tool": "t" * 129}, RecordErrorKind.TOO_LONG, "tool", id="tool-too-long"),
    pytest.param(
        {"field": "job_id=17"},
        RecordErrorKind.BAD_IDENTIFIER,
        "field",
        id="field-carries-value",
    ),
    pytest.param({"field": "a" * 129}, RecordErrorKind.TOO_LONG, "field", id="field-too-long"),
    pytest.param({"trace_id": "XYZ"}, RecordErrorKind.BAD_ID, "trace_id", id="trace-id-not-hex"),
    pytest.param({"span_id": "0" * 15}, RecordErrorKind.BAD_ID, "span_id", id="span-id-short"),
    pytest.param(
        {"code": "Not Found"}, RecordErrorKind.BAD_IDENTIFIER, "code", id="code-not-identifier"
    ),
    pytest.param(
        {"raw_code": "E42"}, RecordErrorKind.BAD_CODE, "raw_code", id="raw-code-without-unknown"
    ),
    pytest.param(
        {"code": "unknown", "raw_code": "has space"},
        RecordErrorKind.BAD_IDENTIFIER,
        "raw_code",
        id="raw-code-not-identifier",
    ),
    pytest.param({"call_id": "call 1"}, RecordErrorKind.BAD_ID, "call_id", id="call-id-with-space"),
    pytest.param({"session_id": ""}, RecordErrorKind.BAD_ID, "session_id", id="session-id-empty"),
    pytest.param(
        {"correlation_id": "run-\u00e9"},
        RecordErrorKind.BAD_ID,
        "correlation_id",
        id="correlation-id-non-ascii",
    ),
    pytest.param(
        {"trace_id": "0" * 31 + "\u00e9"},
        RecordErrorKind.BAD_ID,
        "trace_id",
        id="trace-id-32-chars",
    ),
    pytest.param(
        {"span_id": "0" * 15 + "A"}, RecordErrorKind.BAD_ID, "span_id", id="span-id-upper-case"
    ),
    pytest.param(
        {"service": "a\nb"}, RecordErrorKind.BAD_VALUE, "service", id="service-control-char"
    ),
    pytest.param(
        {"duration_ms": -1.0}, RecordErrorKind.BAD_VALUE, "duration_ms", id="negative-duration"
    ),
    pytest.param(
        {"field": "items[\u0663]"}, RecordErrorKind.BAD_IDENTIFIER, "field", id="field-arabic-digit"
    ),
]


@pytest.mark.parametrize(("override", "kind", "field"), BAD_RECORDS)
def test_record_validation(override: dict[str, object], kind: RecordErrorKind, field: str) -> None:
    """Over-long or non-identifier values are refused with the field named, never truncated."""
    with pytest.raises(RecordError) as caught:
        make_call(**override).validate()
    assert (caught.value.kind, caught.value.field) == (kind, field)


@pytest.mark.parametrize(
    "override",
    [
        pytest.param({"tool": "github/create_issue"}, id="tool-with-slash"),
        pytest.param({"tool": "fs:read-file"}, id="tool-with-colon-dash"),
        pytest.param({"field": "items[0].id"}, id="field-path"),
        pytest.param({"code": "unknown", "raw_code": "E_QUOTA.v2"}, id="safe-raw-code"),
        pytest.param({"version": None, "environment": None}, id="no-version"),
    ],
)
def test_record_validation_accepts(override: dict[str, object]) -> None:
    """Realistic names pass validation."""
    make_call(**override).validate()


@pytest.mark.parametrize(("override", "kind", "field"), BAD_RECORDS)
def test_batch_validation_agrees_with_one_record(
    memory_store: DuckDBStore, override: dict[str, object], kind: RecordErrorKind, field: str
) -> None:
    """A batch, given as records or as an Arrow table, is refused for the same kind and field."""
    calls = [make_call(), make_call(**override), make_call()]
    table = pa.Table.from_pylist([asdict(call) for call in calls], schema=TOOL_CALLS_SCHEMA)
    for batch in (calls, table):
        with pytest.raises(RecordError) as caught:
            memory_store.append_tool_calls(batch)
        assert (caught.value.kind, caught.value.field) == (kind, field)
    assert memory_store.count("tool_calls") == 0


_ID_TEXT = st.text(
    alphabet=st.sampled_from("0af9AZz_.:/+=@- \"'\n\u00e9\u0663"), min_size=0, max_size=40
)


@settings(max_examples=200, deadline=None)
@given(
    ids=st.lists(
        st.tuples(
            st.one_of(st.none(), _ID_TEXT),
            st.one_of(_ID_TEXT, st.text(alphabet="0123456789abcdef", min_size=16, max_size=16)),
        ),
        min_size=1,
        max_size=6,
    ),
    start=st.integers(min_value=0, max_value=2),
)
def test_batch_id_checks_agree_with_the_patterns(
    ids: list[tuple[str | None, str]], start: int
) -> None:
    """The batch check on raw bytes decides every id exactly as the one-record patterns do.

    Batches are sliced and split into chunks, so values sit at an offset in their buffers.
    """
    calls = [make_call(correlation_id=a, span_id=b) for a, b in [("x", "0" * 16)] * 2 + ids]
    table = pa.Table.from_pylist([asdict(call) for call in calls], schema=TOOL_CALLS_SCHEMA)
    cut = 2 + len(ids) // 2
    table = pa.concat_tables([table.slice(start, cut - start), table.slice(cut)])
    refused: set[tuple[RecordErrorKind, str | None]] = set()
    for call in calls[start:]:
        try:
            call.validate()
        except RecordError as exc:
            refused.add((exc.kind, exc.field))
    if not refused:
        validate_tool_calls(table)
        return
    with pytest.raises(RecordError) as caught:
        validate_tool_calls(table)
    # The batch names the first rule any row breaks: that row's own first error.
    assert (caught.value.kind, caught.value.field) in refused


def test_other_tables(memory_store: DuckDBStore) -> None:
    """Deploys are kept once per (service, version, environment, source); the rest append."""
    deploy = Deploy(
        service="billing-agent", version="1.5.0", environment="prod", ts=T0, source="auto"
    )
    assert memory_store.add_deploys([deploy, replace(deploy, ts=T0 + timedelta(minutes=1))]) == 1
    assert memory_store.add_deploys([deploy]) == 0
    assert memory_store.add_deploys([replace(deploy, source="cli")]) == 1
    assert memory_store.known_versions() == {("billing-agent", "1.5.0", "prod")}
    sample = TracebackSample(
        ts=T0,
        service="s",
        tool="get_job",
        trace_id="a" * 32,
        span_id="b" * 16,
        exception_type="KeyError",
        fingerprint="f00d",
        text="KeyError\n  at handler (tools.py:3)",
    )
    assert memory_store.append_tracebacks([sample, sample]) == 1
    assert memory_store.append_tracebacks([sample]) == 0
    counts = [RedactionCount(hour=T0, service="s", tool="get_job", rule="github-pat", count=3)]
    assert memory_store.add_redactions(counts) == 1
    assert memory_store.count("redactions") == 1


def test_prune_by_age(memory_store: DuckDBStore) -> None:
    """Prune deletes rows older than the cut-off and keeps the rest and all deploys."""
    old = [make_call(ts=T0 - timedelta(days=40)) for _ in range(5)]
    new = [make_call(ts=T0 - timedelta(days=1)) for _ in range(3)]
    memory_store.append_tool_calls(old + new)
    memory_store.add_deploys([Deploy(service="s", version="1", ts=T0 - timedelta(days=90))])
    report = memory_store.prune(timedelta(days=30), now=T0)
    assert report.deleted["tool_calls"] == 5
    assert memory_store.count("tool_calls") == 3
    assert memory_store.count("deploys") == 1
    with pytest.raises(StoreError):
        memory_store.prune(timedelta(0))


def test_migration_from_previous_version(tmp_path: Path) -> None:
    """A database at schema version 1 is migrated forward with its rows kept."""
    path = tmp_path / "old.duckdb"
    con = duckdb.connect(str(path))
    con.execute(migrations()[0].sql)
    con.execute(
        "CREATE TABLE errscope_schema (version INTEGER PRIMARY KEY, name VARCHAR NOT NULL, "
        "applied_at TIMESTAMPTZ NOT NULL)"
    )
    con.execute("INSERT INTO errscope_schema VALUES (1, '0001_initial.sql', now())")
    con.execute(
        "INSERT INTO tool_calls (ts, service, tool, code, trace_id, span_id) "
        "VALUES (TIMESTAMPTZ '2026-11-01 10:00:00+00', 's', 'get_job', 'ok', $t, $s)",
        {"t": "c" * 32, "s": "d" * 16},
    )
    con.close()
    with pytest.raises(StoreError) as caught:  # read-only cannot migrate: say so, up front
        DuckDBStore(path, read_only=True)
    assert caught.value.kind is StoreErrorKind.SCHEMA_TOO_OLD
    assert caught.value.hint is not None
    with DuckDBStore(path) as store:
        assert store.schema_version() == SCHEMA_VERSION == 4
        row = store.cursor().execute("SELECT received_at, ts FROM tool_calls").fetchone()
        assert row is not None
        assert row[0] == row[1]
        assert store.append_tool_calls([make_call()]) == 1


def test_newer_schema_is_refused(tmp_path: Path) -> None:
    """A database written by a newer errscope is refused rather than misread."""
    path = tmp_path / "new.duckdb"
    with DuckDBStore(path) as store:
        store.cursor().execute("INSERT INTO errscope_schema VALUES (99, 'future.sql', now())")
    with pytest.raises(StoreError) as caught:
        DuckDBStore(path)
    assert caught.value.kind is StoreErrorKind.SCHEMA_TOO_NEW


def test_reopen_is_idempotent(tmp_path: Path) -> None:
    """Opening a store twice in a row migrates nothing and keeps the data."""
    path = tmp_path / "s.duckdb"
    with DuckDBStore(path) as store:
        store.append_tool_calls([make_call()])
    with DuckDBStore(path) as store:
        assert store.count("tool_calls") == 1
    with DuckDBStore(path, read_only=True) as store:
        assert store.count("tool_calls") == 1


def test_file_held_by_another_process_is_locked(tmp_path: Path) -> None:
    """A file held by another process gives a LOCKED error that says how to read instead."""
    path = tmp_path / "held.duckdb"
    DuckDBStore(path).close()
    with held_by_another_process(path):
        for read_only in (False, True):
            with pytest.raises(StoreError) as caught:
                DuckDBStore(path, read_only=read_only)
            assert caught.value.kind is StoreErrorKind.LOCKED
            assert caught.value.hint is not None
            assert "query API" in caught.value.hint


def test_a_file_that_is_not_a_store_is_unreadable_whatever_its_path(tmp_path: Path) -> None:
    """A non-DuckDB file under a path holding the word "lock" is not reported as locked."""
    path = tmp_path / "blocklist" / "clock.duckdb"
    path.parent.mkdir()
    path.write_text("not a database, just some text that is long enough to be a header")
    with pytest.raises(StoreError) as caught:
        DuckDBStore(path)
    assert caught.value.kind is StoreErrorKind.UNREADABLE


def test_received_at_is_kept_apart_from_ts(memory_store: DuckDBStore) -> None:
    """A call whose client clock is an hour off keeps both times, so skew is visible."""
    skewed = make_call(ts=T0 - timedelta(hours=1), received_at=T0)
    memory_store.append_tool_calls([skewed])
    row = memory_store.cursor().execute("SELECT ts, received_at FROM tool_calls").fetchone()
    assert row is not None
    assert row[1] - row[0] == timedelta(hours=1)
    assert row[1].astimezone(UTC) == datetime(2026, 11, 30, 9, 0, tzinfo=UTC)


def test_memory_limit_bounds_duckdb(tmp_path: Path) -> None:
    """A store opened with a memory limit hands it to DuckDB; a malformed one is refused."""
    with open_store(str(tmp_path / "s.duckdb"), memory_limit="64MB") as store:
        setting = store.cursor().execute("SELECT current_setting('memory_limit')").fetchone()
    assert setting == ("61.0 MiB",)
    for bad in ("lots", "64", "64MB'; SELECT 1; --", ""):
        with pytest.raises(StoreError) as caught:
            DuckDBStore(tmp_path / "t.duckdb", memory_limit=bad)
        assert (caught.value.kind, caught.value.field) == (
            StoreErrorKind.BAD_SETTING,
            "memory_limit",
        )


class _CountsFailOnce(DuckDBStore):
    """A DuckDB file whose next redaction insert fails, as on a disk that just filled."""

    fail_counts = True

    def add_redactions(self, counts: Iterable[RedactionCount]) -> int:
        if self.fail_counts:
            self.fail_counts = False
            raise StoreError(StoreErrorKind.WRITE_FAILED, "write failed (IOException)")
        return super().add_redactions(counts)


def _sums(store: DuckDBStore) -> tuple[int, int, int]:
    con = store.cursor()
    calls = con.execute("SELECT count(*) FROM tool_calls").fetchone()
    counts = con.execute("SELECT coalesce(sum(count), 0) FROM redactions").fetchone()
    tracebacks = con.execute("SELECT count(*) FROM tracebacks").fetchone()
    assert calls is not None
    assert counts is not None
    assert tracebacks is not None
    return int(calls[0]), int(counts[0]), int(tracebacks[0])


@pytest.mark.parametrize("replayed", [False, True], ids=["fresh", "with-a-replayed-span"])
def test_a_batch_failing_part_way_stores_nothing_and_its_retry_stores_it_once(
    tmp_path: Path, replayed: bool
) -> None:
    """Calls, counts and tracebacks of one batch commit together: a failure after the calls
    leaves nothing stored (no counts lost to the retry), and the retry stores each once."""
    store = _CountsFailOnce(tmp_path / "s.duckdb")
    sink = StoreSink(store)
    earlier = make_call()
    if replayed:  # a span of this export that an earlier delivery stored
        store.append_tool_calls([earlier])
    calls = [make_call() for _ in range(3)] + ([earlier] if replayed else [])

    def delivery(n: int) -> StoreBatch:
        """The export as the sidecar's n-th receipt of it builds it."""
        batch = StoreBatch()
        for original in calls:
            call = replace(original, received_at=original.received_at + timedelta(minutes=n))
            sample = TracebackSample(
                ts=call.ts,
                service=call.service,
                tool=call.tool,
                trace_id=call.trace_id,
                span_id=call.span_id,
                exception_type="KeyError",
                fingerprint="fp",
                text="Traceback: KeyError",
            )
            batch.add(Processed(record=call, traceback=sample, redactions={"github-pat": 2}))
        return batch

    before = _sums(store)
    with pytest.raises(StoreError):
        sink.write(delivery(1))
    assert _sums(store) == before
    result = sink.write(delivery(2))
    assert (result.calls, result.tracebacks) == (3, len(calls))
    # Three new calls with two masked values each; the replayed span's were counted before.
    after = (before[0] + 3, 6, len(calls))
    assert _sums(store) == after
    assert sink.write(delivery(3)).calls == 0  # the client retries once more
    assert _sums(store) == after
    store.close()


def test_a_first_start_killed_before_its_first_migration_opens_later(tmp_path: Path) -> None:
    """A first start killed between creating `errscope_schema` and migration 1 left only
    that empty table; it is errscope's own, so the next open migrates instead of refusing
    the file as someone else's."""
    import duckdb

    path = tmp_path / "half.duckdb"
    with duckdb.connect(str(path)) as con:
        con.execute(
            "CREATE TABLE errscope_schema (version INTEGER PRIMARY KEY, name VARCHAR NOT NULL, "
            "applied_at TIMESTAMPTZ NOT NULL)"
        )
    with DuckDBStore(path) as store:
        assert store.schema_version() == SCHEMA_VERSION
