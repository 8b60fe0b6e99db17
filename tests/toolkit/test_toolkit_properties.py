"""Properties of the adapter: nothing makes it raise; every observation is a capped dict."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from errscope.collector.catalog import Code, default_catalog
from errscope.collector.toolkit import (
    BoolFromString,
    InvalidArgs,
    NotFound,
    PositiveInt,
    RetryBudget,
    Tool,
    tool,
)
from errscope.collector.toolkit.observation import observation_bytes

CATALOG = default_catalog()
CAP = 512

json_scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.integers(min_value=2**62, max_value=2**70)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text()
    | st.text(alphabet="0123456789 \t\n+-.eE_", max_size=30)
    | st.binary(max_size=64)
)
json_values = st.recursive(
    json_scalars,
    lambda children: (
        st.lists(children, max_size=5) | st.dictionaries(st.text(max_size=20), children, max_size=5)
    ),
    max_leaves=20,
)
keys = st.sampled_from(["job_id", "verbose", "note", "jobid", ""]) | st.text(max_size=30)
arguments = (
    st.dictionaries(keys, json_values, max_size=5)
    | st.fixed_dictionaries({"job_id": json_values})
    | json_values
    | st.text().map(lambda t: t * 50)  # long JSON-ish text
)


def _make(outcome: str) -> Tool:
    @tool("prop_tool")
    def prop_tool(job_id: PositiveInt, verbose: BoolFromString = False, note: str = "") -> Any:
        match outcome:
            case "ok":
                return {"id": job_id, "verbose": verbose}
            case "not_found":
                raise NotFound(hint=note or None)
            case "invalid":
                raise InvalidArgs(note, field=note)
            case _:
                raise RuntimeError(note)

    return prop_tool


TOOLS = {name: _make(name) for name in ("ok", "not_found", "invalid", "boom")}


def _check(observation: object) -> None:
    assert isinstance(observation, dict)
    assert observation_bytes(observation) <= CAP
    json.dumps(observation, allow_nan=False)
    if "error" in observation:
        assert observation["error"] in CATALOG.codes
        assert isinstance(observation["hint"], str)
        # A traceback's header, not the bare word: `got` echoes the model's own text,
        # which may say "Traceback" (hypothesis found "Traceback" * 50).
        assert "Traceback (most recent call last)" not in json.dumps(observation)
    else:
        assert observation["ok"] is True


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(raw=arguments, outcome=st.sampled_from(sorted(TOOLS)), call_id=st.none() | st.text())
def test_adapter_never_raises_and_observations_fit(raw: object, outcome: str, call_id: Any) -> None:
    """Whatever the model sends, the tool returns a JSON dict under the cap with a catalog code."""
    budget = RetryBudget()
    observation = TOOLS[outcome](raw, call_id=call_id, budget=budget)
    _check(observation)
    assert budget.last_decision in ("continue", "stop", "handoff")


@settings(max_examples=150, deadline=None)
@given(job_id=json_values)
def test_handler_runs_only_on_valid_ids(job_id: object) -> None:
    """The handler sees only positive ints: everything else stops at invalid_args."""
    observation = TOOLS["ok"]({"job_id": job_id})
    _check(observation)
    if observation.get("ok"):
        assert isinstance(observation["result"]["id"], int)
        assert observation["result"]["id"] >= 1
    else:
        assert observation == observation | {"error": Code.INVALID_ARGS.value, "field": "job_id"}
