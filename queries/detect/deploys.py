"""Deploy regressions read from a source: the deploy, its window, its verdict as findings.

`detect_deploy` finds a deploy's marker (`find_deploy`), names the version that was
serving before it, reads the minutes of `deploy_window` (`deploy_minute_counts`) and the
signature exposures, hands them to `deploy_evaluation.evaluate_deploy` and turns the
evaluation into `Finding`s (`DeployReport`).  `deploy_window` is the one place the
judged window is drawn: the dashboard's before/after chart reads the same minutes
through `deploy_minute_counts`, so the chart and the verdict cannot disagree about what
they cover.  Every query is bounded by the evaluation time and counts only rows received
by `known_by`; nothing here raises on sparse data (too little is `INSUFFICIENT_DATA`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import pyarrow as pa

from errscope.collector.errors import QueryError, QueryErrorKind
from errscope.queries.detect.config import (
    DEFAULT_CONFIG,
    DetectConfig,
    Source,
    evaluation_time,
    received_by,
)
from errscope.queries.detect.deploy_evaluation import (
    AGGREGATE_TOOL,
    DeployCounts,
    DeployEvaluation,
    DeployInfo,
    SignatureTest,
    evaluate_deploy,
)
from errscope.queries.findings import Finding, FindingKind, Verdict

__all__ = [
    "DeployReport",
    "DeployWindow",
    "confidence",
    "counts_from_table",
    "deploy_info",
    "deploy_minute_counts",
    "deploy_window",
    "detect_deploy",
    "find_deploy",
    "signature_tests",
]


@dataclass(frozen=True, slots=True)
class DeployReport:
    """What `errscope check` prints: the verdict, its findings, and storms seen as notes."""

    verdict: Verdict
    reason: str
    deploy: DeployInfo | None
    findings: tuple[Finding, ...]
    notes: tuple[Finding, ...] = ()
    evaluation: DeployEvaluation | None = None


@dataclass(frozen=True, slots=True)
class DeployWindow:
    """The minutes one deploy is judged on: the previous version's baseline, then the deploy.

    `since` is `baseline_s` before the deploy, or `long_baseline_s` once the first long
    look is due; `until` the evaluation time, or the end of the long looks
    (`long_horizon_s` after the deploy) when that came first.
    """

    since: datetime
    until: datetime


def deploy_window(
    deploy: DeployInfo, now: datetime, config: DetectConfig = DEFAULT_CONFIG
) -> DeployWindow:
    """The window detection judges `deploy` on as of `now` (and the dashboard charts)."""
    # The day-long baseline is read only once a long look is due: a gate's first hour
    # reads two hours of rows, not a day's.
    long_due = bool(config.long_looks_s) and now - deploy.ts >= timedelta(
        seconds=min(config.long_looks_s)
    )
    baseline_s = max(config.baseline_s, config.long_baseline_s) if long_due else config.baseline_s
    horizon_s = config.horizon_s
    if config.long_looks_s:
        horizon_s = max(horizon_s, config.long_horizon_s)
    return DeployWindow(
        since=deploy.ts - timedelta(seconds=baseline_s),
        until=min(now, deploy.ts + timedelta(seconds=horizon_s)),
    )


def deploy_minute_counts(
    source: Source, deploy: DeployInfo, window: DeployWindow, *, known_by: datetime
) -> pa.Table:
    """`deploy_minute_counts` of the deploy's new and previous version over `window`."""
    return source.run(
        "deploy_minute_counts",
        {
            "service": deploy.service,
            "environment": deploy.environment,
            "new_version": deploy.version,
            "old_version": deploy.previous_version,
            "since": window.since,
            "until": window.until,
            "known_by": known_by,
        },
    )


def deploy_info(row: Mapping[str, Any]) -> DeployInfo:
    """A `deploy_markers` row (as `to_pylist` gives it) as a `DeployInfo`."""
    return DeployInfo(
        service=row["service"],
        version=row["version"],
        environment=row["environment"],
        ts=row["ts"].astimezone(UTC),
        previous_version=row["previous_version"],
    )


def counts_from_table(
    table: pa.Table, deploy: DeployInfo, codes: Sequence[str], *, baseline_s: int, until: datetime
) -> DeployCounts:
    """Turn `deploy_minute_counts` rows into `DeployCounts` (minutes up to `until`)."""
    origin = deploy.ts.astimezone(UTC).replace(second=0, microsecond=0)
    start_min = -math.ceil(baseline_s / 60)
    end_min = max(1, math.ceil((until - origin).total_seconds() / 60))
    n_min = end_min - start_min
    rows = table.to_pylist()
    tools = tuple(sorted({str(r["tool"]) for r in rows}))
    tool_ix = {t: i for i, t in enumerate(tools)}
    code_ix = {c: i for i, c in enumerate(codes)}
    calls = np.zeros((2, len(tools), n_min))
    units = np.zeros((2, len(tools), len(codes), n_min))
    loops = np.zeros_like(units)
    errors = np.zeros_like(units)
    field_ix: dict[tuple[int, int, str | None], int] = {}
    field_rows: list[tuple[int, int, int, float]] = []
    seen_tool_minute: set[tuple[int, int, int]] = set()
    for r in rows:
        minute = r["minute"].astimezone(UTC)
        m = int((minute - origin).total_seconds() // 60) - start_min
        if not 0 <= m < n_min:
            continue
        v = 1 if r["version"] == deploy.version else 0
        t = tool_ix[str(r["tool"])]
        if (v, t, m) not in seen_tool_minute:
            seen_tool_minute.add((v, t, m))
            calls[v, t, m] = float(r["calls"])
        c = code_ix.get(str(r["code"]))
        if c is None:
            continue
        looped = float(r.get("loop_units") or 0)
        units[v, t, c, m] += float(r["units"])
        loops[v, t, c, m] += looped
        errors[v, t, c, m] += float(r["n"])
        key = (t, c, r["field"])
        f = field_ix.setdefault(key, len(field_ix))
        field_rows.append((v, f, m, float(r["units"]) - looped))
    field_units = np.zeros((2, len(field_ix), n_min))
    for v, f, m, u in field_rows:
        field_units[v, f, m] += u
    return DeployCounts(
        deploy=deploy,
        tools=tools,
        codes=tuple(codes),
        start_min=start_min,
        calls=calls,
        units=units,
        errors=errors,
        field_keys=tuple(field_ix),
        field_units=field_units,
        loop_units=loops,
    )


def signature_tests(
    new: pa.Table, old: pa.Table, codes: Sequence[str], config: DetectConfig = DEFAULT_CONFIG
) -> list[SignatureTest]:
    """New (tool, code, field) signatures: `signature_exposure` of the new version against
    `signature_history` (tool, code, field and the tool's calls) of the versions before.

    A signature is new when the earlier exposure never had it; its exact conditional
    p-value is (n_new / (n_new + n_old)) ** traces: every failing trace fell on the new
    version although the old one had n_old calls of the tool.
    """
    old_rows = old.to_pylist()
    seen = {(r["tool"], r["code"], r["field"]) for r in old_rows}
    old_calls = {r["tool"]: int(r["calls"]) for r in old_rows}
    out: list[SignatureTest] = []
    for r in new.to_pylist():
        key = (r["tool"], r["code"], r["field"])
        if r["code"] not in codes or key in seen:
            continue
        traces, ids = int(r["traces"]), int(r["ids"])
        if traces < config.signature_min_traces or ids < config.signature_min_ids:
            continue
        n1, n0 = int(r["calls"]), old_calls.get(r["tool"], 0)
        p = (n1 / (n1 + n0)) ** traces if n0 > 0 else 1.0
        out.append(
            SignatureTest(
                tool=str(r["tool"]),
                code=str(r["code"]),
                field=r["field"],
                traces=traces,
                errors=int(r["n"]),
                ids=ids,
                calls_new=n1,
                calls_old=n0,
                first_ts=r["first_ts"],
                p_value=p,
                baseline_ok=n0 >= config.signature_min_baseline_calls,
            )
        )
    return out


def find_deploy(
    source: Source,
    service: str,
    version: str,
    environment: str | None = None,
    *,
    as_of: datetime | None = None,
) -> DeployInfo | None:
    """The deploy marker of (service, version[, environment]) at or before `as_of`."""
    now = evaluation_time(as_of)
    table = source.run(
        "deploy_markers",
        {
            "since": now - timedelta(days=365),
            "until": now,
            "service": service,
            "environment": environment,
            "version": version,
        },
    )
    rows = table.to_pylist()
    if not rows:
        return None
    environments = sorted({str(r["environment"]) for r in rows if r["environment"] is not None})
    if environment is None and len(environments) > 1:
        raise QueryError(
            QueryErrorKind.BAD_PARAM_VALUE,
            f"{service} {version} was deployed to several environments: " + ", ".join(environments),
            field="environment",
            hint="name the one to judge with --environment",
        )
    return deploy_info(rows[-1])


def detect_deploy(
    source: Source,
    service: str,
    version: str,
    environment: str | None = None,
    *,
    as_of: datetime | None = None,
    config: DetectConfig = DEFAULT_CONFIG,
    deploy: DeployInfo | None = None,
    known_by: datetime | None = None,
) -> DeployReport:
    """Evaluate one deploy through named queries, as of `as_of` (default now).

    Only rows received by `known_by` count (default: `as_of`, so a replay says what a live
    gate said then; pass a later time to judge a past moment on data that came in since,
    such as a back-fill).  `deploy` skips the marker lookup when the caller already has it
    (`detect_all`).
    """
    now = evaluation_time(as_of)
    known = received_by(known_by, now)
    if deploy is None:
        deploy = find_deploy(source, service, version, environment, as_of=now)
    if deploy is None:
        return DeployReport(
            Verdict.INSUFFICIENT_DATA,
            f"insufficient data: no deploy of {service} {version} seen by {now:%Y-%m-%dT%H:%M}Z",
            None,
            (),
        )
    deploy = _serving_before(source, deploy, config, known_by=known)
    window = deploy_window(deploy, now, config)
    until = window.until
    table = deploy_minute_counts(source, deploy, window, known_by=known)
    counts = counts_from_table(
        table,
        deploy,
        config.codes,
        baseline_s=int((deploy.ts - window.since).total_seconds()),
        until=until,
    )
    # `known_by`: only rows received by the evaluation time count, so an as-of replay sees
    # what a live gate saw then (not rows back-filled or sent late by a skewed clock).
    sig_common = {"service": deploy.service, "environment": deploy.environment, "known_by": known}
    new_sig = source.run(
        "signature_exposure",
        {**sig_common, "version": deploy.version, "since": deploy.ts, "until": until},
    )
    old_sig = source.run(
        "signature_history",
        {
            **sig_common,
            "exclude_version": deploy.version,
            "since": deploy.ts - timedelta(seconds=config.signature_history_s),
            "until": deploy.ts,
        },
    )
    sigs = signature_tests(new_sig, old_sig, config.codes, config)
    origin = deploy.ts.replace(second=0, microsecond=0)
    elapsed = math.ceil((until - origin).total_seconds() / 60)
    observed_s = max(0.0, (until - deploy.ts).total_seconds())
    evaluation = evaluate_deploy(counts, elapsed, config, sigs, observed_s=observed_s)
    ids: dict[tuple[str, str, str | None], list[str]] = {}
    if evaluation.verdict is Verdict.REGRESSION or any(t.storm for t in evaluation.tests):
        first = source.run(
            "first_failing_calls",
            {
                **sig_common,
                "version": deploy.version,
                "since": deploy.ts,
                "until": until,
                "per_group": config.first_ids,
            },
        )
        for r in first.to_pylist():
            ids.setdefault((r["tool"], r["code"], r["field"]), []).append(r["correlation_id"])
    # detected_at is the evaluation time (docs/detection.md); the window may end earlier
    # (at the horizon), which window_end says.
    findings, notes = _deploy_findings(deploy, evaluation, ids, until, config, detected_at=now)
    return DeployReport(evaluation.verdict, evaluation.reason, deploy, findings, notes, evaluation)


def _serving_before(
    source: Source, deploy: DeployInfo, config: DetectConfig, *, known_by: datetime
) -> DeployInfo:
    """`deploy` with the version that was serving before it as its previous version.

    The markers' order names the version first deployed before this one; after a
    rollback (1.0 -> 2.0 -> back to 1.0 -> 2.1) that is the broken 2.0, against which a
    still-broken 2.1 looks healthy.  The calls say what was serving.
    """
    rows = source.run(
        "versions_serving",
        {
            "service": deploy.service,
            "environment": deploy.environment,
            "since": deploy.ts - timedelta(seconds=config.serving_window_s),
            "until": deploy.ts,
            "known_by": known_by,
        },
    ).to_pylist()
    serving = next((str(r["version"]) for r in rows if r["version"] != deploy.version), None)
    if serving is None or serving == deploy.previous_version:
        return deploy
    return replace(deploy, previous_version=serving)


def _ids_for(
    ids: Mapping[tuple[str, str, str | None], list[str]],
    tool: str,
    code: str,
    fld: str | None,
    limit: int,
) -> tuple[str, ...]:
    if tool != AGGREGATE_TOOL and (tool, code, fld) in ids:
        return tuple(ids[(tool, code, fld)][:limit])
    picked = [
        i
        for (t, c, _), values in sorted(ids.items(), key=lambda kv: str(kv[0]))
        for i in values
        if c == code and (tool in (AGGREGATE_TOOL, t))
    ]
    return tuple(dict.fromkeys(picked))[:limit]


def _deploy_findings(
    deploy: DeployInfo,
    evaluation: DeployEvaluation,
    ids: Mapping[tuple[str, str, str | None], list[str]],
    until: datetime,
    config: DetectConfig,
    *,
    detected_at: datetime | None = None,
) -> tuple[tuple[Finding, ...], tuple[Finding, ...]]:
    findings: list[Finding] = []
    notes: list[Finding] = []
    # A pooled finding only adds to per-tool findings of the same code when none exists.
    tool_codes = {t.code for t in evaluation.findings if t.tool != AGGREGATE_TOOL}
    for t in evaluation.tests:
        if t.finding and not (t.tool == AGGREGATE_TOOL and t.code in tool_codes):
            tool = None if t.tool == AGGREGATE_TOOL else t.tool
            findings.append(
                Finding(
                    kind=FindingKind.DEPLOY_REGRESSION,
                    code=t.code,
                    tool=tool,
                    field=t.field,
                    window_start=deploy.ts,
                    window_end=until,
                    calls_before=int(t.calls_old),
                    errors_before=int(t.errors_old),
                    calls_after=int(t.calls_new),
                    errors_after=int(t.errors_new),
                    traces_after=int(t.units_new),
                    ratio=t.ratio,
                    ratio_ci=t.ratio_ci,
                    p_value=t.p_value,
                    p_adjusted=t.p_adjusted,
                    excess_share=t.excess_share,
                    phase=t.phase,
                    look_s=None if t.look_min is None else t.look_min * 60,
                    level=t.level,
                    alpha_spent=t.alpha_spent,
                    next_look_at=_next_look(deploy, evaluation),
                    correlation_ids=_ids_for(ids, t.tool, t.code, t.field, config.first_ids),
                    summary=(
                        f"{t.code} on {tool or 'all tools'}"
                        + (f" (most of the excess on field {t.field})" if t.field else "")
                        + f": {_pct(t.errors_old, t.calls_old)} -> "
                        f"{_pct(t.errors_new, t.calls_new)} of its calls, x{_fmt(t.ratio)} "
                        f"({int(t.units_new)} traces), q={t.p_adjusted:.2g}"
                        + (
                            f" at the +{t.look_min // 60} h look"
                            if t.family == "long" and t.look_min
                            else ""
                        )
                    ),
                    service=deploy.service,
                    version=deploy.version,
                    environment=deploy.environment,
                    previous_version=deploy.previous_version,
                    detected_at=detected_at or until,
                )
            )
        elif t.storm and t.tool != AGGREGATE_TOOL:
            notes.append(
                Finding(
                    kind=FindingKind.LOOP_MISUSE,
                    code=t.code,
                    tool=t.tool,
                    window_start=deploy.ts,
                    window_end=until,
                    calls_before=int(t.calls_old),
                    errors_before=int(t.errors_old),
                    calls_after=int(t.calls_new),
                    errors_after=int(t.errors_new),
                    traces_after=int(t.units_new + t.loops_new),
                    label=("storm",),
                    correlation_ids=_ids_for(ids, t.tool, t.code, None, config.first_ids),
                    summary=(
                        f"{int(t.errors_new)} {t.code} errors from only "
                        f"{int(t.units_new + t.loops_new)} traces ({int(t.loops_new)} looping) "
                        f"on {t.tool}: retry loops, not a regression of the deploy"
                    ),
                    service=deploy.service,
                    version=deploy.version,
                    environment=deploy.environment,
                    previous_version=deploy.previous_version,
                    detected_at=detected_at or until,
                )
            )
    for s, adj, hit in evaluation.signatures:
        if not hit:
            continue
        findings.append(
            Finding(
                kind=FindingKind.NEW_SIGNATURE,
                code=s.code,
                tool=s.tool,
                field=s.field,
                window_start=deploy.ts,
                window_end=until,
                calls_before=s.calls_old,
                errors_before=0,
                calls_after=s.calls_new,
                errors_after=s.errors,
                traces_after=s.traces,
                p_value=s.p_value,
                p_adjusted=adj,
                correlation_ids=tuple(ids.get((s.tool, s.code, s.field), ())[: config.first_ids]),
                summary=(
                    f"new signature {s.tool}/{s.code}/{s.field}: {s.errors} calls in "
                    f"{s.traces} traces, never in {s.calls_old} earlier calls"
                ),
                service=deploy.service,
                version=deploy.version,
                environment=deploy.environment,
                previous_version=deploy.previous_version,
                detected_at=detected_at or until,
            )
        )
    return tuple(findings), tuple(notes)


def _next_look(deploy: DeployInfo, evaluation: DeployEvaluation) -> datetime | None:
    if evaluation.next_look_min is None:
        return None
    return deploy.ts + timedelta(minutes=evaluation.next_look_min)


def confidence(report: DeployReport, *, closest: int = 3) -> dict[str, object] | None:
    """How sure the verdict is and what would make it surer (the check JSON's `confidence`).

    Per family, its level and the share of it spent by the looks so far; the long looks
    done and the time of the next; per gated code, the service-wide pool and the
    `closest` tools nearest an alarm (smallest adjusted p), each with its adjusted p,
    ratio, failing traces seen and expected at the previous version's rate, and the
    traces that would have flagged it on the exposure seen so far.
    """
    ev = report.evaluation
    if ev is None or report.deploy is None:
        return None
    deploy = report.deploy
    families: dict[str, dict[str, object]] = {}
    for t in ev.tests:
        families.setdefault(t.family, {"level": t.level, "alpha_spent": round(t.alpha_spent, 4)})
    rows: list[dict[str, object]] = []
    by_code: dict[str, list[Any]] = {}
    for t in ev.tests:
        by_code.setdefault(t.code, []).append(t)
    for tests in by_code.values():
        pool = [t for t in tests if t.tool == AGGREGATE_TOOL]
        tools = sorted(
            (t for t in tests if t.tool != AGGREGATE_TOOL and t.baseline_ok),
            key=lambda t: t.p_adjusted,
        )[:closest]
        rows.extend(
            {
                "tool": None if t.tool == AGGREGATE_TOOL else t.tool,
                "code": t.code,
                "family": t.family,
                "finding": t.finding,
                "p_adjusted": round(t.p_adjusted, 6),
                "level": t.level,
                "ratio": None if t.ratio is None else round(t.ratio, 4),
                "traces_after": int(t.units_new),
                "traces_expected": round(t.traces_expected, 2),
                "traces_needed": t.traces_needed,
                "look_s": None if t.look_min is None else t.look_min * 60,
            }
            for t in (*pool, *tools)
        )
    nxt = _next_look(deploy, ev)
    return {
        "families": families,
        "long_looks_done_s": [m * 60 for m in ev.long_looks_done],
        "next_look_at": None if nxt is None else nxt.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "tests": rows,
    }


def _pct(x: float, n: float) -> str:
    return f"{100 * x / n:.2f}%" if n else "n/a"


def _fmt(value: float | None) -> str:
    return "inf" if value is None else f"{value:.2f}"
