"""One writer process for the concurrency tests: appends batches to a lake, reports acks.

    python tests/lake/lake_writer.py URL DATA_PATH --writer W --batches N --rows R \
        --shared S [--t0 ISO] [--maintain]

Writer W appends N batches of its own R rows, interleaved with S batches that every
writer appends too (in an order rotated by W, so writers store the same spans at the
same moment) and with a replay of its own previous batch.  It prints one JSON line:
the sum of the new-row counts the store acknowledged, and the store's counters.
With --maintain it runs `maintain()` in a loop instead, until a stop file appears.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from errscope.collector.record import ToolCall
from errscope.collector.store.lake import DuckLakeStore

# Every writer must build identical rows for a shared batch, so the base time is an
# argument (--t0), never each process's own clock.
DEFAULT_T0 = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)
CODES = ("ok", "ok", "ok", "invalid_args", "not_found")


def batch(owner: int, index: int, rows: int, t0: datetime = DEFAULT_T0) -> list[ToolCall]:
    """Rows whose ids and times depend only on (owner, index): identical in every writer."""
    out = []
    for j in range(rows):
        n = index * rows + j
        code = CODES[n % len(CODES)]
        out.append(
            ToolCall(
                ts=t0 + timedelta(milliseconds=n * 7 + owner),
                received_at=t0 + timedelta(milliseconds=n * 7 + owner + 3),
                service=f"agent-{owner % 3}",
                version="1.0.0",
                environment="prod",
                tool=f"tool_{n % 7}",
                code=code,
                field="job_id" if code == "invalid_args" else None,
                trace_id=f"{owner:08x}{n:024x}",
                span_id=f"{index:08x}{j:08x}",
                correlation_id=f"corr-{owner}-{n}",
                duration_ms=5.0,
                convention="genai",
                source="status",
            )
        )
    return out


def write(args: argparse.Namespace) -> dict[str, object]:
    """Append own and shared batches; return acknowledged new rows and counters."""
    shared_owner = 0xFFFF
    plan: list[tuple[int, int]] = []
    shared = [(args.writer + k) % args.shared for k in range(args.shared)] if args.shared else []
    for i in range(args.batches):
        plan.append((args.writer + 1, i))
        if shared:
            plan.append((shared_owner, shared.pop(0)))
        if i % 3 == 2:
            plan.append((args.writer + 1, i))  # a replay of our own batch
    plan.extend((shared_owner, s) for s in shared)
    acked = 0
    with DuckLakeStore(args.url, data_path=args.data_path) as store:
        start = time.perf_counter()
        for owner, index in plan:
            acked += store.append_tool_calls(batch(owner, index, args.rows, args.t0))
        elapsed = time.perf_counter() - start
        return {
            "writer": args.writer,
            "acked": acked,
            "appends": len(plan),
            "elapsed_s": elapsed,
            "conflicts_retried": store.stats.conflicts_retried,
            "copies_removed": store.stats.concurrent_copies_removed,
        }


def maintain(args: argparse.Namespace) -> dict[str, object]:
    """Run maintenance passes until the stop file exists."""
    passes = 0
    with DuckLakeStore(args.url, data_path=args.data_path) as store:
        while True:
            store.maintain()
            passes += 1
            if args.ready_file:
                Path(args.ready_file).touch()  # the writers start only once maintenance runs
            if Path(args.stop_file).exists():
                break
            time.sleep(0.2)
    return {"maintain_passes": passes}


def main() -> None:
    """Parse arguments, run, print one JSON line."""
    parser = argparse.ArgumentParser()
    parser.add_argument("url")
    parser.add_argument("data_path")
    parser.add_argument("--writer", type=int, default=0)
    parser.add_argument("--batches", type=int, default=10)
    parser.add_argument("--rows", type=int, default=500)
    parser.add_argument("--shared", type=int, default=0)
    parser.add_argument("--maintain", action="store_true")
    parser.add_argument("--stop-file", default="")
    parser.add_argument("--ready-file", default="")
    parser.add_argument("--t0", type=datetime.fromisoformat, default=DEFAULT_T0)
    args = parser.parse_args()
    result = maintain(args) if args.maintain else write(args)
    sys.stdout.write(json.dumps(result) + "\n")


if __name__ == "__main__":
    main()
