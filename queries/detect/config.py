"""What every detector is given: the thresholds, the source it reads, and the time it judges.

`DetectConfig` holds every threshold docs/detection.md names, with its defaults;
`with_codes` widens or narrows the gated codes the way `errscope check --codes` does.
`Source` is the one method of `errscope.queries.source.QuerySource` detection calls, so a
test can hand it any object that runs named queries.  `evaluation_time` and `received_by`
turn the callers' `as_of` / `known_by` into the UTC times every query is bounded by, the
same way for deploys, spikes and loops.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Final, Protocol

import pyarrow as pa

__all__ = [
    "DEFAULT_CONFIG",
    "DetectConfig",
    "Source",
    "evaluation_time",
    "first_hour",
    "received_by",
    "with_codes",
]


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
    The long looks (`long_looks_s`, `long_look_weights`, `long_q`, `long_theta0`,
    `long_baseline_s`) keep judging the deploy to `long_horizon_s`.
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
    # The first-hour family judges the deploy's first `horizon_s` (its verdict then stays).
    horizon_s: int = 7200
    # Evidence that accumulates: looks at +2 h, +6 h and +24 h, a family of its own with
    # its own level `long_q` (weighted Bonferroni over its looks, Benjamini-Hochberg over
    # the deploy's tests), so over every look to +24 h a deploy's false-alarm bound is
    # q + long_q.  The baseline is the previous version's last `long_baseline_s`: for a
    # look shorter than a day the same hours of the day before when it served them
    # (seasonality cancels), else the whole day.  Counts are deflated by an hourly NB2
    # over-dispersion with its hour-to-hour correlation, and `long_theta0` is the drift
    # still counted as noise over hours (an error rate wanders more over a day than over
    # an hour).
    long_looks_s: tuple[int, ...] = (7200, 21600, 86400)
    long_look_weights: tuple[float, ...] = (0.2, 0.3, 0.5)
    long_q: float = 0.01
    long_theta0: float = 1.2
    long_baseline_s: int = 86400
    long_horizon_s: int = 86400
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


def with_codes(config: DetectConfig, codes: Iterable[str]) -> DetectConfig:
    """A copy of `config` testing these codes, each once (a repeat would add a test of
    nothing to the family the p-values are adjusted over, and weaken every other one)."""
    return replace(config, codes=tuple(dict.fromkeys(codes)))


def evaluation_time(as_of: datetime | None) -> datetime:
    """The time an evaluation judges, in UTC: `as_of`, or now when it is None."""
    if as_of is None:
        return datetime.now(UTC)
    # A naive time is UTC, as everywhere else in errscope (not the machine's local time).
    return as_of.replace(tzinfo=UTC) if as_of.tzinfo is None else as_of.astimezone(UTC)


def received_by(known_by: datetime | None, now: datetime) -> datetime:
    """Rows received before this count: `known_by` when given, else the evaluation time."""
    return evaluation_time(known_by) if known_by is not None else now


def first_hour(config: DetectConfig) -> DetectConfig:
    """`config` without its long looks: what `findings`, the watch and the dashboard judge
    by default (each deploy on its first `horizon_s`, as before the long looks)."""
    return replace(config, long_looks_s=(), long_look_weights=())
