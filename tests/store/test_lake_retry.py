"""The lake's one retry loop: which errors it retries, and when it gives up."""

from __future__ import annotations

from dataclasses import dataclass

import duckdb
import pytest

from errscope.collector.errors import StoreError, StoreErrorKind
from errscope.collector.store.lake.retry import Retrying, RetryPolicy


@dataclass(frozen=True)
class Case:
    """How the attempt fails, the policy, and how many tries end in which outcome."""

    error: type[duckdb.Error]
    failures: int
    attempts: int
    budget_s: float
    tries: int
    succeeds: bool


@pytest.mark.parametrize(
    "case",
    [
        pytest.param(
            Case(duckdb.TransactionException, 2, 5, 60.0, tries=3, succeeds=True),
            id="conflicts-then-commit",
        ),
        pytest.param(
            Case(duckdb.TransactionException, 9, 3, 60.0, tries=3, succeeds=False),
            id="attempts-spent",
        ),
        # The budget is spent before the first retry: maintenance CALLs used to ignore it.
        pytest.param(
            Case(duckdb.TransactionException, 9, 12, -1.0, tries=1, succeeds=False),
            id="budget-spent",
        ),
        pytest.param(
            Case(duckdb.CatalogException, 1, 12, 60.0, tries=1, succeeds=False),
            id="not-a-conflict",
        ),
    ],
)
def test_retry_loop(case: Case) -> None:
    """A conflict is run again within the attempts and the budget; anything else, or a
    spent allowance, raises StoreError of the asked kind from the DuckDB error."""
    tries: list[int] = []
    retried: list[int] = []

    def attempt() -> str:
        tries.append(1)
        if len(tries) <= case.failures:
            raise case.error("commit failed")  # a conflict by its class alone
        return "committed"

    policy = RetryPolicy(
        attempts=case.attempts, budget_s=case.budget_s, base_delay_s=0.0, max_delay_s=0.0
    )
    retrying = Retrying(policy, entry="ducklake:postgres:***", on_retry=lambda: retried.append(1))
    if case.succeeds:
        assert retrying.run("append", attempt) == "committed"
    else:
        with pytest.raises(StoreError) as caught:
            retrying.run("flush", attempt, kind=StoreErrorKind.MIGRATION_FAILED)
        assert caught.value.kind is StoreErrorKind.MIGRATION_FAILED
        assert isinstance(caught.value.__cause__, case.error)
        assert f"after {case.tries} attempt(s)" in str(caught.value)
    assert len(tries) == case.tries
    assert len(retried) == case.tries - 1


def test_transaction_rolls_back_before_a_retry() -> None:
    """`Retrying.transaction` rolls a failed attempt back, so the retry starts clean and
    only the committed attempt's rows remain."""
    con = duckdb.connect(":memory:")
    con.execute("CREATE TABLE t (n INTEGER)")
    runs: list[int] = []

    def body(c: duckdb.DuckDBPyConnection) -> int:
        runs.append(1)
        c.execute("INSERT INTO t VALUES (1)")
        if len(runs) == 1:
            raise duckdb.TransactionException("conflict")
        return len(runs)

    retrying = Retrying(RetryPolicy(base_delay_s=0.0, max_delay_s=0.0), entry="lake")
    assert retrying.transaction("append", con, body) == 2
    assert con.execute("SELECT count(*) FROM t").fetchone() == (1,)
