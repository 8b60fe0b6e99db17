"""The named-query runner: header parsing, parameter binding, errors, and each shipped query."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from errscope.collector.errors import QueryError, QueryErrorKind
from errscope.collector.store.duckdb import DuckDBStore
from errscope.queries.runner import (
    ParamType,
    bind_params,
    default_queries,
    load_queries,
    parse_query,
    run_query,
)
from tests.factories import T0, make_call

_GOOD = """-- name: q
-- returns: rows
-- param: n integer = 5     -- how many
-- param: who text
SELECT $who AS who, $n AS n
"""


def test_parse_header() -> None:
    """The header gives the name, what rows mean, and typed parameters with defaults."""
    query = parse_query("q", _GOOD)
    assert query.returns == "rows"
    assert [(p.name, p.type, p.default, p.required) for p in query.params] == [
        ("n", ParamType.INTEGER, "5", False),
        ("who", ParamType.TEXT, None, True),
    ]
    assert query.params[0].doc == "how many"
    assert query.sql.startswith("SELECT")


@pytest.mark.parametrize(
    ("text", "kind", "field"),
    [
        pytest.param("-- returns: x\nSELECT 1", QueryErrorKind.BAD_HEADER, "name", id="no-name"),
        pytest.param(
            "-- name: other\n-- returns: x\nSELECT 1",
            QueryErrorKind.BAD_HEADER,
            "name",
            id="name-differs",
        ),
        pytest.param("-- name: q\nSELECT 1", QueryErrorKind.BAD_HEADER, "returns", id="no-returns"),
        pytest.param(
            "-- name: q\n-- returns: x\nSELECT $a",
            QueryErrorKind.UNDECLARED_PARAM,
            "a",
            id="undeclared",
        ),
        pytest.param(
            "-- name: q\n-- returns: x\n-- param: a text\nSELECT 1",
            QueryErrorKind.UNUSED_PARAM,
            "a",
            id="unused",
        ),
        pytest.param(
            "-- name: q\n-- returns: x\n-- param: a blob\nSELECT $a",
            QueryErrorKind.BAD_HEADER,
            "a",
            id="bad-type",
        ),
        pytest.param(
            "-- name: q\n-- returns: x\n-- param: a integer = ten\nSELECT $a",
            QueryErrorKind.BAD_PARAM_VALUE,
            "a",
            id="bad-default",
        ),
        pytest.param(
            "-- name: q\n-- returns: x\n-- param: a text\n-- param: a text\nSELECT $a",
            QueryErrorKind.BAD_HEADER,
            "param",
            id="declared-twice",
        ),
    ],
)
def test_bad_header(text: str, kind: QueryErrorKind, field: str) -> None:
    """A badly declared query is refused at load time, naming the field."""
    with pytest.raises(QueryError) as caught:
        parse_query("q", text)
    assert (caught.value.kind, caught.value.field) == (kind, field)


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        pytest.param({"who": "ann"}, {"who": "ann", "n": 5}, id="default-filled"),
        pytest.param({"who": "ann", "n": "7"}, {"who": "ann", "n": 7}, id="string-converted"),
        pytest.param({"who": "ann", "n": 7}, {"who": "ann", "n": 7}, id="int-kept"),
    ],
)
def test_bind(given: dict[str, object], expected: dict[str, object]) -> None:
    """Values are converted to the declared type and defaults filled in."""
    assert bind_params(parse_query("q", _GOOD), given) == expected


@pytest.mark.parametrize(
    ("given", "kind", "field"),
    [
        pytest.param({}, QueryErrorKind.MISSING_PARAM, "who", id="missing"),
        pytest.param({"who": "a", "x": "1"}, QueryErrorKind.UNKNOWN_PARAM, "x", id="unknown"),
        pytest.param(
            {"who": "a", "n": "7.5"}, QueryErrorKind.BAD_PARAM_VALUE, "n", id="not-integer"
        ),
        pytest.param(
            {"who": "a", "n": True}, QueryErrorKind.BAD_PARAM_VALUE, "n", id="bool-is-not-integer"
        ),
        pytest.param(
            {"who": "a", "n": "1; DROP TABLE x"},
            QueryErrorKind.BAD_PARAM_VALUE,
            "n",
            id="injection",
        ),
    ],
)
def test_bind_errors(given: dict[str, object], kind: QueryErrorKind, field: str) -> None:
    """Missing, unknown and badly typed parameters are named in a typed error."""
    with pytest.raises(QueryError) as caught:
        bind_params(parse_query("q", _GOOD), given)
    assert (caught.value.kind, caught.value.field) == (kind, field)


def test_values_are_bound_not_formatted(memory_store: DuckDBStore) -> None:
    """A text value full of SQL comes back as data: it is bound, never spliced into the query."""
    queries = {"q": parse_query("q", _GOOD)}
    sneaky = "x' ; DROP TABLE tool_calls; --"
    table = run_query(memory_store.cursor(), "q", {"who": sneaky}, queries=queries)
    assert table.to_pylist() == [{"who": sneaky, "n": 5}]
    assert memory_store.count("tool_calls") == 0


def test_unknown_query_lists_names(memory_store: DuckDBStore) -> None:
    """An unknown query name is refused with the list of names in the hint."""
    with pytest.raises(QueryError) as caught:
        run_query(memory_store.cursor(), "drop_everything", {})
    assert caught.value.kind is QueryErrorKind.UNKNOWN_QUERY
    assert caught.value.hint is not None
    assert "error_rates" in caught.value.hint


def test_every_shipped_query_loads() -> None:
    """Every .sql file in queries/ has a valid header and uses exactly its parameters."""
    shipped = default_queries()
    assert {"error_rates", "calls_by_correlation"} <= set(shipped)
    assert load_queries(Path(__file__).parent.parent / "queries").keys() == shipped.keys()


def test_error_rates(memory_store: DuckDBStore) -> None:
    """error_rates counts calls per minute bucket, service, tool and code inside the window."""
    memory_store.append_tool_calls(
        [
            make_call(ts=T0 + timedelta(seconds=s), code=c)
            for s, c in [(1, "ok"), (2, "ok"), (3, "not_found"), (61, "ok")]
        ]
        + [make_call(ts=T0 - timedelta(days=2))]
    )
    rows = run_query(
        memory_store.cursor(),
        "error_rates",
        {
            "since": (T0 - timedelta(hours=1)).isoformat(),
            "until": (T0 + timedelta(hours=1)).isoformat(),
        },
    ).to_pylist()
    assert [(r["bucket"] - T0, r["code"], r["calls"]) for r in rows] == [
        (timedelta(0), "not_found", 1),
        (timedelta(0), "ok", 2),
        (timedelta(minutes=1), "ok", 1),
    ]
    filtered = run_query(
        memory_store.cursor(),
        "error_rates",
        {"since": "2026-11-30T08:00:00Z", "until": "2026-11-30T10:00:00Z", "tool": "nope"},
    )
    assert filtered.num_rows == 0


@pytest.mark.parametrize(
    "key",
    [
        pytest.param("trace_id", id="by-trace-id"),
        pytest.param("call_id", id="by-call-id"),
        pytest.param("correlation_id", id="by-correlation-id"),
        pytest.param("session_id", id="by-session-id"),
    ],
)
def test_calls_by_correlation(memory_store: DuckDBStore, key: str) -> None:
    """calls_by_correlation finds a call by any of its ids and nothing else."""
    target = make_call(session_id="sess-target")
    memory_store.append_tool_calls([target, make_call(), make_call()])
    rows = run_query(
        memory_store.cursor(),
        "calls_by_correlation",
        {
            "id": getattr(target, key),
            "since": "2026-11-29T00:00:00Z",
            "until": "2026-12-01T00:00:00Z",
        },
    ).to_pylist()
    assert [r["span_id"] for r in rows] == [target.span_id]
