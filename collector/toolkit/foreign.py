"""Reading a foreign exception: the catalog code it stands for, and its Retry-After.

`code_for` maps an exception a handler raised that is not a `ToolError` through the catalog:
the HTTP status on the exception or its response first (httpx, requests, aiohttp, the
OpenAI SDK), then the class names along its MRO (dotted, and the public package form
`httpx.ReadTimeout` of `httpx._exceptions.ReadTimeout`), then the catalog's fallback.
Reading an odd exception object never raises out of here: an attribute whose getter raises
counts as absent, and a Retry-After that is not a finite, non-negative number is dropped.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from typing import Final

from errscope.collector.catalog import Catalog, Code

__all__ = ["class_names", "clean_seconds", "code_for", "http_response", "retry_after_s"]

_SKIPPED_BASES: Final = (BaseException, Exception, object)
_STATUS_DIGITS: Final = 3


def class_names(cls: type) -> Iterator[str]:
    """The names a catalog may list a class under: dotted, then the public package form."""
    if cls.__module__ == "builtins":
        yield cls.__qualname__
        return
    yield f"{cls.__module__}.{cls.__qualname__}"
    # httpx defines ReadTimeout in httpx._exceptions and exports it as httpx.ReadTimeout.
    parts = cls.__module__.split(".")
    if any(part.startswith("_") for part in parts):
        yield f"{parts[0]}.{cls.__qualname__}"


def _attribute(obj: object, name: str) -> object:
    """`getattr(obj, name, None)`, or None when reading it raises (a property with a bug)."""
    try:
        return getattr(obj, name, None)
    except Exception:  # noqa: BLE001 — an odd exception object must not fail the call
        return None


def _status(value: object) -> int | None:
    """An HTTP status from an int or its text ("404"); None for anything else."""
    if isinstance(value, str) and len(value.strip()) == _STATUS_DIGITS:
        value = int(value) if value.strip().isascii() and value.strip().isdigit() else None
    if isinstance(value, int) and not isinstance(value, bool) and 100 <= value <= 599:
        return value
    return None


def http_response(exc: BaseException) -> tuple[int | None, object]:
    """The HTTP status and headers an httpx/requests/aiohttp/SDK exception carries, if any.

    httpx and requests put them on `exc.response` (`status_code`, `headers`), the OpenAI
    SDK on the exception (`status_code`), aiohttp's ClientResponseError too (`status`,
    `headers`).
    """
    response = _attribute(exc, "response")
    status = _status(_attribute(response, "status_code"))
    if status is None:
        status = _status(_attribute(exc, "status_code"))
    if status is None:
        status = _status(_attribute(exc, "status"))
    headers = _attribute(response, "headers")
    if headers is None:
        headers = _attribute(exc, "headers")
    return status, headers


def retry_after_s(headers: object) -> float | None:
    """Retry-After in seconds from a headers mapping (delay-seconds form only)."""
    if not isinstance(headers, Mapping):
        return None
    try:
        value = headers.get("retry-after") or headers.get("Retry-After")
    except Exception:  # noqa: BLE001 — a broken headers object: no retry_after
        return None
    return clean_seconds(value)


def clean_seconds(value: object) -> float | None:
    """Seconds as a finite, non-negative float; a number given as text ("5", straight from a
    Retry-After header) is read; anything else (10**400 included) is dropped rather than
    failing the call."""
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        return None
    try:
        seconds = float(value.strip() if isinstance(value, str) else value)
    except (ValueError, OverflowError):
        return None
    if not math.isfinite(seconds) or seconds < 0:
        return None
    return round(seconds, 3)


def code_for(catalog: Catalog, exc: Exception) -> tuple[str, float | None]:
    """The catalog code for a foreign exception, and retry_after when one is given."""
    status, headers = http_response(exc)
    if status is not None:
        code = catalog.for_http(status)
        if code is not None:
            return code, retry_after_s(headers)
    for cls in type(exc).__mro__:
        if cls in _SKIPPED_BASES:
            break
        for name in class_names(cls):
            code = catalog.for_exception(name)
            if code == Code.INVALID_ARGS:
                # The arguments were validated before the handler ran: a ValueError or
                # ValidationError from the handler's own code (a bad upstream payload, a
                # decode) is not the model's to fix.  Authors say invalid_args with
                # InvalidArgs; an upstream's 4xx is read from its status above.
                return Code.INTERNAL_ERROR.value, None
            if code is not None:
                return code, retry_after_s(headers)
    return catalog.fallback["exception"], None
