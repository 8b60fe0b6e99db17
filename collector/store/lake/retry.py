"""Commit conflicts on a DuckLake, retried by one loop within one time budget.

Several sidecars commit to one catalog, so a commit may lose a race (DuckLake 1.5.5's
#1094: snapshot ids as max(id)+1) after DuckLake's own retries are spent.  Every write
of `DuckLakeStore` (appends, the clean-up of concurrent copies, prune, migrations) and
every maintenance CALL runs through `Retrying.run` (`Retrying.transaction` for a
statement group): a conflict is run again after a
full-jitter backoff; anything else, the last allowed attempt, or a spent budget raises
`StoreError` from the DuckDB error, whose text is never quoted (it may hold a URL).
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass
from typing import Final, TypeVar

import duckdb

from errscope.collector.errors import StoreError, StoreErrorKind

__all__ = ["RetryPolicy", "Retrying", "is_conflict"]

T = TypeVar("T")

_CONFLICT_MARKERS: Final = (
    "conflict",
    "duplicate key",
    "could not serialize",
    "maximum retry count",
    "deadlock detected",
)


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How hard a commit is retried before its batch fails.

    DuckLake retries a conflicting commit itself `ducklake_retry_count` times (its default
    is 10, without jitter); when that is spent, the whole transaction — anti-join included —
    is run again up to `attempts` times with full-jitter backoff from `base_delay_s` to
    `max_delay_s`, and never past `budget_s` in all.
    """

    attempts: int = 12
    base_delay_s: float = 0.05
    max_delay_s: float = 2.0
    budget_s: float = 120.0
    ducklake_retry_count: int = 100
    ducklake_retry_wait_ms: int = 20
    ducklake_retry_backoff: float = 1.2

    def backoff_s(self, attempt: int) -> float:
        """A full-jitter delay before try `attempt + 1`: uniform up to a doubling cap."""
        cap = min(self.max_delay_s, self.base_delay_s * 2**attempt)
        return random.uniform(0, cap)  # noqa: S311 - jitter, not security


def is_conflict(exc: duckdb.Error) -> bool:
    """Whether `exc` is a lost commit race (worth running again), not a real failure."""
    if isinstance(exc, duckdb.TransactionException):
        return True
    text = str(exc).lower()
    return any(marker in text for marker in _CONFLICT_MARKERS)


class Retrying:
    """The one retry loop, bound to a store's policy, its masked URL and its counter."""

    def __init__(
        self, policy: RetryPolicy, *, entry: str, on_retry: Callable[[], None] | None = None
    ) -> None:
        self.policy = policy
        self.entry = entry
        self._on_retry = on_retry

    def run(
        self,
        what: str,
        attempt: Callable[[], T],
        *,
        kind: StoreErrorKind = StoreErrorKind.WRITE_FAILED,
    ) -> T:
        """`attempt()`'s result; a conflict is retried within the policy's attempts and budget.

        `attempt` must leave nothing open when it raises (a transaction rolls itself back).
        Gives up with `StoreError(kind)` on an error that is not a conflict, after the last
        allowed attempt, or once `budget_s` is spent; no backoff sleeps past the budget.
        """
        deadline = time.monotonic() + self.policy.budget_s
        tries = 0
        while True:
            try:
                return attempt()
            except duckdb.Error as exc:
                tries += 1
                left_s = deadline - time.monotonic()
                if not is_conflict(exc) or tries >= self.policy.attempts or left_s < 0:
                    raise StoreError(
                        kind,
                        f"{what} failed after {tries} attempt(s) ({type(exc).__name__})",
                        entry=self.entry,
                    ) from exc
                if self._on_retry is not None:
                    self._on_retry()
                time.sleep(min(self.policy.backoff_s(tries), left_s))

    def transaction(
        self,
        what: str,
        con: duckdb.DuckDBPyConnection,
        body: Callable[[duckdb.DuckDBPyConnection], T],
        *,
        kind: StoreErrorKind = StoreErrorKind.WRITE_FAILED,
    ) -> T:
        """`body(con)` in one transaction on `con`, run again whole on a commit conflict.

        Any failure rolls the transaction back before the loop decides: a retry starts
        clean, and a failure leaves `con` usable.
        """

        def attempt() -> T:
            con.execute("BEGIN TRANSACTION")
            try:
                result = body(con)
                con.execute("COMMIT")
            except BaseException:
                with suppress(duckdb.Error):  # no transaction open: nothing to undo
                    con.execute("ROLLBACK")
                raise
            return result

        return self.run(what, attempt, kind=kind)
