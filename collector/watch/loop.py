"""The watch loop: detection on a schedule, episodes folded into the state, webhooks posted.

`Watcher.run_once` runs detection once (`detect_all` through a query source: a sidecar's
query API, or a lake or file no sidecar holds) and folds the findings into the state file;
a failed run (the sidecar unreachable) changes no episode, so an outage never reads as
every finding clearing.  `Watcher.deliver` posts what the outbox owes, each sink at most
`rate_per_min` messages a minute (Slack takes about one a second per hook; a burst of
findings waits its turn rather than being dropped), retrying 429, 5xx and no answer with
exponential backoff (or the server's Retry-After when longer) up to `max_attempts`.
A finding that opens an episode has its evidence gathered once (errscope.queries.evidence:
its first failing calls and traceback samples, two queries per id), kept with the episode
while it stays open; each post draws its trace links from `trace_url` then (sinks.relink).
Each run first deletes the episodes resolved more than `keep_s` ago, with their deliveries
(`WatchState.prune`).  `Watcher.serve` runs both until its stop event is set.  No jitter
on the backoff: one watch per webhook is no herd.

Thread-safety: `run_once`, `deliver` and `serve` belong to one thread; `exposition` may be
called from the metrics server's threads (it reads a snapshot under `_lock`).
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import Any, Final

from errscope.collector.errors import ErrscopeError
from errscope.collector.sidecar.metrics import escape_label
from errscope.collector.watch.sinks import DeliveryOutcome, Sink, relink
from errscope.collector.watch.state import Episode, OutboxStatus, WatchState, finding_key
from errscope.queries.detect import DEFAULT_CONFIG, DetectConfig, detect_all
from errscope.queries.evidence import gather_evidence
from errscope.queries.findings import Finding, finding_dict
from errscope.queries.source import QuerySource

__all__ = ["WatchConfig", "Watcher"]

log = logging.getLogger("errscope.watch")

_EPISODE_LABELS: Final = ("kind", "service", "environment", "code")
_EVIDENCE_KEYS: Final = ("first_failing_calls", "tracebacks")


@dataclass(frozen=True, slots=True)
class WatchConfig:
    """How often to detect and how to deliver; the defaults are `errscope watch`'s."""

    interval_s: float = 60.0
    resolve_after_s: float = 300.0  # unseen this long before an episode clears
    rate_per_min: float = 20.0  # per sink
    max_attempts: int = 8
    backoff_s: float = 1.0  # first retry; doubles per attempt
    max_backoff_s: float = 300.0
    keep_s: float = 30 * 86400.0  # resolved episodes older than this are deleted
    service: str | None = None
    environment: str | None = None
    detect: DetectConfig = DEFAULT_CONFIG
    trace_url: str | None = None  # the links' template (errscope.queries.links); None: none


class Watcher:
    """Detection, episodes and deliveries for one state file and its sinks."""

    def __init__(
        self,
        source: QuerySource,
        state: WatchState,
        sinks: Sequence[Sink] = (),
        config: WatchConfig = WatchConfig(),
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self.source = source
        self.state = state
        self.sinks = {s.ident: s for s in sinks}
        self.config = config
        self.clock = clock
        self._last_post: dict[str, datetime] = {}
        self._lock = threading.Lock()
        self._open: list[Episode] = state.open_episodes()
        self._episodes: Counter[tuple[str, ...]] = Counter()
        self._runs: Counter[str] = Counter()
        self._deliveries: Counter[tuple[str, str, str]] = Counter()
        self._last_success_s: float | None = None
        self._last_run_s = 0.0
        self._up = False
        self._pending = state.counts().get(OutboxStatus.PENDING, 0)

    def run_once(self, now: datetime | None = None) -> bool:
        """Detect as of `now` (default the clock) and fold the findings in; True if it ran."""
        now = now or self.clock()
        started = time.monotonic()
        try:
            self.state.prune(
                now - timedelta(seconds=self.config.keep_s), keep_pending_for=list(self.sinks)
            )
            found = detect_all(
                self.source,
                as_of=now,
                service=self.config.service,
                environment=self.config.environment,
                config=self.config.detect,
            )
            observed = self.state.observe(
                self._with_evidence(found),
                now,
                resolve_after_s=self.config.resolve_after_s,
                sinks=list(self.sinks),
            )
        except ErrscopeError as exc:
            log.warning(
                "detection run failed; episodes unchanged",
                extra={"code": str(exc.kind), "error_class": type(exc).__name__},
            )
            self._finish_run(ok=False, seconds=time.monotonic() - started)
            return False
        for episode in observed.opened:
            labels = episode.labels()
            self._episodes[tuple(labels[k] for k in _EPISODE_LABELS)] += 1
            log.info("episode opened", extra={"code": labels["code"], "reason": labels["kind"]})
        for episode in observed.resolved:
            labels = episode.labels()
            log.info("episode resolved", extra={"code": labels["code"], "reason": labels["kind"]})
        self._finish_run(ok=True, seconds=time.monotonic() - started)
        return True

    def _with_evidence(self, found: Sequence[Finding]) -> list[dict[str, object]]:
        """The findings' JSON with their evidence: gathered for a finding that opens an
        episode, carried over from the episode for one already open."""
        current = {e.key: e for e in self.state.open_episodes()}
        plain = [(f, finding_dict(f)) for f in found]
        new = [f for f, d in plain if finding_key(d) not in current]
        evidence = gather_evidence(self.source, new, self.config.trace_url) if new else {}
        out: list[dict[str, object]] = []
        for f, d in plain:
            episode = current.get(finding_key(d))
            if episode is None:
                out.append(finding_dict(f, evidence.get(f)))
            else:
                out.append({**d, **{k: episode.finding.get(k, []) for k in _EVIDENCE_KEYS}})
        return out

    def _finish_run(self, *, ok: bool, seconds: float) -> None:
        open_now = self.state.open_episodes()
        pending = self.state.counts().get(OutboxStatus.PENDING, 0)
        with self._lock:
            self._open = open_now
            self._pending = pending
            self._runs["ok" if ok else "failed"] += 1
            self._up = ok
            self._last_run_s = seconds
            if ok:
                self._last_success_s = time.time()

    def _retry_at(
        self, now: datetime, attempts: int, retry_after_s: float | None
    ) -> datetime | None:
        if attempts >= self.config.max_attempts:
            return None
        backoff = min(self.config.backoff_s * 2 ** (attempts - 1), self.config.max_backoff_s)
        return now + timedelta(seconds=max(backoff, retry_after_s or 0.0))

    def _allowed(self, ident: str, now: datetime) -> bool:
        last = self._last_post.get(ident)
        gap = timedelta(seconds=60.0 / self.config.rate_per_min)
        return last is None or now - last >= gap

    def deliver(self, now: datetime | None = None, budget_s: float | None = None) -> int:
        """Post what is due, at most one message per sink within its rate; the posts tried.

        Stops after `budget_s` of wall time (default half the interval), so a webhook that
        answers slowly delays the next detection run by at most that.  What a sink owes
        and may not post yet stays pending (`serve` wakes when it may).
        """
        now = now or self.clock()
        budget = self.config.interval_s / 2 if budget_s is None else budget_s
        deadline = time.monotonic() + budget
        tried = 0
        for ident, sink in self.sinks.items():
            if time.monotonic() > deadline:
                break
            if not self._allowed(ident, now):
                continue
            items = self.state.due(now, ident)
            if not items:
                continue
            item = items[0]
            self._last_post[ident] = now
            message = item.message
            message = replace(message, finding=relink(message.finding, self.config.trace_url))
            delivery = sink.post(message)
            tried += 1
            attempts = item.attempts + 1
            retry_at = (
                self._retry_at(now, attempts, delivery.retry_after_s)
                if delivery.outcome is DeliveryOutcome.RETRY
                else None
            )
            status = self.state.record(item, delivery, now, retry_at=retry_at)
            with self._lock:
                self._deliveries[(sink.name, str(sink.format), str(status))] += 1
            extra: dict[str, Any] = {
                "code": f"webhook_{status}",
                "reason": f"{item.event} episode {item.episode_id} attempt {attempts}: "
                f"{delivery.reason}",
                "address": f"{sink.name} {sink.shown}",
            }
            if status is OutboxStatus.SENT:
                log.info("webhook delivered", extra=extra)
            elif status is OutboxStatus.PENDING:
                log.warning("webhook delivery failed; will retry", extra=extra)
            else:
                log.error("webhook delivery abandoned", extra=extra)
        pending = self.state.counts().get(OutboxStatus.PENDING, 0)
        with self._lock:
            self._pending = pending
        return tried

    def next_wake(self, now: datetime, next_run: datetime) -> datetime:
        """The next run, or sooner the first time a configured sink may post what it owes."""
        gap = timedelta(seconds=60.0 / self.config.rate_per_min)
        wake = next_run
        for ident, due in self.state.next_due().items():
            if ident not in self.sinks:
                continue  # owed to a webhook no longer configured: kept, not waited for
            last = self._last_post.get(ident)
            wake = min(wake, due if last is None else max(due, last + gap))
        return max(wake, now)

    def serve(self, stop: threading.Event) -> None:
        """Detect every `interval_s` (the first run at once) and deliver, until `stop`."""
        interval = timedelta(seconds=self.config.interval_s)
        next_run = self.clock()
        while not stop.is_set():
            now = self.clock()
            if now >= next_run:
                self.run_once(now)
                next_run = max(next_run + interval, now)
            self.deliver(self.clock())
            wake = self.next_wake(self.clock(), next_run)
            stop.wait(max((wake - self.clock()).total_seconds(), 0.01))

    def exposition(self) -> str:
        """The watch's /metrics: open findings, episodes, runs, deliveries (Prometheus text)."""
        esc = escape_label
        with self._lock:
            open_now = list(self._open)
            episodes = dict(self._episodes)
            runs = dict(self._runs)
            deliveries = dict(self._deliveries)
            last_success, last_run, up, pending = (
                self._last_success_s,
                self._last_run_s,
                self._up,
                self._pending,
            )
        lines = [
            "# HELP errscope_finding_open 1 while a finding's episode is open.",
            "# TYPE errscope_finding_open gauge",
        ]
        for episode in open_now:
            labels = ",".join(f'{k}="{esc(v)}"' for k, v in episode.labels().items())
            lines.append(f"errscope_finding_open{{{labels}}} 1")
        lines += [
            "# HELP errscope_finding_episodes_total Episodes opened since the watch started.",
            "# TYPE errscope_finding_episodes_total counter",
        ]
        for values, n in sorted(episodes.items()):
            labels = ",".join(
                f'{k}="{esc(v)}"' for k, v in zip(_EPISODE_LABELS, values, strict=True)
            )
            lines.append(f"errscope_finding_episodes_total{{{labels}}} {n}")
        lines += [
            "# HELP errscope_watch_runs_total Detection runs, by result.",
            "# TYPE errscope_watch_runs_total counter",
            *(
                f'errscope_watch_runs_total{{result="{r}"}} {runs.get(r, 0)}'
                for r in ("ok", "failed")
            ),
            "# HELP errscope_watch_up 1 when the last detection run succeeded.",
            "# TYPE errscope_watch_up gauge",
            f"errscope_watch_up {1 if up else 0}",
            "# HELP errscope_watch_run_seconds How long the last detection run took.",
            "# TYPE errscope_watch_run_seconds gauge",
            f"errscope_watch_run_seconds {last_run:.6f}",
            "# HELP errscope_watch_last_success_timestamp_seconds When a run last succeeded.",
            "# TYPE errscope_watch_last_success_timestamp_seconds gauge",
        ]
        if last_success is not None:
            lines.append(f"errscope_watch_last_success_timestamp_seconds {last_success:.3f}")
        lines += [
            "# HELP errscope_webhook_deliveries_total Webhook posts, by sink and outcome.",
            "# TYPE errscope_webhook_deliveries_total counter",
        ]
        for (name, fmt, status), n in sorted(deliveries.items()):
            lines.append(
                f'errscope_webhook_deliveries_total{{sink="{esc(name)}",format="{fmt}",'
                f'status="{status}"}} {n}'
            )
        lines += [
            "# HELP errscope_webhook_pending Deliveries owed and not yet made.",
            "# TYPE errscope_webhook_pending gauge",
            f"errscope_webhook_pending {pending}",
        ]
        return "\n".join(lines) + "\n"
