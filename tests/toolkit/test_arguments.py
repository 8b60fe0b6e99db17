"""Validation before coercion: one object, no unknown keys, required fields, strict types."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Annotated, Any, Literal

import pytest

from errscope.collector.toolkit import (
    BoolFromString,
    Coerce,
    PositiveInt,
    Tool,
    coerce_positive_int,
)

Small = Annotated[int, Coerce(partial(coerce_positive_int, maximum=1000), shape="1 to 1000")]


@pytest.fixture
def search(make_tool: Callable[..., Callable[[Callable[..., Any]], Tool]]) -> Tool:
    """A tool with one parameter of each supported kind; it returns what it was given."""

    @make_tool("search")
    def search(
        query: str,
        limit: Small = 10,
        verbose: BoolFromString = False,
        strict: bool = False,
        owner_id: PositiveInt | None = None,
        status: Literal["open", "closed"] = "open",
        page: int = 1,
        weight: float = 1.0,
        filters: dict[str, Any] | None = None,
        tags: list[str] | None = None,
        extra: Any = None,
    ) -> dict[str, Any]:
        return {
            "query": query,
            "limit": limit,
            "verbose": verbose,
            "strict": strict,
            "owner_id": owner_id,
            "status": status,
            "page": page,
            "weight": weight,
            "filters": filters,
            "tags": tags,
            "extra": extra,
        }

    return search


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        pytest.param({"query": "x"}, {}, id="defaults"),
        pytest.param({"query": "x", "limit": " 20 "}, {"limit": 20}, id="opted-in-coercion"),
        pytest.param({"query": "x", "verbose": "true"}, {"verbose": True}, id="bool-from-string"),
        pytest.param({"query": "x", "owner_id": "7"}, {"owner_id": 7}, id="optional-coerced"),
        pytest.param({"query": "x", "owner_id": None}, {"owner_id": None}, id="optional-null"),
        pytest.param({"query": "x", "status": "closed"}, {"status": "closed"}, id="literal"),
        pytest.param({"query": "x", "weight": 2}, {"weight": 2.0}, id="int-as-float"),
        # Nested values are passed as sent: "17" inside filters stays a string.
        pytest.param(
            {"query": "x", "filters": {"owner_id": "17"}},
            {"filters": {"owner_id": "17"}},
            id="nested-not-coerced",
        ),
        pytest.param({"query": "x", "tags": ["a", 1]}, {"tags": ["a", 1]}, id="list-as-sent"),
        pytest.param({"query": "x", "extra": [1, {"a": None}]}, {}, id="any-passes"),
        pytest.param('{"query": "x", "limit": "5"}', {"limit": 5}, id="json-text"),
        pytest.param(b'{"query": "x"}', {}, id="json-bytes"),
    ],
)
def test_accepted(search: Tool, raw: object, expected: dict[str, Any]) -> None:
    """Valid arguments reach the handler validated and coerced, and nothing else changes."""
    observation = search(raw)
    assert observation["ok"] is True
    for key, value in expected.items():
        assert observation["result"][key] == value
        assert type(observation["result"][key]) is type(value)


@pytest.mark.parametrize(
    ("raw", "field", "hint"),
    [
        pytest.param({"query": "x", "qurey": "y"}, "qurey", "qurey: not an argument", id="unknown"),
        # Unknown keys are reported before missing ones: the misspelling is the cause.
        pytest.param({"qurey": "y"}, "qurey", "qurey: not an argument", id="unknown-first"),
        pytest.param({}, "query", "query: required, a string", id="missing"),
        pytest.param({"query": 17}, "query", "query: a string", id="int-for-string"),
        pytest.param({"query": "x", "limit": "1001"}, "limit", "limit: a positive", id="max"),
        pytest.param({"query": "x", "verbose": "yes"}, "verbose", "verbose: true or", id="yes"),
        pytest.param({"query": "x", "strict": "true"}, "strict", "strict: true or", id="strict"),
        pytest.param({"query": "x", "owner_id": True}, "owner_id", "owner_id:", id="opt-bool"),
        pytest.param({"query": "x", "status": "OPEN"}, "status", "one of", id="literal-case"),
        pytest.param({"query": "x", "page": "2"}, "page", "page: an integer", id="int-strict"),
        pytest.param({"query": "x", "page": True}, "page", "page: an integer", id="bool-int"),
        pytest.param({"query": "x", "weight": "1.5"}, "weight", "a number", id="float-strict"),
        pytest.param({"query": "x", "weight": float("nan")}, "weight", "a number", id="nan"),
        pytest.param({"query": "x", "weight": 10**400}, "weight", "a number", id="overflow"),
        pytest.param({"query": "x", "filters": "[]"}, "filters", "a JSON object", id="dict"),
        pytest.param({"query": "x", "tags": "a,b"}, "tags", "a JSON array", id="list"),
    ],
)
def test_rejected_naming_the_field(search: Tool, raw: object, field: str, hint: str) -> None:
    """Each refusal is invalid_args naming one field, with a hint that starts with the shape."""
    observation = search(raw)
    assert observation["error"] == "invalid_args"
    assert observation["field"] == field
    assert hint in observation["hint"]


@pytest.mark.parametrize(
    "raw",
    [
        pytest.param([1, 2], id="list"),
        pytest.param("not json", id="bad-json-text"),
        pytest.param('"a string"', id="json-text-of-a-string"),
        pytest.param(None, id="null"),
        pytest.param(17, id="number"),
        pytest.param("[" * 100_000, id="deep-json"),
        pytest.param({1: "x"}, id="non-string-key"),
        pytest.param({"bad key!": 1}, id="non-identifier-key"),
        pytest.param({"x" * 500: 1}, id="overlong-key"),
    ],
)
def test_rejected_without_a_field(search: Tool, raw: object) -> None:
    """Arguments that are not one object, or keys that are not names, name no field."""
    observation = search(raw)
    assert observation["error"] == "invalid_args"
    assert "field" not in observation
    assert observation["hint"]


def test_unknown_key_holding_a_secret_is_not_named(search: Tool) -> None:
    """An identifier-shaped key that is a secret is never echoed as the field."""
    key = "sk_live_" + "4eC39HqLyjWDarjtT1zdp7dc"
    observation = search({"query": "x", key: 1})
    assert observation["error"] == "invalid_args"
    assert "field" not in observation
    assert "4eC39HqLyjWD" not in repr(observation)


def test_unknown_key_hint_lists_the_arguments(search: Tool) -> None:
    """The unknown-key hint names the accepted arguments, so the model can fix the spelling."""
    observation = search({"query": "x", "lmit": 5})
    assert "arguments are query, limit," in observation["hint"]


def _star_args(*args: int) -> None: ...
def _star_kwargs(**kwargs: int) -> None: ...
def _positional_only(a: int, /) -> None: ...
def _union(a: int | str) -> None: ...
def _tuple(a: tuple[int, int]) -> None: ...
def _custom_class(a: Tool) -> None: ...


@pytest.mark.parametrize(
    "handler",
    [
        pytest.param(_star_args, id="star-args"),
        pytest.param(_star_kwargs, id="star-kwargs"),
        pytest.param(_positional_only, id="positional-only"),
        pytest.param(_union, id="union-of-two-types"),
        pytest.param(_tuple, id="tuple"),
        pytest.param(_custom_class, id="custom-class"),
    ],
)
def test_uncheckable_signatures_fail_at_declaration(
    make_tool: Callable[..., Callable[[Callable[..., Any]], Tool]], handler: Callable[..., Any]
) -> None:
    """A handler whose arguments cannot be checked is refused when declared, not when called."""
    with pytest.raises(TypeError):
        make_tool("bad")(handler)


@pytest.mark.parametrize(
    ("name", "options"),
    [
        pytest.param("", {}, id="empty-name"),
        pytest.param("get job", {}, id="space-in-name"),
        pytest.param("x" * 129, {}, id="long-name"),
        pytest.param("-job", {}, id="leading-dash"),
        pytest.param("ok", {"max_observation_bytes": 64}, id="cap-too-small"),
    ],
)
def test_bad_tool_options_fail_at_declaration(
    make_tool: Callable[..., Callable[[Callable[..., Any]], Tool]],
    name: str,
    options: dict[str, Any],
) -> None:
    """Bad tool names and caps below the minimum are ValueErrors at declaration."""

    def handler() -> None: ...

    with pytest.raises(ValueError, match=r"tool names|max_observation_bytes"):
        make_tool(name, **options)(handler)


def _coerce_day(value: object, *, field: str) -> int:
    return int(str(value))  # raises ValueError on "soon": a validation failure, not a bug


Day = Annotated[int, Coerce(_coerce_day, shape="a day number such as 3")]


def test_coercion_value_error_is_invalid_args(
    make_tool: Callable[..., Callable[[Callable[..., Any]], Tool]],
) -> None:
    """A custom coercion raising ValueError (before the handler runs) blames the field."""

    @make_tool("t")
    def schedule(day: Day) -> int:
        return day

    observation = schedule({"day": "soon"})
    assert observation["error"] == "invalid_args"
    assert observation["field"] == "day"
    assert observation["hint"] == "day: a day number such as 3"


@pytest.mark.parametrize(
    "raw",
    [
        pytest.param(None, id="none"),
        pytest.param("", id="empty-text"),  # some providers send "" for a parameterless call
        pytest.param("  \n", id="whitespace"),
        pytest.param("null", id="json-null"),
        pytest.param(b"", id="empty-bytes"),
        pytest.param({}, id="empty-object"),
    ],
)
def test_no_arguments_for_a_tool_that_needs_none(
    make_tool: Callable[..., Callable[[Callable[..., Any]], Tool]], raw: object
) -> None:
    """Empty arguments mean {} for a tool with no parameters or only optional ones."""

    @make_tool("ping")
    def ping() -> str:
        return "pong"

    @make_tool("list_jobs")
    def list_jobs(status: Literal["open", "closed"] | None = None) -> str | None:
        return status

    assert ping(raw) == {"ok": True, "result": "pong"}
    assert list_jobs(raw) == {"ok": True, "result": None}


@pytest.mark.parametrize("raw", [None, "", "null", b""])
def test_no_arguments_for_a_tool_with_a_required_one(search: Tool, raw: object) -> None:
    """A required parameter still makes empty arguments invalid_args, naming this tool's keys."""
    observation = search(raw)
    assert observation["error"] == "invalid_args"


@pytest.mark.parametrize(
    ("raw", "hint"),
    [
        pytest.param(
            "{not json",
            "arguments: one JSON object with the keys query (required), limit, verbose, "
            "strict, owner_id, status, page, weight, filters, tags, extra",
            id="invalid-json",
        ),
        pytest.param(
            "[1]",
            "arguments: one JSON object with the keys query (required), limit, verbose, "
            "strict, owner_id, status, page, weight, filters, tags, extra",
            id="array",
        ),
    ],
)
def test_object_hint_names_the_tools_own_keys(search: Tool, raw: object, hint: str) -> None:
    """The shape hint is built from this tool's parameters, not another tool's example."""
    observation = search(raw)
    assert observation["hint"] == hint
    assert "job_id" not in observation["hint"]


def test_object_hint_for_a_tool_without_parameters(
    make_tool: Callable[..., Callable[[Callable[..., Any]], Tool]],
) -> None:
    """A parameterless tool's hint says it takes an empty object."""

    @make_tool("ping")
    def ping() -> str:
        return "pong"

    assert ping("[]")["hint"] == "arguments: one JSON object, {} (this tool takes no arguments)"
