"""The retry budget: each cap rule of the catalog, as a sequence of observations."""

from __future__ import annotations

from typing import Any

import pytest

from collector.catalog import load_catalog
from collector.toolkit import Decision, RetryBudget


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
            [("t", err("rate_limited", retry_after=1))] * 4,
            ["continue"] * 4,
            id="rate-limited-waits",
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
