"""The retry budget: caps retries in the runtime, by the catalog, not in a prompt.

One `RetryBudget` per conversation (the catalog's "trace" scope).  `record(observation)`
counts the observation's code over the scope the catalog gives it and returns what the loop
does next: "continue", "stop" or "handoff".  With the built-in catalog:

    invalid_args    2 tries per field of a tool, then handoff
    not_found       2 misses in the conversation (any ids, any tool), then handoff
    denied          1, then stop
    timeout         2 per tool, then stop
    internal_error  1, then stop
    rate_limited    continue (the runtime waits `retry_after`; the catalog's on_cap is
                    retry_after, so a cap trip waits rather than stops)
    ok              continue

A code the catalog does not know, or something that is not an observation, stops: it is a
bug in a handler and a loop must not spin on it.  Counts are never reset by a success: two
misses in one conversation are a pattern even with a hit between them.

When the tool adapter is given the budget (`get_job(args, budget=budget)`), the decision is
also recorded on the execute_tool span as `errscope.retry.decision`, which is what the
dashboard counts as cap trips.  Thread-safe: one lock around the counters.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from enum import StrEnum
from typing import Any, Final

from opentelemetry.trace import Span

from collector.catalog import CapAction, Catalog, RetryScope, default_catalog

__all__ = ["ATTR_RETRY_DECISION", "Decision", "RetryBudget"]

ATTR_RETRY_DECISION: Final = "errscope.retry.decision"


class Decision(StrEnum):
    """What the agent loop does after a tool call; equal to its string value."""

    CONTINUE = "continue"
    STOP = "stop"
    HANDOFF = "handoff"


_ON_CAP: Final = {
    CapAction.STOP: Decision.STOP,
    CapAction.HANDOFF: Decision.HANDOFF,
    CapAction.RETRY_AFTER: Decision.CONTINUE,
}


class RetryBudget:
    """Counts failures per catalog scope and decides continue, stop or handoff."""

    def __init__(self, *, catalog: Catalog | None = None) -> None:
        self._catalog = catalog if catalog is not None else default_catalog()
        self._counts: dict[tuple[str | None, ...], int] = {}
        self._lock = threading.Lock()
        self._last: Decision | None = None

    @property
    def last_decision(self) -> Decision | None:
        """The decision of the latest `record` call; None before the first."""
        return self._last

    def record(
        self, observation: object, *, tool: str | None = None, span: Span | None = None
    ) -> Decision:
        """Count one observation and return the decision; set it on `span` when given.

        `tool` separates the per-field and per-call counts of different tools; the adapter
        passes its name.  Never raises.
        """
        decision = self._decide(observation, tool)
        if span is not None:
            span.set_attribute(ATTR_RETRY_DECISION, decision.value)
        return decision

    def _decide(self, observation: object, tool: str | None) -> Decision:
        if not isinstance(observation, Mapping):
            return self._set(Decision.STOP)
        code: Any = observation.get("error")
        if code is None:
            return self._set(Decision.CONTINUE if observation.get("ok") is True else Decision.STOP)
        entry = self._catalog.entries.get(code) if isinstance(code, str) else None
        if entry is None:
            return self._set(Decision.STOP)
        field = observation.get("field")
        match entry.scope:
            case RetryScope.FIELD:
                key: tuple[str | None, ...] = (
                    entry.name,
                    tool,
                    field if isinstance(field, str) else None,
                )
            case RetryScope.CALL:
                key = (entry.name, tool)
            case RetryScope.IDS | RetryScope.TRACE:
                key = (entry.name,)
        with self._lock:
            count = self._counts.get(key, 0) + 1
            self._counts[key] = count
            decision = Decision.CONTINUE if count < entry.max_tries else _ON_CAP[entry.on_cap]
            self._last = decision
        return decision

    def _set(self, decision: Decision) -> Decision:
        with self._lock:
            self._last = decision
        return decision
