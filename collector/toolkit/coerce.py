"""Narrow coercions: each a named function that turns one boring case into the right type.

A coercion takes the value the model sent and the field's name, and returns the coerced
value or raises `InvalidArgs` naming the field with a hint that gives the accepted shape
and one valid example.  It never echoes the value in the hint (the observation's `got`
does that, scrubbed and capped).  Coercions are narrow on purpose: each accepts the few
spellings a model really sends for a value that is unambiguous, and rejects the rest, so
a schema break shows up as invalid_args instead of a silently wrong call.

Adding a coercion means adding a fixture to tests/toolkit/test_coerce.py that it accepts
and that was rejected before.

A handler opts a field into a coercion with an annotation: `PositiveInt`, `BoolFromString`,
or `Annotated[T, Coerce(function, shape=...)]` for one of its own.  Fields annotated with a
plain type (`int`, `str`, `bool`, ...) are checked strictly, never coerced.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any, Final

from errscope.collector.toolkit.exceptions import InvalidArgs

__all__ = [
    "DEFAULT_MAXIMUM",
    "BoolFromString",
    "Coerce",
    "PositiveInt",
    "coerce_bool_from_string",
    "coerce_positive_int",
]

# Database ids are signed 64-bit almost everywhere; a larger id is invented.
DEFAULT_MAXIMUM: Final = 2**63 - 1
# ASCII digits only: str.isdigit() also accepts "²" and "٣", which int() then refuses or
# reads as something the model did not mean.
# Only ASCII whitespace is trimmed: str.strip() would also take a no-break or an
# ideographic space, which a narrow coercion has no reason to read as nothing.
_ASCII_SPACE: Final = " \t\r\n\f\v"
_DIGITS_RE: Final = re.compile(r"[0-9]+")
_EXAMPLE_ID: Final = 17
_POSITIVE_INT_SHAPE: Final = "a positive integer such as 17"
_BOOL_SHAPE: Final = "true or false"


@dataclass(frozen=True, slots=True)
class Coerce:
    """`Annotated` metadata: coerce this argument with `function(value, field=name)`.

    `shape` describes the accepted values for the hint of a missing field ("a positive
    integer such as 17").  Options go in with `functools.partial`:
    `Annotated[int, Coerce(partial(coerce_positive_int, maximum=1000), shape="...")]`.
    """

    function: Callable[..., Any]
    shape: str


def coerce_positive_int(value: object, *, field: str, maximum: int = DEFAULT_MAXIMUM) -> int:
    """A positive integer id from an int or a digit string (ASCII whitespace trimmed), else
    InvalidArgs.

    Booleans are rejected before anything else (True is not job 1).  "17.0", "INV-17",
    "+17", "1_000", "four thousand", floats, 0, negative numbers and values past `maximum`
    are rejected.  Leading zeros are read as decimal ("017" is 17).
    """
    if maximum < 1:
        raise ValueError("maximum must be a positive integer")
    example = _EXAMPLE_ID if maximum >= _EXAMPLE_ID else 1
    hint = f"{field}: a positive integer such as {example}"
    too_large = f"{field}: a positive integer no larger than {maximum}, such as {example}"
    if isinstance(value, bool):
        raise InvalidArgs(hint, field=field)
    if isinstance(value, int):
        number = int(value)
    elif isinstance(value, str):
        text = value.strip(_ASCII_SPACE)
        if _DIGITS_RE.fullmatch(text) is None:
            raise InvalidArgs(hint, field=field)
        # Compare lengths before int(): a megabyte of digits must not reach the parser.
        digits = text.lstrip("0") or "0"
        if len(digits) > len(str(maximum)):
            raise InvalidArgs(too_large, field=field)
        number = int(digits)
    else:
        raise InvalidArgs(hint, field=field)
    if number < 1:
        raise InvalidArgs(hint, field=field)
    if number > maximum:
        raise InvalidArgs(too_large, field=field)
    return number


def coerce_bool_from_string(value: object, *, field: str) -> bool:
    """A bool from a bool or from "true"/"false" (trimmed, any case), else InvalidArgs.

    Only for fields that opt in with `BoolFromString`; "yes", "1", 1 and 0 are rejected
    because their meaning depends on who wrote them.
    """
    if isinstance(value, bool):
        return value
    if isinstance(value, str):
        match value.strip(_ASCII_SPACE).lower():
            case "true":
                return True
            case "false":
                return False
    raise InvalidArgs(f"{field}: {_BOOL_SHAPE}", field=field)


PositiveInt = Annotated[int, Coerce(coerce_positive_int, shape=_POSITIVE_INT_SHAPE)]
"""An id field: `coerce_positive_int` with the default maximum (2**63 - 1)."""

BoolFromString = Annotated[bool, Coerce(coerce_bool_from_string, shape=_BOOL_SHAPE)]
"""A flag field that also accepts the strings "true" and "false"."""
