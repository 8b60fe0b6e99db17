"""The retry budget: each cap rule of the catalog, as a sequence of observations."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from errscope.collector.catalog import load_catalog
from errscope.collector.toolkit import (
    Decision,
    Denied,
    NotFound,
    Observation,
    PositiveInt,
    RateLimited,
    RetryBudget,
    tool,
)


def err(code: str, **extra: Any) -> dict[str, Any]:
    """An error observation as the adapter builds it."""
    return {"error": code, "hint": "h", **extra}


OK = {"ok": True, "result": {}}


@pytest.mark.parametrize(
    ("steps", "expected"),
    [
        pytest.param([("t", OK)], ["continue"], id="ok"),
        pytest.param(
            [("t", err("invalid_args", field="job_id"))] * 2,
            ["continue", "handoff"],
            id="invalid-args-twice-same-field-hands-off",
        ),
        pytest.param(
            [("t", err("invalid_args", field="a")), ("t", err("invalid_args", field="b"))],
            ["continue", "continue"],
            id="invalid-args-different-fields",
        ),
        pytest.param(
            [("t", err("invalid_args", field="a")), ("u", err("invalid_args", field="a"))],
            ["continue", "continue"],
            id="invalid-args-same-field-different-tools",
        ),
        pytest.param(
            [
                ("t", err("invalid_args", field="a")),
                ("t", OK),
                ("t", err("invalid_args", field="a")),
            ],
            ["continue", "continue", "handoff"],
            id="success-does-not-reset",
        ),
        pytest.param(
            [("t", err("invalid_args")), ("t", err("invalid_args"))],
            ["continue", "handoff"],
            id="invalid-args-without-field",
        ),
        pytest.param(
            [("t", err("not_found")), ("t", err("not_found"))],
            ["continue", "handoff"],
            id="not-found-twice-hands-off",
        ),
        pytest.param(
            [("t", err("not_found")), ("u", err("not_found"))],
            ["continue", "handoff"],
            id="not-found-counts-across-tools",
        ),
        pytest.param([("t", err("denied"))], ["stop"], id="denied-once-stops"),
        pytest.param(
            [("t", err("timeout")), ("t", err("timeout"))], ["continue", "stop"], id="timeout"
        ),
        pytest.param([("t", err("internal_error"))], ["stop"], id="internal-error-stops"),
        pytest.param(
            [("t", err("rate_limited", retry_after=1))] * 3,
            ["continue", "continue", "stop"],
            id="rate-limited-waits-then-stops-at-3-tries",
        ),
        pytest.param(
            [("t", err("rate_limited")), ("t", err("rate_limited")), ("u", err("rate_limited"))],
            ["continue", "continue", "continue"],
            id="rate-limited-counted-per-tool",
        ),
        pytest.param([("t", err("made_up"))], ["stop"], id="unknown-code-stops"),
        pytest.param([("t", {"result": 1})], ["stop"], id="not-an-observation"),
        pytest.param([("t", "oops")], ["stop"], id="not-a-dict"),
        pytest.param([("t", err("not_found", field=["x"]))], ["continue"], id="odd-field-type"),
    ],
)
def test_cap_rules(steps: list[tuple[str, object]], expected: list[str]) -> None:
    """The decisions follow the catalog: 2 per field, 2 misses, denied once, unknown stops."""
    budget = RetryBudget()
    decisions = [budget.record(obs, tool=name) for name, obs in steps]
    assert decisions == expected
    assert all(isinstance(d, Decision) for d in decisions)
    assert budget.last_decision == expected[-1]


def test_fresh_budget_has_no_decision() -> None:
    """last_decision is None until the first record."""
    assert RetryBudget().last_decision is None


def test_user_catalog_changes_the_caps() -> None:
    """A user catalog that adds a code gives the budget that code's cap and action."""
    catalog = load_catalog(
        user_texts=[
            (
                "user.toml",
                """
[codes.quota_exceeded]
meaning = "The monthly quota is used up."
retry_by = "nobody"
max_tries = 1
scope = "trace"
on_cap = "handoff"
hint = "Say when the quota resets."
color = "#123456"
""",
            )
        ]
    )
    budget = RetryBudget(catalog=catalog)
    assert budget.record(err("quota_exceeded")) == "handoff"


def test_parallel_calls_keep_the_most_severe_decision() -> None:
    """asyncio.gather(denied, ok): the stop is not overwritten by the later continue."""

    @tool("delete_repo")
    async def delete_repo(name: str) -> str:
        raise Denied()

    @tool("get_job")
    async def get_job(job_id: PositiveInt) -> dict[str, int]:
        await asyncio.sleep(0.01)
        return {"id": job_id}

    async def turn(budget: RetryBudget) -> list[Observation]:
        return list(
            await asyncio.gather(
                delete_repo({"name": "x"}, budget=budget), get_job({"job_id": 1}, budget=budget)
            )
        )

    budget = RetryBudget()
    denied, ok = asyncio.run(turn(budget))
    assert (denied["error"], ok["ok"]) == ("denied", True)
    assert budget.last_decision == "stop"
    assert budget.take_decision() == "stop"


@pytest.mark.parametrize(
    ("decisions_in", "taken"),
    [
        pytest.param(["stop", "continue"], "stop", id="stop-is-sticky"),
        pytest.param(["continue", "handoff", "continue"], "handoff", id="handoff-is-sticky"),
        pytest.param(["handoff", "stop"], "stop", id="stop-outranks-handoff"),
        pytest.param(["continue"], "continue", id="continue"),
    ],
)
def test_take_decision_returns_the_most_severe_and_starts_over(
    decisions_in: list[str], taken: str
) -> None:
    """take_decision() gives the most severe unread decision, then None until the next record."""
    observation = {"stop": err("denied"), "handoff": err("not_found"), "continue": OK}
    budget = RetryBudget()
    for decision in decisions_in:
        if decision == "handoff":  # the second miss hands off
            budget.record(err("not_found"), tool="t")
        budget.record(observation[decision], tool="t")
    assert budget.last_decision == taken
    assert budget.take_decision() == taken
    assert budget.last_decision is None
    assert budget.take_decision() is None
    budget.record(OK, tool="t")
    assert budget.take_decision() == "continue"


def test_not_found_counts_distinct_ids() -> None:
    """The same id missed twice is one miss; a second distinct id is the cap."""

    @tool("get_job")
    def get_job(job_id: PositiveInt) -> None:
        raise NotFound()

    budget = RetryBudget()
    assert [
        (get_job({"job_id": job_id}, budget=budget), budget.take_decision())[1]
        for job_id in (5, "5", 5, 6)  # "5" is coerced to the same id
    ] == ["continue", "continue", "continue", "handoff"]


def test_not_found_field_names_the_id() -> None:
    """With NotFound(field=...), only that argument is the id: other arguments do not matter."""

    @tool("get_job")
    def get_job(job_id: PositiveInt, verbose: bool = False) -> None:
        raise NotFound(field="job_id")

    budget = RetryBudget()
    get_job({"job_id": 5}, budget=budget)
    get_job({"job_id": 5, "verbose": True}, budget=budget)
    assert budget.take_decision() == "continue"


def test_invented_keys_share_one_count_per_tool() -> None:
    """A model inventing a new misspelt key every call is capped like one field."""

    @tool("get")
    def get(job_id: PositiveInt) -> None:
        return None

    budget = RetryBudget()
    decisions = [
        (get({f"jobid{i}": 1}, budget=budget), budget.take_decision())[1] for i in range(3)
    ]
    assert decisions == ["continue", "handoff", "handoff"]


def test_declared_fields_keep_their_own_counts() -> None:
    """Declared fields are still counted apart: fixing job_id then status gives two tries each."""
    budget = RetryBudget()
    declared = ("job_id", "status")
    for field in ("job_id", "status"):
        assert budget.record(err("invalid_args", field=field), declared_fields=declared) == (
            "continue"
        )
    assert budget.record(err("invalid_args", field="typo"), declared_fields=declared) == "continue"
    assert budget.record(err("invalid_args", field="other"), declared_fields=declared) == "handoff"


def test_rate_limited_through_the_adapter_stops_at_the_cap() -> None:
    """A tool that is always throttled stops after the catalog's 3 tries, never spins."""

    @tool("search")
    def search(q: str) -> None:
        raise RateLimited(retry_after_s=1)

    budget = RetryBudget()
    decisions = [(search({"q": "a"}, budget=budget), budget.take_decision())[1] for _ in range(4)]
    assert decisions == ["continue", "continue", "stop", "stop"]
