"""Each named query on a small hand-made table: what one row means, pinned."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from errscope.collector.errors import QueryError, QueryErrorKind
from errscope.collector.record import Deploy, RedactionCount, TracebackSample
from errscope.collector.store.duckdb import DuckDBStore
from errscope.queries.runner import bind_params, default_queries
from tests.queries.traffic import StoreSource, call

T = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)
WIDE = {"since": T - timedelta(days=1), "until": T + timedelta(days=1)}


def _rows(source: StoreSource, name: str, **params: object) -> list[dict[str, object]]:
    return source.run(name, params).to_pylist()


def test_every_query_declares_until_or_is_an_id_lookup() -> None:
    """Every named query can be bounded in time (for --as-of) or is a lookup by id."""
    for query in default_queries().values():
        names = {p.name for p in query.params}
        assert "until" in names or "id" in names, query.name


def test_minute_rollup_counts_calls_errors_and_traces(
    store: DuckDBStore, source: StoreSource
) -> None:
    """minute_rollup gives the tool's calls per minute beside errors per code and field."""
    store.append_tool_calls(
        [
            call(T, code="ok"),
            call(T + timedelta(seconds=1), code="invalid_args", field="job_id", trace_id="a" * 32),
            call(T + timedelta(seconds=2), code="invalid_args", field="job_id", trace_id="a" * 32),
            call(T + timedelta(minutes=1), code="ok"),
        ]
    )
    rows = _rows(source, "minute_rollup", **WIDE)
    bad = [r for r in rows if r["code"] == "invalid_args"]
    assert len(bad) == 1
    assert (bad[0]["calls"], bad[0]["errors"], bad[0]["traces"]) == (3, 2, 1)
    assert sum(r["errors"] for r in rows if r["code"] == "ok") == 0


def test_code_mix_by_version_shares_sum_to_one(store: DuckDBStore, source: StoreSource) -> None:
    """code_mix_by_version gives each code's share of its version's calls."""
    store.append_tool_calls(
        [call(T, version="1"), call(T, version="1", code="not_found"), call(T, version="2")]
    )
    rows = _rows(source, "code_mix_by_version", **WIDE)
    shares = {(r["version"], r["code"]): r["share"] for r in rows}
    assert shares == {("1", "ok"): 0.5, ("1", "not_found"): 0.5, ("2", "ok"): 1.0}


def test_deploy_markers_name_the_previous_version(store: DuckDBStore, source: StoreSource) -> None:
    """deploy_markers merges auto and cli marks and names the version each deploy replaced."""
    store.add_deploys(
        [
            Deploy("svc", "1", T, "prod"),
            Deploy("svc", "2", T + timedelta(hours=1), "prod", source="cli"),
            Deploy("svc", "2", T + timedelta(hours=1, minutes=2), "prod", source="auto"),
        ]
    )
    rows = _rows(source, "deploy_markers", **WIDE)
    assert [(r["version"], r["previous_version"], r["sources"]) for r in rows] == [
        ("1", None, "auto"),
        ("2", "1", "auto,cli"),
    ]
    assert rows[1]["ts"] == T + timedelta(hours=1)


def test_deploy_markers_until_hides_later_deploys(store: DuckDBStore, source: StoreSource) -> None:
    """deploy_markers sees nothing marked at or after `until` (--as-of)."""
    store.add_deploys([Deploy("svc", "1", T, "prod"), Deploy("svc", "2", T + timedelta(hours=1))])
    rows = _rows(
        source, "deploy_markers", since=T - timedelta(days=1), until=T + timedelta(minutes=5)
    )
    assert [r["version"] for r in rows] == ["1"]


def test_deploy_minute_counts_counts_a_trace_once(store: DuckDBStore, source: StoreSource) -> None:
    """deploy_minute_counts counts a retrying trace as one unit, in its first failing minute."""
    trace = "b" * 32
    store.append_tool_calls(
        [
            call(
                T + timedelta(seconds=s),
                version="2",
                code="invalid_args",
                field="x",
                trace_id=trace,
            )
            for s in (0, 10, 70)
        ]
        + [call(T, version="2"), call(T, version="1")]
    )
    rows = _rows(
        source,
        "deploy_minute_counts",
        service="billing-agent",
        new_version="2",
        old_version="1",
        since=T - timedelta(hours=1),
        until=T + timedelta(hours=1),
    )
    bad = [(r["minute"], r["n"], r["units"], r["calls"]) for r in rows if r["code"] != "ok"]
    assert bad == [(T, 2, 1, 3), (T + timedelta(minutes=1), 1, 0, 1)]


@pytest.mark.parametrize(
    ("failures", "loop_units"),
    [
        pytest.param(2, 0, id="two-failures-is-not-a-loop"),
        pytest.param(3, 1, id="three-failures-is-a-loop"),
    ],
)
def test_deploy_minute_counts_marks_looping_traces(
    store: DuckDBStore, source: StoreSource, failures: int, loop_units: int
) -> None:
    """deploy_minute_counts counts a trace failing more than twice on one field as a loop."""
    store.append_tool_calls(
        [
            call(
                T + timedelta(seconds=20 * i),
                version="2",
                code="invalid_args",
                field="x",
                trace_id="c" * 32,
            )
            for i in range(failures)
        ]
    )
    rows = _rows(
        source,
        "deploy_minute_counts",
        service="billing-agent",
        new_version="2",
        since=T - timedelta(hours=1),
        until=T + timedelta(hours=1),
    )
    assert [(r["units"], r["loop_units"]) for r in rows] == [(1, loop_units)]


def test_signature_exposure_excludes_a_version(store: DuckDBStore, source: StoreSource) -> None:
    """signature_exposure can describe every version but the new one."""
    store.append_tool_calls(
        [
            call(T, version="1", code="invalid_args", field="a"),
            call(T, version="2"),
            call(T, version="2", code="invalid_args", field="b", correlation_id="c1"),
        ]
    )
    old = _rows(source, "signature_exposure", service="billing-agent", exclude_version="2", **WIDE)
    new = _rows(source, "signature_exposure", service="billing-agent", version="2", **WIDE)
    assert [(r["code"], r["field"]) for r in old] == [("invalid_args", "a")]
    assert {(r["code"], r["field"], r["calls"], r["ids"]) for r in new} == {
        ("invalid_args", "b", 2, 1),
        ("ok", None, 2, 0),
    }


def test_signature_history_is_the_exposure_of_the_other_versions(
    store: DuckDBStore, source: StoreSource
) -> None:
    """signature_history gives the signatures and tool calls signature_exposure gives for
    every version but one (what the new-signature test reads), without its distinct counts."""
    store.append_tool_calls(
        [
            call(T, version="1", code="invalid_args", field="a"),
            call(T, version="1", code="invalid_args", field="a"),
            call(T, version="0", tool="other"),
            call(T, version="2", code="invalid_args", field="b"),
        ]
    )
    args = {"service": "billing-agent", "exclude_version": "2", **WIDE}
    history = _rows(source, "signature_history", **args)
    exposure = _rows(source, "signature_exposure", **args)
    keep = ("tool", "code", "field", "n", "calls")
    assert [{k: r[k] for k in keep} for r in history] == [{k: r[k] for k in keep} for r in exposure]
    assert {(r["tool"], r["field"], r["n"], r["calls"]) for r in history} == {
        ("get_job", "a", 2, 2),
        ("other", None, 1, 1),
    }


def test_first_failing_calls_one_per_correlation_id(
    store: DuckDBStore, source: StoreSource
) -> None:
    """first_failing_calls lists distinct correlation ids, oldest first, capped per group."""
    store.append_tool_calls(
        [
            call(
                T + timedelta(seconds=i),
                code="invalid_args",
                field="f",
                correlation_id=f"c{i // 2}",
            )
            for i in range(10)
        ]
    )
    rows = _rows(source, "first_failing_calls", service="billing-agent", per_group=3, **WIDE)
    assert [r["correlation_id"] for r in rows] == ["c0", "c1", "c2"]


def test_not_found_series_buckets(store: DuckDBStore, source: StoreSource) -> None:
    """not_found_series counts calls and not_found per bucket and tool."""
    store.append_tool_calls([call(T), call(T, code="not_found"), call(T + timedelta(minutes=6))])
    rows = _rows(source, "not_found_series", **WIDE)
    assert [(r["calls"], r["not_found"]) for r in rows] == [(2, 1), (1, 0)]


def test_top_invalid_args_fields_ranks_by_errors(store: DuckDBStore, source: StoreSource) -> None:
    """top_invalid_args_fields ranks fields by invalid_args with their share of the tool."""
    store.append_tool_calls(
        [call(T, code="invalid_args", field="a") for _ in range(3)]
        + [call(T, code="invalid_args", field="b")]
    )
    rows = _rows(source, "top_invalid_args_fields", **WIDE)
    assert [(r["field"], r["errors"], r["share_of_tool"]) for r in rows] == [
        ("a", 3, 0.75),
        ("b", 1, 0.25),
    ]


@pytest.mark.parametrize(
    ("calls", "rule"),
    [
        pytest.param([("invalid_args", "f", None)] * 3, "invalid_args_repeated", id="field-thrice"),
        pytest.param(
            [("denied", None, None), ("ok", None, None)],
            "retry_after_denied",
            id="retry-after-denied",
        ),
        pytest.param(
            [("not_found", None, f"k{i}") for i in range(3)],
            "not_found_repeated",
            id="three-misses",
        ),
    ],
)
def test_loop_misuse_rules(
    store: DuckDBStore,
    source: StoreSource,
    calls: list[tuple[str, str | None, str | None]],
    rule: str,
) -> None:
    """loop_misuse reports each retry rule broken within one trace."""
    trace = "c" * 32
    store.append_tool_calls(
        [
            call(
                T + timedelta(seconds=i),
                code=code,
                field=fld,
                trace_id=trace,
                **({"call_id": cid} if cid else {}),
            )
            for i, (code, fld, cid) in enumerate(calls)
        ]
    )
    rows = _rows(source, "loop_misuse", **WIDE)
    assert [r["rule"] for r in rows] == [rule]


@pytest.mark.parametrize(
    "calls",
    [
        pytest.param([("invalid_args", "f", None)] * 2, id="field-twice-is-allowed"),
        pytest.param(
            [("invalid_args", "f", None), ("invalid_args", "g", None), ("invalid_args", "h", None)],
            id="different-fields",
        ),
        pytest.param([("ok", None, None), ("denied", None, None)], id="denied-last"),
    ],
)
def test_loop_misuse_allows_the_catalog_retries(
    store: DuckDBStore, source: StoreSource, calls: list[tuple[str, str | None, str | None]]
) -> None:
    """loop_misuse stays silent on retries the catalog allows."""
    trace = "d" * 32
    store.append_tool_calls(
        [
            call(T + timedelta(seconds=i), code=code, field=fld, trace_id=trace)
            for i, (code, fld, _) in enumerate(calls)
        ]
    )
    assert _rows(source, "loop_misuse", **WIDE) == []


def test_unknown_codes_group_raw_codes(store: DuckDBStore, source: StoreSource) -> None:
    """unknown_codes counts handler bugs per raw code with an example id."""
    store.append_tool_calls(
        [
            call(T, code="unknown", raw_code="E_WEIRD", correlation_id="x1"),
            call(T, code="unknown", raw_code="E_WEIRD"),
        ]
    )
    rows = _rows(source, "unknown_codes", **WIDE)
    assert [(r["raw_code"], r["calls"]) for r in rows] == [("E_WEIRD", 2)]


def _tb(n: int, fp: str, corr: str) -> TracebackSample:
    return TracebackSample(
        ts=T,
        service="svc",
        tool="t",
        trace_id=f"{n:032x}",
        span_id=f"{n:016x}",
        exception_type="KeyError",
        fingerprint=fp,
        text="Traceback ...",
        correlation_id=corr,
    )


def test_traceback_groups_and_lookup(store: DuckDBStore, source: StoreSource) -> None:
    """traceback_groups groups by fingerprint; tracebacks_by_correlation finds one by id."""
    store.append_tracebacks([_tb(1, "fp1", "k1"), _tb(2, "fp1", "k2"), _tb(3, "fp2", "k3")])
    groups = _rows(source, "traceback_groups", **WIDE)
    assert [(g["fingerprint"], g["samples"]) for g in groups] == [("fp1", 2), ("fp2", 1)]
    found = _rows(source, "tracebacks_by_correlation", id="k3")
    assert [r["fingerprint"] for r in found] == ["fp2"]


def test_redaction_summary_sums_counts(store: DuckDBStore, source: StoreSource) -> None:
    """redaction_summary sums counts per rule, never values."""
    store.add_redactions(
        [RedactionCount(T, "svc", "t", "aws_key", 2), RedactionCount(T, "svc", "t", "aws_key", 3)]
    )
    rows = _rows(source, "redaction_summary", **WIDE)
    assert [(r["rule"], r["redactions"]) for r in rows] == [("aws_key", 5)]


def test_spike_slots_places_days_and_slots(store: DuckDBStore, source: StoreSource) -> None:
    """spike_slots puts the newest 5 minutes in day 0 slot 0 and yesterday's slot in day 1."""
    until = T + timedelta(hours=1)
    recent = [call(until - timedelta(seconds=30), code="not_found") for _ in range(3)]
    yesterday = [call(until - timedelta(days=1, seconds=30), code="not_found")]
    store.append_tool_calls([*recent, *yesterday])
    rows = _rows(source, "spike_slots", until=until, min_recent_errors=3)
    assert [(r["day"], r["slot"], r["errors"]) for r in rows] == [(0, 0, 3), (1, 0, 1)]
    assert _rows(source, "spike_slots", until=until, min_recent_errors=4) == []


def test_a_window_that_ends_before_it_starts_is_refused() -> None:
    """since after until is a mistake to name, not an empty table that reads as quiet."""
    query = default_queries()["error_rates"]
    with pytest.raises(QueryError) as caught:
        bind_params(query, {"since": "2026-11-30T10:00:00Z", "until": "2026-11-29T00:00:00Z"})
    assert (caught.value.kind, caught.value.field) == (QueryErrorKind.BAD_PARAM_VALUE, "since")
    same = bind_params(query, {"since": "2026-11-29T00:00:00Z", "until": "2026-11-29T00:00:00Z"})
    assert same["since"] == same["until"]
