"""Error observations: the cap ladder, the scrubbed `got`, and what never reaches the model."""

from __future__ import annotations

import json
from typing import Any

import pytest

from errscope.collector.catalog import default_catalog, load_catalog
from errscope.collector.toolkit.observation import (
    MIN_OBSERVATION_BYTES,
    default_hint,
    error_observation,
    observation_bytes,
    success_observation,
)

CATALOG = default_catalog()
CORRELATION_ID = "0123456789abcdef0123456789abcdef"


def build(code: str = "invalid_args", hint: str = "n: a number", **options: Any) -> dict[str, Any]:
    """error_observation with the default catalog."""
    return error_observation(code, hint, catalog=CATALOG, **options)


@pytest.mark.parametrize(
    ("options", "keys"),
    [
        pytest.param({}, ["error", "hint"], id="bare"),
        pytest.param({"field": "n"}, ["error", "hint", "field"], id="field"),
        pytest.param(
            {"field": "n", "got": "abc", "has_got": True},
            ["error", "hint", "field", "got"],
            id="field-and-got",
        ),
        pytest.param({"got": None, "has_got": True}, ["error", "hint", "got"], id="got-null"),
        pytest.param({"got": "abc"}, ["error", "hint"], id="got-without-has-got"),
        pytest.param({"retry_after_s": 2.0}, ["error", "hint", "retry_after"], id="retry-after"),
        pytest.param(
            {"correlation_id": CORRELATION_ID}, ["error", "hint", "correlation_id"], id="corr"
        ),
    ],
)
def test_keys(options: dict[str, Any], keys: list[str]) -> None:
    """An error observation has error and hint, and each optional key only when it applies."""
    assert list(build(**options)) == keys


@pytest.mark.parametrize(
    ("got", "expected"),
    [
        pytest.param("abc", "abc", id="string-as-is"),
        pytest.param(True, "true", id="bool-as-json"),
        pytest.param(None, "null", id="null-as-json"),
        pytest.param(-1, "-1", id="int"),
        pytest.param(1.5, "1.5", id="float"),
        pytest.param(10**1000, "an integer of 3322 bits", id="huge-int"),
        pytest.param([1, 2], "[1, 2]", id="list"),
        pytest.param("a<b>bold</b>c", "aboldc", id="html-tags-removed"),
        pytest.param("line\x00\x1bnext", "line next", id="control-characters"),
        pytest.param("\ud800x", "?x", id="lone-surrogate"),
    ],
)
def test_got_rendering(got: object, expected: str) -> None:
    """`got` is short plain text: JSON-ish scalars, no tags, no control characters."""
    assert build(got=got, has_got=True)["got"] == expected


@pytest.mark.parametrize(
    ("got", "secret_part"),
    [
        pytest.param("sk_live_" + "4eC39HqLyjWDarjtT1zdp7dc", "4eC39HqLyjWD", id="stripe-key"),
        pytest.param("password=hunter2sdfsdf", "hunter2", id="password-assignment"),
        pytest.param(
            {"auth": "Bearer xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx"},
            "AbCdEfGhIjKl",
            id="token-inside-object",
        ),
        pytest.param(
            "Traceback (most recent call last):\n"
            '  File "/home/alice/app.py", line 3, in main\n'
            "ValueError: bad",
            "/home/alice",
            id="traceback",
        ),
    ],
)
def test_got_is_scrubbed(got: object, secret_part: str) -> None:
    """A token or traceback the model sent is never echoed back in `got`."""
    observation = build(got=got, has_got=True)
    assert secret_part not in json.dumps(observation)


def test_secret_cut_by_the_cap_is_not_echoed() -> None:
    """A secret that truncation would cut in half is still masked (scrubbed before the cut)."""
    secret = "sk_live_" + "4eC39HqLyjWDarjtT1zdp7dc"
    for offset in range(380, 470, 7):
        observation = build(got="x" * offset + " " + secret, has_got=True)
        assert "4eC39HqLyj" not in json.dumps(observation)
        assert observation_bytes(observation) <= 512


@pytest.mark.parametrize(
    ("options", "max_bytes", "kept"),
    [
        pytest.param(
            {"field": "n", "got": "x" * 2000, "has_got": True},
            512,
            {"error", "hint", "field", "got"},
            id="got-truncated",
        ),
        pytest.param(
            {"hint": "h" * 2000, "field": "n", "got": "x" * 50, "has_got": True},
            512,
            {"error", "hint", "field"},
            id="got-dropped-then-hint-truncated",
        ),
        pytest.param(
            {"hint": "h" * 500, "field": "f" * 120, "correlation_id": CORRELATION_ID},
            MIN_OBSERVATION_BYTES,
            {"error", "hint", "correlation_id"},
            id="field-dropped-at-the-minimum",
        ),
        pytest.param(
            {"hint": "€" * 400, "got": "€" * 400, "has_got": True},
            256,
            {"error", "hint"},
            id="non-ascii-counts-escaped",
        ),
    ],
)
def test_cap_ladder(options: dict[str, Any], max_bytes: int, kept: set[str]) -> None:
    """Over the cap, got is truncated, then dropped, then the hint shortened, then field."""
    observation = build(max_bytes=max_bytes, **options)
    assert observation_bytes(observation) <= max_bytes
    assert set(observation) == kept
    for key in ("got", "hint"):
        if key in observation and len(options.get(key, "")) > len(observation[key]):
            assert observation[key].endswith("...")


@pytest.mark.parametrize(
    ("code", "expected"),
    [
        pytest.param("not_found", "nothing has that id", id="builtin"),
        pytest.param("quota_exceeded", "The monthly quota is used up.", id="user-code-meaning"),
        pytest.param("no_such_code", "the tool failed on our side", id="unknown-code"),
    ],
)
def test_default_hint(code: str, expected: str) -> None:
    """Without a handler hint, built-in codes get a short default and user codes their meaning."""
    catalog = load_catalog(
        user_texts=[
            (
                "user.toml",
                '[codes.quota_exceeded]\nmeaning = "The monthly quota is used up."\n'
                'retry_by = "nobody"\nmax_tries = 1\nscope = "trace"\non_cap = "stop"\n'
                'hint = "Say when it resets."\ncolor = "#123456"\n',
            )
        ]
    )
    assert default_hint(code, catalog).startswith(expected)


def test_success_is_wrapped() -> None:
    """Success is {"ok": true, "result": ...}, whatever the handler returned."""
    assert success_observation({"error": "a field of the record"}) == {
        "ok": True,
        "result": {"error": "a field of the record"},
    }
    assert success_observation(None) == {"ok": True, "result": None}


_STRIPE = "sk_live_" + "4eC39HqLyjWDarjtT1zdp7dc"


@pytest.mark.parametrize(
    "split",
    [
        pytest.param(_STRIPE[:6] + "<b>" + _STRIPE[6:], id="bold-tag"),
        pytest.param(_STRIPE[:10] + "<wbr>" + _STRIPE[10:], id="wbr"),
        pytest.param(_STRIPE[:8] + "<span class=x></span>" + _STRIPE[8:], id="two-tags"),
    ],
)
def test_secret_split_by_a_tag_is_not_rejoined(split: str) -> None:
    """Tags go before scrubbing: a key split by one is masked, in the hint and in `got`."""
    observation = build(code="denied", hint=f"upstream said: {split}", got=split, has_got=True)
    text = json.dumps(observation)
    assert "4eC39HqLyjWD" not in text
    assert "[REDACTED:stripe-secret-key]" in observation["hint"]


class _UnprintableRepr:
    def __repr__(self) -> str:
        raise RuntimeError("no repr")


def test_got_with_a_raising_repr_has_a_placeholder() -> None:
    """A value whose repr raises is shown as a placeholder, not an empty string."""
    got = build(got=_UnprintableRepr(), has_got=True)["got"]
    assert got == "(a value that cannot be shown)"


@pytest.mark.parametrize(
    "split",
    [
        pytest.param(_STRIPE[:12] + "\x00" + _STRIPE[12:], id="nul"),
        pytest.param(_STRIPE[:12] + "\x1b\x7f" + _STRIPE[12:], id="escape-and-delete"),
    ],
)
def test_secret_split_by_a_control_character_is_masked(split: str) -> None:
    """A key split by a control character is masked, not shown with a space in it."""
    observation = build(code="denied", hint=f"upstream said: {split}", got=split, has_got=True)
    assert "4eC39HqLyjWD"[4:] not in json.dumps(observation)
    assert "[REDACTED:stripe-secret-key]" in observation["hint"]
