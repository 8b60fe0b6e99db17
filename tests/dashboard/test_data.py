"""errscope.dashboards.data and .shape: query answers shaped, and answers equal to detection's."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pytest
import streamlit as st

from errscope.collector.store.duckdb import DuckDBStore
from errscope.dashboards import data, shape, source
from errscope.queries import detect
from errscope.queries.findings import Finding, FindingKind, finding_dict
from errscope.queries.source import FileSource
from tests.dashboard.scenario import AS_OF
from tests.queries.traffic import DEPLOY_TS, Scenario

M0 = datetime(2026, 11, 30, 10, 0, tzinfo=UTC)
M1 = datetime(2026, 11, 30, 10, 1, tzinfo=UTC)


def _rollup(rows: list[tuple[datetime, str, str, str | None, int, int]]) -> pd.DataFrame:
    return pd.DataFrame(
        [
            {
                "minute": m,
                "service": "svc",
                "version": "1",
                "environment": "prod",
                "tool": tool,
                "code": code,
                "field": fld,
                "calls": calls,
                "errors": errors,
                "traces": errors,
            }
            for m, tool, code, fld, calls, errors in rows
        ]
    )


@pytest.mark.parametrize(
    ("rows", "bucket_s", "expected"),
    [
        pytest.param(
            [(M0, "t", "ok", None, 10, 0), (M0, "t", "invalid_args", "a", 10, 3)],
            60,
            {(M0, "t", "ok"): 7, (M0, "t", "invalid_args"): 3},
            id="ok-is-calls-minus-errors",
        ),
        pytest.param(
            # two fields of one code in one minute are one code's calls
            [(M0, "t", "invalid_args", "a", 5, 2), (M0, "t", "invalid_args", "b", 5, 3)],
            60,
            {(M0, "t", "invalid_args"): 5},
            id="all-failing-no-ok-row",
        ),
        pytest.param(
            [(M0, "t", "ok", None, 4, 0), (M1, "t", "ok", None, 6, 0)],
            300,
            {(M0, "t", "ok"): 10},
            id="minutes-merged-into-buckets",
        ),
    ],
)
def test_calls_by_code_from_minute_rollup(
    rows: list[tuple[datetime, str, str, str | None, int, int]],
    bucket_s: int,
    expected: dict[tuple[datetime, str, str], int],
) -> None:
    """minute_rollup's per-tool totals and per-code errors become calls per code, ok included."""
    out = shape.shape_calls_by_code(_rollup(rows), bucket_s=bucket_s)
    got = {(r.bucket.to_pydatetime(), r.tool, r.code): r.calls for r in out.itertuples()}
    assert got == expected


def test_empty_rollup_gives_an_empty_frame() -> None:
    """No rows is an empty frame with the columns charts expect, not an error."""
    out = shape.shape_calls_by_code(pd.DataFrame(), bucket_s=60)
    assert list(out.columns) == ["bucket", "tool", "code", "calls"]
    assert out.empty


@pytest.mark.parametrize(
    ("range_s", "bucket_s"),
    [
        pytest.param(3600, 60, id="1h-per-minute"),
        pytest.param(6 * 3600, 120, id="6h"),
        pytest.param(86400, 300, id="24h"),
        pytest.param(7 * 86400, 2040, id="7d"),
    ],
)
def test_bucket_width_keeps_charts_to_300_columns(range_s: int, bucket_s: int) -> None:
    """Buckets are whole minutes and a chart has at most ~300 of them."""
    assert shape.bucket_for(range_s) == bucket_s


def test_findings_are_detect_alls(scenario_db: Path) -> None:
    """Uncapped, the dashboard's findings are exactly what detect_all reports."""
    st.cache_data.clear()
    spec = source.SourceSpec(db=str(scenario_db), as_of=AS_OF)
    mine = data.findings(spec, None, None, limit=None)
    theirs = detect.detect_all(FileSource(scenario_db), as_of=AS_OF)

    def key(found: list[Finding]) -> list[str]:
        return sorted(str(sorted(finding_dict(f).items())) for f in found)

    assert key(mine.found) == key(theirs)
    assert mine.skipped == 0


def test_findings_cap_says_what_it_left_out(scenario_db: Path) -> None:
    """A cap of zero deploys keeps spikes and loops and counts the deploys left out."""
    st.cache_data.clear()
    spec = source.SourceSpec(db=str(scenario_db), as_of=AS_OF)
    capped = data.findings(spec, None, None, limit=0)
    assert capped.skipped == capped.deploys == 1
    assert {f.kind for f in capped.found} == {
        FindingKind.SPIKE,
        FindingKind.LOOP_MISUSE,
    }


def test_source_from_environment() -> None:
    """The environment names the source; the token is kept but never described."""
    spec = source.spec_from_env(
        {
            source.ENV_API: "http://127.0.0.1:4320",
            source.ENV_TOKEN: "tok-0123456789abcdef",
            source.ENV_AS_OF: "2026-11-30T12:00:00Z",
        }
    )
    assert spec.as_of == AS_OF
    assert spec.describe() == "http://127.0.0.1:4320"
    assert "tok" not in spec.describe()


@pytest.mark.parametrize(("range_s", "hours"), [(3600, 1), (6 * 3600, 6), (24 * 3600, 24)])
def test_the_redaction_timeline_covers_the_range_and_no_more(
    scenario_db: Path, range_s: int, hours: int
) -> None:
    """The Secret exposure chart spans the chosen range: a 1 h range is not twelve hours."""
    st.cache_data.clear()
    spec = source.SourceSpec(db=str(scenario_db), as_of=AS_OF)
    frame = data.redactions_over_time(spec, range_s, None)
    assert not frame.empty
    buckets = pd.to_datetime(frame["bucket"]).drop_duplicates().sort_values()
    span = buckets.iloc[-1] - buckets.iloc[0]
    assert span <= pd.Timedelta(hours=hours)
    assert buckets.iloc[0] >= pd.Timestamp(AS_OF) - pd.Timedelta(hours=hours + 1)


class _Recording:
    """A real `FileSource` that also remembers the parameters of every query it ran."""

    def __init__(self, inner: FileSource) -> None:
        self.inner = inner
        self.calls: list[tuple[str, dict[str, object]]] = []

    def run(self, name: str, params: Mapping[str, object] | None = None) -> pa.Table:
        self.calls.append((name, dict(params or {})))
        return self.inner.run(name, params)


@pytest.fixture(scope="module")
def every_minute_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One tool failing on every call from 3 h before DEPLOY_TS to 3 h after: each minute drawn."""
    path = tmp_path_factory.mktemp("deploy-window") / "every-minute.duckdb"
    scenario = Scenario(
        tools=("get_job",), calls_per_min=4, rate=1.0, minutes_before=180, minutes_after=180
    )
    with DuckDBStore(path) as store:
        scenario.load(store)
    return path


@pytest.mark.parametrize(
    "after_deploy",
    [
        pytest.param(timedelta(minutes=30), id="within-the-horizon"),
        pytest.param(timedelta(hours=3), id="past-the-horizon"),
    ],
)
def test_the_deploy_chart_draws_the_window_detection_judges(
    every_minute_db: Path, after_deploy: timedelta
) -> None:
    """The before/after chart covers exactly the minutes detection's verdict read: one window."""
    st.cache_data.clear()
    as_of = DEPLOY_TS + after_deploy
    spec = source.SourceSpec(db=str(every_minute_db), as_of=as_of)
    (deploy,) = data.recent_deploys(spec, 6 * 3600, None, None)
    window = detect.deploy_window(deploy, as_of, data.CONFIG)
    recording = _Recording(FileSource(every_minute_db))
    detect.detect_deploy(
        recording,
        deploy.service,
        deploy.version,
        deploy.environment,
        as_of=as_of,
        deploy=deploy,
        config=data.CONFIG,
    )
    (read,) = [params for name, params in recording.calls if name == "deploy_minute_counts"]
    assert (read["since"], read["until"]) == (window.since, window.until)
    minutes = pd.to_datetime(data.deploy_detail(spec, deploy, "get_job").rates["minute"], utc=True)
    assert (minutes.min(), minutes.max()) == (window.since, window.until - timedelta(minutes=1))
