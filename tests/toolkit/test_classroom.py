"""The classroom table from issue 9: get_job with good ids, bad ids and invented ids."""

from __future__ import annotations

import json
from typing import Any

import pytest

from errscope.collector.toolkit import NotFound, PositiveInt, tool
from errscope.collector.toolkit.observation import observation_bytes


@pytest.mark.parametrize(
    ("raw", "code", "called"),
    [
        pytest.param("17", "ok", True, id="digit-string"),
        pytest.param(17, "ok", True, id="int"),
        pytest.param(-1, "invalid_args", False, id="negative"),
        pytest.param("abc", "invalid_args", False, id="letters"),
        pytest.param(True, "invalid_args", False, id="true-is-not-job-1"),
        pytest.param(99, "not_found", True, id="invented-id"),
    ],
)
def test_classroom_table(classroom: Any, raw: object, code: str, called: bool) -> None:
    """get_job succeeds on 17 and "17", refuses -1/"abc"/True before the handler, misses 99."""
    observation = classroom.get_job({"job_id": raw})
    assert bool(classroom.calls) is called
    if code == "ok":
        assert observation == {"ok": True, "result": {"id": 17, "title": "ship it"}}
        assert classroom.calls == [17]
        return
    assert observation["error"] == code
    assert observation["hint"]
    if code == "invalid_args":
        assert observation["field"] == "job_id"
        assert observation["hint"] == "job_id: a positive integer such as 17"
    else:
        assert "17" in observation["hint"]
        assert "42" in observation["hint"]


def test_megabyte_got_stays_under_the_cap(classroom: Any) -> None:
    """A 1 MB value yields an invalid_args observation under the 512-byte cap, got truncated."""
    observation = classroom.get_job({"job_id": "x" * 1_000_000})
    assert observation["error"] == "invalid_args"
    assert observation_bytes(observation) <= 512
    assert len(json.dumps(observation, ensure_ascii=False).encode()) <= 512
    assert observation["got"].endswith("...")
    assert observation["field"] == "job_id"
    assert classroom.calls == []


def test_not_found_hint_from_the_tool() -> None:
    """A bare NotFound() takes the tool's not_found_hint."""

    @tool("get_job", not_found_hint="job ids look like 17 or 42")
    def get_job(job_id: PositiveInt) -> dict[str, int]:
        raise NotFound

    assert get_job({"job_id": 5}) == {"error": "not_found", "hint": "job ids look like 17 or 42"}
