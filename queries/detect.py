"""Detection: deploy regressions, new error signatures, spikes and loop misuse.

The one statistics module: the dashboard, `errscope check`, `errscope findings`, the
tests and the benchmarks all call it.  SQL does the counting (named queries, so it works
the same on a file and through the query API); this module does the statistics on the
small tables the queries return.  docs/detection.md explains the methods.

Layers:
- `detect_deploy`, `detect_spikes`, `detect_loop_misuse`, `detect_all` read a
  `QuerySource` and return findings; every query they run is bounded by `as_of`, so
  evaluating "as if it were 10:05" sees nothing written after 10:05.
- `DeployCounts` / `evaluate_deploy` and `SpikeSeries` / `evaluate_spike_series` are
  pure: arrays in, verdicts out.  The benchmarks drive them with simulated counts.
- `mixture_e_values`, `binom_sf`, `rate_ratio_ci`, `benjamini_hochberg`, `nb_alpha`,
  `inflation` (and the older `dispersion`) are the statistical primitives.

Nothing here raises on sparse or empty data: too little data is a verdict
(`INSUFFICIENT_DATA`), never an exception and never a pass.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import Final, Protocol

import numpy as np
import numpy.typing as npt
import pyarrow as pa
from scipy import special, stats

from errscope.collector.errors import QueryError, QueryErrorKind
from errscope.queries.findings import Finding, FindingKind, Verdict

__all__ = [
    "AGGREGATE_TOOL",
    "DEFAULT_CONFIG",
    "DeployCounts",
    "DeployEvaluation",
    "DeployInfo",
    "DeployReport",
    "DetectConfig",
    "SignatureTest",
    "SpikeAlarm",
    "SpikeSeries",
    "TestResult",
    "benjamini_hochberg",
    "binom_sf",
    "counts_from_table",
    "detect_all",
    "detect_deploy",
    "detect_loop_misuse",
    "detect_spikes",
    "dispersion",
    "evaluate_deploy",
    "evaluate_spike_series",
    "find_deploy",
    "inflation",
    "mixture_e_values",
    "nb_alpha",
    "rate_ratio_ci",
    "signature_tests",
    "spike_label",
    "spike_series_from_table",
    "with_codes",
]

Array = npt.NDArray[np.float64]

#: The pseudo-tool of the service-wide test of one code (all tools pooled).
AGGREGATE_TOOL: Final = "*"
_MINUTE: Final = timedelta(minutes=1)


class Source(Protocol):
    """The part of `errscope.queries.source.QuerySource` detection needs."""

    def run(self, name: str, params: Mapping[str, object] | None = None) -> pa.Table:
        """Run a named query."""
        ...


@dataclass(frozen=True, slots=True)
class DetectConfig:
    """Every threshold detection uses; the defaults are docs/detection.md's.

    Deploys: `q` is the per-deploy false-discovery level (Benjamini-Hochberg over every
    test of the deploy); `theta0` the largest increase still counted as noise (drift);
    `min_ratio`, `min_errors` and the baseline minimums are the guards below which a
    test can neither find a regression nor pass.  `codes` are the gated codes (the CLI's
    `--codes` widens them).  `looks_s` are the looks of the baseline comparison (every
    minute early on) and `look_weights` the share of the error rate each spends (they
    sum to at most 1).  `max_dispersion` caps the estimated over-dispersion.
    Spikes: `spike_p` per bucket, two consecutive buckets, at least `spike_min_count`
    errors and `spike_min_ratio` times the expected count.
    """

    codes: tuple[str, ...] = ("invalid_args",)
    q: float = 0.01
    theta0: float = 1.1
    thetas: tuple[float, ...] = (1.5, 2.0, 3.0, 5.0, 10.0)
    min_ratio: float = 1.5
    min_errors: int = 5
    min_baseline_errors: int = 20
    min_baseline_calls: int = 600
    baseline_s: int = 7200
    # The baseline is the version that served most calls in this long before the deploy,
    # which after a rollback is not the version deployed before this one.
    serving_window_s: int = 1800
    # A look every minute for 15 minutes, then at 20, 30, 45 and 60; the gate's decision
    # points (5 and 15 minutes, then 10) spend most of the error rate.
    looks_s: tuple[int, ...] = (*range(60, 901, 60), 1200, 1800, 2700, 3600)
    look_weights: tuple[float, ...] = (
        *(0.01,) * 4,
        0.35,
        *(0.005,) * 4,
        0.06,
        *(0.005,) * 4,
        0.35,
        0.04,
        0.05,
        0.04,
        0.03,
    )
    # Share of the error rate the overlap phase's SPRT spends when a deploy has one; the
    # baseline looks spend the rest (weighted Bonferroni over the two families).
    overlap_seq_share: float = 0.2
    horizon_s: int = 7200
    storm_min_loops: int = 3
    healthy_after_s: int = 900
    cutover_share: float = 0.95
    max_dispersion: float = 4.0
    ci_level: float = 0.95
    signature_history_s: int = 7 * 86400
    signature_min_traces: int = 3
    signature_min_ids: int = 2
    signature_min_baseline_calls: int = 1000
    signature_p: float = 1e-3
    spike_code: str = "not_found"
    spike_bucket_s: int = 300
    spike_recent_s: int = 3600
    spike_history_days: int = 7
    spike_min_days: int = 3
    spike_p: float = 1e-4
    spike_min_count: int = 10
    spike_min_ratio: float = 2.0
    spike_broad_tools: int = 3
    spike_deploy_window_s: int = 1800
    loop_window_s: int = 3600
    first_ids: int = 5


DEFAULT_CONFIG: Final = DetectConfig()


# ===================================================================== primitives


def binom_sf(k: Array | float, n: Array | float, p: Array | float) -> Array:
    """P(X >= k) for X ~ Binomial(n, p), for real k and n (deflated counts allowed).

    Uses the regularised incomplete beta function, I_p(k, n - k + 1); k <= 0 gives 1.
    """
    k_ = np.asarray(k, dtype=np.float64)
    n_ = np.asarray(n, dtype=np.float64)
    p_ = np.clip(np.asarray(p, dtype=np.float64), 0.0, 1.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        out = special.betainc(np.maximum(k_, 1e-12), np.maximum(n_ - k_ + 1.0, 1e-12), p_)
    out = np.where(k_ <= 0, 1.0, out)
    return np.asarray(np.clip(np.nan_to_num(out, nan=1.0), 0.0, 1.0), dtype=np.float64)


def mixture_e_values(
    x_new: Array,
    x_old: Array,
    share_new: Array,
    *,
    thetas: Sequence[float] = DEFAULT_CONFIG.thetas,
    theta0: float = DEFAULT_CONFIG.theta0,
) -> Array:
    """The running e-value of a grid-mixture SPRT on the new version's share of errors.

    Conditional on the errors in a minute, the new version's count is binomial with
    success probability p(theta) = theta*rho / (theta*rho + 1 - rho), rho being its share
    of calls.  Against the null theta <= theta0 the running product of likelihood ratios,
    averaged over the grid `thetas`, is a non-negative supermartingale, so by Ville's
    inequality P(sup_t E_t >= 1/alpha) <= alpha however often it is looked at.

    Arrays are (..., minutes); minutes where rho is 0 or 1 carry no information.  Returns
    E_t with the same shape.
    """
    rho = np.asarray(share_new, dtype=np.float64)
    valid = (rho > 0.0) & (rho < 1.0)
    rho = np.where(valid, rho, 0.5)
    x1 = np.where(valid, x_new, 0.0)
    x0 = np.where(valid, x_old, 0.0)
    p0 = theta0 * rho / (theta0 * rho + 1.0 - rho)
    log_sum: Array | None = None
    grid = np.asarray(thetas, dtype=np.float64)
    for theta in grid:
        p1 = theta * rho / (theta * rho + 1.0 - rho)
        step = x1 * np.log(p1 / p0) + x0 * np.log((1.0 - p1) / (1.0 - p0))
        cum = np.cumsum(step, axis=-1)
        log_sum = cum if log_sum is None else np.logaddexp(log_sum, cum)
    if log_sum is None:
        return np.zeros(np.shape(x1))
    return np.asarray(np.exp(log_sum - math.log(len(grid))), dtype=np.float64)


def rate_ratio_ci(
    x_new: float, n_new: float, x_old: float, n_old: float, *, level: float = 0.95
) -> tuple[float, float]:
    """Exact (Clopper-Pearson, conditional) CI of (x_new/n_new) / (x_old/n_old).

    Conditional on the total, x_new is binomial with p = theta*n_new/(theta*n_new+n_old);
    the CI of p maps to theta = p/(1-p) * n_old/n_new.  Real-valued counts are allowed.
    """
    total = x_new + x_old
    if n_new <= 0 or n_old <= 0 or total <= 0:
        return (0.0, math.inf)
    tail = (1.0 - level) / 2.0
    lo_p = float(stats.beta.ppf(tail, x_new, x_old + 1.0)) if x_new > 0 else 0.0
    hi_p = float(stats.beta.ppf(1.0 - tail, x_new + 1.0, x_old)) if x_old > 0 else 1.0

    def to_theta(p: float) -> float:
        return math.inf if p >= 1.0 else p / (1.0 - p) * n_old / n_new

    return (to_theta(lo_p), to_theta(hi_p))


def benjamini_hochberg(p_values: Sequence[float] | Array) -> Array:
    """BH-adjusted p-values (q-values); an empty family gives an empty array."""
    p = np.asarray(p_values, dtype=np.float64)
    if p.size == 0:
        return p
    adjusted = stats.false_discovery_control(np.clip(p, 0.0, 1.0), method="bh")
    return np.asarray(adjusted, dtype=np.float64)


def dispersion(counts: Array, expected: Array, *, min_cells: int = 5, cap: float = 4.0) -> float:
    """Pearson dispersion of counts around their expectation, pooled to cells >= 5 expected.

    Cells are merged in order until each expects at least five events (sparse Pearson
    residuals are dominated by single events); with fewer than `min_cells` merged cells
    the answer is 1 (Poisson).  The result is clipped to [1, cap].
    """
    x = np.asarray(counts, dtype=np.float64).ravel()
    mu = np.asarray(expected, dtype=np.float64).ravel()
    if mu.size == 0 or float(mu.sum()) <= 0:
        return 1.0
    mean = float(mu.mean())
    block = max(1, math.ceil(5.0 / mean)) if mean > 0 else 1
    cells = mu.size // block
    if cells < min_cells:
        return 1.0
    xs = x[: cells * block].reshape(cells, block).sum(axis=1)
    ms = mu[: cells * block].reshape(cells, block).sum(axis=1)
    keep = ms > 0
    chi2 = float((((xs - ms) ** 2)[keep] / ms[keep]).sum())
    df = int(keep.sum()) - 1
    if df < min_cells - 1:
        return 1.0
    return float(min(cap, max(1.0, chi2 / df)))


def nb_alpha(counts: Array, expected: Array, *, cap: float = 4.0) -> float:
    """Method-of-moments NB2 over-dispersion: Var(x) = mu + alpha * mu^2, alpha >= 0.

    alpha = sum((x - mu)^2 - x) / sum(mu^2) over cells with mu > 0, clipped to [0, cap].
    A gamma(k) multiplier on each cell's rate gives alpha = 1/k whatever the cell's
    size, so a traffic burst (one large cell) no longer passes for extra noise the way it
    does in a single Pearson ratio, where a cell's excess variance grows with its mean.
    """
    x = np.asarray(counts, dtype=np.float64).ravel()
    mu = np.asarray(expected, dtype=np.float64).ravel()
    keep = mu > 0
    denominator = float((mu[keep] ** 2).sum())
    if denominator <= 0:
        return 0.0
    numerator = float((((x - mu) ** 2 - x)[keep]).sum())
    return float(min(cap, max(0.0, numerator / denominator)))


def inflation(alpha: Array | float, rate: Array | float, n_sum: Array, n_sq_sum: Array) -> Array:
    """phi = Var / mean of a sum of NB2 cells with expectations rate * n_i (>= 1).

    Var(sum) = sum(mu_i) + alpha * sum(mu_i^2), so phi = 1 + alpha * rate * sum(n_i^2) /
    sum(n_i); the sums of calls and of squared calls are passed in.
    """
    with np.errstate(invalid="ignore", divide="ignore"):
        ratio = np.where(n_sum > 0, n_sq_sum / np.where(n_sum > 0, n_sum, 1.0), 0.0)
    return np.asarray(1.0 + np.asarray(alpha) * np.asarray(rate) * ratio, dtype=np.float64)


# ===================================================================== deploys


@dataclass(frozen=True, slots=True)
class DeployInfo:
    """A deploy as `deploy_markers` returns it."""

    service: str
    version: str
    environment: str | None
    ts: datetime
    previous_version: str | None


@dataclass(frozen=True, slots=True)
class DeployCounts:
    """Per-minute counts around one deploy, as arrays.

    Minute index 0 is the deploy's minute; `start_min` (negative) is the first baseline
    minute.  `calls[v, t, m]` are the calls of tool t by version v (0 old, 1 new);
    `units[v, t, c, m]` distinct traces first failing with code c that minute and
    `errors[v, t, c, m]` the calls with code c.  `field_units[v, f, m]` splits units by
    `field_keys[f] = (tool index, code index, field)`.  `loop_units[v, t, c, m]` (same shape
    as `units`, None for none) are the units that looped: traces failing more than twice on
    one tool, code and field.  They are loop misuse, not deploy evidence: the tests count
    `units - loop_units`, and `field_units` should leave them out already.
    """

    deploy: DeployInfo
    tools: tuple[str, ...]
    codes: tuple[str, ...]
    start_min: int
    calls: Array
    units: Array
    errors: Array
    field_keys: tuple[tuple[int, int, str | None], ...]
    field_units: Array
    loop_units: Array | None = None

    @property
    def evidence(self) -> Array:
        """The failing traces the tests count: `units` without the looping ones."""
        if self.loop_units is None:
            return self.units
        return np.asarray(np.maximum(0.0, self.units - self.loop_units), dtype=np.float64)

    @property
    def minutes(self) -> int:
        """How many minutes the arrays cover."""
        return int(self.calls.shape[-1])


@dataclass(frozen=True, slots=True)
class TestResult:
    """One (tool, code) test of one deploy, as of one evaluation time."""

    tool: str
    code: str
    field: str | None
    p_value: float
    p_adjusted: float
    ratio: float | None
    ratio_ci: tuple[float, float] | None
    units_new: float
    errors_new: float
    calls_new: float
    units_old: float
    errors_old: float
    calls_old: float
    baseline_ok: bool
    sufficient: bool
    finding: bool
    excess_share: float | None
    phase: str
    storm: bool
    loops_new: float = 0.0


@dataclass(frozen=True, slots=True)
class SignatureTest:
    """A (tool, code, field) of the new version never seen in the earlier exposure."""

    tool: str
    code: str
    field: str | None
    traces: int
    errors: int
    ids: int
    calls_new: int
    calls_old: int
    first_ts: datetime | None
    p_value: float
    baseline_ok: bool


@dataclass(frozen=True, slots=True)
class DeployEvaluation:
    """The verdict on one deploy at one elapsed time, with every test behind it."""

    verdict: Verdict
    elapsed_min: int
    cutover_min: int
    dispersion: dict[str, float]
    tests: tuple[TestResult, ...]
    signatures: tuple[tuple[SignatureTest, float, bool], ...]
    reason: str

    @property
    def findings(self) -> tuple[TestResult, ...]:
        """The tests that found a regression."""
        return tuple(t for t in self.tests if t.finding)


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


def _gated(counts: DeployCounts, codes: Sequence[str]) -> DeployCounts:
    """`counts` restricted to the gated `codes` (all of its codes when none is gated).

    The fallback keeps a caller that counted other codes from getting a verdict with no
    test behind it.
    """
    keep = [i for i, c in enumerate(counts.codes) if c in codes]
    if not keep or len(keep) == len(counts.codes):
        return counts
    remap = {old: new for new, old in enumerate(keep)}
    fields = [f for f, (_, c, _) in enumerate(counts.field_keys) if c in remap]
    return replace(
        counts,
        codes=tuple(counts.codes[i] for i in keep),
        units=counts.units[:, :, keep],
        loop_units=None if counts.loop_units is None else counts.loop_units[:, :, keep],
        errors=counts.errors[:, :, keep],
        field_keys=tuple(
            (t, remap[c], name) for t, c, name in (counts.field_keys[f] for f in fields)
        ),
        field_units=counts.field_units[:, fields],
    )


def _cutover_minute(counts: DeployCounts, elapsed: int, share: float) -> int:
    """One past the last minute both versions served (the new one under `share`)."""
    lo = -counts.start_min
    new = counts.calls[1].sum(axis=0)[lo : lo + elapsed]
    old = counts.calls[0].sum(axis=0)[lo : lo + elapsed]
    total = new + old
    with np.errstate(invalid="ignore", divide="ignore"):
        overlap = (new > 0) & (old > 0) & (new / np.where(total > 0, total, 1) < share)
    idx = np.flatnonzero(overlap)
    return int(idx[-1]) + 1 if idx.size else 0


def _look_p_values(
    x1: Array, n1: Array, x0: Array, n0: Array, *, phi1: Array, phi0: Array, theta0: float
) -> Array:
    """One-sided exact conditional p-values of rate_new <= theta0 * rate_old.

    Each side is deflated by its own variance inflation (counts and exposure divided by
    phi), so an over-dispersed count weighs as the Poisson count of equal variance.
    """
    e1, e0 = n1 / phi1, n0 / phi0
    with np.errstate(invalid="ignore", divide="ignore"):
        p_null = theta0 * e1 / (theta0 * e1 + e0)
    p = binom_sf(x1 / phi1, x1 / phi1 + x0 / phi0, p_null)
    return np.where((n1 > 0) & (n0 > 0), p, 1.0)


@dataclass(frozen=True, slots=True)
class _Sums:
    """Per-(tool, code) totals of one evaluation; the last tool row is the service pool."""

    units_new: Array
    calls_new: Array
    errors_new: Array
    units_old: Array
    calls_old: Array
    errors_old: Array


def _with_pool(values: Array) -> Array:
    """Append the sum over tools (axis 1) as one more tool: the service-wide test."""
    return np.concatenate([values, values.sum(axis=1, keepdims=True)], axis=1)


def _alphas(calls_old: Array, units_old: Array, base_end: int, cap: float) -> Array:
    """NB2 over-dispersion per (tool row, code) from the old version's baseline minutes.

    The tool rows share one service-wide estimate per code (each tool-minute a cell, its
    expectation the tool's own baseline rate times its calls): an hour of one tool is too
    few cells for a stable estimate.  The pool row (last) gets its own estimate from the
    pooled per-minute series, which is smaller when tools fluctuate independently and
    the same when a common shock moves them all.
    """
    n = calls_old[:, None, :base_end]
    x = units_old[:, :, :base_end]
    with np.errstate(invalid="ignore", divide="ignore"):
        rate = x.sum(axis=-1, keepdims=True) / np.maximum(n.sum(axis=-1, keepdims=True), 1.0)
    mu = np.broadcast_to(n * rate, x.shape)
    n_rows, n_codes = x.shape[0], x.shape[1]
    out = np.zeros((n_rows, n_codes))
    for c in range(n_codes):
        out[:-1, c] = nb_alpha(x[:-1, c], mu[:-1, c], cap=cap)
        out[-1, c] = nb_alpha(x[-1, c], mu[-1, c], cap=cap)
    return out


def _look_tests(
    calls: Array,
    units: Array,
    *,
    lo: int,
    cut: int,
    elapsed: int,
    alpha: Array,
    config: DetectConfig,
) -> tuple[Array, Array, Array]:
    """Weighted-Bonferroni p-values of the looks against the previous version.

    Returns (p, phi_new, phi_old): the p-value over every look up to `elapsed`, and the
    variance inflations of the window as of `elapsed` (for the ratio's interval).  Every
    look is one exact conditional test spending its weight of the error rate, so the
    minimum over looks, divided by the weights, stays valid however the looks correlate.
    """
    if elapsed <= 0:
        ones = np.ones(units.shape[1:3])
        return ones, ones, ones
    looks = [
        (look_s // 60, w)
        for look_s, w in zip(config.looks_s, config.look_weights, strict=True)
        if 0 < look_s // 60 <= elapsed
    ]
    ends = np.array([m for m, _ in looks] + [elapsed], dtype=np.int64)
    weights = np.array([w for _, w in looks] + [1.0])
    n1_all = calls[1, :, lo : lo + elapsed]
    c_units = np.cumsum(units[1, :, :, lo : lo + elapsed], axis=-1)
    c_n1 = np.cumsum(n1_all, axis=-1)
    c_n1_sq = np.cumsum(n1_all**2, axis=-1)
    old_n = calls[0]
    c_x0 = np.cumsum(units[0], axis=-1)
    c_n0 = np.cumsum(old_n, axis=-1)
    c_n0_sq = np.cumsum(old_n**2, axis=-1)
    # (looks, tools, codes): new window [lo, lo + m), baseline [0, lo + min(cut, m))
    base = lo + np.minimum(cut, ends) - 1
    x1 = np.moveaxis(c_units[:, :, ends - 1], -1, 0)
    n1 = np.moveaxis(c_n1[:, ends - 1], -1, 0)[:, :, None]
    n1_sq = np.moveaxis(c_n1_sq[:, ends - 1], -1, 0)[:, :, None]
    if lo + min(cut, 1) <= 0:  # no baseline minute at all
        zeros = np.zeros((ends.size, *x1.shape[1:]))
        x0, n0, n0_sq = zeros, zeros[:, :, :1], zeros[:, :, :1]
    else:
        x0 = np.moveaxis(c_x0[:, :, base], -1, 0)
        n0 = np.moveaxis(c_n0[:, base], -1, 0)[:, :, None]
        n0_sq = np.moveaxis(c_n0_sq[:, base], -1, 0)[:, :, None]
    with np.errstate(invalid="ignore", divide="ignore"):
        rate0 = np.where(n0 > 0, x0 / np.where(n0 > 0, n0, 1.0), 0.0)
    # Not capped: a burst minute inside the window really does add alpha * mu^2.
    phi1 = inflation(alpha[None], rate0, n1, n1_sq)
    phi0 = inflation(alpha[None], rate0, n0, n0_sq)
    n1b, n0b = np.broadcast_to(n1, x1.shape), np.broadcast_to(n0, x0.shape)
    p = _look_p_values(x1, n1b, x0, n0b, phi1=phi1, phi0=phi0, theta0=config.theta0)
    spent = np.minimum(1.0, p[:-1] / weights[:-1, None, None])
    p_look = spent.min(axis=0) if looks else np.ones(x1.shape[1:])
    return p_look, phi1[-1], phi0[-1]


def _sequential_tests(
    calls: Array, units: Array, *, lo: int, cut: int, elapsed: int, config: DetectConfig
) -> Array:
    """Anytime-valid p-values 1 / max E_t of the mixture SPRT over the overlap minutes."""
    span = slice(lo, lo + min(cut, elapsed))
    new, old = calls[1, :, None, span], calls[0, :, None, span]
    total = new + old
    with np.errstate(invalid="ignore", divide="ignore"):
        rho = np.where(total > 0, new / np.where(total > 0, total, 1.0), 0.0)
    rho = np.broadcast_to(rho, units[1, :, :, span].shape)
    e = mixture_e_values(
        units[1, :, :, span], units[0, :, :, span], rho, thetas=config.thetas, theta0=config.theta0
    )
    if e.shape[-1] == 0:
        return np.ones(e.shape[:-1])
    return np.asarray(np.minimum(1.0, 1.0 / np.maximum(e.max(axis=-1), 1e-300)), dtype=np.float64)


def _sums(
    calls: Array, units: Array, errors: Array, *, lo: int, base_end: int, elapsed: int
) -> _Sums:
    new = slice(lo, lo + elapsed)
    shape = units.shape[1:3]
    return _Sums(
        units_new=units[1, :, :, new].sum(axis=-1),
        calls_new=np.broadcast_to(calls[1, :, None, new].sum(axis=-1), shape).copy(),
        errors_new=errors[1, :, :, new].sum(axis=-1),
        units_old=units[0, :, :, :base_end].sum(axis=-1),
        calls_old=np.broadcast_to(calls[0, :, None, :base_end].sum(axis=-1), shape).copy(),
        errors_old=errors[0, :, :, :base_end].sum(axis=-1),
    )


def _loop_sums(counts: DeployCounts, *, lo: int, base_end: int, elapsed: int) -> Array:
    """(old, new) looping traces per (tool row and pool, code): baseline and new window."""
    if counts.loop_units is None:
        zeros = np.zeros((len(counts.tools) + 1, len(counts.codes)))
        return np.stack([zeros, zeros])
    loops = _with_pool(counts.loop_units)
    return np.stack(
        [loops[0, :, :, :base_end].sum(axis=-1), loops[1, :, :, lo : lo + elapsed].sum(axis=-1)]
    )


def _ratio(x1: Array, n1: Array, x0: Array, n0: Array) -> Array:
    with np.errstate(invalid="ignore", divide="ignore"):
        rate1 = x1 / np.where(n1 > 0, n1, 1.0)
        rate0 = x0 / np.where(n0 > 0, n0, 1.0)
        out = np.where(rate0 > 0, rate1 / np.where(rate0 > 0, rate0, 1.0), np.inf)
    return np.asarray(np.where(n1 > 0, out, 0.0), dtype=np.float64)


def evaluate_deploy(
    counts: DeployCounts,
    elapsed_min: int,
    config: DetectConfig = DEFAULT_CONFIG,
    signatures: Sequence[SignatureTest] = (),
    *,
    observed_s: float | None = None,
) -> DeployEvaluation:
    """The verdict on a deploy `elapsed_min` minutes after it, from counts alone.

    `elapsed_min` counts the minute buckets since the one the deploy fell in; `observed_s`,
    when given, is the time actually observed since the deploy, which a healthy verdict's
    minimum (`healthy_after_s`) is held to (a deploy at 10:00:50 has 13 min 11 s of data
    at 10:14:01, though it spans 15 buckets).

    Every (tool, code) and the service-wide pool of each code is tested two ways:
    - the overlap phase (both versions serving): a grid-mixture SPRT on the new version's
      share of failing traces, anytime-valid, checked every minute;
    - against the previous version's last `baseline_s` (plus its overlap minutes): an exact
      conditional binomial test at every look of `looks_s` (each minute early on), each
      spending `look_weights` of the error rate, with each side's counts deflated by its
      NB2 variance inflation (alpha estimated on the baseline's tool-minutes).
    The two p-values are combined by weighted Bonferroni (`overlap_seq_share` to the SPRT,
    the rest to the looks); Benjamini-Hochberg runs over every test and new signature of
    the deploy.  Looping traces (`DeployCounts.loop_units`) are not counted as evidence;
    a tool whose looping traces double is a `storm` note instead.  A finding needs
    q <= `q`, at least `min_errors` failing traces, ratio >= `min_ratio` and a sufficient
    baseline.
    """
    counts = _gated(counts, config.codes)
    elapsed = max(0, min(elapsed_min, counts.minutes + counts.start_min))
    lo = -counts.start_min
    cut = _cutover_minute(counts, elapsed, config.cutover_share)
    base_end = lo + cut
    calls, units, errors = (
        _with_pool(counts.calls),
        _with_pool(counts.evidence),
        _with_pool(counts.errors),
    )
    tools = (*counts.tools, AGGREGATE_TOOL)
    alpha = _alphas(calls[0], units[0], base_end, config.max_dispersion)
    p_look, phi_new, phi_old = _look_tests(
        calls, units, lo=lo, cut=cut, elapsed=elapsed, alpha=alpha, config=config
    )
    phis = {code: float(phi_new[-1, c]) for c, code in enumerate(counts.codes)}
    has_overlap = cut > 0
    if has_overlap:
        p_seq = _sequential_tests(calls, units, lo=lo, cut=cut, elapsed=elapsed, config=config)
        share = config.overlap_seq_share
        p_raw = np.minimum(
            1.0,
            np.minimum(
                p_seq / share if share > 0 else 1.0,
                p_look / (1.0 - share) if share < 1 else 1.0,
            ),
        )
    else:
        p_raw = p_look
    s = _sums(calls, units, errors, lo=lo, base_end=base_end, elapsed=elapsed)
    ratio = _ratio(s.units_new, s.calls_new, s.units_old, s.calls_old)
    raw_ratio = _ratio(s.errors_new, s.calls_new, s.errors_old, s.calls_old)
    with np.errstate(invalid="ignore", divide="ignore"):
        expected = np.where(
            s.calls_old > 0,
            s.calls_new * s.units_old / np.where(s.calls_old > 0, s.calls_old, 1),
            0,
        )
    baseline_ok = (s.calls_old > 0) & (
        (s.units_old >= config.min_baseline_errors) | (s.calls_old >= config.min_baseline_calls)
    )
    # A code the previous version never had is judged on exposure alone.
    quiet_ok = (s.units_old == 0) & (s.calls_new >= 0.25 * s.calls_old)
    sufficient = baseline_ok & (
        (s.units_new >= config.min_errors) | (expected >= config.min_errors) | quiet_ok
    )
    tested = baseline_ok & (s.calls_new > 0)
    sig_list = [sig for sig in signatures if sig.baseline_ok]
    adjusted = benjamini_hochberg(
        np.concatenate([p_raw[tested], np.array([sig.p_value for sig in sig_list])])
    )
    p_adj = np.ones_like(p_raw)
    p_adj[tested] = adjusted[: int(tested.sum())]
    is_finding = (
        tested
        & (p_adj <= config.q)
        & (s.units_new >= config.min_errors)
        & (ratio >= config.min_ratio)
    )
    # A storm: raw errors well above the failing traces, while the traces show no effect;
    # or looping traces (set apart from the evidence) at twice the previous version's rate.
    loops = _loop_sums(counts, lo=lo, base_end=base_end, elapsed=elapsed)
    loop_ratio = _ratio(loops[1], s.calls_new, loops[0], s.calls_old)
    storm = ~is_finding & (
        (
            (raw_ratio >= max(config.min_ratio, 2.0))
            & (s.errors_new >= 3 * np.maximum(s.units_new, 1))
        )
        | ((loops[1] >= config.storm_min_loops) & (loop_ratio >= 2.0))
    )
    excess = np.maximum(0.0, s.units_new - expected)
    total_excess = excess[:-1].sum(axis=0)
    phase = _phase(has_overlap, cut, elapsed)
    results: list[TestResult] = []
    for t, c in np.ndindex(p_raw.shape):
        found = bool(is_finding[t, c])
        ci = None
        if found:
            f1, f0 = float(phi_new[t, c]), float(phi_old[t, c])
            ci = rate_ratio_ci(
                float(s.units_new[t, c]) / f1,
                float(s.calls_new[t, c]) / f1,
                float(s.units_old[t, c]) / f0,
                float(s.calls_old[t, c]) / f0,
                level=config.ci_level,
            )
        results.append(
            TestResult(
                tool=tools[t],
                code=counts.codes[c],
                field=_top_field(counts, t, c, lo=lo, elapsed=elapsed, base_end=base_end)
                if found
                else None,
                p_value=float(p_raw[t, c]),
                p_adjusted=float(p_adj[t, c]),
                ratio=float(ratio[t, c]) if math.isfinite(ratio[t, c]) else None,
                ratio_ci=ci,
                units_new=float(s.units_new[t, c]),
                errors_new=float(s.errors_new[t, c]),
                calls_new=float(s.calls_new[t, c]),
                units_old=float(s.units_old[t, c]),
                errors_old=float(s.errors_old[t, c]),
                calls_old=float(s.calls_old[t, c]),
                baseline_ok=bool(baseline_ok[t, c]),
                sufficient=bool(sufficient[t, c]),
                finding=found,
                excess_share=(
                    float(excess[t, c] / total_excess[c]) if total_excess[c] > 0 else None
                ),
                phase=phase,
                storm=bool(storm[t, c]),
                loops_new=float(loops[1][t, c]),
            )
        )
    sig_results = tuple(
        (sig, float(a), bool(a <= config.q and sig.p_value <= config.signature_p))
        for sig, a in zip(sig_list, adjusted[int(tested.sum()) :], strict=True)
    )
    observed = elapsed * 60.0 if observed_s is None else min(observed_s, elapsed * 60.0)
    verdict, reason = _verdict(results, sig_results, observed, counts.codes, config)
    return DeployEvaluation(
        verdict=verdict,
        elapsed_min=elapsed,
        cutover_min=cut,
        dispersion=phis,
        tests=tuple(results),
        signatures=sig_results,
        reason=reason,
    )


def _phase(has_overlap: bool, cut: int, elapsed: int) -> str:
    if not has_overlap:
        return "cutover"
    return "overlap" if cut >= elapsed else "overlap+cutover"


def _top_field(
    counts: DeployCounts, tool: int, code: int, *, lo: int, elapsed: int, base_end: int
) -> str | None:
    """The field that accounts for most of the excess, when it accounts for at least half."""
    n1 = counts.calls[1, :, lo : lo + elapsed].sum(axis=-1)
    n0 = counts.calls[0, :, :base_end].sum(axis=-1)
    excess: dict[str | None, float] = {}
    for f, (t, c, name) in enumerate(counts.field_keys):
        if c != code or (tool < len(counts.tools) and t != tool):
            continue
        x1 = float(counts.field_units[1, f, lo : lo + elapsed].sum())
        x0 = float(counts.field_units[0, f, :base_end].sum())
        rate0 = x0 / float(n0[t]) if n0[t] > 0 else 0.0
        excess[name] = excess.get(name, 0.0) + max(0.0, x1 - float(n1[t]) * rate0)
    total = sum(excess.values())
    if total <= 0:
        return None
    name, best = max(excess.items(), key=lambda kv: kv[1])
    return name if best >= 0.5 * total else None


def _verdict(
    results: Sequence[TestResult],
    signatures: Sequence[tuple[SignatureTest, float, bool]],
    observed_s: float,
    codes: Sequence[str],
    config: DetectConfig,
) -> tuple[Verdict, str]:
    found = [r for r in results if r.finding]
    new_sigs = [s for s, _, hit in signatures if hit]
    if found or new_sigs:
        # The service-wide pool is named only when no tool of its code is: "get_job x2.4",
        # not "get_job x2.4, * x1.3" for the same excess.
        named = {r.code for r in found if r.tool != AGGREGATE_TOOL}
        shown = [r for r in found if r.tool != AGGREGATE_TOOL or r.code not in named]
        parts = [f"{r.tool}/{r.code} x{(r.ratio or math.inf):.2g}" for r in shown]
        parts += [f"new {s.tool}/{s.code}/{s.field}" for s in new_sigs]
        return Verdict.REGRESSION, "regression: " + ", ".join(parts)
    pooled = {r.code: r for r in results if r.tool == AGGREGATE_TOOL}
    missing = [c for c in codes if c not in pooled or not pooled[c].sufficient]
    if missing:
        why = []
        for code in missing:
            r = pooled.get(code)
            if r is None or not r.baseline_ok:
                why.append(f"{code}: previous version's exposure too small")
            else:
                why.append(f"{code}: too few calls on the new version")
        return Verdict.INSUFFICIENT_DATA, "insufficient data: " + "; ".join(why)
    if observed_s < config.healthy_after_s:
        return (
            Verdict.INSUFFICIENT_DATA,
            f"insufficient data: observed {_minutes(observed_s)}, a pass needs "
            f"{config.healthy_after_s // 60} min",
        )
    return Verdict.HEALTHY, f"healthy: no regression after {_minutes(observed_s)}"


def _minutes(seconds: float) -> str:
    whole, rest = divmod(int(seconds), 60)
    return f"{whole} min" if rest == 0 else f"{whole} min {rest} s"


def signature_tests(
    new: pa.Table, old: pa.Table, codes: Sequence[str], config: DetectConfig = DEFAULT_CONFIG
) -> list[SignatureTest]:
    """New (tool, code, field) signatures from two `signature_exposure` tables.

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


# ===================================================================== reading a source


@dataclass(frozen=True, slots=True)
class DeployReport:
    """What `errscope check` prints: the verdict, its findings, and storms seen as notes."""

    verdict: Verdict
    reason: str
    deploy: DeployInfo | None
    findings: tuple[Finding, ...]
    notes: tuple[Finding, ...] = ()
    evaluation: DeployEvaluation | None = None


def _now(as_of: datetime | None) -> datetime:
    if as_of is None:
        return datetime.now(UTC)
    # A naive time is UTC, as everywhere else in errscope (not the machine's local time).
    return as_of.replace(tzinfo=UTC) if as_of.tzinfo is None else as_of.astimezone(UTC)


def _known(known_by: datetime | None, now: datetime) -> datetime:
    """Rows received before this count: `known_by` when given, else the evaluation time."""
    return _now(known_by) if known_by is not None else now


def find_deploy(
    source: Source,
    service: str,
    version: str,
    environment: str | None = None,
    *,
    as_of: datetime | None = None,
) -> DeployInfo | None:
    """The deploy marker of (service, version[, environment]) at or before `as_of`."""
    now = _now(as_of)
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
    row = rows[-1]
    return DeployInfo(
        service=row["service"],
        version=row["version"],
        environment=row["environment"],
        ts=row["ts"].astimezone(UTC),
        previous_version=row["previous_version"],
    )


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
    now = _now(as_of)
    known = _known(known_by, now)
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
    until = min(now, deploy.ts + timedelta(seconds=config.horizon_s))
    since = deploy.ts - timedelta(seconds=config.baseline_s)
    table = source.run(
        "deploy_minute_counts",
        {
            "service": deploy.service,
            "environment": deploy.environment,
            "new_version": deploy.version,
            "old_version": deploy.previous_version,
            "since": since,
            "until": until,
            "known_by": known,
        },
    )
    counts = counts_from_table(
        table, deploy, config.codes, baseline_s=config.baseline_s, until=until
    )
    # `known_by`: only rows received by the evaluation time count, so an as-of replay sees
    # what a live gate saw then (not rows back-filled or sent late by a skewed clock).
    sig_common = {"service": deploy.service, "environment": deploy.environment, "known_by": known}
    new_sig = source.run(
        "signature_exposure",
        {**sig_common, "version": deploy.version, "since": deploy.ts, "until": until},
    )
    old_sig = source.run(
        "signature_exposure",
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
                    correlation_ids=_ids_for(ids, t.tool, t.code, t.field, config.first_ids),
                    summary=(
                        f"{t.code} on {tool or 'all tools'}"
                        + (f" (most of the excess on field {t.field})" if t.field else "")
                        + f": {_pct(t.errors_old, t.calls_old)} -> "
                        f"{_pct(t.errors_new, t.calls_new)} of its calls, x{_fmt(t.ratio)} "
                        f"({int(t.units_new)} traces), q={t.p_adjusted:.2g}"
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


def _pct(x: float, n: float) -> str:
    return f"{100 * x / n:.2f}%" if n else "n/a"


def _fmt(value: float | None) -> str:
    return "inf" if value is None else f"{value:.2f}"


# ===================================================================== spikes


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
    mad = float(stats.median_abs_deviation(resid, scale="normal"))
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
        p = stats.nbinom.sf(k - 1, size, 1.0 / phi)
    else:
        p = stats.poisson.sf(k - 1, mu)
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
    now = _now(as_of)
    code = code or config.spike_code
    table = source.run(
        "spike_slots",
        {
            "code": code,
            "until": now,
            "known_by": _known(known_by, now),
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
        lo, hi = _poisson_ci(a.errors, config.ci_level)
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


def _poisson_ci(k: float, level: float) -> tuple[float, float]:
    tail = (1.0 - level) / 2.0
    lo = float(stats.chi2.ppf(tail, 2 * k) / 2) if k > 0 else 0.0
    hi = float(stats.chi2.ppf(1 - tail, 2 * k + 2) / 2)
    return lo, hi


# ===================================================================== loop misuse


def detect_loop_misuse(
    source: Source,
    *,
    as_of: datetime | None = None,
    service: str | None = None,
    environment: str | None = None,
    config: DetectConfig = DEFAULT_CONFIG,
    known_by: datetime | None = None,
) -> list[Finding]:
    """Retry-rule breaches in the last `loop_window_s`, one finding per (service, tool, rule)."""
    now = _now(as_of)
    since = now - timedelta(seconds=config.loop_window_s)
    rows = source.run(
        "loop_misuse",
        {
            "since": since,
            "until": now,
            "known_by": _known(known_by, now),
            "service": service,
            "environment": environment,
            "limit": 10000,
        },
    ).to_pylist()
    groups: dict[tuple[str, str, str, str | None], list[dict[str, object]]] = {}
    for r in rows:
        key = (str(r["service"]), str(r["tool"]), str(r["rule"]), r["field"])
        groups.setdefault(key, []).append(r)
    findings: list[Finding] = []
    for (svc, tool, rule, fld), items in sorted(groups.items(), key=lambda kv: str(kv[0])):
        items.sort(key=lambda r: str(r["first_ts"]))
        code = {"invalid_args_repeated": "invalid_args", "not_found_repeated": "not_found"}.get(
            rule, "denied"
        )
        calls = sum(int(str(r["calls"])) for r in items)
        findings.append(
            Finding(
                kind=FindingKind.LOOP_MISUSE,
                service=svc,
                environment=environment,
                version=str(items[-1]["version"]) if items[-1]["version"] else None,
                tool=tool,
                code=code,
                field=fld,
                detected_at=now,
                window_start=since,
                window_end=now,
                errors_after=calls,
                traces_after=len(items),
                label=(rule,),
                correlation_ids=tuple(dict.fromkeys(str(r["correlation_id"]) for r in items))[
                    : config.first_ids
                ],
                summary=f"{rule} on {svc}/{tool}: {len(items)} traces, {calls} calls",
            )
        )
    return findings


# ===================================================================== everything


def detect_all(
    source: Source,
    *,
    as_of: datetime | None = None,
    service: str | None = None,
    environment: str | None = None,
    config: DetectConfig = DEFAULT_CONFIG,
    known_by: datetime | None = None,
) -> list[Finding]:
    """Current findings: every deploy within `horizon_s`, spikes, and loop misuse (only
    rows received by `known_by`, default `as_of`, count: see `detect_deploy`)."""
    now = _now(as_of)
    deploys = source.run(
        "deploy_markers",
        {
            "since": now - timedelta(seconds=config.horizon_s),
            "until": now,
            "service": service,
            "environment": environment,
        },
    ).to_pylist()
    findings: list[Finding] = []
    for d in deploys:
        info = DeployInfo(
            service=d["service"],
            version=d["version"],
            environment=d["environment"],
            ts=d["ts"].astimezone(UTC),
            previous_version=d["previous_version"],
        )
        report = detect_deploy(
            source,
            info.service,
            info.version,
            info.environment,
            as_of=now,
            config=config,
            deploy=info,
            known_by=known_by,
        )
        findings.extend(report.findings)
        findings.extend(report.notes)
    findings.extend(
        detect_spikes(
            source,
            as_of=now,
            service=service,
            environment=environment,
            config=config,
            known_by=known_by,
        )
    )
    findings.extend(
        detect_loop_misuse(
            source,
            as_of=now,
            service=service,
            environment=environment,
            config=config,
            known_by=known_by,
        )
    )
    return findings


def with_codes(config: DetectConfig, codes: Iterable[str]) -> DetectConfig:
    """A copy of `config` testing these codes, each once (a repeat would add a test of
    nothing to the family the p-values are adjusted over, and weaken every other one)."""
    return replace(config, codes=tuple(dict.fromkeys(codes)))
