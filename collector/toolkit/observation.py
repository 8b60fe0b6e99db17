"""Observations: the dict a tool call returns to the agent loop, and the cap that bounds it.

Two shapes, told apart by their first key:

    {"ok": true, "result": <what the handler returned>}
    {"error": "<catalog code>", "hint": "...", "field": "job_id", "got": "...",
     "retry_after": 5, "correlation_id": "<32 hex>"}

Success is wrapped rather than passed through as the handler's dict because a handler's
own record may have an "error" key (a job that failed, an HTTP log line), and errscope's
sidecar reads a top-level "error" in a tool's output as a structured failure; the wrapper
also keeps "always a dict" true for handlers that return a list, a string or None.  The
loop branches on `"error" in observation`.

An error observation always has `error` and `hint`; `field` (invalid_args, an identifier),
`got` (the rejected value, scrubbed), `retry_after` (seconds, rate_limited) and
`correlation_id` (internal_error) appear only when they apply.  It never holds an exception
type name, a traceback, an exception message or HTML.

The cap: an error observation is at most `max_bytes` long as `json.dumps(observation)`
encodes it (ASCII escapes and ", " separators: the longest of the common encodings, so
compact or UTF-8 encodings of it are no longer).  Over the cap, `got` is truncated first
(ending in "..."), then dropped; then the hint is truncated, and only when not even a
shortened hint fits are `field` and then `retry_after` dropped.  Success results are the
handler's own output and are not capped.
"""

from __future__ import annotations

import json
import reprlib
from typing import Any, Final

from errscope.collector.catalog import Catalog, Code
from errscope.collector.toolkit.scrubbing import looks_secret, model_text

__all__ = [
    "DEFAULT_MAX_OBSERVATION_BYTES",
    "MIN_OBSERVATION_BYTES",
    "Observation",
    "default_hint",
    "error_observation",
    "observation_bytes",
    "success_observation",
]

Observation = dict[str, Any]

DEFAULT_MAX_OBSERVATION_BYTES: Final = 512
# Room for the longest code (32), an empty hint and a correlation id, with margin.
MIN_OBSERVATION_BYTES: Final = 128
_ELLIPSIS: Final = "..."
_BIG_INT_BITS: Final = 256
# `got` for a value whose text is empty once tags are dropped (an object whose repr raised
# renders as "<... instance at 0x...>"): an empty `got` reads as "you sent an empty string".
_UNSHOWN_GOT: Final = "(a value that cannot be shown)"

# What the model is told when the handler gave no hint: short, no values, no blame.
_DEFAULT_HINTS: Final = {
    Code.INVALID_ARGS.value: "the arguments do not fit this tool's schema; check each field",
    Code.NOT_FOUND.value: "nothing has that id; use an id a search or list tool returned",
    Code.DENIED.value: "this action is not allowed; ask the user or an approver",
    Code.RATE_LIMITED.value: "throttled; the runtime retries after retry_after seconds",
    Code.TIMEOUT.value: "the tool did not answer in time; the runtime decides on a retry",
    Code.INTERNAL_ERROR.value: "the tool failed on our side; try later or go on without it",
}


def observation_bytes(observation: Observation) -> int:
    """The size the cap is measured in: `json.dumps(observation)` encoded as UTF-8."""
    return len(json.dumps(observation).encode("utf-8"))


def success_observation(result: object) -> Observation:
    """`{"ok": True, "result": result}`: the handler's return value, wrapped, not capped."""
    return {"ok": True, "result": result}


def default_hint(code: str, catalog: Catalog) -> str:
    """The model-facing hint for a code when the handler gave none."""
    if code in _DEFAULT_HINTS:
        return _DEFAULT_HINTS[code]
    entry = catalog.entries.get(code)
    return entry.meaning if entry is not None else _DEFAULT_HINTS[Code.INTERNAL_ERROR]


def _render(value: object, limit: int) -> str:
    """At most about `limit` characters of text for a value the model sent."""
    if isinstance(value, str):
        return value[:limit]
    if value is None or isinstance(value, bool):
        return json.dumps(value)
    if isinstance(value, int):
        # str() of a huge int is slow and refused past 4300 digits; its size says enough.
        if value.bit_length() > _BIG_INT_BITS:
            return f"an integer of {value.bit_length()} bits"
        return str(value)
    bounded = reprlib.Repr()
    bounded.maxlevel = 3
    bounded.maxstring = bounded.maxother = limit
    bounded.maxdict = bounded.maxlist = bounded.maxtuple = bounded.maxset = 16
    return bounded.repr(value)[:limit]


def _got_text(value: object, limit: int) -> str | None:
    """The rejected value as scrubbed plain text, or None when it cannot be shown safely."""
    try:
        text = _render(value, limit)
    except Exception:  # noqa: BLE001 — an unprintable value is simply not echoed
        return None
    shown = model_text(text)
    if shown is not None and not shown.strip() and text.strip():
        return _UNSHOWN_GOT
    return shown


def _shorten(observation: Observation, key: str, max_bytes: int) -> bool:
    """Truncate `observation[key]` to the longest prefix + "..." that fits; False if none."""
    text = str(observation[key])[:max_bytes]
    lo, hi, best = 0, len(text), -1
    while lo <= hi:
        mid = (lo + hi) // 2
        observation[key] = text[:mid] + _ELLIPSIS
        if observation_bytes(observation) <= max_bytes:
            best, lo = mid, mid + 1
        else:
            hi = mid - 1
    if best < 0:
        return False
    observation[key] = text[:best] + _ELLIPSIS
    return True


def _fit(observation: Observation, max_bytes: int) -> Observation:
    """Apply the cap ladder described in the module docstring."""
    if observation_bytes(observation) <= max_bytes:
        return observation
    if "got" in observation and not _shorten(observation, "got", max_bytes):
        del observation["got"]
    hint = observation["hint"]
    # The hint is worth more than `field` (it names the field too), so `field` and then
    # `retry_after` go only when not even a shortened hint fits beside them.
    for dropped in (None, "field", "retry_after"):
        if dropped is not None:
            observation.pop(dropped, None)
        observation["hint"] = hint
        if observation_bytes(observation) <= max_bytes or _shorten(observation, "hint", max_bytes):
            return observation
    observation["hint"] = ""
    if observation_bytes(observation) <= max_bytes:
        return observation
    return {"error": observation["error"], "hint": ""}


def error_observation(
    code: str,
    hint: str,
    *,
    catalog: Catalog,
    max_bytes: int = DEFAULT_MAX_OBSERVATION_BYTES,
    field: str | None = None,
    got: object = None,
    has_got: bool = False,
    retry_after_s: float | None = None,
    correlation_id: str | None = None,
) -> Observation:
    """An error observation under `max_bytes`, with `got` and `hint` scrubbed.

    `field` must already be a safe identifier.  A hint the scrub engine cannot process is
    replaced by the default hint for the code; a `got` it cannot process is left out.
    """
    shown_hint = model_text(hint)
    observation: Observation = {
        "error": code,
        "hint": shown_hint if shown_hint is not None else default_hint(code, catalog),
    }
    if field is not None:
        observation["field"] = field
    if has_got:
        # Render a few times the cap so a secret cut at the edge is still whole for the
        # scrubber, then let the cap truncate.
        text = _got_text(got, 4 * max_bytes)
        if text is not None:
            observation["got"] = text
    if retry_after_s is not None:
        observation["retry_after"] = retry_after_s
    if correlation_id is not None:
        observation["correlation_id"] = correlation_id
    observation = _fit(observation, max_bytes)
    # Truncation can leave part of a secret the scrubber did not recognise: check again.
    if "got" in observation and looks_secret(observation["got"]):
        del observation["got"]
    return observation
