"""Evidence that accumulates: the long looks (+2 h, +6 h, +24 h) on real stores and counts.

A quiet tool's 2x regression is invisible in the first hour (a handful of failing traces)
and certain after a day; a healthy deploy whose traffic and error rate both follow the
time of day must stay quiet at every look, short and long; the check JSON says how sure
the verdict is and what would make it surer.
"""

from __future__ import annotations

from datetime import timedelta

import numpy as np
import pyarrow as pa
import pytest

from errscope.collector.record import TOOL_CALLS_SCHEMA, Deploy
from errscope.collector.store.duckdb import DuckDBStore
from errscope.queries import detect
from errscope.queries.detect.deploys import confidence
from errscope.queries.findings import Verdict, check_dict
from tests.queries.traffic import DEPLOY_TS, StoreSource, simulated_counts

SERVICE, OLD, NEW = "billing-agent", "1.0", "2.0"
#: minutes of the previous version before the deploy, and of the new one after it
BEFORE, AFTER = 26 * 60, 24 * 60 + 5
#: every look a gate or the watch might ask at, minutes after the deploy
LOOKS = (5, 15, 60, 120, 360, 1440)


def _season(minute: np.ndarray, amplitude: float) -> np.ndarray:
    """1 + amplitude * a daily sine peaking at 14:00 UTC (the deploy is at 10:00)."""
    hour = (DEPLOY_TS.hour + minute / 60.0) % 24
    return 1.0 + amplitude * np.sin(2 * np.pi * (hour - 8) / 24)


def _load(
    store: DuckDBStore,
    *,
    tools: dict[str, tuple[float, float]],
    ratio_new: dict[str, float],
    traffic_season: float,
    rate_season: float,
    seed: int,
) -> None:
    """Write two days of one service: `tools` maps name -> (calls/min, invalid_args rate);
    the new version multiplies a tool's rate by `ratio_new`; traffic and error rate both
    follow the time of day.  One call per row, each its own trace (no retries)."""
    rng = np.random.default_rng(seed)
    minutes = np.arange(-BEFORE, AFTER)
    cols: dict[str, list[np.ndarray]] = {k: [] for k in ("sec", "tool", "new", "bad")}
    for name, (per_min, rate) in tools.items():
        n = rng.poisson(per_min * _season(minutes, traffic_season))
        minute = np.repeat(minutes, n)
        sec = minute * 60.0 + rng.uniform(0, 60, minute.size)
        new = minute >= 0
        p = rate * _season(minute, rate_season) * np.where(new, ratio_new.get(name, 1.0), 1.0)
        cols["sec"].append(sec)
        cols["tool"].append(np.full(minute.size, name, dtype=object))
        cols["new"].append(new)
        cols["bad"].append(rng.random(minute.size) < p)
    sec = np.concatenate(cols["sec"])
    rows = sec.size
    ts = pa.array(
        [DEPLOY_TS + timedelta(seconds=float(s)) for s in sec],
        type=TOOL_CALLS_SCHEMA.field("ts").type,
    )
    bad = np.concatenate(cols["bad"])
    ids = np.arange(1, rows + 1)
    data = {
        "ts": ts,
        "received_at": ts,
        "service": pa.array([SERVICE] * rows),
        "version": pa.array(np.where(np.concatenate(cols["new"]), NEW, OLD).tolist()),
        "environment": pa.array(["prod"] * rows),
        "tool": pa.array(np.concatenate(cols["tool"]).tolist()),
        "code": pa.array(np.where(bad, "invalid_args", "ok").tolist()),
        "field": pa.array(np.where(bad, "job_id", None).tolist(), type=pa.string()),
        "trace_id": pa.array([f"{i:032x}" for i in ids]),
        "span_id": pa.array([f"{i:016x}" for i in ids]),
        "correlation_id": pa.array([f"corr-{i}" for i in ids]),
        "redactions": pa.array(np.zeros(rows, np.int32)),
    }
    table = pa.table({f.name: data.get(f.name, pa.nulls(rows, f.type)) for f in TOOL_CALLS_SCHEMA})
    store.append_tool_calls(table)
    store.add_deploys(
        [
            Deploy(SERVICE, OLD, DEPLOY_TS - timedelta(minutes=BEFORE), "prod"),
            Deploy(SERVICE, NEW, DEPLOY_TS, "prod"),
        ]
    )


def _at(store: DuckDBStore, minutes: int) -> detect.DeployReport:
    return detect.detect_deploy(
        StoreSource(store), SERVICE, NEW, "prod", as_of=DEPLOY_TS + timedelta(minutes=minutes)
    )


#: a busy tool beside a quiet one (3 calls a minute, 3 % invalid_args)
TOOLS = {"search_docs": (40.0, 0.01), "get_job": (3.0, 0.03)}


def test_a_quiet_tools_doubling_is_caught_by_a_day_and_not_in_the_first_hour(
    store: DuckDBStore,
) -> None:
    """get_job at 3 calls/min doubling its invalid_args: the first hour cannot tell (a
    dozen failing traces), the +24 h look names the tool, from the long family."""
    _load(
        store,
        tools=TOOLS,
        ratio_new={"get_job": 2.0},
        traffic_season=0.5,
        rate_season=0.0,
        seed=11,
    )
    early = [_at(store, m) for m in (5, 15, 60)]
    assert all(r.verdict is not Verdict.REGRESSION for r in early), [r.reason for r in early]
    day = _at(store, 1440)
    assert day.verdict is Verdict.REGRESSION, day.reason
    found = [f for f in day.findings if f.tool == "get_job"]
    assert found, day.reason
    f = found[0]
    assert f.look_s is not None
    assert f.look_s >= 2 * 3600  # a long look decided, not the first hour
    assert f.level == detect.DEFAULT_CONFIG.long_q
    assert f.ratio is not None
    assert 1.5 <= f.ratio <= 3.0
    assert f.field == "job_id"
    assert "search_docs" not in {x.tool for x in day.findings}


def test_findings_judge_the_long_looks_only_when_asked(store: DuckDBStore) -> None:
    """`detect_all` (findings, the watch) keeps its first-hour horizon unless asked for
    the long looks: a day after the deploy the quiet tool's regression is listed with
    `long_looks=True` only, and a long look decided it."""
    _load(
        store,
        tools=TOOLS,
        ratio_new={"get_job": 2.0},
        traffic_season=0.5,
        rate_season=0.0,
        seed=11,
    )
    source, as_of = StoreSource(store), DEPLOY_TS + timedelta(minutes=1440)

    def regressions(**kw: bool) -> list[tuple[str | None, int | None]]:
        found = detect.detect_all(source, as_of=as_of, **kw)
        return [(f.tool, f.look_s) for f in found if f.kind.value == "deploy_regression"]

    assert regressions() == []
    asked = regressions(long_looks=True)
    assert [tool for tool, _ in asked] == ["get_job"]
    assert all(look is not None and look >= 2 * 3600 for _, look in asked)


def test_a_healthy_deploy_with_daily_seasonality_stays_quiet_at_every_look(
    store: DuckDBStore,
) -> None:
    """Traffic +-50 % and the error rate itself +-60 % by time of day, no change in the
    deploy: no look alarms, short or long (the 2 h and 6 h looks compare with the same hours
    the day before, the 24 h look a whole day with a whole day)."""
    _load(
        store,
        tools={"search_docs": (60.0, 0.02), "get_job": (3.0, 0.03)},
        ratio_new={},
        traffic_season=0.5,
        rate_season=0.6,
        seed=12,
    )
    reports = {m: _at(store, m) for m in LOOKS}
    assert all(r.verdict is not Verdict.REGRESSION for r in reports.values()), {
        m: r.reason for m, r in reports.items()
    }
    assert reports[1440].verdict is Verdict.HEALTHY, reports[1440].reason
    assert reports[1440].evaluation is not None
    assert reports[1440].evaluation.long_looks_done == (120, 360, 1440)


def test_check_json_says_how_sure_and_what_would_make_it_surer(store: DuckDBStore) -> None:
    """A pass at +60 min names its families' levels and spent shares, the next long look
    and, per test, the failing traces that would have flagged it."""
    _load(store, tools=TOOLS, ratio_new={}, traffic_season=0.5, rate_season=0.0, seed=13)
    report = _at(store, 60)
    assert report.verdict is Verdict.HEALTHY, report.reason
    assert "next at +120 min" in report.reason
    conf = confidence(report)
    assert conf is not None
    assert conf["next_look_at"] == "2026-11-30T12:00:00Z"
    assert conf["long_looks_done_s"] == []
    families = conf["families"]
    assert isinstance(families, dict)
    assert families["first_hour"] == {"level": 0.01, "alpha_spent": 1.0}
    tests = conf["tests"]
    assert isinstance(tests, list)
    pool = next(t for t in tests if t["tool"] is None)
    assert pool["finding"] is False
    assert isinstance(pool["traces_needed"], int)
    assert pool["traces_needed"] > pool["traces_after"]
    doc = check_dict(
        report.verdict,
        report.findings,
        service=SERVICE,
        version=NEW,
        environment="prod",
        as_of=DEPLOY_TS + timedelta(minutes=60),
        reason=report.reason,
        confidence=conf,
    )
    assert doc["confidence"] == conf


def _long_null(rng: np.random.Generator, *, calls_per_min: float) -> detect.DeployCounts:
    """A cut-over deploy of 3 tools, a day either side, no change: hourly AR(1) wander of
    each tool's error rate (sigma 0.15), a shared per-minute gamma(8) shock, a daily
    traffic cycle."""
    before, after, tools = 1440, 1440, 3
    minutes = before + after
    t = np.arange(minutes)
    traffic = calls_per_min * (1 + 0.5 * np.sin(2 * np.pi * t / 1440))
    calls = rng.poisson(np.broadcast_to(traffic, (tools, minutes))).astype(float)
    hours = minutes // 60
    wander = np.zeros((tools, hours))
    for h in range(1, hours):
        wander[:, h] = 0.8 * wander[:, h - 1] + rng.normal(0, 0.15, tools)
    rate = 0.02 * np.exp(np.repeat(wander, 60, axis=1)) * rng.gamma(8.0, 1 / 8.0, minutes)
    units = rng.binomial(calls.astype(int), np.clip(rate, 0, 1)).astype(float)
    return simulated_counts(calls, units, before)


@pytest.mark.parametrize(
    "calls_per_min",
    [pytest.param(3.0, id="quiet"), pytest.param(100.0, id="busy-wander-dominates")],
)
def test_long_looks_false_alarm_under_their_level_when_the_rate_wanders(
    calls_per_min: float,
) -> None:
    """Over 300 healthy day-long deploys whose error rates wander by the hour, the long
    family's findings stay under 2 % (its level is 1 %): the hourly over-dispersion with
    its hour-to-hour correlation, not 24 independent hours, is what a day's sum varies by.
    (Measured on this draw, busy case: 1 % as built, 10 % with 24 independent hours, 26 %
    with no hourly over-dispersion.)"""
    rng = np.random.default_rng(20261202)
    runs = 300
    alarms = 0
    for _ in range(runs):
        ev = detect.evaluate_deploy(_long_null(rng, calls_per_min=calls_per_min), 1440)
        alarms += any(t.finding and t.family == "long" for t in ev.tests)
    assert alarms / runs <= 0.02, alarms
