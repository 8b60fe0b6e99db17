"""A day of agent traffic for the dashboard tests: one bad deploy, one spike, loops, leaks.

`build_store(path, as_of)` writes a DuckDB store (closed afterwards, so `FileSource` can
open it) holding, for the 24 hours before `as_of`:

- billing-agent (prod), tools get_job, list_jobs, cancel_job at 20 calls per minute each;
  version 1.0 until `DEPLOY_AGO` before `as_of`, then 2.0, whose get_job fails
  invalid_args on the new field `due_date` for a quarter of its calls (the flagged deploy);
- search-agent (staging), tools search_docs and fetch_doc at 10 calls per minute; in the
  last 15 minutes fetch_doc answers not_found 40 % of the time (a narrow spike, no deploy);
- retry-rule breaches in billing-agent 2.0 (invalid_args on one field four times, calls
  after denied, three not_found on different calls), unknown codes, sampled tracebacks in
  two fingerprint groups, and hourly redaction counts for three scrub rules.

Rows are built as Arrow columns (no per-row Python objects), seeded, deterministic.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Final

import numpy as np
import pyarrow as pa

from errscope.collector.record import (
    TOOL_CALLS_SCHEMA,
    Deploy,
    RedactionCount,
    TracebackSample,
)
from errscope.collector.store.duckdb import DuckDBStore

AS_OF: Final = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
DEPLOY_AGO: Final = timedelta(minutes=60)
HOURS: Final = 24
BAD_TOOL: Final = "get_job"
BAD_FIELD: Final = "due_date"
SPIKE_TOOL: Final = "fetch_doc"
UNKNOWN_RAW_CODE: Final = "E_QUOTA_WEIRD"
TRACEBACK_ID: Final = "corr-tb-0001"


@dataclass(frozen=True)
class _Service:
    name: str
    environment: str
    tools: tuple[str, ...]
    calls_per_min: int


BILLING: Final = _Service("billing-agent", "prod", ("get_job", "list_jobs", "cancel_job"), 20)
SEARCH: Final = _Service("search-agent", "staging", ("search_docs", "fetch_doc"), 10)

# Base mix for every tool: (code, probability, field).
_BASE_MIX: Final = (
    ("not_found", 0.02, None),
    ("invalid_args", 0.02, "job_id"),
    ("rate_limited", 0.004, None),
    ("timeout", 0.003, None),
    ("internal_error", 0.002, None),
)


class _Rows:
    """Column lists for a `tool_calls` Arrow table, with unique ids per row."""

    def __init__(self) -> None:
        self.cols: dict[str, list[object]] = {f.name: [] for f in TOOL_CALLS_SCHEMA}
        self.n = 0

    def add(self, ts: datetime, **values: object) -> str:
        self.n += 1
        n = self.n
        row: dict[str, object] = {
            "ts": ts,
            "received_at": ts,
            "trace_id": f"{n:032x}",
            "span_id": f"{n:016x}",
            "call_id": f"call_{n}",
            "session_id": f"sess-{n // 10}",
            "correlation_id": f"corr-{n}",
            "duration_ms": 12.5,
            "attempt": 1,
            "convention": "genai",
            "source": "observation",
            "redactions": 0,
        }
        row.update(values)
        for name, column in self.cols.items():
            column.append(row.get(name))
        return str(row["correlation_id"])

    def table(self) -> pa.Table:
        return pa.Table.from_pydict(self.cols, schema=TOOL_CALLS_SCHEMA)


def _traffic(rows: _Rows, svc: _Service, as_of: datetime, rng: np.random.Generator) -> None:
    start = as_of - timedelta(hours=HOURS)
    deploy = as_of - DEPLOY_AGO
    minutes = HOURS * 60
    for minute in range(minutes):
        base = start + timedelta(minutes=minute)
        for tool in svc.tools:
            u = rng.random(svc.calls_per_min)
            for i in range(svc.calls_per_min):
                ts = base + timedelta(seconds=60 * i / svc.calls_per_min)
                version = "0.9"
                if svc is BILLING:
                    version = "2.0" if ts >= deploy else "1.0"
                code, fld = _pick(u[i], svc, tool, version, minutes - minute)
                rows.add(
                    ts,
                    service=svc.name,
                    version=version,
                    environment=svc.environment,
                    tool=tool,
                    code=code,
                    field=fld,
                    http_status=_STATUS.get(code),
                )


_STATUS: Final = {"not_found": 404, "invalid_args": 422, "rate_limited": 429, "denied": 403}


def _pick(
    u: float, svc: _Service, tool: str, version: str, minutes_left: int
) -> tuple[str, str | None]:
    if svc is BILLING and version == "2.0" and tool == BAD_TOOL and u < 0.25:
        return "invalid_args", BAD_FIELD
    if svc is SEARCH and tool == SPIKE_TOOL and minutes_left <= 15 and u < 0.4:
        return "not_found", None
    acc = 0.0
    for code, p, fld in _BASE_MIX:
        acc += p
        if u < acc:
            return code, fld
    return "ok", None


def _loops(rows: _Rows, as_of: datetime) -> None:
    """Retry-rule breaches and unknown codes in billing-agent 2.0's last 30 minutes."""
    common = {"service": "billing-agent", "version": "2.0", "environment": "prod"}
    t0 = as_of - timedelta(minutes=30)
    for k in range(3):  # invalid_args on the same field four times in one trace
        trace = f"{0xA000 + k:032x}"
        for j in range(4):
            rows.add(
                t0 + timedelta(minutes=k, seconds=j),
                **common,
                tool=BAD_TOOL,
                code="invalid_args",
                field=BAD_FIELD,
                trace_id=trace,
                attempt=j + 1,
            )
    for k in range(2):  # calls after denied
        trace = f"{0xB000 + k:032x}"
        rows.add(
            t0 + timedelta(minutes=5 + k),
            **common,
            tool="cancel_job",
            code="denied",
            trace_id=trace,
        )
        for j in range(2):
            rows.add(
                t0 + timedelta(minutes=5 + k, seconds=j + 1),
                **common,
                tool="cancel_job",
                code="ok",
                trace_id=trace,
            )
    for k in range(2):  # three not_found on different calls: guessed ids
        trace = f"{0xC000 + k:032x}"
        for j in range(3):
            rows.add(
                t0 + timedelta(minutes=8 + k, seconds=j),
                **common,
                tool="list_jobs",
                code="not_found",
                trace_id=trace,
            )
    for j in range(7):  # a handler returning a code outside the catalog
        rows.add(
            t0 + timedelta(minutes=12, seconds=j),
            **common,
            tool="cancel_job",
            code="unknown",
            raw_code=UNKNOWN_RAW_CODE,
        )


_TRACEBACK_TEXT: Final = (
    "Traceback (most recent call last):\n"
    '  File "…/agent/tools/jobs.py", line 42, in get_job\n'
    "    row = store.jobs[job_id]\n"
    "KeyError: '<redacted:value>'\n"
)
_TIMEOUT_TEXT: Final = (
    "Traceback (most recent call last):\n"
    '  File "…/agent/tools/docs.py", line 17, in fetch_doc\n'
    "    return client.get(url, timeout=5)\n"
    "TimeoutError: read timed out after 5 s (token=<redacted:bearer-token>)\n"
)


def _tracebacks(as_of: datetime) -> list[TracebackSample]:
    keyerrors = [
        TracebackSample(
            ts=as_of - timedelta(minutes=300 - 70 * k),
            service="billing-agent",
            version="1.0" if k < 4 else "2.0",
            tool="get_job",
            trace_id=f"{0xD000 + k:032x}",
            span_id=f"{0xD000 + k:016x}",
            correlation_id=TRACEBACK_ID if k == 0 else f"corr-tb-{k + 1:04d}",
            exception_type="KeyError",
            fingerprint="fp-keyerror-get-job",
            text=_TRACEBACK_TEXT,
        )
        for k in range(5)
    ]
    timeouts = [
        TracebackSample(
            ts=as_of - timedelta(minutes=40 - 10 * k),
            service="search-agent",
            version="0.9",
            tool="fetch_doc",
            trace_id=f"{0xE000 + k:032x}",
            span_id=f"{0xE000 + k:016x}",
            correlation_id=f"corr-tb-fetch-{k}",
            exception_type="TimeoutError",
            fingerprint="fp-timeout-fetch-doc",
            text=_TIMEOUT_TEXT,
        )
        for k in range(3)
    ]
    return keyerrors + timeouts


def _redactions(as_of: datetime) -> list[RedactionCount]:
    hour0 = as_of.replace(minute=0, second=0, microsecond=0)
    out = []
    for h in range(1, HOURS + 1):
        hour = hour0 - timedelta(hours=h)
        out.append(RedactionCount(hour, "billing-agent", "get_job", "aws-access-key-id", 3))
        if h % 3 == 0:
            out.append(RedactionCount(hour, "search-agent", "fetch_doc", "jwt", 2 + h % 4))
        if h <= 6:
            out.append(RedactionCount(hour, "billing-agent", "cancel_job", "github-pat", 1))
    return out


def build_store(path: Path, as_of: datetime = AS_OF, *, seed: int = 11) -> Path:
    """Write the scenario into a new store at `path` and close it."""
    rng = np.random.default_rng(seed)
    rows = _Rows()
    _traffic(rows, BILLING, as_of, rng)
    _traffic(rows, SEARCH, as_of, rng)
    _loops(rows, as_of)
    with DuckDBStore(path) as store:
        store.append_tool_calls(rows.table())
        store.add_deploys(
            [
                Deploy("billing-agent", "1.0", as_of - timedelta(hours=30), "prod"),
                Deploy("billing-agent", "2.0", as_of - DEPLOY_AGO, "prod"),
                Deploy("search-agent", "0.9", as_of - timedelta(days=2), "staging"),
            ]
        )
        store.append_tracebacks(_tracebacks(as_of))
        store.add_redactions(_redactions(as_of))
    return path


def build_empty_store(path: Path) -> Path:
    """A migrated store with no rows."""
    DuckDBStore(path).close()
    return path
