"""DuckLake scale-out: spans/s for 1, 2 and 3 writer processes on one lake, beside a file.

Each writer is its own OS process with its own `DuckLakeStore` (as each sidecar would be)
appending batches of 5,000 spans through `append_tool_calls` — validation, the anti-join
de-duplication and one commit per batch included — to one lake whose catalog is a fresh
PostgreSQL database on this machine and whose data is a local directory.  Beside them:
one writer on a DuckDB file store.  After each run, the latency of the `error_rates`
named query (median of 5), and on the lake again after `maintain()` merged the files.

    .venv/bin/python bench/lake.py [--batches 20] [--rows 5000]

Needs the local PostgreSQL (`make services`); creates and drops its databases with psql
as the postgres OS user (root) or through ERRSCOPE_TEST_PG_ADMIN.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import multiprocessing.synchronize
import os
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from errscope.collector.record import ToolCall, tool_calls_to_arrow  # noqa: E402
from errscope.collector.store.duckdb import DuckDBStore  # noqa: E402
from errscope.collector.store.lake import DuckLakeStore  # noqa: E402
from errscope.queries.runner import run_query  # noqa: E402
from tests.lake.conftest import PG_ROLE, admin_sql, conninfo  # noqa: E402

CODES = ["ok"] * 8 + ["invalid_args", "not_found"]
T0 = datetime.now(UTC).replace(microsecond=0) - timedelta(hours=2)

AnyStore = DuckDBStore | DuckLakeStore


def make_batch(writer: int, index: int, rows: int) -> object:
    """One Arrow batch of realistic spans, ids unique to (writer, index)."""
    calls = []
    for j in range(rows):
        n = index * rows + j
        code = CODES[n % 10]
        calls.append(
            ToolCall(
                ts=T0 + timedelta(microseconds=n * 250 + writer),
                received_at=T0 + timedelta(microseconds=n * 250 + writer + 3000),
                service=f"agent-{n % 5}",
                version="1.4.0",
                environment="prod",
                tool=f"tool_{n % 20}",
                code=code,
                field="job_id" if code == "invalid_args" else None,
                trace_id=f"{writer:08x}{n:024x}",
                span_id=f"{n * 7919 % (1 << 63):016x}",
                call_id=f"call_{n:x}",
                session_id=f"sess-{n // 50}",
                correlation_id=f"corr-{writer}-{n}",
                duration_ms=12.5,
                attempt=1,
                convention="genai",
                source="status",
            )
        )
    return tool_calls_to_arrow(calls)


def _open(url: str, data_path: str | None) -> AnyStore:
    if url.startswith("ducklake:"):
        return DuckLakeStore(url, data_path=data_path)
    return DuckDBStore(url)


def writer_main(
    *,
    url: str,
    data_path: str | None,
    writer: int,
    batches: int,
    rows: int,
    barrier: multiprocessing.synchronize.Barrier,
    out: mp.Queue,  # type: ignore[type-arg]
) -> None:
    """One writer process: prepare batches, wait for the others, append, report timings."""
    prepared = [make_batch(writer, i, rows) for i in range(batches)]
    store = _open(url, data_path)
    barrier.wait()
    start = time.time()
    stored = sum(store.append_tool_calls(batch) for batch in prepared)  # type: ignore[arg-type]
    end = time.time()
    conflicts = getattr(getattr(store, "stats", None), "conflicts_retried", 0)
    store.close()
    out.put((writer, start, end, stored, conflicts))


def run_writers(url: str, data_path: str | None, writers: int, batches: int, rows: int) -> dict:
    """Run `writers` processes at once; return spans/s over the whole run and counters."""
    ctx = mp.get_context("spawn")
    barrier = ctx.Barrier(writers)
    out: mp.Queue = ctx.Queue()  # type: ignore[type-arg]
    procs = [
        ctx.Process(
            target=writer_main,
            kwargs={
                "url": url,
                "data_path": data_path,
                "writer": w,
                "batches": batches,
                "rows": rows,
                "barrier": barrier,
                "out": out,
            },
        )
        for w in range(writers)
    ]
    for proc in procs:
        proc.start()
    results = [out.get(timeout=600) for _ in procs]
    for proc in procs:
        proc.join()
        assert proc.exitcode == 0
    start = min(r[1] for r in results)
    end = max(r[2] for r in results)
    stored = sum(r[3] for r in results)
    assert stored == writers * batches * rows
    return {
        "spans_per_s": stored / (end - start),
        "stored": stored,
        "conflicts": sum(r[4] for r in results),
    }


def query_ms(store: AnyStore) -> float:
    """Median latency of the error_rates named query over the whole data set, in ms."""
    params = {"since": T0 - timedelta(hours=1), "until": T0 + timedelta(hours=3)}
    timings = []
    for _ in range(5):
        start = time.perf_counter()
        table = run_query(store.cursor(), "error_rates", params)
        timings.append((time.perf_counter() - start) * 1000)
        assert table.num_rows > 0
    return statistics.median(timings)


def with_lake(action: Callable[[str], dict]) -> dict:
    """Run `action` on the URL of a fresh lake catalog database; drop it afterwards."""
    admin_sql(
        "DO $$BEGIN IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = "
        f"'{PG_ROLE}') THEN CREATE ROLE {PG_ROLE} LOGIN PASSWORD 'errscope-test-only'; "
        "END IF; END$$"
    )
    name = f"errscope_bench_{uuid.uuid4().hex[:10]}"
    admin_sql(f"CREATE DATABASE {name} OWNER {PG_ROLE}")
    try:
        return action(f"ducklake:postgres:{conninfo(name)}")
    finally:
        admin_sql(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


def main() -> None:
    """Run every configuration and print one table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", type=int, default=20, help="batches per writer")
    parser.add_argument("--rows", type=int, default=5000, help="spans per batch")
    args = parser.parse_args()
    os.environ.setdefault("ERRSCOPE_DUCKDB_EXTENSIONS", "wheel")
    rows: list[tuple[str, dict]] = []
    with tempfile.TemporaryDirectory() as tmp:
        file_url = str(Path(tmp) / "bench.duckdb")
        result = run_writers(file_url, None, 1, args.batches, args.rows)
        with DuckDBStore(file_url) as store:
            result["query_ms"] = query_ms(store)
        rows.append(("DuckDB file, 1 writer", result))
        for writers in (1, 2, 3):
            data_path = str(Path(tmp) / f"lake-{writers}")

            def lake_run(url: str, writers: int = writers, data_path: str = data_path) -> dict:
                out = run_writers(url, data_path, writers, args.batches, args.rows)
                with DuckLakeStore(url) as store:
                    out["query_ms"] = query_ms(store)
                    out["files"] = sum(1 for _ in Path(data_path).rglob("*.parquet"))
                    store.maintain()
                    out["query_ms_merged"] = query_ms(store)
                return out

            rows.append((f"DuckLake, {writers} writer(s)", with_lake(lake_run)))
    total = args.batches * args.rows
    print(
        f"lake: {total:,} spans per writer in batches of {args.rows:,}; "
        f"PostgreSQL 15 catalog on this machine, local data path, {os.cpu_count()} cores"
    )
    header = f"{'store':<24}{'spans/s':>10}{'conflicts':>11}{'files':>7}"
    print(header + f"{'error_rates ms':>16}{'after maintain':>16}")
    for label, r in rows:
        merged = r.get("query_ms_merged")
        print(
            f"{label:<24}{r['spans_per_s']:>10,.0f}{r['conflicts']:>11}{r.get('files', '-'):>7}"
            f"{r['query_ms']:>16.1f}{(f'{merged:.1f}' if merged is not None else '-'):>16}"
        )


if __name__ == "__main__":
    main()
