"""The dashboard's only data access: named queries and detection, cached, shaped for pages.

Every number a page shows comes from here, and everything here reads through a
`QuerySource`: the sidecar's query API (`ERRSCOPE_DASHBOARD_API`, with `ERRSCOPE_TOKEN`)
or a DuckDB file no sidecar holds (`ERRSCOPE_DASHBOARD_DB`).  `errscope dashboard` sets
these variables for the Streamlit process; tests set them directly.

Results are cached with `st.cache_data` for `TTL_S` seconds, keyed by the source and the
parameters; failures are never cached, so a sidecar that comes back is seen on the next
rerun.  Functions raise `ErrscopeError` (`SourceError` for an unreachable API or a refused
token, `StoreError` for a missing or locked file); `dashboards/app.py` turns those into a
banner.  `ERRSCOPE_DASHBOARD_AS_OF` pins "now" (offline analysis of an old file, tests,
benchmarks); without it every window ends at the time of the query.

Shaping (pivoting counts, bucketing minutes) is plain pandas on the small tables the
queries return; nothing here formats a value into SQL.
"""

from __future__ import annotations

import math
import os
import threading
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import partial
from typing import Final, TypeVar

import pandas as pd
import pyarrow as pa
import streamlit as st
from streamlit.runtime.scriptrunner import add_script_run_ctx, get_script_run_ctx

from errscope.collector.catalog import default_catalog
from errscope.collector.errors import ConfigError, ConfigErrorKind
from errscope.collector.units import parse_time
from errscope.queries import detect
from errscope.queries.detect import DeployInfo, DeployReport
from errscope.queries.findings import Finding, FindingKind, Verdict
from errscope.queries.source import ApiSource, FileSource, QuerySource

__all__ = [
    "ENV_API",
    "ENV_AS_OF",
    "ENV_DB",
    "ENV_REFRESH_S",
    "ENV_TOKEN",
    "HORIZON_S",
    "MAX_DEPLOYS",
    "RULE_LABELS",
    "TTL_S",
    "DeployDetail",
    "DeployRow",
    "Endpoints",
    "Findings",
    "Scope",
    "SourceSpec",
    "bucket_for",
    "calls_by_code",
    "code_totals",
    "deploy_detail",
    "deploy_markers",
    "deploy_report",
    "deploy_rows",
    "deploy_table",
    "error_series",
    "findings",
    "findings_by_tool",
    "ingest_endpoints",
    "lookup",
    "loop_findings",
    "loop_rows",
    "recent_deploys",
    "redactions",
    "redactions_over_time",
    "refresh_s",
    "rule_counts",
    "scope",
    "shape_before_after",
    "shape_calls_by_code",
    "shape_fields",
    "spec_from_env",
    "spike_codes",
    "spikes",
    "tools",
    "traceback_groups",
    "traceback_sample",
    "unknown_codes",
]

ENV_API: Final = "ERRSCOPE_DASHBOARD_API"
ENV_DB: Final = "ERRSCOPE_DASHBOARD_DB"
ENV_TOKEN: Final = "ERRSCOPE_TOKEN"  # noqa: S105 - a variable name, not a secret
ENV_AS_OF: Final = "ERRSCOPE_DASHBOARD_AS_OF"
ENV_REFRESH_S: Final = "ERRSCOPE_DASHBOARD_REFRESH_S"

#: Seconds a query result is reused; short, so a refresh shows new calls within a minute.
TTL_S: Final = 30
#: Deploys evaluated per render by default (each costs a few queries, ~0.2 s at 10 M rows).
MAX_DEPLOYS: Final = 5
#: How far back detection looks for deploys to judge (`DetectConfig.horizon_s`).
HORIZON_S: Final = detect.DEFAULT_CONFIG.horizon_s
_API_TIMEOUT_S: Final = 15.0
#: Reads in flight at once when a page needs several independent ones.
_WORKERS: Final = 4
T = TypeVar("T")
_LONG_AGO: Final = timedelta(days=3650)
_SCOPE_WINDOW: Final = timedelta(days=30)
#: Buckets the redaction timeline is split into (one `redaction_summary` call each).
_REDACTION_BUCKETS: Final = 12
_DEFAULT_OTLP_HTTP_PORT: Final = 4318
_DEFAULT_OTLP_GRPC_PORT: Final = 4317


# ===================================================================== the source


@dataclass(frozen=True, slots=True)
class SourceSpec:
    """Where the dashboard reads, and the pinned "now" if any (hashable: a cache key)."""

    api: str | None = None
    token: str | None = None
    db: str | None = None
    as_of: datetime | None = None

    def open(self) -> QuerySource:
        """The query source; `ConfigError` when none or both are configured."""
        if self.api and not self.db:
            return _OmitNone(
                ApiSource(self.api, token=self.token or None, timeout_s=_API_TIMEOUT_S)
            )
        if self.db and not self.api:
            return FileSource(self.db)
        raise ConfigError(
            ConfigErrorKind.BAD_VALUE,
            "the dashboard needs exactly one source",
            entry="dashboard",
            field="source",
            hint="start it with `errscope dashboard --api URL [--token T]` or `--db PATH`",
        )

    def describe(self) -> str:
        """The address or path read, for the sidebar and banners (never the token)."""
        return self.api or self.db or "no source configured"

    def now(self) -> datetime:
        """The pinned time, or the current time."""
        return self.as_of or datetime.now(UTC)


class _OmitNone:
    """An `ApiSource` that leaves out parameters given as None (the query's null default).

    `ApiSource` sends None as the text "None", which the sidecar binds as a value, so
    "all services" would match no service; detection passes None for every open filter.
    """

    def __init__(self, inner: ApiSource) -> None:
        self.inner = inner
        self.url = inner.url

    def run(self, name: str, params: Mapping[str, object] | None = None) -> pa.Table:
        """Run the named query with only the parameters that have a value."""
        given = {k: v for k, v in (params or {}).items() if v is not None}
        return self.inner.run(name, given)

    def describe(self) -> str:
        """The API base URL."""
        return self.inner.describe()

    def health(self) -> dict[str, object]:
        """GET /healthz."""
        return self.inner.health()


def spec_from_env(environ: Mapping[str, str] | None = None) -> SourceSpec:
    """The source configured by `errscope dashboard` through environment variables."""
    env = os.environ if environ is None else environ
    as_of_text = env.get(ENV_AS_OF)
    as_of = parse_time(as_of_text).astimezone(UTC) if as_of_text else None
    return SourceSpec(
        api=env.get(ENV_API) or None,
        token=env.get(ENV_TOKEN) or None,
        db=env.get(ENV_DB) or None,
        as_of=as_of,
    )


def refresh_s(environ: Mapping[str, str] | None = None) -> int:
    """The auto-refresh interval offered by default (0: off)."""
    env = os.environ if environ is None else environ
    try:
        return max(0, int(env.get(ENV_REFRESH_S, "0")))
    except ValueError:
        return 0


def _run(spec: SourceSpec, name: str, params: Mapping[str, object]) -> pd.DataFrame:
    return _frame(spec.open().run(name, params))


def _frame(table: pa.Table) -> pd.DataFrame:
    """An Arrow answer as a DataFrame; DuckDB's DECIMAL sums become int64 or float64."""
    for i, f in enumerate(table.schema):
        if pa.types.is_decimal(f.type):
            target = pa.int64() if f.type.scale == 0 else pa.float64()
            table = table.set_column(i, f.name, table.column(i).cast(target))
    return table.to_pandas()


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
        if isinstance(source, _OmitNone):
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


def bucket_for(range_s: int) -> int:
    """A bucket width giving at most ~300 buckets, in whole minutes."""
    return max(60, math.ceil(range_s / 300 / 60) * 60)


def shape_calls_by_code(rollup: pd.DataFrame, *, bucket_s: int) -> pd.DataFrame:
    """`minute_rollup` rows -> calls per (bucket, tool, code), ok included."""
    columns = ["bucket", "tool", "code", "calls"]
    if rollup.empty:
        return pd.DataFrame(columns=columns)
    rows = rollup.assign(bucket=pd.to_datetime(rollup["minute"], utc=True).dt.floor(f"{bucket_s}s"))
    failing = (
        rows[rows["code"] != "ok"]
        .groupby(["bucket", "tool", "code"], as_index=False)["errors"]
        .sum()
        .rename(columns={"errors": "calls"})
    )
    # `calls` repeats the tool's total on every row of its minute and version: count it once
    groups = rows.drop_duplicates(["minute", "service", "version", "environment", "tool"])
    totals = groups.groupby(["bucket", "tool"])["calls"].sum()
    failed = failing.groupby(["bucket", "tool"])["calls"].sum()
    ok = (totals - failed.reindex(totals.index, fill_value=0)).reset_index().assign(code="ok")
    out = pd.concat([failing, ok[columns]], ignore_index=True)
    out = out[out["calls"] > 0].reset_index(drop=True)
    out["calls"] = out["calls"].astype("int64")
    return out[columns]


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
    """The detection module's verdict on one deploy (cached per deploy)."""
    return detect.detect_deploy(
        spec.open(),
        deploy.service,
        deploy.version,
        deploy.environment,
        as_of=spec.as_of,
        deploy=deploy,
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
    first_calls: pd.DataFrame  # ts, tool, code, field, correlation_id, trace_id, call_id


@st.cache_data(ttl=TTL_S, show_spinner=False)
def deploy_detail(spec: SourceSpec, deploy: DeployInfo, tool: str) -> DeployDetail:
    """Before/after error rates of one tool around a deploy, its failing fields, first calls."""
    until = min(spec.now(), deploy.ts + timedelta(seconds=detect.DEFAULT_CONFIG.horizon_s))
    since = deploy.ts - timedelta(seconds=detect.DEFAULT_CONFIG.baseline_s)
    counts = _run(
        spec,
        "deploy_minute_counts",
        {
            "service": deploy.service,
            "environment": deploy.environment,
            "new_version": deploy.version,
            "old_version": deploy.previous_version,
            "since": since,
            "until": until,
            "known_by": spec.now(),
        },
    )
    first = _run(
        spec,
        "first_failing_calls",
        {
            "service": deploy.service,
            "environment": deploy.environment,
            "version": deploy.version,
            "since": deploy.ts,
            "until": until,
            "known_by": spec.now(),
        },
    )
    counts = counts[counts["tool"] == tool] if not counts.empty else counts
    first = first[first["tool"] == tool] if not first.empty else first
    return DeployDetail(
        rates=shape_before_after(counts),
        fields=shape_fields(counts, deploy.version),
        first_calls=first.reset_index(drop=True),
    )


def shape_before_after(counts: pd.DataFrame) -> pd.DataFrame:
    """`deploy_minute_counts` of one tool -> error rate per minute and code, all versions."""
    columns = ["minute", "code", "errors", "calls", "rate"]
    if counts.empty:
        return pd.DataFrame(columns=columns)
    calls = counts.groupby(["minute", "version"], as_index=False)["calls"].max()
    calls = calls.groupby("minute", as_index=False)["calls"].sum()
    errors = counts[counts["code"] != "ok"].groupby(["minute", "code"], as_index=False)["n"].sum()
    out = errors.merge(calls, on="minute", how="left").rename(columns={"n": "errors"})
    out["rate"] = out["errors"] / out["calls"].where(out["calls"] > 0)
    return out[columns]


def shape_fields(counts: pd.DataFrame, version: str) -> pd.DataFrame:
    """Per (code, field): errors and rate before (other versions) and after (this version)."""
    columns = ["code", "field", "errors_before", "rate_before", "errors_after", "rate_after", "new"]
    if counts.empty:
        return pd.DataFrame(columns=columns)
    calls = counts.groupby(["minute", "version"], as_index=False)["calls"].max()
    calls_after = float(calls.loc[calls["version"] == version, "calls"].sum())
    calls_before = float(calls.loc[calls["version"] != version, "calls"].sum())
    errs = counts[counts["code"] != "ok"].assign(field=lambda f: f["field"].fillna("—"))
    is_new = errs["version"] == version
    after = errs[is_new].groupby(["code", "field"])["n"].sum().rename("errors_after")
    before = errs[~is_new].groupby(["code", "field"])["n"].sum().rename("errors_before")
    out = pd.concat([before, after], axis=1).fillna(0).reset_index()
    out["rate_before"] = out["errors_before"] / calls_before if calls_before else float("nan")
    out["rate_after"] = out["errors_after"] / calls_after if calls_after else float("nan")
    out["new"] = out["errors_before"] == 0
    out = out[out["errors_after"] > 0].sort_values("errors_after", ascending=False)
    for c in ("errors_before", "errors_after"):
        out[c] = out[c].astype("int64")
    return out[columns].reset_index(drop=True)


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


def code_totals(frame: pd.DataFrame) -> pd.DataFrame:
    """Calls per code over the window with each code's share, in catalog order."""
    totals = frame.groupby("code", as_index=False)["calls"].sum()
    totals["share"] = totals["calls"] / totals["calls"].sum()
    order = {c: i for i, c in enumerate(("ok", *default_catalog().codes, "unknown"))}
    return totals.sort_values("code", key=lambda s: s.map(order).fillna(len(order)))


def deploy_table(rows: Sequence[DeployRow]) -> pd.DataFrame:
    """One line per deploy: where, when, what it replaced, the verdict and why."""
    return pd.DataFrame(
        [
            {
                "service": r.deploy.service,
                "version": r.deploy.version,
                "environment": r.deploy.environment,
                "deployed_at": r.deploy.ts,
                "previous_version": r.deploy.previous_version,
                "verdict": str(r.report.verdict).replace("_", " "),
                "findings": len(r.report.findings),
                "reason": r.report.reason,
            }
            for r in rows
        ]
    )


def spike_codes() -> list[str]:
    """The codes the Spikes page offers, the detection default first."""
    first = detect.DEFAULT_CONFIG.spike_code
    return [first, *(c for c in default_catalog().codes if c != first)]


#: Loop-misuse rules as the Loop health page names them.
RULE_LABELS: Final = {
    "invalid_args_repeated": "invalid_args retried on the same field",
    "retry_after_denied": "retried after denied",
    "not_found_repeated": "guessed ids (repeated not_found)",
}


def rule_counts(found: Sequence[Finding]) -> dict[str, int]:
    """Traces breaking each retry rule (every rule listed, zero included)."""
    counts = dict.fromkeys(RULE_LABELS.values(), 0)
    for f in found:
        for rule in f.label:
            if rule in RULE_LABELS:
                counts[RULE_LABELS[rule]] += f.traces_after
    return counts


def findings_by_tool(found: Sequence[Finding]) -> dict[str, list[Finding]]:
    """A deploy's per-tool findings grouped by tool, in the order detection reported them."""
    out: dict[str, list[Finding]] = {}
    for f in found:
        if f.tool is not None:
            out.setdefault(f.tool, []).append(f)
    return out
