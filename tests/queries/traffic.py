"""Traffic builders for query and detection tests: a source on a store, calls, scenarios."""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import numpy as np
import pyarrow as pa

from errscope.collector.record import Deploy, ToolCall
from errscope.collector.store.duckdb import DuckDBStore
from errscope.queries.detect import DeployCounts, DeployInfo
from errscope.queries.runner import run_query

#: The deploy time every scenario is built around.
DEPLOY_TS = datetime(2026, 11, 30, 10, 0, tzinfo=UTC)
_ids = itertools.count(1)


class StoreSource:
    """A `QuerySource` over an open store (the in-process twin of FileSource)."""

    def __init__(self, store: DuckDBStore) -> None:
        self.store = store

    def run(self, name: str, params: Mapping[str, object] | None = None) -> pa.Table:
        """Run a named query on a fresh cursor."""
        return run_query(self.store.cursor(), name, params or {})

    def describe(self) -> str:
        """Where this source reads."""
        return "memory"


def call(ts: datetime, **overrides: object) -> ToolCall:
    """A valid ok call at `ts` with unique ids; keywords override any column."""
    n = next(_ids)
    values: dict[str, object] = {
        "ts": ts,
        "received_at": ts,
        "service": "billing-agent",
        "version": "1.0",
        "environment": "prod",
        "tool": "get_job",
        "code": "ok",
        "trace_id": f"{n:032x}",
        "span_id": f"{n:016x}",
        "call_id": f"call_{n}",
        "session_id": f"sess-{n}",
        "correlation_id": f"corr-{n}",
    }
    values.update(overrides)
    return ToolCall(**values)  # type: ignore[arg-type]


@dataclass(frozen=True)
class Scenario:
    """Traffic around one deploy of billing-agent 1.0 -> 2.0 at DEPLOY_TS.

    `rates_new` maps tool -> invalid_args rate of the new version (default `rate`);
    `overlap_min` minutes after the deploy both versions serve half the calls each;
    `storm` adds one trace per minute retrying `storm_tool` many times.
    """

    tools: Sequence[str] = ("get_job", "list_jobs", "cancel_job")
    calls_per_min: int = 60
    rate: float = 0.03
    rates_new: Mapping[str, float] | None = None
    minutes_before: int = 60
    minutes_after: int = 30
    overlap_min: int = 0
    new_field: str | None = None
    storm_tool: str | None = None
    storm_size: int = 0
    seed: int = 7
    dispersion_k: float | None = None

    def calls(self) -> list[ToolCall]:
        """The rows, deterministic for a seed."""
        rng = np.random.default_rng(self.seed)
        out: list[ToolCall] = []
        for minute in range(-self.minutes_before, self.minutes_after):
            start = DEPLOY_TS + timedelta(minutes=minute)
            mult = rng.gamma(self.dispersion_k, 1 / self.dispersion_k) if self.dispersion_k else 1.0
            for tool in self.tools:
                for i in range(self.calls_per_min):
                    ts = start + timedelta(seconds=60 * i / self.calls_per_min)
                    if minute < 0:
                        version = "1.0"
                    elif minute < self.overlap_min:
                        version = "2.0" if i % 2 else "1.0"
                    else:
                        version = "2.0"
                    rate = self.rate
                    if version == "2.0" and self.rates_new:
                        rate = self.rates_new.get(tool, self.rate)
                    if rng.random() < rate * mult:
                        out.append(
                            call(
                                ts, tool=tool, version=version, code="invalid_args", field="job_id"
                            )
                        )
                    elif (
                        version == "2.0"
                        and self.new_field
                        and tool == self.tools[0]
                        and i % 15 == 0
                    ):
                        out.append(
                            call(
                                ts,
                                tool=tool,
                                version=version,
                                code="invalid_args",
                                field=self.new_field,
                            )
                        )
                    else:
                        out.append(call(ts, tool=tool, version=version))
            if self.storm_tool and minute >= 0:
                trace = f"{next(_ids):032x}"
                out.extend(
                    call(
                        start + timedelta(seconds=j),
                        tool=self.storm_tool,
                        version="2.0",
                        code="invalid_args",
                        field="job_id",
                        trace_id=trace,
                    )
                    for j in range(self.storm_size)
                )
        return out

    def load(self, store: DuckDBStore) -> None:
        """Write the rows and the two deploy markers."""
        store.append_tool_calls(self.calls())
        store.add_deploys(
            [
                Deploy("billing-agent", "1.0", DEPLOY_TS - timedelta(days=1), "prod"),
                Deploy("billing-agent", "2.0", DEPLOY_TS, "prod"),
            ]
        )


def simulated_counts(calls: np.ndarray, units: np.ndarray, before: int) -> DeployCounts:
    """Per-tool minute counts (tools x minutes) as `DeployCounts`: the old version serves
    the first `before` minutes, the new one the rest; invalid_args only, one unit per error."""
    tools, minutes = calls.shape
    by_version = np.zeros((2, tools, minutes))
    by_version[0, :, :before] = calls[:, :before]
    by_version[1, :, before:] = calls[:, before:]
    u = np.zeros((2, tools, 1, minutes))
    u[0, :, 0, :before] = units[:, :before]
    u[1, :, 0, before:] = units[:, before:]
    return DeployCounts(
        deploy=DeployInfo("s", "2", None, DEPLOY_TS, "1"),
        tools=tuple(f"t{i}" for i in range(tools)),
        codes=("invalid_args",),
        start_min=-before,
        calls=by_version,
        units=u,
        errors=u.copy(),
        field_keys=(),
        field_units=np.zeros((2, 0, minutes)),
    )
