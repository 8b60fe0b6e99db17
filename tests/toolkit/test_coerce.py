"""Every coercion, table-driven: what it accepts, what it rejects, and the hint it gives."""

from __future__ import annotations

from typing import Any

import pytest

from errscope.collector.toolkit import InvalidArgs, coerce_bool_from_string, coerce_positive_int

MAX = 2**63 - 1


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        pytest.param(17, 17, id="int"),
        pytest.param("17", 17, id="digit-string"),
        pytest.param(" 17\n", 17, id="trimmed-whitespace"),
        pytest.param("\t42 ", 42, id="tab-and-space"),
        pytest.param("017", 17, id="leading-zero-is-decimal"),
        pytest.param(1, 1, id="smallest"),
        pytest.param(MAX, MAX, id="default-maximum-int"),
        pytest.param(str(MAX), MAX, id="default-maximum-string"),
        pytest.param("000" + str(MAX), MAX, id="zero-padded-maximum"),
    ],
)
def test_positive_int_accepts(raw: object, expected: int) -> None:
    """coerce_positive_int turns an int or a trimmed digit string into the same int."""
    value = coerce_positive_int(raw, field="job_id")
    assert value == expected
    assert type(value) is int


@pytest.mark.parametrize(
    "raw",
    [
        pytest.param(True, id="true-is-not-job-1"),
        pytest.param(False, id="false"),
        pytest.param("17.0", id="decimal-string"),
        pytest.param(17.0, id="float"),
        pytest.param("INV-17", id="prefixed-id"),
        pytest.param("four thousand", id="words"),
        pytest.param("abc", id="letters"),
        pytest.param(0, id="zero"),
        pytest.param("0", id="zero-string"),
        pytest.param(-1, id="negative"),
        pytest.param("-1", id="negative-string"),
        pytest.param("+17", id="plus-sign"),
        pytest.param("1_000", id="underscore-digits"),  # int() would accept this
        pytest.param("1e3", id="exponent"),
        pytest.param("0x11", id="hex"),
        pytest.param("١٧", id="arabic-indic-digits"),  # str.isdigit() is True for these
        pytest.param("²", id="superscript-digit"),
        pytest.param("", id="empty"),
        pytest.param("   ", id="blank"),
        pytest.param("1 7", id="inner-space"),
        pytest.param("\u00a017", id="no-break-space"),
        pytest.param("17\u3000", id="ideographic-space"),
        pytest.param(None, id="null"),
        pytest.param([17], id="list"),
        pytest.param({"id": 17}, id="object"),
        pytest.param(MAX + 1, id="past-maximum"),
        pytest.param(str(MAX + 1), id="past-maximum-string"),
        pytest.param("9" * 1_000_000, id="megabyte-of-digits"),
        pytest.param(10**5000, id="huge-int"),
    ],
)
def test_positive_int_rejects(raw: object) -> None:
    """coerce_positive_int raises InvalidArgs naming the field, with a shape-and-example hint."""
    with pytest.raises(InvalidArgs) as caught:
        coerce_positive_int(raw, field="job_id")
    assert caught.value.field == "job_id"
    assert caught.value.hint is not None
    assert caught.value.hint.startswith("job_id: a positive integer")
    assert "such as" in caught.value.hint
    assert caught.value.code == "invalid_args"


@pytest.mark.parametrize(
    ("raw", "maximum", "ok"),
    [
        pytest.param(1000, 1000, True, id="at-maximum"),
        pytest.param(1001, 1000, False, id="past-maximum"),
        pytest.param("1001", 1000, False, id="past-maximum-string"),
        pytest.param("10000", 1000, False, id="longer-than-maximum"),
        pytest.param(5, 5, True, id="tiny-maximum"),
    ],
)
def test_positive_int_maximum(raw: object, maximum: int, ok: bool) -> None:
    """A configured maximum is inclusive, and the hint for values past it names the maximum."""
    if ok:
        assert coerce_positive_int(raw, field="n", maximum=maximum) == int(str(raw))
        return
    with pytest.raises(InvalidArgs) as caught:
        coerce_positive_int(raw, field="n", maximum=maximum)
    assert str(maximum) in (caught.value.hint or "")


def test_positive_int_refuses_a_bad_maximum() -> None:
    """A maximum below 1 is a programming error (ValueError), not an invalid_args."""
    with pytest.raises(ValueError, match="maximum"):
        coerce_positive_int(1, field="n", maximum=0)


def test_hint_never_echoes_the_value() -> None:
    """The hint gives the shape and an example, never the rejected value itself."""
    with pytest.raises(InvalidArgs) as caught:
        coerce_positive_int("sk_live_secret_value", field="job_id")
    assert "sk_live" not in (caught.value.hint or "")


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        pytest.param(True, True, id="true"),
        pytest.param(False, False, id="false"),
        pytest.param("true", True, id="true-string"),
        pytest.param("false", False, id="false-string"),
        pytest.param(" TRUE ", True, id="any-case-trimmed"),
        pytest.param("False", False, id="capitalised"),
    ],
)
def test_bool_from_string_accepts(raw: object, expected: bool) -> None:
    """coerce_bool_from_string takes bools and the strings "true"/"false" only."""
    assert coerce_bool_from_string(raw, field="verbose") is expected


@pytest.mark.parametrize(
    "raw",
    [
        pytest.param("yes", id="yes"),
        pytest.param("1", id="one-string"),
        pytest.param(1, id="one"),
        pytest.param(0, id="zero"),
        pytest.param("", id="empty"),
        pytest.param(None, id="null"),
        pytest.param("truthy", id="prefix-of-true"),
    ],
)
def test_bool_from_string_rejects(raw: Any) -> None:
    """Anything but a bool or "true"/"false" is invalid_args naming the field."""
    with pytest.raises(InvalidArgs) as caught:
        coerce_bool_from_string(raw, field="verbose")
    assert caught.value.field == "verbose"
    assert caught.value.hint == "verbose: true or false"
