"""Detection rules on small hand-made traffic: clean, 3x, guards, multiplicity, storms, spikes."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from errscope.collector.store.duckdb import DuckDBStore
from errscope.queries import detect
from errscope.queries.detect.stats import (
    benjamini_hochberg,
    binom_sf,
    mixture_e_values,
    nb_alpha,
    rate_ratio_ci,
)
from errscope.queries.findings import Finding, FindingKind, Verdict
from tests.queries.traffic import DEPLOY_TS, Scenario, StoreSource, simulated_counts

SERVICE, NEW = "billing-agent", "2.0"


def _check(store: DuckDBStore, scenario: Scenario, minutes: int) -> detect.DeployReport:
    scenario.load(store)
    return detect.detect_deploy(
        StoreSource(store), SERVICE, NEW, "prod", as_of=DEPLOY_TS + timedelta(minutes=minutes)
    )


# ------------------------------------------------------------------ primitives


@pytest.mark.parametrize(
    ("k", "n", "p"),
    [
        pytest.param(5, 20, 0.1, id="small"),
        pytest.param(40, 300, 0.09, id="medium"),
        pytest.param(0, 10, 0.5, id="zero-is-one"),
    ],
)
def test_binom_sf_matches_scipy(k: int, n: int, p: float) -> None:
    """binom_sf equals scipy's exact binomial tail at integer counts."""
    expected = stats.binom.sf(k - 1, n, p)
    assert float(binom_sf(k, n, p)) == pytest.approx(expected, rel=1e-9)


def test_rate_ratio_ci_covers_the_estimate() -> None:
    """rate_ratio_ci brackets the observed ratio and excludes 1 on a clear 3x jump."""
    lo, hi = rate_ratio_ci(90, 1000, 300, 10000, level=0.95)
    assert lo < 3.0 < hi
    assert lo > 1.0


def test_benjamini_hochberg_adjusts_for_family_size() -> None:
    """BH multiplies the smallest p by the family size and keeps adjusted p monotone."""
    adjusted = benjamini_hochberg([0.001, 0.02, 0.03, 0.5])
    assert adjusted[0] == pytest.approx(0.004)
    assert list(adjusted) == sorted(adjusted)
    assert benjamini_hochberg([]).size == 0


@pytest.mark.parametrize(
    ("share", "theta"),
    [
        pytest.param(0.5, 1.0, id="even-split"),
        pytest.param(0.2, 1.0, id="new-version-small"),
        pytest.param(0.5, detect.DEFAULT_CONFIG.theta0, id="at-the-null-boundary"),
    ],
)
def test_sequential_test_false_alarms_under_repeated_looks(share: float, theta: float) -> None:
    """Looking every minute for 2 hours, the mixture SPRT alarms on null data under alpha."""
    rng = np.random.default_rng(20261130)
    runs, minutes, alpha = 2000, 120, 0.01
    base = rng.poisson(3.0, size=(runs, minutes)).astype(float)
    total = base * 2
    p_new = theta * share / (theta * share + 1 - share)
    x_new = rng.binomial(total.astype(int), p_new).astype(float)
    e = mixture_e_values(x_new, total - x_new, np.full_like(total, share))
    false_alarm = float((e.max(axis=1) >= 1 / alpha).mean())
    assert false_alarm <= alpha


def test_sequential_test_detects_a_tripling() -> None:
    """The mixture SPRT crosses 1/alpha quickly when the new version's rate triples."""
    rng = np.random.default_rng(1)
    x_old = rng.poisson(3.0, size=(200, 30)).astype(float)
    x_new = rng.poisson(9.0, size=(200, 30)).astype(float)
    e = mixture_e_values(x_new, x_old, np.full_like(x_new, 0.5))
    assert (e.max(axis=1) >= 100).mean() > 0.95


@pytest.mark.parametrize(
    ("k", "burst"),
    [
        pytest.param(5.0, 1.0, id="gamma-k5"),
        pytest.param(5.0, 8.0, id="gamma-k5-with-bursts"),  # bursts must not inflate alpha
        pytest.param(2.0, 1.0, id="gamma-k2"),
    ],
)
def test_nb_alpha_recovers_the_gamma_mixing(k: float, burst: float) -> None:
    """nb_alpha estimates 1/k of gamma-mixed counts, unmoved by traffic bursts."""
    rng = np.random.default_rng(11)
    calls = np.full(4000, 200.0)
    calls[::10] *= burst
    mu = calls * 0.02
    x = rng.poisson(mu * rng.gamma(k, 1 / k, size=mu.size)).astype(float)
    assert nb_alpha(x, mu) == pytest.approx(1 / k, rel=0.15)


def test_nb_alpha_is_zero_on_poisson_counts() -> None:
    """Poisson counts give alpha close to 0 (never negative)."""
    rng = np.random.default_rng(12)
    mu = np.full(4000, 4.0)
    alpha = nb_alpha(rng.poisson(mu).astype(float), mu)
    assert 0.0 <= alpha < 0.02


def _null_deploy(
    rng: np.random.Generator, *, calls_per_min: float, ratio: float = 1.0
) -> detect.DeployCounts:
    """A cut-over deploy of 2 tools whose rate changes by `ratio`: gamma(5) noise, a burst."""
    before, after, tools = 120, 60, 2
    minutes = before + after
    calls = rng.poisson(np.full((tools, minutes), calls_per_min)).astype(float)
    b0 = int(rng.integers(0, minutes - 5))
    calls[:, b0 : b0 + 3] *= 5  # a traffic-only burst, before or after the deploy
    rate = 0.02 * rng.gamma(5.0, 0.2, size=(tools, minutes))
    rate[:, before:] *= ratio
    units = rng.binomial(calls.astype(int), np.clip(rate, 0, 1)).astype(float)
    return simulated_counts(calls, units, before)


@pytest.mark.parametrize(
    ("calls_per_min", "ratio"),
    [
        pytest.param(200.0, 1.0, id="200-no-change"),
        pytest.param(200.0, detect.DEFAULT_CONFIG.theta0, id="200-at-the-null-boundary"),
        pytest.param(20.0, detect.DEFAULT_CONFIG.theta0, id="20-at-the-null-boundary"),
    ],
)
def test_minute_looks_false_alarms_under_repeated_looks(calls_per_min: float, ratio: float) -> None:
    """Looking every minute for an hour, each baseline test alarms on null data under alpha."""
    rng = np.random.default_rng(20261130)
    runs, alpha = 600, 0.05
    p = np.array(
        [
            [t.p_value for t in detect.evaluate_deploy(_null_deploy(rng, **kw), 60).tests]
            for kw in [{"calls_per_min": calls_per_min, "ratio": ratio}] * runs
        ]
    )
    # p_value at 60 min is already the minimum over every look up to then, each look's p
    # divided by its weight: P(p <= alpha) is the false-alarm rate of monitoring an hour.
    assert float((p <= alpha).mean()) <= alpha


def _overlap_null_deploy(rng: np.random.Generator, *, calls_per_min: float) -> detect.DeployCounts:
    """A null deploy whose first 10 minutes split calls 50/50, a common gamma(5) per minute."""
    before, after, overlap, tools = 120, 60, 10, 2
    minutes = before + after
    calls = rng.poisson(np.full((tools, minutes), calls_per_min)).astype(float)
    share = np.zeros(minutes)
    share[before:] = 1.0
    share[before : before + overlap] = 0.5
    new = rng.binomial(calls.astype(int), share).astype(float)
    by_version = np.stack([calls - new, new])
    # The world's noise is shared by both versions: one multiplier per tool-minute.
    rate = 0.02 * rng.gamma(5.0, 0.2, size=(tools, minutes))
    rate[:, before:] *= detect.DEFAULT_CONFIG.theta0  # the null's boundary
    u = rng.binomial(by_version.astype(int), np.clip(rate, 0, 1)).astype(float)[:, :, None]
    return detect.DeployCounts(
        deploy=detect.DeployInfo("s", "2", None, DEPLOY_TS, "1"),
        tools=tuple(f"t{i}" for i in range(tools)),
        codes=("invalid_args",),
        start_min=-before,
        calls=by_version,
        units=u,
        errors=u.copy(),
        field_keys=(),
        field_units=np.zeros((2, 0, minutes)),
    )


@pytest.mark.parametrize(
    "calls_per_min", [pytest.param(200.0, id="200"), pytest.param(20.0, id="20")]
)
def test_overlap_combination_false_alarms_under_repeated_looks(calls_per_min: float) -> None:
    """The overlap SPRT and the baseline looks, combined, alarm on null data under alpha."""
    rng = np.random.default_rng(20261201)
    runs, alpha = 600, 0.05
    p = np.array(
        [
            [
                t.p_value
                for t in detect.evaluate_deploy(
                    _overlap_null_deploy(rng, calls_per_min=calls_per_min), 60
                ).tests
            ]
            for _ in range(runs)
        ]
    )
    # Both families' p-values are running minima over every minute, so the combined p at
    # 60 min is the smallest ever reported: P(p <= alpha) is the false-alarm rate.
    assert float((p <= alpha).mean()) <= alpha


def test_minute_looks_catch_a_tenfold_jump_in_two_minutes() -> None:
    """A tenfold jump on one tool at 200 calls per minute is a regression within 2 minutes."""
    rng = np.random.default_rng(5)
    counts = _null_deploy(rng, calls_per_min=200.0)
    units = counts.units.copy()
    units[1, 0, 0, 120:] = rng.binomial(200, 0.2, size=60)
    jumped = replace(counts, units=units, errors=units.copy())
    assert detect.evaluate_deploy(jumped, 2).verdict is Verdict.REGRESSION


def test_only_the_gated_codes_are_tested() -> None:
    """Counts carrying two codes are tested only on the codes the config gates."""
    counts = _counts(np.array([3.0, 3.0]), 2)
    two = replace(
        counts,
        codes=("invalid_args", "not_found"),
        units=np.concatenate([counts.units, counts.units], axis=2),
        errors=np.concatenate([counts.errors, counts.errors], axis=2),
    )
    gated = detect.evaluate_deploy(two, 20, detect.DetectConfig(codes=("not_found",)))
    assert {t.code for t in gated.tests} == {"not_found"}
    widened = detect.evaluate_deploy(
        two, 20, detect.DetectConfig(codes=("invalid_args", "not_found"))
    )
    assert {t.code for t in widened.tests} == {"invalid_args", "not_found"}


# ------------------------------------------------------------------ deploys


def test_clean_deploy_has_no_finding(store: DuckDBStore) -> None:
    """A deploy that changes nothing is healthy after 15 minutes, with no finding."""
    report = _check(store, Scenario(), 20)
    assert report.verdict is Verdict.HEALTHY
    assert report.findings == ()


def test_three_fold_jump_is_a_regression_naming_tool_and_field(store: DuckDBStore) -> None:
    """A 3x invalid_args jump on one tool is found, with its field, interval and ids."""
    report = _check(store, Scenario(rates_new={"get_job": 0.09}), 20)
    assert report.verdict is Verdict.REGRESSION
    (finding,) = [f for f in report.findings if f.tool == "get_job"]
    assert finding.kind is FindingKind.DEPLOY_REGRESSION
    assert (finding.code, finding.field) == ("invalid_args", "job_id")
    assert finding.ratio_ci is not None
    assert finding.ratio_ci[0] > 1.0
    assert finding.p_adjusted is not None
    assert finding.p_adjusted <= detect.DEFAULT_CONFIG.q
    assert finding.correlation_ids
    assert finding.excess_share is not None
    assert finding.excess_share > 0.5


def test_overlap_phase_finds_a_jump(store: DuckDBStore) -> None:
    """With both versions serving, a 4x jump is found by the overlap test."""
    report = _check(store, Scenario(rates_new={"get_job": 0.12}, overlap_min=40), 30)
    assert report.verdict is Verdict.REGRESSION
    assert report.findings[0].phase == "overlap"


@pytest.mark.parametrize(
    ("scenario", "minutes"),
    [
        pytest.param(Scenario(calls_per_min=2, rate=0.01), 30, id="too-few-errors"),
        pytest.param(Scenario(minutes_before=2), 30, id="too-little-baseline"),
        pytest.param(Scenario(), 5, id="too-early-to-pass"),
    ],
)
def test_below_the_guards_is_insufficient_data_never_healthy(
    store: DuckDBStore, scenario: Scenario, minutes: int
) -> None:
    """Below the guards (errors, baseline, observation time) the verdict is INSUFFICIENT DATA."""
    report = _check(store, scenario, minutes)
    assert report.verdict is Verdict.INSUFFICIENT_DATA


def test_unknown_deploy_is_insufficient_data(store: DuckDBStore) -> None:
    """A version never seen is INSUFFICIENT DATA, not healthy and not an error."""
    report = detect.detect_deploy(StoreSource(store), SERVICE, "9.9", as_of=DEPLOY_TS)
    assert report.verdict is Verdict.INSUFFICIENT_DATA
    assert report.deploy is None


def test_as_of_before_the_deploy_sees_nothing(store: DuckDBStore) -> None:
    """Evaluated as of a time before the deploy, the deploy does not exist yet."""
    report = _check(store, Scenario(rates_new={"get_job": 0.09}), -5)
    assert report.deploy is None


@pytest.mark.parametrize(
    "calls_per_min",
    [
        pytest.param(60, id="60-calls-per-min"),
        # 0.3 failing traces a minute per tool: the storm's one looping trace a minute
        # would be a 4x excess if it counted as evidence.
        pytest.param(10, id="10-calls-per-min"),
    ],
)
def test_loop_storm_is_loop_misuse_not_a_regression(store: DuckDBStore, calls_per_min: int) -> None:
    """A trace per minute retrying a field a dozen times is a storm note, not a regression."""
    scenario = Scenario(storm_tool="list_jobs", storm_size=12, calls_per_min=calls_per_min)
    report = _check(store, scenario, 20)
    assert report.verdict is not Verdict.REGRESSION
    assert report.findings == ()
    assert [n.kind for n in report.notes] == [FindingKind.LOOP_MISUSE]
    assert report.notes[0].tool == "list_jobs"


def test_looping_traces_are_not_deploy_evidence() -> None:
    """Failing traces marked as looping are left out of the tests, whatever their number."""
    counts = _counts(np.array([3.0, 3.0]), 2)
    units = counts.units.copy()
    units[1, 0, 0, 60:] += 6  # six more failing traces a minute on t0 ...
    loops = np.zeros_like(units)
    loops[1, 0, 0, 60:] = 6  # ... every one of them a loop
    stormy = replace(counts, units=units, errors=units * 12)
    assert detect.evaluate_deploy(stormy, 15).verdict is Verdict.REGRESSION
    looped = detect.evaluate_deploy(replace(stormy, loop_units=loops), 15)
    assert looped.verdict is Verdict.HEALTHY
    t0 = next(t for t in looped.tests if t.tool == "t0")
    assert (t0.storm, t0.loops_new, t0.units_new) == (True, 90.0, 45.0)


def test_new_field_signature_is_found(store: DuckDBStore) -> None:
    """A (tool, code, field) never seen before, across many ids, is a new signature."""
    report = _check(store, Scenario(new_field="jobId"), 5)
    kinds = {(f.kind, f.field) for f in report.findings}
    assert (FindingKind.NEW_SIGNATURE, "jobId") in kinds


def _counts(x_new: np.ndarray, n_tools: int) -> detect.DeployCounts:
    """DeployCounts with a 60-minute baseline at 3% and the given new-version units."""
    minutes = 90
    calls = np.full((2, n_tools, minutes), 100.0)
    calls[0, :, 60:] = 0
    calls[1, :, :60] = 0
    units = np.zeros((2, n_tools, 1, minutes))
    units[0, :, 0, :60] = 3
    units[1, :, 0, 60:] = x_new[:, None]
    info = detect.DeployInfo("s", "2", None, DEPLOY_TS, "1")
    return detect.DeployCounts(
        deploy=info,
        tools=tuple(f"t{i}" for i in range(n_tools)),
        codes=("invalid_args",),
        start_min=-60,
        calls=calls,
        units=units,
        errors=units.copy(),
        field_keys=(),
        field_units=np.zeros((2, 0, minutes)),
    )


def test_multiple_testing_adjustment_grows_with_the_family() -> None:
    """The same borderline jump on one tool is a finding among 2 tools and not among 40."""
    config = detect.DetectConfig(codes=("invalid_args",), q=0.05)
    few = np.array([5.0, 3.0])
    many = np.array([5.0] + [3.0] * 39)
    small = detect.evaluate_deploy(_counts(few, 2), 15, config)
    large = detect.evaluate_deploy(_counts(many, 40), 15, config)
    hit_small = next(t for t in small.tests if t.tool == "t0")
    hit_large = next(t for t in large.tests if t.tool == "t0")
    assert hit_small.p_value == pytest.approx(hit_large.p_value)
    assert hit_small.finding
    assert not hit_large.finding
    assert hit_large.p_adjusted > hit_small.p_adjusted


# ------------------------------------------------------------------ spikes


def _series(
    recent_errors: list[float], *, calls: float = 200.0, rate: float = 0.02
) -> detect.SpikeSeries:
    recent = 12
    k = np.zeros(recent)
    k[: len(recent_errors)] = recent_errors
    k[len(recent_errors) :] = calls * rate
    hist_calls = np.full((7, recent + 2), calls)
    return detect.SpikeSeries(
        service="s",
        tool="t",
        recent_calls=np.full(recent, calls),
        recent_errors=k,
        hist_calls=hist_calls,
        hist_errors=hist_calls * rate,
        day_calls=np.full(276, calls),
        day_errors=np.full(276, calls * rate),
    )


@pytest.mark.parametrize(
    ("recent", "alarm"),
    [
        pytest.param([4.0, 4.0], False, id="normal"),
        pytest.param([30.0, 4.0], False, id="one-bucket-only"),
        pytest.param([30.0, 30.0], True, id="two-consecutive"),
        pytest.param([9.0, 9.0], False, id="below-min-ratio"),
    ],
)
def test_spike_needs_two_consecutive_significant_buckets(recent: list[float], alarm: bool) -> None:
    """A spike alarms only on two consecutive significant buckets above the count and ratio."""
    assert (detect.evaluate_spike_series(_series(recent)) is not None) is alarm


def test_traffic_burst_is_not_a_spike() -> None:
    """Five times the calls with the usual error rate is not a spike."""
    series = _series([20.0, 20.0])
    burst = detect.SpikeSeries(
        service="s",
        tool="t",
        recent_calls=series.recent_calls * 5,
        recent_errors=series.recent_calls * 5 * 0.02,
        hist_calls=series.hist_calls,
        hist_errors=series.hist_errors,
        day_calls=series.day_calls,
        day_errors=series.day_errors,
    )
    assert detect.evaluate_spike_series(burst) is None


def test_a_naive_as_of_is_utc_whatever_the_local_zone(
    store: DuckDBStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`as_of` without a zone means UTC, as everywhere in errscope, not the machine's zone."""
    import time

    Scenario(rates_new={"get_job": 0.09}).load(store)
    source = StoreSource(store)
    aware = DEPLOY_TS + timedelta(minutes=10)
    monkeypatch.setenv("TZ", "America/New_York")
    time.tzset()
    try:
        naive = detect.detect_deploy(
            source, "billing-agent", "2.0", "prod", as_of=aware.replace(tzinfo=None)
        )
    finally:
        monkeypatch.delenv("TZ")
        time.tzset()
    expected = detect.detect_deploy(source, "billing-agent", "2.0", "prod", as_of=aware)
    assert (naive.verdict, naive.reason) == (expected.verdict, expected.reason)
    assert [f.window_end for f in naive.findings] == [f.window_end for f in expected.findings]
    assert all(f.window_end <= aware for f in naive.findings)


def test_loop_misuse_keeps_to_the_environment_asked_for(store: DuckDBStore) -> None:
    """findings --environment prod does not report staging's looping traces."""
    from tests.queries.traffic import call

    start = DEPLOY_TS + timedelta(minutes=5)
    trace = "f" * 32
    store.append_tool_calls(
        [
            call(
                start + timedelta(seconds=i),
                environment="staging",
                code="invalid_args",
                field="job_id",
                trace_id=trace,
            )
            for i in range(6)
        ]
    )
    source = StoreSource(store)
    as_of = DEPLOY_TS + timedelta(minutes=20)
    staging = detect.detect_loop_misuse(source, as_of=as_of, environment="staging")
    assert [(f.kind, f.tool) for f in staging] == [(FindingKind.LOOP_MISUSE, "get_job")]
    assert detect.detect_loop_misuse(source, as_of=as_of, environment="prod") == []
    kinds = {f.kind for f in detect.detect_all(source, as_of=as_of, environment="prod")}
    assert FindingKind.LOOP_MISUSE not in kinds


def test_a_spike_names_a_version_only_from_its_own_environment(tmp_path: Path) -> None:
    """An unfiltered spike pools environments: deploys near it in two environments name
    no version; filtered to one environment, that environment's deploy is named."""
    from errscope.collector.record import Deploy
    from errscope.queries.source import FileSource
    from tests.dashboard.scenario import AS_OF, SPIKE_TOOL, build_store

    path = build_store(tmp_path / "s.duckdb")
    with DuckDBStore(path) as store:
        store.add_deploys(
            [
                Deploy("search-agent", "1.0", AS_OF - timedelta(minutes=20), "staging"),
                Deploy("search-agent", "7.0", AS_OF - timedelta(minutes=25), "prod"),
            ]
        )
    source = FileSource(path)

    def spike(environment: str | None) -> Finding:
        found = detect.detect_spikes(source, as_of=AS_OF, environment=environment)
        (only,) = [f for f in found if f.tool == SPIKE_TOOL]
        return only

    pooled = spike(None)
    assert "deploy_related" in pooled.label
    assert (pooled.version, pooled.environment) == (None, None)
    staging = spike("staging")
    assert (staging.version, staging.environment) == ("1.0", "staging")


def test_the_public_surface_is_small_and_pinned() -> None:
    """errscope.queries.detect exports what its callers use and nothing else; each name exists."""
    assert sorted(detect.__all__) == [
        "DEFAULT_CONFIG",
        "DeployCounts",
        "DeployEvaluation",
        "DeployInfo",
        "DeployReport",
        "DeployWindow",
        "DetectConfig",
        "SpikeSeries",
        "deploy_minute_counts",
        "deploy_window",
        "detect_all",
        "detect_deploy",
        "detect_loop_misuse",
        "detect_spikes",
        "evaluate_deploy",
        "evaluate_spike_series",
        "find_deploy",
        "first_hour",
        "with_codes",
    ]
    assert all(hasattr(detect, name) for name in detect.__all__)
