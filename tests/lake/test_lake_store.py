"""DuckLakeStore keeps DuckDBStore's promises: same methods, same results, on a real lake."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from errscope.collector.errors import StoreError, StoreErrorKind
from errscope.collector.pipeline import Processed
from errscope.collector.record import (
    Deploy,
    RedactionCount,
    TracebackSample,
    tool_calls_to_arrow,
)
from errscope.collector.store.batch import StoreBatch, StoreSink
from errscope.collector.store.duckdb import DuckDBStore
from errscope.collector.store.lake import DuckLakeStore
from errscope.collector.store.migrations import SCHEMA_VERSION
from errscope.queries.runner import run_query
from tests.factories import T0, make_call

pytestmark = pytest.mark.postgres

AnyStore = DuckDBStore | DuckLakeStore


def _both(lake: DuckLakeStore, action: Callable[[AnyStore], object]) -> tuple[object, object]:
    """The result of `action` on the lake and on a fresh in-memory DuckDB store."""
    with DuckDBStore(":memory:") as file_store:
        return action(lake), action(file_store)


@pytest.mark.parametrize(
    ("batches", "expected"),
    [
        pytest.param([[0, 1, 2]], [3], id="fresh-batch"),
        pytest.param([[0, 1, 2], [0, 1, 2]], [3, 0], id="full-replay"),
        pytest.param([[0, 1], [1, 2, 3]], [2, 2], id="partial-replay"),
        # The same span twice in one batch is stored once, as the primary key does.
        pytest.param([[0, 0, 1]], [2], id="duplicate-inside-batch"),
    ],
)
def test_append_tool_calls_counts_new_rows_like_the_file_store(
    lake_store: DuckLakeStore, batches: list[list[int]], expected: list[int]
) -> None:
    """append_tool_calls returns the same new-row counts on the lake as on a DuckDB file."""
    calls = [make_call() for _ in range(4)]

    def run(store: AnyStore) -> tuple[list[int], int]:
        counts = [store.append_tool_calls([calls[i] for i in batch]) for batch in batches]
        return counts, store.count("tool_calls")

    on_lake, on_file = _both(lake_store, run)
    assert on_lake == on_file == (expected, sum(expected))


@pytest.mark.parametrize(
    ("batches", "expected"),
    [
        pytest.param([[(0, 1), (1, 1)]], [2], id="fresh-batch"),
        # A client retrying an export that was committed: the same spans, received later.
        pytest.param([[(0, 1), (1, 1)], [(0, 2), (1, 2)]], [2, 2], id="full-replay"),
        pytest.param([[(0, 1), (1, 1)], [(1, 2), (2, 2)]], [2, 3], id="partial-replay"),
        # Two deliveries of one span grouped into the same commit.
        pytest.param([[(0, 1), (0, 2), (1, 1)]], [2], id="replay-inside-batch"),
    ],
)
def test_replayed_calls_add_no_redaction_counts(
    lake_store: DuckLakeStore, batches: list[list[tuple[int, int]]], expected: list[int]
) -> None:
    """A replayed span's redaction counts are stored once, like the span (lake and file)."""
    calls = [make_call() for _ in range(3)]

    def run(store: AnyStore) -> list[int]:
        sink = StoreSink(store)
        totals = []
        for batch in batches:
            pending = StoreBatch()
            for index, delivery in batch:
                call = replace(calls[index], received_at=T0 + timedelta(hours=delivery))
                pending.add(Processed(record=call, redactions={"github-pat": 1}))
            sink.write(pending)
            row = store.cursor().execute("SELECT sum(count) FROM redactions").fetchone()
            totals.append(int(row[0]) if row and row[0] is not None else 0)
        return totals

    on_lake, on_file = _both(lake_store, run)
    assert on_lake == on_file == expected


def test_append_tool_calls_takes_arrow_tables(lake_store: DuckLakeStore) -> None:
    """An Arrow batch (the sidecar's form) is stored and de-duplicated like records."""
    table = tool_calls_to_arrow([make_call() for _ in range(5)])
    assert [lake_store.append_tool_calls(table), lake_store.append_tool_calls(table)] == [5, 0]


def test_side_tables_deduplicate_like_the_file_store(lake_store: DuckLakeStore) -> None:
    """Tracebacks, deploys and redaction counts behave as on the file store."""
    sample = TracebackSample(
        ts=T0,
        service="billing-agent",
        tool="get_job",
        trace_id="a" * 32,
        span_id="b" * 16,
        exception_type="KeyError",
        fingerprint="fp1",
        text="Traceback: KeyError",
    )
    deploy = Deploy(service="billing-agent", version="1.4.0", ts=T0, environment="prod")
    later = Deploy(service="billing-agent", version="1.4.0", ts=T0 + timedelta(hours=1))
    redaction = RedactionCount(
        hour=T0, service="billing-agent", tool="get_job", rule="aws", count=2
    )

    def run(store: AnyStore) -> tuple[object, ...]:
        return (
            store.append_tracebacks([sample, sample]),
            store.append_tracebacks([sample]),
            store.add_deploys([deploy, later]),
            store.add_deploys([deploy]),
            store.add_redactions([redaction]),
            store.add_redactions([redaction]),
            sorted(store.known_versions(), key=str),
            [store.count(t) for t in ("tracebacks", "deploys", "redactions")],
        )

    on_lake, on_file = _both(lake_store, run)
    assert on_lake == on_file


def test_prune_removes_old_rows_like_the_file_store(lake_store: DuckLakeStore) -> None:
    """Retention deletes the same rows and reports the same counts on both stores."""
    old = [make_call(ts=T0 - timedelta(days=40)) for _ in range(3)]
    new = [make_call(ts=T0) for _ in range(2)]

    def run(store: AnyStore) -> tuple[object, int]:
        store.append_tool_calls(old + new)
        report = store.prune(timedelta(days=30), now=T0)
        return report.deleted, store.count("tool_calls")

    on_lake, on_file = _both(lake_store, run)
    deleted = {"tool_calls": 3, "tool_call_layers": 0, "tracebacks": 0, "redactions": 0}
    assert on_lake == on_file == (deleted, 2)


@pytest.mark.parametrize(
    ("name", "params"),
    [
        pytest.param(
            "error_rates",
            {"since": "2026-11-30T08:00:00Z", "until": "2026-11-30T12:00:00Z", "bucket_s": 60},
            id="error_rates",
        ),
        pytest.param("calls_by_correlation", {"id": "sess-7"}, id="calls_by_correlation"),
    ],
)
def test_named_queries_answer_the_same_on_the_lake(
    lake_store: DuckLakeStore, name: str, params: dict[str, object]
) -> None:
    """The named queries run unchanged on the lake's cursor and return the file store's rows."""
    codes = ["ok", "ok", "invalid_args", "not_found"]
    calls = [
        make_call(
            ts=T0 + timedelta(seconds=17 * i),
            code=codes[i % 4],
            field="job_id" if codes[i % 4] == "invalid_args" else None,
            tool=f"tool_{i % 3}",
            session_id=f"sess-{i % 9}",
        )
        for i in range(300)
    ]

    def run(store: AnyStore) -> list[dict[str, object]]:
        store.append_tool_calls(calls[:150])
        store.append_tool_calls(calls[100:])
        rows: list[dict[str, object]] = run_query(store.cursor(), name, params).to_pylist()
        return rows

    on_lake, on_file = _both(lake_store, run)
    assert on_lake == on_file
    assert on_lake


def test_schema_and_read_only(lake_store: DuckLakeStore, lake_url: str) -> None:
    """The lake is migrated to the current version; a read-only open reads and refuses writes."""
    lake_store.append_tool_calls([make_call()])
    assert lake_store.schema_version() == SCHEMA_VERSION
    with DuckLakeStore(lake_url, read_only=True) as reader:
        assert reader.count("tool_calls") == 1
        with pytest.raises(StoreError) as caught:
            reader.append_tool_calls([make_call()])
        assert caught.value.kind is StoreErrorKind.WRITE_FAILED


def test_extensions_load_without_network(lake_store: DuckLakeStore) -> None:
    """Both extensions are loaded, from the local install, the network or the wheels, and
    httpfs (for an object-store data path) the same way."""
    extensions = dict(lake_store.stats.extensions)
    assert extensions.pop("httpfs") in {"installed", "network", "wheel"}
    assert set(extensions) == {"ducklake", "postgres_scanner"}
    assert set(extensions.values()) <= {"installed", "network", "wheel"}


@pytest.mark.parametrize(
    ("mutate", "kind", "field"),
    [
        # A catalog without a lake needs to be told where the data files go.
        pytest.param(lambda url: url, StoreErrorKind.BAD_URL, "data_path", id="no-data-path"),
        pytest.param(
            lambda url: url.replace("password=", "password=wrong"),
            StoreErrorKind.UNREADABLE,
            None,
            id="bad-password",
        ),
    ],
)
def test_open_failures_are_typed_and_masked(
    lake_url: str, mutate: Callable[[str], str], kind: StoreErrorKind, field: str | None
) -> None:
    """Attach failures become StoreError kinds whose text never carries the password."""
    with pytest.raises(StoreError) as caught:
        DuckLakeStore(mutate(lake_url))
    assert (caught.value.kind, caught.value.field) == (kind, field)
    assert "errscope-test-only" not in caught.value.describe()


def _parquet_files(folder: Path) -> int:
    return sum(1 for _ in folder.rglob("*.parquet"))


def test_maintain_merges_small_files_and_keeps_rows(
    lake_store: DuckLakeStore, data_path: Path
) -> None:
    """Many small commits are merged into few files; rows and answers are unchanged."""
    for _ in range(12):
        lake_store.append_tool_calls([make_call() for _ in range(20)])
    before = run_query(lake_store.cursor(), "error_rates", {"since": "2026-01-01T00:00:00Z"})
    assert lake_store.maintain().data_files == 1
    after = run_query(lake_store.cursor(), "error_rates", {"since": "2026-01-01T00:00:00Z"})
    assert lake_store.count("tool_calls") == 240
    assert after.to_pylist() == before.to_pylist()


def test_prune_then_maintain_deletes_files(lake_store: DuckLakeStore, data_path: Path) -> None:
    """Retention plus snapshot expiry removes the pruned rows' files from storage."""
    for _ in range(4):
        lake_store.append_tool_calls([make_call(ts=T0 - timedelta(days=60)) for _ in range(20)])
    lake_store.append_tool_calls([make_call(ts=T0) for _ in range(5)])
    files_before = _parquet_files(data_path)
    lake_store.prune(timedelta(days=30), now=T0)
    report = lake_store.maintain(keep_snapshots=timedelta(0))
    assert report.deleted_files > 0
    assert _parquet_files(data_path) < files_before
    assert lake_store.count("tool_calls") == 5


def test_maintain_removes_copies_a_crashed_writer_left(lake_store: DuckLakeStore) -> None:
    """A copy stored without the settle step (a writer died) is removed, the first kept."""
    calls = [make_call() for _ in range(3)]
    lake_store.append_tool_calls(calls)
    cur = lake_store.cursor()
    cur.register("again", tool_calls_to_arrow(calls[:2]))
    cur.execute("INSERT INTO tool_calls BY NAME SELECT * FROM again")  # bypasses de-dup
    assert lake_store.count("tool_calls") == 5
    now = datetime.now(UTC) + timedelta(minutes=1)
    report = lake_store.maintain(
        settle_margin=timedelta(0), dedupe_window=timedelta(days=3650), now=now
    )
    assert report.duplicates_removed == 2
    assert lake_store.count("tool_calls") == 3


def test_prune_and_maintain_a_lake_from_the_cli(lake_store: DuckLakeStore, lake_url: str) -> None:
    """`errscope prune --db ducklake:...` applies retention to a lake; `errscope maintain`
    compacts it (docs/scale-out.md); both print what they did and exit 0."""
    import os
    import subprocess
    import sys

    lake_store.append_tool_calls([make_call(ts=T0 - timedelta(days=40)), make_call(ts=T0)])
    lake_store.append_tool_calls([make_call(ts=T0 + timedelta(seconds=1))])
    env = {**os.environ, "ERRSCOPE_DUCKDB_EXTENSIONS": "wheel"}

    def errscope(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "errscope.collector.cli", *args],
            capture_output=True,
            text=True,
            env=env,
            timeout=180,
            check=False,
        )

    pruned = errscope("prune", "--db", lake_url, "--older-than", "30d")
    assert pruned.returncode == 0, pruned.stderr
    assert "tool_calls 1" in pruned.stdout
    maintained = errscope("maintain", "--db", lake_url, "--keep-snapshots", "0s")
    assert maintained.returncode == 0, maintained.stderr
    assert maintained.stdout.startswith("maintained: ")
    assert lake_store.count("tool_calls") == 2
    assert "password" not in pruned.stdout + maintained.stdout + maintained.stderr
    refused = errscope("maintain", "--db", "/tmp/some.duckdb")
    assert refused.returncode == 2
    assert "a DuckDB file needs none" in refused.stderr
