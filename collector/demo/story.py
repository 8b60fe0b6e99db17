"""The demo's story on a time line: when traffic is busy, when the deploy rolls, when the
orders replica falls behind.  Pure: times in, decisions out (unit-tested without a sidecar).

Relative to the end of the back-fill ("now"):

- the fleet is quiet overnight (5 % of its peak rate) until 6 h before now, ramps up to
  its peak by 3 h before now, and stays busy;
- at now - 50 min billing-agent 2.4.0 starts a 10-minute rolling deploy over 2.3.0 (the
  share of conversations served by 2.4.0 grows linearly from 0 to 1), which breaks
  `search_invoices`' `since` field;
- from now - 25 min to now - 5 min support-agent's orders replica is behind: `get_order`
  misses most lookups (a not_found spike) — no deploy of support-agent anywhere near it.

Detection evaluated at "now" sees 50 minutes after the deploy (it needs 15 to pass or
fail one) and the spike inside its one-hour window.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Final

__all__ = [
    "DEPLOY_BEFORE_END",
    "MIN_HOURS",
    "ROLLOUT",
    "SPIKE_FROM_END",
    "SPIKE_TO_END",
    "Timeline",
]

DEPLOY_BEFORE_END: Final = timedelta(minutes=50)
ROLLOUT: Final = timedelta(minutes=10)
SPIKE_FROM_END: Final = timedelta(minutes=25)
SPIKE_TO_END: Final = timedelta(minutes=5)
#: The deploy needs an hour of the old version before it (the baseline) and the spike a
#: few hours of history to set the expected rate: below this, the story does not hold.
MIN_HOURS: Final = 3.0
_QUIET: Final = 0.05
_RAMP_FROM: Final = timedelta(hours=6)
_BUSY_FROM: Final = timedelta(hours=3)


@dataclass(frozen=True, slots=True)
class Timeline:
    """The back-fill window and the story's moments inside it."""

    start: datetime
    end: datetime

    @classmethod
    def ending(cls, end: datetime, hours: float) -> Timeline:
        """The time line of a back-fill of `hours` (at least `MIN_HOURS`) ending at `end`."""
        if hours < MIN_HOURS:
            raise ValueError(f"the story needs at least {MIN_HOURS:g} hours of history")
        return cls(start=end - timedelta(hours=hours), end=end)

    @property
    def deploy_at(self) -> datetime:
        """When billing-agent 2.4.0 starts rolling out."""
        return self.end - DEPLOY_BEFORE_END

    @property
    def spike_start(self) -> datetime:
        """When support-agent's orders replica falls behind."""
        return self.end - SPIKE_FROM_END

    @property
    def spike_end(self) -> datetime:
        """When it has caught up again."""
        return self.end - SPIKE_TO_END

    def traffic(self, at: datetime) -> float:
        """The fleet's rate at `at` as a share of its peak (0.05 .. 1)."""
        before_end = self.end - at
        if before_end >= _RAMP_FROM:
            return _QUIET
        if before_end <= _BUSY_FROM:
            return 1.0
        ramp = (_RAMP_FROM - before_end) / (_RAMP_FROM - _BUSY_FROM)
        return _QUIET + (1.0 - _QUIET) * ramp

    def new_version_share(self, at: datetime) -> float:
        """The share of billing-agent conversations 2.4.0 serves at `at`."""
        if at < self.deploy_at:
            return 0.0
        return min(1.0, (at - self.deploy_at) / ROLLOUT)

    def orders_outage(self, at: datetime) -> bool:
        """Whether support-agent's orders replica is behind at `at`."""
        return self.spike_start <= at < self.spike_end
