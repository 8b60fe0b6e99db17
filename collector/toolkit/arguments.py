"""Validation, then coercion, of the model's raw arguments against a handler's signature.

`Signature(handler)` reads the handler's parameters and annotations once, when the tool is
declared, and refuses (TypeError) what it cannot check: `*args`, `**kwargs`,
positional-only parameters and annotations outside the supported set below.  `bind(raw)`
then runs on every call and either returns the keyword arguments for the handler or a
`Rejection` naming one field, so the model fixes one thing at a time.

Order, which is also the order of precedence for the single rejection reported:

1. validation: the arguments are one JSON object (a dict, or JSON text of one); no unknown
   keys; every required field present.  A tool with no required parameter also takes "no
   arguments" as some providers send them for a parameterless call: None, "", b"", text
   of only whitespace, and JSON `null` all mean `{}`;
2. coercion and strict type checks, field by field in signature order.

Supported annotations: `Annotated[T, Coerce(...)]` (`PositiveInt`, `BoolFromString`, your
own), `int`, `float`, `str`, `bool` (strict: no coercion), `dict`/`list` (with or without
parameters; only the container is checked, nothing inside it is coerced), `Literal[...]`,
`T | None`, `Any`, `object`, or no annotation (passed as sent).
"""

from __future__ import annotations

import inspect
import json
import math
import types
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Annotated, Any, Final, Literal, Union, get_args, get_origin

from errscope.collector.record import is_identifier
from errscope.collector.toolkit.coerce import Coerce
from errscope.collector.toolkit.exceptions import InvalidArgs
from errscope.collector.toolkit.scrubbing import looks_secret

__all__ = ["Rejection", "Signature"]

_Check = Callable[[object], object]


@dataclass(frozen=True, slots=True)
class Rejection:
    """Why the arguments were refused: one field (when it can be named), a hint, the value."""

    hint: str
    field: str | None = None
    got: object = None
    has_got: bool = False


@dataclass(frozen=True, slots=True)
class _Param:
    name: str
    required: bool
    check: _Check
    shape: str


def _strict(name: str, shape: str, accept: Callable[[object], bool]) -> _Check:
    def check(value: object) -> object:
        if not accept(value):
            raise InvalidArgs(f"{name}: {shape}", field=name)
        return value

    return check


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _describe(choice: object) -> str:
    try:
        return json.dumps(choice)
    except (TypeError, ValueError):
        return repr(choice)


def _compile(name: str, annotation: Any) -> tuple[_Check, str]:
    """The check for one parameter and the shape its hints describe."""
    origin = get_origin(annotation)
    if origin is Annotated:
        base, *metadata = get_args(annotation)
        coercions = [m for m in metadata if isinstance(m, Coerce)]
        if not coercions:
            return _compile(name, base)
        coerce = coercions[-1]

        def coerced(value: object) -> object:
            return coerce.function(value, field=name)

        return coerced, coerce.shape
    if annotation in (inspect.Parameter.empty, Any, object):
        return (lambda value: value), "any JSON value"
    if origin in (Union, types.UnionType):
        members = [a for a in get_args(annotation) if a is not type(None)]
        if len(members) != 1 or len(get_args(annotation)) != 2:
            raise TypeError(f"{name}: only `T | None` unions are supported")
        inner, shape = _compile(name, members[0])

        def optional(value: object) -> object:
            return None if value is None else inner(value)

        return optional, f"{shape}, or null"
    if origin is Literal:
        choices = get_args(annotation)
        shape = "one of " + ", ".join(_describe(c) for c in choices)
        # `True == 1`: compare types too, or Literal[1] would accept true.
        return _strict(
            name, shape, lambda v: any(type(v) is type(c) and v == c for c in choices)
        ), shape
    simple: dict[Any, tuple[str, Callable[[object], bool]]] = {
        bool: ("true or false", lambda v: isinstance(v, bool)),
        int: ("an integer such as 17", _is_int),
        str: ("a string", lambda v: isinstance(v, str)),
        dict: ("a JSON object", lambda v: isinstance(v, dict)),
        list: ("a JSON array", lambda v: isinstance(v, list)),
    }
    if annotation is float:

        def number(value: object) -> object:
            if isinstance(value, float) and math.isfinite(value):
                return value
            if _is_int(value):
                try:
                    return float(value)  # type: ignore[arg-type]  # _is_int checked it
                except OverflowError:
                    pass
            raise InvalidArgs(f"{name}: a number such as 1.5", field=name)

        return number, "a number such as 1.5"
    key = origin if origin in (dict, list) else annotation
    if key in simple:
        shape, accept = simple[key]
        return _strict(name, shape, accept), shape
    raise TypeError(f"{name}: unsupported annotation {annotation!r}")


class Signature:
    """The compiled argument rules of one handler; `bind` is pure and thread-safe."""

    def __init__(self, handler: Callable[..., Any]) -> None:
        try:
            signature = inspect.signature(handler, eval_str=True)
        except (NameError, SyntaxError, ValueError) as exc:
            raise TypeError(f"cannot read the handler's signature: {exc}") from exc
        params: list[_Param] = []
        for p in signature.parameters.values():
            if p.kind not in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY):
                raise TypeError(f"{p.name}: tool handlers take named parameters only")
            check, shape = _compile(p.name, p.annotation)
            params.append(_Param(p.name, p.default is p.empty, check, shape))
        self.params: Final = {p.name: p for p in params}
        names = ", ".join(self.params)
        self._accepted: Final = f"arguments are {names}" if names else "it takes no arguments"
        self._takes_nothing: Final = not any(p.required for p in params)
        # The shape hint names this tool's own keys: an example from another tool's schema
        # ({"job_id": 17} for every tool) teaches the model a key that does not exist here.
        keys = ", ".join(f"{p.name} (required)" if p.required else p.name for p in params)
        self._object_shape: Final = (
            f"arguments: one JSON object with the keys {keys}"
            if keys
            else "arguments: one JSON object, {} (this tool takes no arguments)"
        )

    def bind(self, raw: object) -> dict[str, object] | Rejection:
        """The handler's keyword arguments, validated then coerced; or the first Rejection."""
        arguments = raw
        if isinstance(raw, str | bytes | bytearray):
            try:
                arguments = json.loads(raw) if raw.strip() else None
            except (ValueError, RecursionError):
                return Rejection(self._object_shape, got=raw, has_got=True)
        if arguments is None and self._takes_nothing:
            arguments = {}
        if not isinstance(arguments, Mapping):
            return Rejection(self._object_shape, got=raw, has_got=True)
        for key in arguments:
            if key not in self.params:
                return self._unknown(key)
        for param in self.params.values():
            if param.required and param.name not in arguments:
                hint = f"{param.name}: required, {param.shape}"
                return Rejection(hint, field=param.name)
        bound: dict[str, object] = {}
        for name, param in self.params.items():
            if name not in arguments:
                continue
            value = arguments[name]
            try:
                bound[name] = param.check(value)
            except InvalidArgs as exc:
                hint = exc.hint or f"{name}: {param.shape}"
                return Rejection(hint, field=exc.field or name, got=value, has_got=True)
            except ValueError:
                # A coercion's own parse failure (int("soon"), a decode) happens before the
                # handler runs: it is this field's validation failing.
                return Rejection(f"{name}: {param.shape}", field=name, got=value, has_got=True)
        return bound

    def _unknown(self, key: object) -> Rejection:
        # A key is model text: named only when it is an identifier that holds no secret.
        if isinstance(key, str) and is_identifier(key) and not looks_secret(key):
            return Rejection(f"{key}: not an argument of this tool; {self._accepted}", field=key)
        return Rejection(f"unknown argument name; {self._accepted}", got=key, has_got=True)
