"""Record factories shared by the tests: valid by default, any column overridable."""

from __future__ import annotations

import contextlib
import itertools
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from errscope.collector.record import ToolCall

T0 = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)
_counter = itertools.count(1)


def make_call(**overrides: Any) -> ToolCall:
    """A valid ToolCall with unique ids; keyword arguments override any column."""
    n = next(_counter)
    values: dict[str, Any] = {
        "ts": T0 + timedelta(seconds=n),
        "received_at": T0 + timedelta(seconds=n, milliseconds=5),
        "service": "billing-agent",
        "version": "1.4.0",
        "environment": "prod",
        "tool": "get_job",
        "code": "ok",
        "trace_id": f"{n:032x}",
        "span_id": f"{n:016x}",
        "call_id": f"call_{n}",
        "session_id": "sess-1",
        "correlation_id": f"corr-{n}",
        "duration_ms": 12.5,
        "convention": "genai",
        "source": "status",
    }
    values.update(overrides)
    return ToolCall(**values)


@contextlib.contextmanager
def held_by_another_process(path: Path) -> Iterator[None]:
    """While inside, another process holds the DuckDB file open for writing (as a sidecar does)."""
    script = textwrap.dedent(f"""
        import sys, duckdb
        con = duckdb.connect({str(path)!r})
        print("held", flush=True)
        sys.stdin.read()
    """)
    holder = subprocess.Popen(
        [sys.executable, "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline().strip() == "held"
        yield
    finally:
        holder.communicate("")
