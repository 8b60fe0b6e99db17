"""The retry budget: caps retries in the runtime, by the catalog, not in a prompt.

One `RetryBudget` per conversation (the catalog's "trace" scope).  `record(observation)`
counts the observation's code over the scope the catalog gives it and returns what the loop
does next: "continue", "stop" or "handoff".  With the built-in catalog:

    invalid_args    2 tries per field of a tool, then handoff; the fields a tool does not
                    declare (an invented or misspelt key) share one count per tool, so a
                    model inventing a new key every time is capped too
    not_found       2 misses on distinct ids in the conversation (any tool), then handoff;
                    the same id looked up again is not a new miss
    denied          1, then stop
    timeout         2 per tool, then stop
    internal_error  1, then stop
    rate_limited    3 per tool, then stop: the catalog's on_cap "retry_after" means the
                    runtime waits `retry_after` between the tries, and the cap still holds
    ok              continue

A code the catalog does not know, or something that is not an observation, stops: it is a
bug in a handler and a loop must not spin on it.  Counts are never reset by a success: two
misses in one conversation are a pattern even with a hit between them.

Decisions under parallel calls.  `record` returns the decision for that one call.  The
budget also keeps the most severe decision (stop, then handoff, then continue) recorded
since the loop last took it: `take_decision()` returns it and starts over, and
`last_decision` reads it without starting over.  So with two tool calls run at once
(`asyncio.gather`), a denied call's stop is not overwritten by the other call's continue,
and a stop stays visible until the loop has taken it.

When the tool adapter is given the budget (`get_job(args, budget=budget)`), the decision is
also recorded on the execute_tool span as `errscope.retry.decision`, which is what the
dashboard counts as cap trips.  Thread-safe: one lock around the counters.  Only digests of
looked-up ids are kept, never the ids.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Collection, Mapping
from enum import StrEnum
from typing import Any, Final

from opentelemetry.trace import Span

from errscope.collector.catalog import CapAction, Catalog, RetryScope, default_catalog

__all__ = ["ATTR_RETRY_DECISION", "Decision", "RetryBudget"]

ATTR_RETRY_DECISION: Final = "errscope.retry.decision"


class Decision(StrEnum):
    """What the agent loop does after a tool call; equal to its string value."""

    CONTINUE = "continue"
    STOP = "stop"
    HANDOFF = "handoff"


# Stop outranks handoff: a refusal nobody may retry is not made retryable by a human
# looking at another call's invented id.
_SEVERITY: Final = {Decision.CONTINUE: 0, Decision.HANDOFF: 1, Decision.STOP: 2}

_ON_CAP: Final = {
    CapAction.STOP: Decision.STOP,
    CapAction.HANDOFF: Decision.HANDOFF,
    # The runtime waited and retried up to max_tries; the cap is the cap.
    CapAction.RETRY_AFTER: Decision.STOP,
}

# The per-tool bucket of the fields a tool does not declare; cannot collide with a field
# name, which is an identifier.
_UNDECLARED_FIELD: Final = "<undeclared>"

_Key = tuple[str | None, ...]


class RetryBudget:
    """Counts failures per catalog scope and decides continue, stop or handoff."""

    def __init__(self, *, catalog: Catalog | None = None) -> None:
        self._catalog = catalog if catalog is not None else default_catalog()
        self._counts: dict[_Key, int] = {}
        self._seen: dict[_Key, set[str]] = {}
        self._lock = threading.Lock()
        self._pending: Decision | None = None

    @property
    def last_decision(self) -> Decision | None:
        """The most severe decision recorded since the last `take_decision()`; None if none.

        Without `take_decision()` this is the most severe decision so far: a stop stays a
        stop even when a later (or parallel) call succeeded.
        """
        with self._lock:
            return self._pending

    def take_decision(self) -> Decision | None:
        """Return the most severe decision recorded since the last call, and start over."""
        with self._lock:
            decision, self._pending = self._pending, None
        return decision

    def record(
        self,
        observation: object,
        *,
        tool: str | None = None,
        span: Span | None = None,
        declared_fields: Collection[str] | None = None,
        lookup: str | None = None,
    ) -> Decision:
        """Count one observation and return the decision for it; set it on `span` when given.

        `tool` separates the per-field and per-call counts of different tools; the adapter
        passes its name.  `declared_fields` (the tool's parameters) puts every other field
        of an invalid_args under one count per tool.  `lookup` says what a call looked up
        (the adapter passes a digest of the tool and its arguments); for a code counted over
        distinct ids, a lookup already counted is not counted again; without it every miss
        counts.  Never raises.
        """
        decision = self._decide(observation, tool, declared_fields, lookup)
        with self._lock:
            if self._pending is None or _SEVERITY[decision] > _SEVERITY[self._pending]:
                self._pending = decision
        if span is not None:
            # Telemetry must not change the decision: a span that raises is ignored.
            with contextlib.suppress(Exception):
                span.set_attribute(ATTR_RETRY_DECISION, decision.value)
        return decision

    def _decide(
        self,
        observation: object,
        tool: str | None,
        declared_fields: Collection[str] | None,
        lookup: str | None,
    ) -> Decision:
        if not isinstance(observation, Mapping):
            return Decision.STOP
        code: Any = observation.get("error")
        if code is None:
            return Decision.CONTINUE if observation.get("ok") is True else Decision.STOP
        entry = self._catalog.entries.get(code) if isinstance(code, str) else None
        if entry is None:
            return Decision.STOP
        field = observation.get("field")
        if not isinstance(field, str):
            field = None
        elif declared_fields is not None and field not in declared_fields:
            field = _UNDECLARED_FIELD
        match entry.scope:
            case RetryScope.FIELD:
                key: _Key = (entry.name, tool, field)
            case RetryScope.CALL:
                key = (entry.name, tool)
            case RetryScope.IDS | RetryScope.TRACE:
                key = (entry.name,)
        with self._lock:
            if entry.scope == RetryScope.IDS and lookup is not None:
                seen = self._seen.setdefault(key, set())
                seen.add(lookup)
                count = len(seen) + self._counts.get(key, 0)
            else:
                count = self._counts.get(key, 0) + 1
                self._counts[key] = count
                count += len(self._seen.get(key, ()))
        return Decision.CONTINUE if count < entry.max_tries else _ON_CAP[entry.on_cap]
