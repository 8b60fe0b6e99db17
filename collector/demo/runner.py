"""Play the story: back-fill hours of history in seconds, then keep live traffic flowing.

`Demo(options)` builds the world (seeded dice, a clock, the planted secrets), the three
agents and their senders.  `backfill()` walks the time line minute by minute: conversations
arrive as a Poisson process at the fleet's rate for that minute, each one is played with
the clock set to its start (span times in the past), billing-agent's conversations go to
2.4.0 with the rollout's share, the orders outage is switched on and off, the deploy is
marked through the API when the walk passes it, and every few simulated minutes the
exporters are flushed so the sidecar has committed what the progress bar shows.  `live()`
plays conversations at the peak rate in real time until told to stop.

Not thread-safe: a `Demo` belongs to one thread.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Final

from errscope.collector.demo.clock import ClockedTracerProvider, SimClock
from errscope.collector.demo.fleet import (
    BILLING,
    BILLING_NEW,
    BILLING_OLD,
    BROKEN_FIELD,
    BROKEN_TOOL,
    OPS,
    OPS_VERSION,
    SPIKE_TOOL,
    SUPPORT,
    SUPPORT_VERSION,
    Agent,
    BillingAgent,
    OpsAgent,
    SupportAgent,
    World,
)
from errscope.collector.demo.secrets import PlantedSecret, plant_secrets
from errscope.collector.demo.send import Senders, Target, mark_deploy
from errscope.collector.demo.story import Timeline

__all__ = ["DEFAULT_RATE", "BackfillReport", "Demo", "DemoOptions", "Progress"]

#: Conversations per minute across the fleet at its busiest (about 2.5 tool calls each).
DEFAULT_RATE: Final = 12.0
# Each service's share of the fleet's conversations.
_SHARES: Final = {BILLING: 0.45, SUPPORT: 0.35, OPS: 0.20}
_FLUSH_EVERY: Final = timedelta(minutes=15)
_FLUSH_SPANS: Final = 4000
_LIVE_LAG: Final = timedelta(seconds=15)
_NS: Final = 1_000_000_000

#: progress(done_share, simulated_time, tool_calls) — called once per simulated minute.
Progress = Callable[[float, datetime, int], None]


@dataclass(frozen=True, slots=True)
class DemoOptions:
    """Where to send and how much: hours of history, seed, conversations per minute at peak."""

    target: Target
    hours: float = 24.0
    seed: int = 7
    rate: float = DEFAULT_RATE
    environment: str = "prod"


@dataclass(frozen=True, slots=True)
class BackfillReport:
    """What the back-fill wrote and where the story's moments are (for tests and banners)."""

    timeline: Timeline
    conversations: int
    tool_calls: int
    spans_exported: int
    spans_failed: int
    deploy_marked: bool
    deploy_mark_reason: str
    planted: tuple[PlantedSecret, ...]
    interrupted: bool = False

    def summary(self) -> dict[str, object]:
        """A JSON-ready summary (no secrets): counts, the deploy, the spike, the window."""
        t = self.timeline
        return {
            "event": "backfilled",
            "start": t.start.isoformat(),
            "end": t.end.isoformat(),
            "conversations": self.conversations,
            "tool_calls": self.tool_calls,
            "spans_exported": self.spans_exported,
            "spans_failed": self.spans_failed,
            "interrupted": self.interrupted,
            "deploy": {
                "service": BILLING,
                "from": BILLING_OLD,
                "to": BILLING_NEW,
                "at": t.deploy_at.isoformat(),
                "broken": {"tool": BROKEN_TOOL, "field": BROKEN_FIELD},
                "marked": self.deploy_marked,
            },
            "spike": {
                "service": SUPPORT,
                "tool": SPIKE_TOOL,
                "code": "not_found",
                "from": t.spike_start.isoformat(),
                "to": t.spike_end.isoformat(),
            },
        }


class Demo:
    """The fleet, its world and its senders; see the module doc."""

    def __init__(self, options: DemoOptions) -> None:
        self.options = options
        self.clock = SimClock(time.time_ns())
        self.rng = random.Random(options.seed)  # noqa: S311 - a reproducible story, not keys
        planted = plant_secrets(options.seed)
        self.planted = tuple(s for values in planted.values() for s in values)
        self.world = World(clock=self.clock, rng=self.rng, planted=planted)
        # The back-fill sends billing-agent raw: errscope's in-process scrubber would double
        # the CPU a back-fill needs on a small machine, and the sidecar runs the same pipeline.
        # Live traffic goes through the in-process scrubber, as `instrument()` sets it up.
        self.senders = Senders(options.target, environment=options.environment)
        self.agents = self._fleet(self.senders)
        self.conversations = 0
        self.tool_calls = 0

    def _fleet(self, senders: Senders) -> dict[str, Agent]:
        def provider_for(service: str) -> Callable[[str], ClockedTracerProvider]:
            cache: dict[str, ClockedTracerProvider] = {}

            def provider(version: str) -> ClockedTracerProvider:
                if version not in cache:
                    cache[version] = ClockedTracerProvider(
                        senders.provider(service, version), self.clock
                    )
                return cache[version]

            return provider

        return {
            BILLING: BillingAgent(self.world, provider_for(BILLING)),
            SUPPORT: SupportAgent(self.world, provider_for(SUPPORT)),
            OPS: OpsAgent(self.world, provider_for(OPS)),
        }

    def _version(self, service: str, share_new: float) -> str:
        if service == BILLING:
            return BILLING_NEW if self.rng.random() < share_new else BILLING_OLD
        return SUPPORT_VERSION if service == SUPPORT else OPS_VERSION

    def _play(self, service: str, at: datetime, *, share_new: float, outage: bool) -> None:
        self.world.orders_outage = outage
        self.clock.set(int(at.timestamp() * _NS))
        conversation_id = f"conv_{self.rng.getrandbits(64):016x}"
        self.tool_calls += self.agents[service].converse(
            self._version(service, share_new), conversation_id
        )
        self.conversations += 1

    def _arrivals(self, start: datetime, seconds: float, scale: float) -> list[tuple[float, str]]:
        """Poisson arrivals per service in [start, start + seconds), as (offset_s, service)."""
        out: list[tuple[float, str]] = []
        for service, share in _SHARES.items():
            per_s = self.options.rate * share * scale / 60.0
            if per_s <= 0:
                continue
            offset = self.rng.expovariate(per_s)
            while offset < seconds:
                out.append((offset, service))
                offset += self.rng.expovariate(per_s)
        out.sort()
        return out

    def backfill(
        self,
        *,
        end: datetime | None = None,
        progress: Progress | None = None,
        stop: threading.Event | None = None,
    ) -> BackfillReport:
        """Write `options.hours` of history ending at `end` (default now) through the sidecar.

        When `stop` is set the walk ends after the current minute (what was played is sent).
        """
        end = (end or datetime.now(UTC)).replace(microsecond=0)
        timeline = Timeline.ending(end, self.options.hours)
        total_s = (timeline.end - timeline.start).total_seconds()
        marked, reason = False, "not reached"
        minute = timeline.start
        last_flush, calls_at_flush = minute, 0
        while minute < timeline.end and not (stop is not None and stop.is_set()):
            seconds = min(60.0, (timeline.end - minute).total_seconds())
            for offset, service in self._arrivals(minute, seconds, timeline.traffic(minute)):
                at = minute + timedelta(seconds=offset)
                self._play(
                    service,
                    at,
                    share_new=timeline.new_version_share(at),
                    outage=timeline.orders_outage(at),
                )
            minute += timedelta(seconds=seconds)
            if reason == "not reached" and minute > timeline.deploy_at:
                marked, reason = mark_deploy(
                    self.options.target,
                    BILLING,
                    BILLING_NEW,
                    self.options.environment,
                    timeline.deploy_at,
                )
            if (
                minute - last_flush >= _FLUSH_EVERY
                or self.tool_calls - calls_at_flush > _FLUSH_SPANS
            ):
                self.senders.flush()
                last_flush, calls_at_flush = minute, self.tool_calls
            if progress is not None:
                done = (minute - timeline.start).total_seconds() / total_s
                progress(done, minute, self.tool_calls)
        self.senders.flush()
        counts = self.senders.counts
        return BackfillReport(
            timeline=timeline,
            conversations=self.conversations,
            tool_calls=self.tool_calls,
            spans_exported=counts.exported,
            spans_failed=counts.failed,
            deploy_marked=marked,
            deploy_mark_reason=reason,
            planted=self.planted,
            interrupted=minute < timeline.end,
        )

    def live(self, stop: threading.Event, *, rate: float | None = None) -> int:
        """Play conversations in real time at `rate` per minute (default: the peak) until `stop`.

        Each conversation is placed so that it ends about now; billing-agent runs 2.4.0 and
        the orders replica is healthy.  Returns the number of conversations played.
        """
        per_min = rate if rate is not None else self.options.rate
        self.senders.shutdown()
        self.senders = Senders(
            self.options.target,
            environment=self.options.environment,
            scrub_in_process=frozenset({BILLING}),
        )
        self.agents = self._fleet(self.senders)
        played = 0
        services = list(_SHARES)
        weights = list(_SHARES.values())
        while per_min > 0 and not stop.wait(self.rng.expovariate(per_min / 60.0)):
            service = self.rng.choices(services, weights=weights)[0]
            self._play(service, datetime.now(UTC) - _LIVE_LAG, share_new=1.0, outage=False)
            played += 1
        return played

    def close(self) -> None:
        """Flush and shut the senders down."""
        self.senders.shutdown()
