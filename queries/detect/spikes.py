"""Spikes of one code (not_found by default) per (service, tool), with or without a deploy.

`detect_spikes` reads `spike_slots` (the last hour's 5-minute slots, the same slots on
earlier days, the rest of the last 24 hours), groups them into one `SpikeSeries` per
(service, tool) (`spike_series_from_table`), asks `evaluate_spike_series` (pure: arrays
in, a `SpikeAlarm` or None out) for two consecutive significant slots, adjusts the
p-values over every series tested, and labels each spike with `spike_label`
(deploy-related or not; broad, when the world went empty, or narrow, when the model may
be inventing ids).  docs/detection.md gives the method; the benchmark drives the pure part.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime, timedelta

import numpy as np
import pyarrow as pa

from errscope.queries.detect.config import (
    DEFAULT_CONFIG,
    DetectConfig,
    Source,
    evaluation_time,
    received_by,
)
from errscope.queries.detect.stats import (
    Array,
    benjamini_hochberg,
    nbinom_sf,
    poisson_ci,
    poisson_sf,
    robust_scale,
)
from errscope.queries.findings import Finding, FindingKind

__all__ = [
    "SpikeAlarm",
    "SpikeSeries",
    "detect_spikes",
    "evaluate_spike_series",
    "spike_label",
    "spike_series_from_table",
]


@dataclass(frozen=True, slots=True)
class SpikeSeries:
    """One (service, tool)'s slots of one code, as `spike_slots` returns them.

    `recent_*[j]` is slot j of the recent window (0 newest); `hist_*[d, j + 1]` is slot j
    (-1..R) on day d+1 before; `day_*` the last 24 hours' other slots (fallback baseline).
    """

    service: str
    tool: str
    recent_calls: Array
    recent_errors: Array
    hist_calls: Array
    hist_errors: Array
    day_calls: Array
    day_errors: Array
    recent_traces: Array | None = None  # distinct failing traces per recent slot


@dataclass(frozen=True, slots=True)
class SpikeAlarm:
    """Two consecutive significant slots of one (service, tool)."""

    service: str
    tool: str
    slot: int
    calls: float
    errors: float
    expected: float
    calls_before: float
    errors_before: float
    p_value: float
    dispersion: float
    baseline: str


def _expected_rates(series: SpikeSeries, config: DetectConfig) -> tuple[Array, str, float, float]:
    """Expected error rate per recent slot: same slot ±1 on earlier days, else last 24 h."""
    recent = series.recent_calls.size
    hist_c, hist_e = series.hist_calls, series.hist_errors
    days_with = int((hist_c.sum(axis=1) > 0).sum()) if hist_c.size else 0
    if days_with >= config.spike_min_days:
        # window sums of slots j-1, j, j+1 per day: columns j, j+1, j+2 of hist
        win_c = hist_c[:, :recent] + hist_c[:, 1 : recent + 1] + hist_c[:, 2 : recent + 2]
        win_e = hist_e[:, :recent] + hist_e[:, 1 : recent + 1] + hist_e[:, 2 : recent + 2]
        with np.errstate(invalid="ignore", divide="ignore"):
            rates = np.where(win_c > 0, win_e / np.where(win_c > 0, win_c, 1), np.nan)
        ok = ~np.all(np.isnan(rates), axis=0)
        med = np.full(recent, np.nan)
        med[ok] = np.nanmedian(rates[:, ok], axis=0)
        fallback = float(hist_e.sum() / hist_c.sum()) if hist_c.sum() > 0 else 0.0
        return (
            np.where(np.isnan(med), fallback, med),
            "same_slot_previous_days",
            float(hist_c.sum()),
            float(hist_e.sum()),
        )
    calls, errs = series.day_calls, series.day_errors
    hours = calls.size // 12
    if hours >= 3:
        hc = calls[: hours * 12].reshape(hours, 12).sum(axis=1)
        he = errs[: hours * 12].reshape(hours, 12).sum(axis=1)
        keep = hc > 0
        rate = float(np.median(he[keep] / hc[keep])) if keep.any() else 0.0
    else:
        rate = float(errs.sum() / calls.sum()) if calls.sum() > 0 else 0.0
    return np.full(recent, rate), "last_24h", float(calls.sum()), float(errs.sum())


def _robust_dispersion(series: SpikeSeries, rate: float, cap: float) -> float:
    """max(1, (MAD of Pearson residuals)^2) over last-24 h cells expecting >= 5 errors."""
    calls, errs = series.day_calls, series.day_errors
    if rate <= 0 or calls.size == 0:
        return 1.0
    per_slot = float(calls.mean()) * rate
    block = max(1, math.ceil(5.0 / per_slot)) if per_slot > 0 else calls.size
    cells = calls.size // block
    if cells < 12:
        return 1.0
    c = calls[: cells * block].reshape(cells, block).sum(axis=1)
    e = errs[: cells * block].reshape(cells, block).sum(axis=1)
    mu = c * rate
    keep = mu > 0
    resid = (e[keep] - mu[keep]) / np.sqrt(mu[keep])
    mad = robust_scale(resid)
    return float(min(cap, max(1.0, mad**2)))


def evaluate_spike_series(
    series: SpikeSeries, config: DetectConfig = DEFAULT_CONFIG
) -> SpikeAlarm | None:
    """The newest pair of consecutive significant slots of one (service, tool), if any.

    Expected count mu = calls x expected rate, so a traffic-only burst raises mu with the
    count and does not alarm.  The tail probability is negative-binomial with variance
    phi*mu (phi robustly estimated), Poisson when phi is 1.
    """
    rates, basis, calls_before, errors_before = _expected_rates(series, config)
    pooled = float(np.nanmedian(rates)) if rates.size else 0.0
    phi = _robust_dispersion(series, pooled, config.max_dispersion)
    k = series.recent_errors
    mu = np.maximum(series.recent_calls * rates, 1e-9)
    if phi > 1.0 + 1e-6:
        size = mu / (phi - 1.0)
        p = nbinom_sf(k, size, 1.0 / phi)
    else:
        p = poisson_sf(k, mu)
    hit = (
        (np.asarray(p) < config.spike_p)
        & (k >= config.spike_min_count)
        & (k >= config.spike_min_ratio * mu)
    )
    for j in range(k.size - 1):
        if hit[j] and hit[j + 1]:
            return SpikeAlarm(
                service=series.service,
                tool=series.tool,
                slot=j,
                calls=float(series.recent_calls[j] + series.recent_calls[j + 1]),
                errors=float(k[j] + k[j + 1]),
                expected=float(mu[j] + mu[j + 1]),
                calls_before=calls_before,
                errors_before=errors_before,
                p_value=float(max(p[j], p[j + 1])),
                dispersion=phi,
                baseline=basis,
            )
    return None


def _slot_traces(per_slot: Array | None, slot: int) -> int:
    if per_slot is None:
        return 0
    return int(per_slot[slot : slot + 2].sum())


def spike_series_from_table(
    table: pa.Table, config: DetectConfig = DEFAULT_CONFIG
) -> list[SpikeSeries]:
    """Group `spike_slots` rows into one `SpikeSeries` per (service, tool)."""
    recent = config.spike_recent_s // config.spike_bucket_s
    per_day = 86400 // config.spike_bucket_s
    days = config.spike_history_days
    groups: dict[tuple[str, str], list[dict[str, object]]] = {}
    for r in table.to_pylist():
        groups.setdefault((str(r["service"]), str(r["tool"])), []).append(r)
    out: list[SpikeSeries] = []
    for (service, tool), rows in sorted(groups.items()):
        rc, re_, rt = np.zeros(recent), np.zeros(recent), np.zeros(recent)
        hc, he = np.zeros((days, recent + 2)), np.zeros((days, recent + 2))
        dc, de = np.zeros(per_day - recent), np.zeros(per_day - recent)
        for r in rows:
            day, slot = int(str(r["day"])), int(str(r["slot"]))
            calls, errs = float(str(r["calls"])), float(str(r["errors"]))
            if day == 0 and 0 <= slot < recent:
                rc[slot], re_[slot] = calls, errs
                rt[slot] = float(str(r.get("traces") or 0))
            elif day == 0 and recent <= slot < per_day:
                dc[slot - recent], de[slot - recent] = calls, errs
            elif 1 <= day <= days and -1 <= slot <= recent:
                hc[day - 1, slot + 1], he[day - 1, slot + 1] = calls, errs
        out.append(SpikeSeries(service, tool, rc, re_, hc, he, dc, de, rt))
    return out


def detect_spikes(
    source: Source,
    *,
    as_of: datetime | None = None,
    service: str | None = None,
    environment: str | None = None,
    code: str | None = None,
    config: DetectConfig = DEFAULT_CONFIG,
    known_by: datetime | None = None,
) -> list[Finding]:
    """Spikes of one code (default not_found) per (service, tool), deploy or not.

    Labels: `deploy_related` when the service had a deploy within `spike_deploy_window_s`
    before the spike (else `not_deploy_related`); `broad` when `spike_broad_tools` or more
    tools of the service (or all of them) spike together — the world went empty — else
    `narrow`: one tool, where the model may be inventing ids.
    """
    now = evaluation_time(as_of)
    code = code or config.spike_code
    table = source.run(
        "spike_slots",
        {
            "code": code,
            "until": now,
            "known_by": received_by(known_by, now),
            "recent_s": config.spike_recent_s,
            "bucket_s": config.spike_bucket_s,
            "history_days": config.spike_history_days,
            "min_recent_errors": 2 * config.spike_min_count,
            "service": service,
            "environment": environment,
        },
    )
    series = spike_series_from_table(table, config)
    alarms = [a for s in series if (a := evaluate_spike_series(s, config)) is not None]
    if not alarms:
        return []
    traces = {(s.service, s.tool): s.recent_traces for s in series if s.recent_traces is not None}
    tested_p = [1.0] * (len(series) - len(alarms)) + [a.p_value for a in alarms]
    adjusted = benjamini_hochberg(tested_p)[len(series) - len(alarms) :]
    deploys = source.run(
        "deploy_markers",
        {
            "since": now - timedelta(seconds=config.spike_recent_s + config.spike_deploy_window_s),
            "until": now,
            "service": service,
            "environment": environment,
        },
    ).to_pylist()
    tools_per_service: dict[str, int] = {}
    for s in series:
        tools_per_service[s.service] = tools_per_service.get(s.service, 0) + 1
    alarmed: dict[str, int] = {}
    for a in alarms:
        alarmed[a.service] = alarmed.get(a.service, 0) + 1
    bucket = timedelta(seconds=config.spike_bucket_s)
    findings: list[Finding] = []
    for a, adj in zip(alarms, adjusted, strict=True):
        end = now - a.slot * bucket
        start = end - 2 * bucket
        near = [
            d
            for d in deploys
            if d["service"] == a.service
            and start - timedelta(seconds=config.spike_deploy_window_s) <= d["ts"] <= end
        ]
        label = spike_label(
            alarmed[a.service], tools_per_service[a.service], deploy_near=bool(near), config=config
        )
        near_one_env = bool(near) and len({d["environment"] for d in near}) == 1
        ratio = a.errors / a.expected
        lo, hi = poisson_ci(a.errors, config.ci_level)
        findings.append(
            Finding(
                kind=FindingKind.SPIKE,
                service=a.service,
                # A version only when the deploys near it agree on the environment: an
                # unfiltered spike pools every environment, and staging's 2.0 is not prod's.
                version=str(near[-1]["version"]) if near_one_env else None,
                environment=environment or (near[-1]["environment"] if near_one_env else None),
                tool=a.tool,
                code=code,
                detected_at=now,
                window_start=start,
                window_end=end,
                calls_before=int(a.calls_before),
                errors_before=int(a.errors_before),
                calls_after=int(a.calls),
                errors_after=int(a.errors),
                # failing traces of the two slots (a trace in both is counted in each)
                traces_after=_slot_traces(traces.get((a.service, a.tool)), a.slot),
                ratio=ratio,
                ratio_ci=(lo / a.expected, hi / a.expected),
                p_value=a.p_value,
                p_adjusted=float(adj),
                phase=a.baseline,
                label=label,
                summary=(
                    f"{code} spike on {a.service}/{a.tool}: {int(a.errors)} vs "
                    f"{a.expected:.1f} expected in 10 min (x{ratio:.1f}), {', '.join(label)}"
                ),
            )
        )
    return findings


def spike_label(
    alarmed_tools: int, tested_tools: int, *, deploy_near: bool, config: DetectConfig
) -> tuple[str, str]:
    """("deploy_related" | "not_deploy_related", "broad" | "narrow") for one spike."""
    broad = alarmed_tools > 1 and alarmed_tools >= min(config.spike_broad_tools, tested_tools)
    return (
        "deploy_related" if deploy_near else "not_deploy_related",
        "broad" if broad else "narrow",
    )
