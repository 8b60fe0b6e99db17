"""The statistical primitives of detection: tail probabilities, e-values, intervals, FDR.

Pure functions of numbers and numpy arrays, with no knowledge of deploys or queries:
`binom_sf` (binomial tail for real-valued, deflated counts), `mixture_e_values` (the
overlap phase's anytime-valid SPRT), `rate_ratio_ci` and `poisson_ci` (exact intervals),
`benjamini_hochberg` (the per-deploy multiple-testing adjustment), and `nb_alpha` /
`inflation` (NB2 over-dispersion and the variance inflation of a window's sum).
docs/detection.md says where each is used and why.  None of them raises on empty or
degenerate input: it answers the value that carries no evidence (p = 1, E = 0, phi = 1).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TypeAlias

import numpy as np
import numpy.typing as npt
from scipy import special  # not scipy.stats: importing it costs a CLI answer 0.5 s

from errscope.queries.detect.config import DEFAULT_CONFIG

__all__ = [
    "Array",
    "benjamini_hochberg",
    "binom_sf",
    "inflation",
    "mixture_e_values",
    "nb_alpha",
    "nbinom_sf",
    "poisson_ci",
    "poisson_sf",
    "rate_ratio_ci",
    "robust_scale",
]

Array: TypeAlias = npt.NDArray[np.float64]


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
    lo_p = float(special.betaincinv(x_new, x_old + 1.0, tail)) if x_new > 0 else 0.0
    hi_p = float(special.betaincinv(x_new + 1.0, x_old, 1.0 - tail)) if x_old > 0 else 1.0

    def to_theta(p: float) -> float:
        return math.inf if p >= 1.0 else p / (1.0 - p) * n_old / n_new

    return (to_theta(lo_p), to_theta(hi_p))


def benjamini_hochberg(p_values: Sequence[float] | Array) -> Array:
    """BH-adjusted p-values (q-values); an empty family gives an empty array.

    q_(i) = min over j >= i of p_(j) * m / j on the sorted p-values, capped at 1.
    """
    p = np.clip(np.asarray(p_values, dtype=np.float64), 0.0, 1.0)
    if p.size == 0:
        return p
    order = np.argsort(p, kind="stable")
    ranked = p[order] * p.size / np.arange(1, p.size + 1)
    adjusted = np.empty_like(p)
    adjusted[order] = np.minimum(1.0, np.minimum.accumulate(ranked[::-1])[::-1])
    return adjusted


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


def poisson_sf(k: Array, mu: Array) -> Array:
    """P(X >= k) for X ~ Poisson(mu), integer k; k <= 0 gives 1."""
    k_ = np.asarray(k, dtype=np.float64)
    with np.errstate(invalid="ignore"):
        out = special.pdtrc(np.maximum(k_ - 1.0, 0.0), np.asarray(mu, dtype=np.float64))
    return np.asarray(np.where(k_ <= 0, 1.0, out), dtype=np.float64)


def nbinom_sf(k: Array, size: Array, p: float) -> Array:
    """P(X >= k) for X ~ NegativeBinomial(size, p) (failures before `size` successes),
    real `size`: the regularised incomplete beta I_(1-p)(k, size); k <= 0 gives 1."""
    k_ = np.asarray(k, dtype=np.float64)
    with np.errstate(invalid="ignore"):
        out = special.betainc(np.maximum(k_, 1.0), np.asarray(size, dtype=np.float64), 1.0 - p)
    return np.asarray(np.where(k_ <= 0, 1.0, out), dtype=np.float64)


def robust_scale(values: Array) -> float:
    """The median absolute deviation scaled to a normal's standard deviation (x 1.4826)."""
    x = np.asarray(values, dtype=np.float64)
    if x.size == 0:
        return math.nan
    return float(np.median(np.abs(x - np.median(x))) / 0.6744897501960817)


def poisson_ci(k: float, level: float) -> tuple[float, float]:
    """Exact (Garwood) interval of a Poisson mean from one count `k` at `level`."""
    tail = (1.0 - level) / 2.0
    # chi2.ppf(q, 2a) / 2 is the inverse regularised lower gamma function at (a, q).
    lo = float(special.gammaincinv(k, tail)) if k > 0 else 0.0
    hi = float(special.gammaincinv(k + 1, 1 - tail))
    return lo, hi
