"""The exceptions a tool handler raises to end a call with a catalog code.

    ToolError              base; `.code` (a catalog code), `.hint`, `.field`
    ├── InvalidArgs        invalid_args: the model must fix `.field`
    ├── NotFound           not_found: a lookup missed
    ├── Denied             denied: a policy refused the call
    ├── RateLimited        rate_limited: throttled; `.retry_after_s` when known
    ├── Timeout            timeout: a deadline passed
    └── InternalError      internal_error: our bug or an upstream failure

`@tool` turns each of these into an observation dict; they never reach the agent loop.  The
catalog maps the dotted names `errscope.<Class>` (and the earlier releases'
`collector.toolkit.<Class>`) to the same codes, so a span
recorded by any other instrumentation that lets one of these escape is counted right too
(`collector/toolkit/__init__.py` sets `__module__` to make those names true).

`hint` is for the model: name the accepted shape and give one valid example; never echo the
rejected value (`got` is for that, and it is scrubbed and capped).  The exception message,
which only humans see, is the code and the field, never the hint.
"""

from __future__ import annotations

from typing import ClassVar

from errscope.collector.catalog import Code

__all__ = [
    "Denied",
    "InternalError",
    "InvalidArgs",
    "NotFound",
    "RateLimited",
    "Timeout",
    "ToolError",
]


class ToolError(Exception):
    """Base of the handler-side exceptions: ends a tool call with `code`, `hint` and `field`.

    Raise a subclass for the built-in codes; raise `ToolError(hint, code="my_code")` for a
    code a user catalog file added.  A code the tool's catalog does not know is a bug in the
    handler and is reported to the model as internal_error.
    """

    default_code: ClassVar[str] = Code.INTERNAL_ERROR.value

    def __init__(
        self, hint: str | None = None, *, field: str | None = None, code: str | None = None
    ) -> None:
        self.code: str = code if code is not None else self.default_code
        self.hint = hint
        self.field = field
        super().__init__(self.code if field is None else f"{self.code} (field {field})")


class InvalidArgs(ToolError):  # noqa: N818 — the catalog and the issue name it
    """The arguments do not fit the tool's schema or rules; `field` names what to fix."""

    default_code = Code.INVALID_ARGS.value

    def __init__(self, hint: str | None = None, *, field: str | None = None) -> None:
        super().__init__(hint, field=field)


class NotFound(ToolError):  # noqa: N818 — the catalog and the issue name it
    """A lookup missed; `hint` says what real ids look like or which tool lists them."""

    default_code = Code.NOT_FOUND.value

    def __init__(self, hint: str | None = None, *, field: str | None = None) -> None:
        super().__init__(hint, field=field)


class Denied(ToolError):  # noqa: N818 — the catalog and the issue name it
    """A policy, credential or permission refused the call; never retried."""

    default_code = Code.DENIED.value

    def __init__(self, hint: str | None = None) -> None:
        super().__init__(hint)


class RateLimited(ToolError):  # noqa: N818 — the catalog and the issue name it
    """Throttled; `retry_after_s` (seconds) reaches the observation as `retry_after`."""

    default_code = Code.RATE_LIMITED.value

    def __init__(self, hint: str | None = None, *, retry_after_s: float | None = None) -> None:
        super().__init__(hint)
        self.retry_after_s = retry_after_s


class Timeout(ToolError):  # noqa: N818 — the catalog and the issue name it
    """A deadline passed before the work finished."""

    default_code = Code.TIMEOUT.value

    def __init__(self, hint: str | None = None) -> None:
        super().__init__(hint)


class InternalError(ToolError):
    """Our bug or an upstream failure the model cannot fix; gets a correlation id."""

    default_code = Code.INTERNAL_ERROR.value

    def __init__(self, hint: str | None = None) -> None:
        super().__init__(hint)
