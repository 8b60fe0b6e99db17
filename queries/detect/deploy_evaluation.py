"""Deploy evaluation, pure: per-minute counts around one deploy in, a verdict out.

`evaluate_deploy` runs every test docs/detection.md describes on a `DeployCounts` (the
overlap phase's mixture SPRT, the looks against the previous version's baseline with NB2
over-dispersion, Benjamini-Hochberg over the deploy's tests and new signatures, the
guards, the storm notes) and returns a `DeployEvaluation`: the verdict, its reason and
every `TestResult` behind it.  Nothing here reads a source or a clock, so the benchmarks
drive it with simulated counts and the tests with hand-built arrays; `deploys.py` turns
query answers into these inputs and the evaluation into findings.  Too little data is
the `INSUFFICIENT_DATA` verdict, never an exception and never a pass.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Final

import numpy as np
import numpy.typing as npt

from errscope.queries.detect.config import DEFAULT_CONFIG, DetectConfig
from errscope.queries.detect.stats import (
    Array,
    benjamini_hochberg,
    binom_sf,
    inflation,
    mixture_e_values,
    nb_alpha,
    rate_ratio_ci,
)
from errscope.queries.findings import Verdict

__all__ = [
    "AGGREGATE_TOOL",
    "DeployCounts",
    "DeployEvaluation",
    "DeployInfo",
    "SignatureTest",
    "TestResult",
    "evaluate_deploy",
]

_Mask = npt.NDArray[np.bool_]

#: The pseudo-tool of the service-wide test of one code (all tools pooled).
AGGREGATE_TOOL: Final = "*"


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
    # How sure: the family whose look decided (`first_hour` or `long`), that look (minutes
    # after the deploy), the family's level, and the share of its level its looks so far
    # have spent.  What would make it surer: `traces_needed`, the failing traces at the
    # exposure seen so far that would have flagged it (None when it is flagged or untested).
    family: str = "first_hour"
    look_min: int | None = None
    level: float = DEFAULT_CONFIG.q
    alpha_spent: float = 0.0
    traces_expected: float = 0.0
    traces_needed: int | None = None


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
    # The long looks done so far and the next one (minutes after the deploy; None: none left).
    long_looks_done: tuple[int, ...] = ()
    next_look_min: int | None = None

    @property
    def findings(self) -> tuple[TestResult, ...]:
        """The tests that found a regression."""
        return tuple(t for t in self.tests if t.finding)


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


def _trim_baseline(counts: DeployCounts, minutes: int) -> DeployCounts:
    """`counts` with only the last `minutes` of baseline before the deploy."""
    cut = max(0, -counts.start_min - minutes)
    if cut == 0:
        return counts
    return replace(
        counts,
        start_min=counts.start_min + cut,
        calls=counts.calls[..., cut:],
        units=counts.units[..., cut:],
        errors=counts.errors[..., cut:],
        field_units=counts.field_units[..., cut:],
        loop_units=None if counts.loop_units is None else counts.loop_units[..., cut:],
    )


@dataclass(frozen=True, slots=True)
class _FamilyView:
    """One family's answer per (tool row, code): what a `TestResult` reports from it."""

    family: str
    level: float
    spent: float
    p_raw: Array
    p_adj: Array
    found: _Mask
    sums: _Sums
    ratio: Array
    expected: Array
    baseline_ok: _Mask
    phi_new: Array
    phi_old: Array
    look_min: Array
    needed: list[list[int | None]]
    counts: DeployCounts
    lo: int
    elapsed: int
    base_end: int
    excess: Array
    total_excess: Array


def _traces_needed(
    s: _Sums, phi_new: Array, phi_old: Array, tested: _Mask, *, theta0: float, threshold: float
) -> list[list[int | None]]:
    """Per row, the fewest failing traces on the new version's exposure so far whose
    conditional test (each side deflated by its phi) would reach `threshold`; None when
    untested.  It answers "what would it take": the evidence a finding would need now."""
    out: list[list[int | None]] = []
    for t in range(tested.shape[0]):
        row: list[int | None] = []
        for c in range(tested.shape[1]):
            if not tested[t, c]:
                row.append(None)
                continue
            f1, f0 = float(phi_new[t, c]), float(phi_old[t, c])
            e1, e0 = float(s.calls_new[t, c]) / f1, float(s.calls_old[t, c]) / f0
            x0 = float(s.units_old[t, c]) / f0
            p_null = theta0 * e1 / (theta0 * e1 + e0)
            expected = (
                float(s.calls_new[t, c])
                * float(s.units_old[t, c])
                / max(1.0, float(s.calls_old[t, c]))
            )
            grid = np.arange(0, int(20 * expected + 200) + 1, dtype=np.float64)
            p = binom_sf(grid / f1, grid / f1 + x0, p_null)
            hit = np.flatnonzero(p <= threshold)
            row.append(int(grid[hit[0]]) if hit.size else None)
        out.append(row)
    return out


def _hours(values: Array) -> Array:
    """(..., minutes) -> (..., hours): sums of consecutive 60-minute blocks (last partial)."""
    m = values.shape[-1]
    h = max(1, -(-m // 60))
    pad = h * 60 - m
    if pad:
        values = np.concatenate([values, np.zeros((*values.shape[:-1], pad))], axis=-1)
    return np.asarray(values.reshape(*values.shape[:-1], h, 60).sum(axis=-1), dtype=np.float64)


def _hourly_dispersion(calls_h: Array, units_h: Array, cap: float) -> tuple[Array, Array]:
    """NB2 over-dispersion of hourly cells and its hour-to-hour correlation.

    Per (row, code): the tool rows share one estimate per code (tools pooled), the pool
    row (last) its own, as for the minute cells.  alpha by moments (`nb_alpha`); rho, the
    lag-1 correlation of the extra-Poisson part, as sum((x_h - mu_h)(x_h+1 - mu_h+1)) /
    (alpha * sum(mu_h mu_h+1)), clipped to [0, 0.95]: an error rate that wanders by the
    hour keeps its wander for hours, so a day's sum varies more than 24 independent hours.
    """
    n = calls_h[:, None, :]
    with np.errstate(invalid="ignore", divide="ignore"):
        rate = units_h.sum(axis=-1, keepdims=True) / np.maximum(n.sum(axis=-1, keepdims=True), 1.0)
    mu = np.broadcast_to(n * rate, units_h.shape)
    rows, codes = units_h.shape[0], units_h.shape[1]
    alpha, rho = np.zeros((rows, codes)), np.zeros((rows, codes))
    for c in range(codes):
        for sel in (slice(0, rows - 1), slice(rows - 1, rows)):
            x, m = units_h[sel, c], mu[sel, c]
            a = nb_alpha(x, m, cap=cap)
            d = np.where(m > 0, x - m, 0.0)
            den = float((m[:, :-1] * m[:, 1:]).sum())
            r = float((d[:, :-1] * d[:, 1:]).sum()) / (a * den) if a > 0 and den > 0 else 0.0
            alpha[sel, c], rho[sel, c] = _undo_demeaning(a, min(0.95, max(0.0, r)), x.shape[-1])
    return alpha, rho


def _undo_demeaning(alpha: float, rho: float, hours: int) -> tuple[float, float]:
    """(alpha, rho) corrected for the baseline's own mean having absorbed part of the wander.

    Each cell's expectation uses the tool's rate over the same H hours, and the mean of
    H correlated hours keeps a share F(rho, H) / H of their variance: the estimates see
    only the rest, alpha (1 - F/H) and a correlation (rho - F/H) / (1 - F/H).  Solved for
    the true pair by a fixed point; the share is capped at 3/4 (a baseline of a few
    hours cannot say more than "four times what it saw").
    """
    if alpha <= 0 or hours < 2:
        return alpha, rho
    seen = rho
    share = 0.0
    for _ in range(30):
        share = min(0.75, float(_ar_factor(np.array([rho]), hours)[0]) / hours)
        rho = min(0.95, seen * (1.0 - share) + share)
    return alpha / (1.0 - share), rho


def _ar_factor(rho: Array, hours: int) -> Array:
    """Var(sum of `hours` AR(1) cells) / (hours * Var(one)): 1 + 2 sum (1 - k/H) rho^k."""
    k = np.arange(1, max(1, hours), dtype=np.float64)
    if k.size == 0:
        return np.ones_like(rho)
    return np.asarray(
        1.0 + 2.0 * ((1.0 - k / hours) * rho[..., None] ** k).sum(axis=-1), dtype=np.float64
    )


def _window(
    calls: Array, units: Array, errors: Array, spans: Sequence[slice]
) -> tuple[Array, Array, Array, Array, int]:
    """Sums over the minute `spans` of one version: calls (rows), units and errors (rows,
    codes), the sum of squared hourly calls (rows), and the hours covered."""
    n = np.zeros(calls.shape[0])
    x = np.zeros(units.shape[:2])
    e = np.zeros(units.shape[:2])
    q = np.zeros(calls.shape[0])
    hours = 0
    for span in spans:
        seg = calls[:, span]
        if seg.shape[-1] == 0:
            continue
        n += seg.sum(axis=-1)
        x += units[:, :, span].sum(axis=-1)
        e += errors[:, :, span].sum(axis=-1)
        q += (_hours(seg) ** 2).sum(axis=-1)
        hours += -(-seg.shape[-1] // 60)
    return n, x, e, q, hours


def _cells(values: Array, shape: tuple[int, ...]) -> Array:
    """A per-row (rows,) or per-(row, code) array as a (rows, codes) array."""
    return np.broadcast_to(values[:, None] if values.ndim == 1 else values, shape)


def _long_family(  # noqa: PLR0915 - one look loop, its baselines and the family's guards
    counts: DeployCounts, elapsed: int, config: DetectConfig, *, exclude: _Mask
) -> _FamilyView | None:
    """The long looks (`long_looks_s`), or None before the first one.

    Each look compares the new version's failing traces from the deploy to the look
    against the previous version's: the same hours of the day before when it served them
    (enough for a baseline), else its whole last `long_baseline_s`, plus its overlap
    minutes.  Each side is deflated by its hourly NB2 inflation times the AR factor of
    its hours; an exact conditional test of rate_new <= `long_theta0` * rate_old spends
    the look's weight of `long_q`.  Benjamini-Hochberg over the deploy's rows at
    `long_q`; rows in `exclude` (found by the first hour) are left out of the family.
    """
    looks = [
        (look_s // 60, w)
        for look_s, w in zip(config.long_looks_s, config.long_look_weights, strict=True)
        if 0 < look_s // 60 <= elapsed
    ]
    if not looks:
        return None
    lo = -counts.start_min
    cut = _cutover_minute(counts, elapsed, config.cutover_share)
    calls, units, errors = (
        _with_pool(counts.calls),
        _with_pool(counts.evidence),
        _with_pool(counts.errors),
    )
    day = 1440
    b0 = max(0, lo - math.ceil(config.long_baseline_s / 60))
    base_h = calls[0, :, b0:lo]
    alpha, rho = _hourly_dispersion(
        _hours(base_h[:, ::-1])[:, ::-1] if base_h.shape[-1] else np.zeros((calls.shape[1], 1)),
        _hours(units[0, :, :, b0:lo][..., ::-1])[..., ::-1]
        if base_h.shape[-1]
        else np.zeros((*units.shape[1:3], 1)),
        config.max_dispersion,
    )
    shape = units.shape[1:3]
    best_p = np.ones(shape)
    best_look = np.full(shape, -1)
    keep: dict[str, Array] = {}
    for m, w in looks:
        n1, x1, e1, q1, h1 = _window(calls[1], units[1], errors[1], [slice(lo, lo + m)])
        overlap = slice(lo, lo + min(cut, m))
        whole = _window(calls[0], units[0], errors[0], [slice(b0, lo), overlap])
        n0, x0, e0, q0 = (_cells(v, shape) for v in whole[:4])
        ar0 = _ar_factor(rho, max(1, whole[4]))
        if m < day and lo - day >= 0:
            like = _window(
                calls[0], units[0], errors[0], [slice(lo - day, min(lo, lo - day + m)), overlap]
            )
            ln, lx, le, lq = (_cells(v, shape) for v in like[:4])
            ok = (ln > 0) & ((lx >= config.min_baseline_errors) | (ln >= config.min_baseline_calls))
            n0, x0, e0, q0 = (
                np.where(ok, a, b) for a, b in ((ln, n0), (lx, x0), (le, e0), (lq, q0))
            )
            ar0 = np.where(ok, _ar_factor(rho, max(1, like[4])), ar0)
        n1b, q1b = _cells(n1, shape), _cells(q1, shape)
        with np.errstate(invalid="ignore", divide="ignore"):
            rate0 = np.where(n0 > 0, x0 / np.where(n0 > 0, n0, 1.0), 0.0)
        phi1 = inflation(alpha * _ar_factor(rho, h1), rate0, n1b, q1b)
        phi0 = inflation(alpha * ar0, rate0, n0, q0)
        p = _look_p_values(x1, n1b, x0, n0, phi1=phi1, phi0=phi0, theta0=config.long_theta0)
        spent = np.minimum(1.0, p / w)
        better = spent < best_p
        best_p = np.where(better, spent, best_p)
        best_look = np.where(better, m, best_look)
        current = {
            "n1": n1b,
            "x1": x1,
            "e1": e1,
            "n0": n0,
            "x0": x0,
            "e0": e0,
            "phi1": phi1,
            "phi0": phi0,
        }
        if not keep:
            keep = {k: v.copy() for k, v in current.items()}
        else:
            # the numbers reported are the deciding look's (else the latest look's)
            pick = better | (best_look == m)
            keep = {k: np.where(pick, v, keep[k]) for k, v in current.items()}
    sums = _Sums(
        units_new=keep["x1"],
        calls_new=np.asarray(keep["n1"], dtype=np.float64).copy(),
        errors_new=keep["e1"],
        units_old=keep["x0"],
        calls_old=np.asarray(keep["n0"], dtype=np.float64).copy(),
        errors_old=keep["e0"],
    )
    ratio = _ratio(sums.units_new, sums.calls_new, sums.units_old, sums.calls_old)
    baseline_ok = (sums.calls_old > 0) & (
        (sums.units_old >= config.min_baseline_errors)
        | (sums.calls_old >= config.min_baseline_calls)
    )
    tested = baseline_ok & (sums.calls_new > 0) & ~exclude
    p_adj = np.ones(shape)
    p_adj[tested] = benjamini_hochberg(best_p[tested])
    found = (
        tested
        & (p_adj <= config.long_q)
        & (sums.units_new >= config.min_errors)
        & (ratio >= config.min_ratio)
    )
    with np.errstate(invalid="ignore", divide="ignore"):
        expected = np.where(
            sums.calls_old > 0,
            sums.calls_new * sums.units_old / np.where(sums.calls_old > 0, sums.calls_old, 1),
            0,
        )
    excess = np.maximum(0.0, sums.units_new - expected)
    last_w = looks[-1][1]
    return _FamilyView(
        family="long",
        level=config.long_q,
        spent=float(sum(w for _, w in looks)),
        p_raw=best_p,
        p_adj=p_adj,
        found=found,
        sums=sums,
        ratio=ratio,
        expected=expected,
        baseline_ok=baseline_ok,
        phi_new=keep["phi1"],
        phi_old=keep["phi0"],
        look_min=best_look,
        needed=_traces_needed(
            sums,
            keep["phi1"],
            keep["phi0"],
            tested,
            theta0=config.long_theta0,
            threshold=config.long_q * last_w / max(1, int(tested.sum())),
        ),
        counts=counts,
        lo=lo,
        elapsed=elapsed,
        base_end=lo + cut,
        excess=excess,
        total_excess=excess[:-1].sum(axis=0),
    )


def evaluate_deploy(  # noqa: PLR0915 - the two families and their merge read best in one place
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
    full = _gated(counts, config.codes)
    total_elapsed = max(0, min(elapsed_min, full.minutes + full.start_min))
    # The first-hour family: the previous version's last `baseline_s`, the first `horizon_s`.
    counts = _trim_baseline(full, math.ceil(config.baseline_s / 60))
    elapsed = min(total_elapsed, math.ceil(config.horizon_s / 60))
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
    spent_early = float(
        sum(
            w
            for look_s, w in zip(config.looks_s, config.look_weights, strict=True)
            if 0 < look_s // 60 <= elapsed
        )
    )
    first = _FamilyView(
        family="first_hour",
        level=config.q,
        spent=spent_early,
        p_raw=p_raw,
        p_adj=p_adj,
        found=is_finding,
        sums=s,
        ratio=ratio,
        expected=expected,
        baseline_ok=baseline_ok,
        phi_new=phi_new,
        phi_old=phi_old,
        look_min=np.full(p_raw.shape, -1),
        needed=_traces_needed(
            s,
            phi_new,
            phi_old,
            tested,
            theta0=config.theta0,
            threshold=config.q * max(config.look_weights) / max(1, int(tested.sum())),
        ),
        counts=counts,
        lo=lo,
        elapsed=elapsed,
        base_end=base_end,
        excess=excess,
        total_excess=total_excess,
    )
    long = _long_family(full, total_elapsed, config, exclude=is_finding)
    results: list[TestResult] = []
    for t, c in np.ndindex(p_raw.shape):
        view = first
        if long is not None and not is_finding[t, c]:
            view = long  # the family still accumulating evidence speaks for the row
        found = bool(view.found[t, c])
        ci = None
        vs = view.sums
        if found:
            f1, f0 = float(view.phi_new[t, c]), float(view.phi_old[t, c])
            ci = rate_ratio_ci(
                float(vs.units_new[t, c]) / f1,
                float(vs.calls_new[t, c]) / f1,
                float(vs.units_old[t, c]) / f0,
                float(vs.calls_old[t, c]) / f0,
                level=config.ci_level,
            )
        r = float(view.ratio[t, c])
        results.append(
            TestResult(
                tool=tools[t],
                code=counts.codes[c],
                field=_top_field(
                    view.counts,
                    t,
                    c,
                    lo=view.lo,
                    elapsed=view.elapsed,
                    base_end=view.base_end,
                )
                if found
                else None,
                p_value=float(view.p_raw[t, c]),
                p_adjusted=float(view.p_adj[t, c]),
                ratio=r if math.isfinite(r) else None,
                ratio_ci=ci,
                units_new=float(vs.units_new[t, c]),
                errors_new=float(vs.errors_new[t, c]),
                calls_new=float(vs.calls_new[t, c]),
                units_old=float(vs.units_old[t, c]),
                errors_old=float(vs.errors_old[t, c]),
                calls_old=float(vs.calls_old[t, c]),
                baseline_ok=bool(baseline_ok[t, c]),
                sufficient=bool(sufficient[t, c]),
                finding=found,
                excess_share=(
                    float(view.excess[t, c] / view.total_excess[c])
                    if view.total_excess[c] > 0
                    else None
                ),
                phase=phase,
                storm=bool(storm[t, c]),
                loops_new=float(loops[1][t, c]),
                family=view.family,
                look_min=int(view.look_min[t, c]) if view.look_min[t, c] >= 0 else None,
                level=view.level,
                alpha_spent=view.spent,
                traces_expected=float(view.expected[t, c]),
                traces_needed=None if found else view.needed[t][c],
            )
        )
    sig_results = tuple(
        (sig, float(a), bool(a <= config.q and sig.p_value <= config.signature_p))
        for sig, a in zip(sig_list, adjusted[int(tested.sum()) :], strict=True)
    )
    observed = total_elapsed * 60.0 if observed_s is None else min(observed_s, total_elapsed * 60.0)
    done = tuple(m for m in (x // 60 for x in config.long_looks_s) if m <= total_elapsed)
    ahead = [m for m in (x // 60 for x in config.long_looks_s) if m > total_elapsed]
    next_look = min(ahead) if ahead else None
    verdict, reason = _verdict(results, sig_results, observed, counts.codes, config)
    if verdict is Verdict.HEALTHY and next_look is not None:
        reason += f"; the long looks go on (next at +{_minutes(next_look * 60)})"
    return DeployEvaluation(
        verdict=verdict,
        elapsed_min=total_elapsed,
        cutover_min=cut,
        dispersion=phis,
        tests=tuple(results),
        signatures=sig_results,
        reason=reason,
        long_looks_done=done,
        next_look_min=next_look,
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
