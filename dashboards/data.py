"""The dashboard's only data access: named queries and detection, cached, for the pages.

Every number a page shows comes from here, and everything here reads through the
`QuerySource` a `SourceSpec` opens (`dashboards/source.py`: the sidecar's query API or a
DuckDB file no sidecar holds).  Detection's answers come from `errscope.queries.detect`
itself, and so does the window of a deploy's before/after chart (`detect.deploy_window`):
the chart draws the minutes the verdict was reached on.

Results are cached with `st.cache_data` for `TTL_S` seconds, keyed by the source and the
parameters; failures are never cached, so a sidecar that comes back is seen on the next
rerun.  Functions raise `ErrscopeError` (`SourceError` for an unreachable API or a refused
token, `StoreError` for a missing or locked file); `dashboards/app.py` turns those into a
banner.  Shaping the answers for charts is `dashboards/shape.py`; nothing here formats a
value into SQL.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, timedelta
from functools import partial
from typing import Final, TypeVar

import pandas as pd
import streamlit as st
from streamlit.runtime.scriptrunner import add_script_run_ctx, get_script_run_ctx

from errscope.collector.catalog import default_catalog
from errscope.dashboards.shape import (
    bucket_for,
    shape_before_after,
    shape_calls_by_code,
    shape_fields,
    to_frame,
)
from errscope.dashboards.source import SourceSpec
from errscope.queries import detect
from errscope.queries.detect import DeployInfo, DeployReport
from errscope.queries.findings import Finding, FindingKind, Verdict
from errscope.queries.source import ApiSource

__all__ = [
    "HORIZON_S",
    "MAX_DEPLOYS",
    "TTL_S",
    "DeployDetail",
    "DeployRow",
    "Endpoints",
    "Findings",
    "Scope",
    "calls_by_code",
    "deploy_detail",
    "deploy_markers",
    "deploy_report",
    "deploy_rows",
    "error_series",
    "findings",
    "ingest_endpoints",
    "lookup",
    "loop_findings",
    "loop_rows",
    "recent_deploys",
    "redactions",
    "redactions_over_time",
    "scope",
    "spike_codes",
    "spikes",
    "tools",
    "traceback_groups",
    "traceback_sample",
    "unknown_codes",
]

#: Seconds a query result is reused; short, so a refresh shows new calls within a minute.
TTL_S: Final = 30
#: Deploys evaluated per render by default (each costs a few queries, ~0.2 s at 10 M rows).
MAX_DEPLOYS: Final = 5
#: How far back detection looks for deploys to judge (`DetectConfig.horizon_s`).
HORIZON_S: Final = detect.DEFAULT_CONFIG.horizon_s
#: What the pages judge deploys by: `findings`' default, the first hour without long looks.
CONFIG: Final = detect.first_hour(detect.DEFAULT_CONFIG)
#: Reads in flight at once when a page needs several independent ones.
_WORKERS: Final = 4
T = TypeVar("T")
_LONG_AGO: Final = timedelta(days=3650)
_SCOPE_WINDOW: Final = timedelta(days=30)
#: Buckets the redaction timeline is split into (one `redaction_summary` call each).
_REDACTION_BUCKETS: Final = 12
_DEFAULT_OTLP_HTTP_PORT: Final = 4318
_DEFAULT_OTLP_GRPC_PORT: Final = 4317


def _run(spec: SourceSpec, name: str, params: Mapping[str, object]) -> pd.DataFrame:
    return to_frame(spec.open().run(name, params))


# ===================================================================== scope and health


@dataclass(frozen=True, slots=True)
class Scope:
    """What the store holds at a glance: the services and environments for the filters."""

    services: tuple[str, ...]
    environments: tuple[str, ...]
    empty: bool


@st.cache_data(ttl=TTL_S, show_spinner=False)
def scope(spec: SourceSpec) -> Scope:
    """Services and environments seen (from the deploy markers), and whether the store is empty.

    Deploy markers are a small table, so this is cheap on any store; only when there are
    none (no service reported a version) are the calls themselves consulted.
    """
    now = spec.now()
    marks = _run(spec, "deploy_markers", {"since": now - _LONG_AGO, "until": now})
    if marks.empty:
        mix = _run(spec, "code_mix_by_version", {"since": now - _SCOPE_WINDOW, "until": now})
        return Scope(
            services=_distinct(mix, "service"),
            environments=_distinct(mix, "environment"),
            empty=mix.empty,
        )
    return Scope(
        services=_distinct(marks, "service"),
        environments=_distinct(marks, "environment"),
        empty=False,
    )


def _distinct(frame: pd.DataFrame, column: str) -> tuple[str, ...]:
    if frame.empty:
        return ()
    return tuple(sorted(str(v) for v in frame[column].dropna().unique()))


@dataclass(frozen=True, slots=True)
class Endpoints:
    """Where an agent service sends its spans."""

    otlp_http: str
    otlp_grpc: str
    from_sidecar: bool


@st.cache_data(ttl=TTL_S, show_spinner=False)
def ingest_endpoints(spec: SourceSpec) -> Endpoints:
    """The sidecar's OTLP addresses: from `/healthz` when it says, else its host's defaults."""
    host = "127.0.0.1"
    if spec.api:
        source = spec.open()
        if isinstance(source, ApiSource):
            health = source.health()
            http, grpc = health.get("otlp_http"), health.get("otlp_grpc")
            if isinstance(http, str) and isinstance(grpc, str):
                return Endpoints(_http_url(http), grpc, from_sidecar=True)
            host = source.url.split("://", 1)[1].rsplit(":", 1)[0] or host
    return Endpoints(
        f"http://{host}:{_DEFAULT_OTLP_HTTP_PORT}",
        f"{host}:{_DEFAULT_OTLP_GRPC_PORT}",
        from_sidecar=False,
    )


def _http_url(address: str) -> str:
    return address if "://" in address else f"http://{address}"


# ===================================================================== overview


@st.cache_data(ttl=TTL_S, show_spinner=False)
def _code_counts(
    spec: SourceSpec, range_s: int, service: str | None, environment: str | None
) -> pd.DataFrame:
    now = spec.now()
    rollup = _run(
        spec,
        "minute_rollup",
        {
            "since": now - timedelta(seconds=range_s),
            "until": now,
            "service": service,
            "environment": environment,
        },
    )
    return shape_calls_by_code(rollup, bucket_s=bucket_for(range_s))


def calls_by_code(
    spec: SourceSpec,
    range_s: int,
    service: str | None,
    environment: str | None,
    tool: str | None = None,
) -> pd.DataFrame:
    """Calls per time bucket, tool and code (`bucket`, `tool`, `code`, `calls`) in the window.

    From `minute_rollup`, whose `calls` column is the tool's calls that minute and whose
    `errors` are the non-ok calls of one code and field: ok calls are the difference.
    Minutes are merged into buckets so a chart has at most a few hundred columns.  The
    tool filter is applied here, so switching tools reuses the cached window.
    """
    counts = _code_counts(spec, range_s, service, environment)
    if tool is None:
        return counts
    return counts[counts["tool"] == tool].reset_index(drop=True)


def tools(
    spec: SourceSpec, range_s: int, service: str | None, environment: str | None
) -> list[str]:
    """The tools called in the window."""
    counts = _code_counts(spec, range_s, service, environment)
    return sorted(str(t) for t in counts["tool"].unique())


@st.cache_data(ttl=TTL_S, show_spinner=False)
def deploy_markers(
    spec: SourceSpec, range_s: int, service: str | None, environment: str | None
) -> pd.DataFrame:
    """Deploys in the window: `service`, `version`, `environment`, `ts`, `previous_version`."""
    now = spec.now()
    return _run(
        spec,
        "deploy_markers",
        {
            "since": now - timedelta(seconds=range_s),
            "until": now,
            "service": service,
            "environment": environment,
        },
    )


@dataclass(frozen=True, slots=True)
class Findings:
    """Current findings, and the deploys in the detection horizon left unevaluated."""

    found: list[Finding]
    deploys: int
    skipped: int


def findings(
    spec: SourceSpec, service: str | None, environment: str | None, *, limit: int | None
) -> Findings:
    """What detection reports now: what `detect.detect_all` reports, deploy by deploy.

    The same composition as `detect_all` (every deploy within the horizon, spikes, loop
    misuse), but each deploy's report is cached on its own, so the Deploys page reuses
    it, and at most `limit` of the newest deploys are evaluated in one render: a fleet
    with dozens of deploys an hour still draws the page in about a second; the page says
    how many were left out and offers to evaluate them all.
    """
    marks = recent_deploys(spec, HORIZON_S, service, environment)
    chosen = marks if limit is None else marks[:limit]
    tasks: list[Callable[[], Sequence[Finding]]] = [
        partial(spikes, spec, detect.DEFAULT_CONFIG.spike_code, service, environment),
        partial(loop_findings, spec, service),
        *(partial(_deploy_findings, spec, d) for d in chosen),
    ]
    found = [f for part in _concurrently(tasks) for f in part]
    order = {k: i for i, k in enumerate(FindingKind)}
    found.sort(key=lambda f: (order[f.kind], f.service, f.tool or ""))
    return Findings(found, deploys=len(marks), skipped=len(marks) - len(chosen))


def _deploy_findings(spec: SourceSpec, deploy: DeployInfo) -> list[Finding]:
    report = deploy_report(spec, deploy)
    return [*report.findings, *report.notes]


def _concurrently(tasks: Sequence[Callable[[], T]]) -> list[T]:
    """Run independent reads at once (the sidecar answers requests in parallel), in order.

    The worker threads carry this script run's context, so the cached functions they call
    share the page's cache.
    """
    if len(tasks) <= 1:
        return [task() for task in tasks]
    ctx = get_script_run_ctx(suppress_warning=True)

    def attach() -> None:
        if ctx is not None:
            add_script_run_ctx(threading.current_thread(), ctx)

    with ThreadPoolExecutor(max_workers=_WORKERS, initializer=attach) as pool:
        return list(pool.map(lambda task: task(), tasks))


def recent_deploys(
    spec: SourceSpec, range_s: int, service: str | None, environment: str | None
) -> list[DeployInfo]:
    """The deploys in the window, newest first."""
    marks = deploy_markers(spec, range_s, service, environment)
    return [
        DeployInfo(
            service=str(r["service"]),
            version=str(r["version"]),
            environment=_opt(r["environment"]),
            ts=pd.Timestamp(r["ts"]).to_pydatetime().astimezone(UTC),
            previous_version=_opt(r["previous_version"]),
        )
        for r in reversed(marks.to_dict("records"))
    ]


@st.cache_data(ttl=TTL_S, show_spinner=False)
def deploy_report(spec: SourceSpec, deploy: DeployInfo) -> DeployReport:
    """The detection module's verdict on one deploy (cached per deploy), as `findings`
    judges it: on its first hour (`detect.first_hour`; the long looks are `check`'s)."""
    return detect.detect_deploy(
        spec.open(),
        deploy.service,
        deploy.version,
        deploy.environment,
        as_of=spec.as_of,
        deploy=deploy,
        config=CONFIG,
    )


# ===================================================================== deploys


@dataclass(frozen=True, slots=True)
class DeployRow:
    """One deploy with the detection module's verdict on it."""

    deploy: DeployInfo
    report: DeployReport

    @property
    def flagged(self) -> bool:
        """True when the deploy regressed (or brought a new failing signature)."""
        return self.report.verdict is Verdict.REGRESSION


def deploy_rows(
    spec: SourceSpec, range_s: int, service: str | None, environment: str | None, *, limit: int
) -> tuple[list[DeployRow], int]:
    """The newest `limit` deploys in the window with their verdicts; how many in all."""
    marks = recent_deploys(spec, range_s, service, environment)
    chosen = marks[:limit]
    reports = _concurrently([partial(deploy_report, spec, d) for d in chosen])
    return [DeployRow(d, r) for d, r in zip(chosen, reports, strict=True)], len(marks)


def _opt(value: object) -> str | None:
    if value is None or (isinstance(value, float) and math.isnan(value)) or value is pd.NA:
        return None
    return str(value)


@dataclass(frozen=True, slots=True)
class DeployDetail:
    """What a flagged deploy's panel shows for one tool."""

    rates: pd.DataFrame  # minute, version, code, errors, calls, rate
    fields: pd.DataFrame  # code, field, errors_before, rate_before, errors_after, rate_after, new
    first_calls: pd.DataFrame  # ts, tool, code, field, correlation_id, trace_id, span_id, call_id


@st.cache_data(ttl=TTL_S, show_spinner=False)
def deploy_detail(spec: SourceSpec, deploy: DeployInfo, tool: str) -> DeployDetail:
    """Before/after error rates of one tool around a deploy, its failing fields, first calls."""
    now = spec.now()
    source = spec.open()
    # detection's own window and query: the chart shows the minutes the verdict judged
    window = detect.deploy_window(deploy, now, CONFIG)
    counts = to_frame(detect.deploy_minute_counts(source, deploy, window, known_by=now))
    first = to_frame(
        source.run(
            "first_failing_calls",
            {
                "service": deploy.service,
                "environment": deploy.environment,
                "version": deploy.version,
                "since": deploy.ts,
                "until": window.until,
                "known_by": now,
            },
        )
    )
    counts = counts[counts["tool"] == tool] if not counts.empty else counts
    first = first[first["tool"] == tool] if not first.empty else first
    return DeployDetail(
        rates=shape_before_after(counts),
        fields=shape_fields(counts, deploy.version),
        first_calls=first.reset_index(drop=True),
    )


# ===================================================================== spikes


@st.cache_data(ttl=TTL_S, show_spinner=False)
def spikes(
    spec: SourceSpec, code: str, service: str | None, environment: str | None
) -> list[Finding]:
    """Spikes of one code per (service, tool), labelled by the detection module."""
    return detect.detect_spikes(
        spec.open(), as_of=spec.as_of, service=service, environment=environment, code=code
    )


@st.cache_data(ttl=TTL_S, show_spinner=False)
def error_series(
    spec: SourceSpec, range_s: int, service: str, tool: str, code: str
) -> pd.DataFrame:
    """One tool's calls and calls with `code` per bucket (`bucket`, `calls`, `errors`, `rate`)."""
    now = spec.now()
    rates = _run(
        spec,
        "error_rates",
        {
            "since": now - timedelta(seconds=range_s),
            "until": now,
            "bucket_s": detect.DEFAULT_CONFIG.spike_bucket_s,
            "service": service,
            "tool": tool,
        },
    )
    if rates.empty:
        return pd.DataFrame(columns=["bucket", "calls", "errors", "rate"])
    rates = rates.assign(hit=rates["calls"].where(rates["code"] == code, 0))
    out = rates.groupby("bucket", as_index=False).agg(calls=("calls", "sum"), errors=("hit", "sum"))
    out["rate"] = out["errors"] / out["calls"]
    return out


# ===================================================================== loop health


@st.cache_data(ttl=TTL_S, show_spinner=False)
def loop_findings(spec: SourceSpec, service: str | None) -> list[Finding]:
    """Retry-rule breaches of the last hour, one per (service, tool, rule)."""
    return detect.detect_loop_misuse(spec.open(), as_of=spec.as_of, service=service)


@st.cache_data(ttl=TTL_S, show_spinner=False)
def loop_rows(spec: SourceSpec, range_s: int, service: str | None) -> pd.DataFrame:
    """Every trace that broke a retry rule in the window (`loop_misuse`)."""
    now = spec.now()
    return _run(
        spec,
        "loop_misuse",
        {
            "since": now - timedelta(seconds=range_s),
            "until": now,
            "known_by": now,
            "service": service,
        },
    )


@st.cache_data(ttl=TTL_S, show_spinner=False)
def unknown_codes(spec: SourceSpec, range_s: int, service: str | None) -> pd.DataFrame:
    """Codes outside the catalog per service, version, tool and raw code."""
    now = spec.now()
    return _run(
        spec,
        "unknown_codes",
        {"since": now - timedelta(seconds=range_s), "until": now, "service": service},
    )


# ===================================================================== tracebacks


@st.cache_data(ttl=TTL_S, show_spinner=False)
def traceback_groups(spec: SourceSpec, range_s: int, service: str | None) -> pd.DataFrame:
    """Sampled tracebacks grouped by fingerprint, most samples first."""
    now = spec.now()
    groups = _run(
        spec,
        "traceback_groups",
        {"since": now - timedelta(seconds=range_s), "until": now, "service": service},
    )
    if not groups.empty:
        groups["versions"] = groups["versions"].map(lambda v: ", ".join(str(x) for x in v))
    return groups


@st.cache_data(ttl=TTL_S, show_spinner=False)
def traceback_sample(spec: SourceSpec, example_id: str, fingerprint: str) -> str | None:
    """The redacted text of one sample of a group, found by its example correlation id."""
    rows = _run(spec, "tracebacks_by_correlation", {"id": example_id, "limit": 20})
    if rows.empty:
        return None
    match = rows[rows["fingerprint"] == fingerprint]
    return str((match if not match.empty else rows).iloc[0]["text"])


@st.cache_data(ttl=TTL_S, show_spinner=False)
def lookup(spec: SourceSpec, ident: str) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The calls and the sampled tracebacks that carry an id (correlation, trace, call, session)."""
    now = spec.now()
    calls = _run(
        spec,
        "calls_by_correlation",
        {"id": ident, "since": now - timedelta(days=7), "until": now, "limit": 200},
    )
    tracebacks = _run(spec, "tracebacks_by_correlation", {"id": ident, "limit": 20})
    return calls, tracebacks


# ===================================================================== secret exposure


@st.cache_data(ttl=TTL_S, show_spinner=False)
def redactions(spec: SourceSpec, range_s: int, service: str | None) -> pd.DataFrame:
    """Values masked per service, tool and rule in the window: counts only, never values."""
    now = spec.now()
    return _run(
        spec,
        "redaction_summary",
        {"since": now - timedelta(seconds=range_s), "until": now, "service": service},
    )


@st.cache_data(ttl=TTL_S, show_spinner=False)
def redactions_over_time(spec: SourceSpec, range_s: int, service: str | None) -> pd.DataFrame:
    """Values masked per rule and time bucket (`bucket`, `tool`, `rule`, `redactions`).

    `redaction_summary` totals a window, so the timeline is that query over
    `_REDACTION_BUCKETS` consecutive windows of whole hours (the table's grain).
    """
    now = spec.now()
    # At most _REDACTION_BUCKETS, never more hours than the range and the current hour: a
    # 1 h range is two hourly buckets, not twelve (the chart obeys the time range).
    buckets = min(_REDACTION_BUCKETS, math.ceil(range_s / 3600) + 1)
    hours = max(1, math.ceil(range_s / 3600 / buckets))
    end = now.replace(minute=0, second=0, microsecond=0) + timedelta(hours=1)
    frames = []
    for k in range(buckets):
        until = end - timedelta(hours=k * hours)
        since = until - timedelta(hours=hours)
        part = _run(spec, "redaction_summary", {"since": since, "until": until, "service": service})
        if not part.empty:
            frames.append(part.assign(bucket=pd.Timestamp(since)))
    if not frames:
        return pd.DataFrame(columns=["bucket", "tool", "rule", "redactions"])
    out = pd.concat(frames, ignore_index=True)
    return out[["bucket", "tool", "rule", "redactions"]].sort_values("bucket")


def spike_codes() -> list[str]:
    """The codes the Spikes page offers, the detection default first."""
    first = detect.DEFAULT_CONFIG.spike_code
    return [first, *(c for c in default_catalog().codes if c != first)]
