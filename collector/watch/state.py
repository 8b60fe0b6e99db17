"""`errscope watch`'s state: finding episodes and the deliveries owed for them, in its own file.

Why its own DuckDB file and not a table in the store: DuckDB lets one process hold a file
for writing and no other process open it, and beside a sidecar that process is the sidecar;
its query API is read-only by design (named queries only), and a write path for watch state
would widen what the network can reach.  A file of its own also puts DuckDB's lock to use:
a second `errscope watch` on the same state file fails to start (`StoreError` LOCKED)
instead of posting every episode twice.

An *episode* is one finding identity (kind, service, version, environment, tool, code,
field) from the successful run that first reports it until a successful run finds it gone
for `resolve_after_s` (a finding that flickers between runs stays one episode).  The
*outbox* holds one row per (episode, sink, event): a trigger when the episode opens, a
resolve when it clears if its trigger was sent; a trigger still unsent when the episode
clears is cancelled.  Rows are marked done only after the post, so a restart resends
nothing already sent and retries what was not.

Retention: `prune` deletes the episodes resolved before a cutoff, with their outbox rows
(`errscope watch --state-keep`, 30 days by default, at every run), except one still owing
a delivery to a configured sink.  Episode ids never repeat (the highest ever given is kept
in watch_meta), so a PagerDuty dedup_key is never reused.

Not thread-safe: one `WatchState` is used from the watch loop's thread only.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from importlib import resources
from pathlib import Path
from typing import Any, Final

import duckdb
import orjson

from errscope.collector.errors import StoreError, StoreErrorKind
from errscope.collector.watch.sinks import Delivery, DeliveryOutcome, Event, Message

__all__ = ["STATE_VERSION", "Episode", "Observed", "OutboxItem", "OutboxStatus", "WatchState"]

STATE_VERSION: Final = "1"
IDENTITY: Final = ("kind", "service", "version", "environment", "tool", "code", "field")


class OutboxStatus(StrEnum):
    """Where one owed delivery stands."""

    PENDING = "pending"
    SENT = "sent"
    REFUSED = "refused"  # the webhook answered a 4xx other than 429
    FAILED = "failed"  # every attempt failed
    CANCELLED = "cancelled"  # a trigger not yet sent when its episode cleared


@dataclass(frozen=True, slots=True)
class Episode:
    """One open or resolved episode and its latest finding JSON."""

    episode_id: int
    key: str
    opened_at: datetime
    last_seen_at: datetime
    resolved_at: datetime | None
    finding: dict[str, Any]

    def labels(self) -> dict[str, str]:
        """The identity as metric labels (a missing part as "", which Prometheus drops)."""
        return {name: str(self.finding.get(name) or "") for name in IDENTITY}


@dataclass(frozen=True, slots=True)
class Observed:
    """What one run changed: the episodes it opened and resolved."""

    opened: tuple[Episode, ...] = ()
    resolved: tuple[Episode, ...] = ()


@dataclass(frozen=True, slots=True)
class OutboxItem:
    """One delivery owed: to which sink (its ident), what, how many tries so far."""

    episode_id: int
    sink: str
    event: Event
    attempts: int
    message: Message


def finding_key(finding: dict[str, Any]) -> str:
    """The episode identity of a finding's JSON, as one unambiguous string."""
    return orjson.dumps([finding.get(name) for name in IDENTITY]).decode()


def _utc(value: datetime) -> datetime:
    return value.astimezone(UTC)


def _is_lock_error(exc: duckdb.Error) -> bool:
    text = str(exc).lower()
    return "could not set lock" in text or "conflicting lock" in text


class WatchState:
    """The state file (or `:memory:`): schema on open, episodes, the outbox."""

    def __init__(self, path: str | Path) -> None:
        self.path = str(path)
        if self.path != ":memory:":
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        try:
            self._con = duckdb.connect(self.path)
        except duckdb.Error as exc:
            if _is_lock_error(exc):
                raise StoreError(
                    StoreErrorKind.LOCKED,
                    "the watch state file is held by another process",
                    entry=self.path,
                    hint="another `errscope watch` uses it: one watch per state file, "
                    "or give this one --state OTHER_FILE",
                ) from None
            raise StoreError(
                StoreErrorKind.UNREADABLE,
                f"cannot open the watch state file ({type(exc).__name__})",
                entry=self.path,
            ) from None
        self._con.execute("SET TimeZone = 'UTC'")
        schema = resources.files("errscope.collector.watch").joinpath("state.sql").read_text()
        self._con.execute(schema)
        version = self._con.execute("SELECT value FROM watch_meta WHERE key = 'version'").fetchone()
        if version is None:
            self._con.execute("INSERT INTO watch_meta VALUES ('version', ?)", [STATE_VERSION])
        elif version[0] != STATE_VERSION:
            self._con.close()
            raise StoreError(
                StoreErrorKind.SCHEMA_TOO_NEW,
                f"watch state version {version[0]}; this errscope reads {STATE_VERSION}",
                entry=self.path,
            )

    def close(self) -> None:
        """Checkpoint and close the file."""
        self._con.close()

    def __enter__(self) -> WatchState:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _episodes(self, where: str, params: Sequence[object] = ()) -> list[Episode]:
        rows = self._con.execute(
            "SELECT episode_id, key, opened_at, last_seen_at, resolved_at, finding "  # noqa: S608 - fixed clauses
            f"FROM watch_episodes WHERE {where} ORDER BY episode_id",
            list(params),
        ).fetchall()
        return [
            Episode(
                int(r[0]),
                str(r[1]),
                _utc(r[2]),
                _utc(r[3]),
                None if r[4] is None else _utc(r[4]),
                orjson.loads(r[5]),
            )
            for r in rows
        ]

    def open_episodes(self) -> list[Episode]:
        """The episodes not resolved, oldest first."""
        return self._episodes("resolved_at IS NULL")

    def observe(
        self,
        findings: Sequence[dict[str, Any]],
        now: datetime,
        *,
        resolve_after_s: float,
        sinks: Sequence[str],
    ) -> Observed:
        """Fold one successful run's findings (their JSON) into the episodes, in one
        transaction, and owe each sink (by ident) a trigger or resolve for what changed.

        Only a run that looked can clear an episode: a finding seen again after the watch
        was stopped for a while continues its episode (no second alert after a restart).
        Every open episode is owed a trigger to every sink given (a sink added since the
        last start hears of what is already open).
        """
        now = _utc(now)
        grace = timedelta(seconds=resolve_after_s)
        latest: dict[str, dict[str, Any]] = {}
        for f in findings:
            latest.setdefault(finding_key(f), f)
        opened: list[Episode] = []
        resolved: list[Episode] = []
        con = self._con
        con.execute("BEGIN TRANSACTION")
        try:
            current = {e.key: e for e in self.open_episodes()}
            for key, episode in current.items():
                if key not in latest and now - episode.last_seen_at >= grace:
                    self._resolve(episode, now)
                    resolved.append(_with(episode, resolved_at=now))
            still_open = set(current) - {r.key for r in resolved}
            (next_id,) = con.execute(
                "SELECT greatest(coalesce(max(episode_id), 0), coalesce(("
                "SELECT CAST(value AS BIGINT) FROM watch_meta WHERE key = 'last_episode_id'"
                "), 0)) + 1 FROM watch_episodes"
            ).fetchone() or (1,)
            for key, f in latest.items():
                body = orjson.dumps(f).decode()
                if key in still_open:
                    con.execute(
                        "UPDATE watch_episodes SET last_seen_at = ?, finding = ? "
                        "WHERE key = ? AND resolved_at IS NULL",
                        [now, body, key],
                    )
                    continue
                con.execute(
                    "INSERT INTO watch_episodes VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, NULL, ?)",
                    [next_id, key, *(f.get(name) for name in IDENTITY), now, now, body],
                )
                opened.append(Episode(int(next_id), key, now, now, None, f))
                next_id += 1
            for sink in sinks:
                con.execute(
                    "INSERT INTO watch_outbox (episode_id, sink, event, status, next_attempt_at) "
                    "SELECT episode_id, ?, 'trigger', 'pending', ? FROM watch_episodes "
                    "WHERE resolved_at IS NULL ON CONFLICT DO NOTHING",
                    [sink, now],
                )
            con.execute("COMMIT")
        except BaseException:
            con.execute("ROLLBACK")
            raise
        return Observed(tuple(opened), tuple(resolved))

    def _resolve(self, episode: Episode, at: datetime) -> None:
        con = self._con
        con.execute(
            "UPDATE watch_episodes SET resolved_at = ? WHERE episode_id = ?",
            [at, episode.episode_id],
        )
        # A resolve is owed where the trigger went out; a trigger not yet out is dropped.
        con.execute(
            "INSERT INTO watch_outbox (episode_id, sink, event, status, next_attempt_at) "
            "SELECT episode_id, sink, 'resolve', 'pending', ? FROM watch_outbox "
            "WHERE episode_id = ? AND event = 'trigger' AND status = 'sent' "
            "ON CONFLICT DO NOTHING",
            [at, episode.episode_id],
        )
        con.execute(
            "UPDATE watch_outbox SET status = 'cancelled', done_at = ? "
            "WHERE episode_id = ? AND event = 'trigger' AND status = 'pending'",
            [at, episode.episode_id],
        )

    def due(self, now: datetime, sink: str, limit: int = 1) -> list[OutboxItem]:
        """A sink's pending deliveries whose next attempt is due, oldest first (a trigger
        before its episode's resolve)."""
        rows = self._con.execute(
            "SELECT o.episode_id, o.sink, o.event, o.attempts, e.key, e.opened_at, "
            "e.resolved_at, e.finding FROM watch_outbox o JOIN watch_episodes e USING (episode_id) "
            "WHERE o.status = 'pending' AND o.sink = ? AND o.next_attempt_at <= ? "
            "ORDER BY o.next_attempt_at, o.episode_id, o.event DESC LIMIT ?",
            [sink, _utc(now), limit],
        ).fetchall()
        return [
            OutboxItem(
                int(r[0]),
                str(r[1]),
                Event(r[2]),
                int(r[3]),
                Message(
                    Event(r[2]),
                    int(r[0]),
                    str(r[4]),
                    _utc(r[5]),
                    None if r[6] is None else _utc(r[6]),
                    orjson.loads(r[7]),
                ),
            )
            for r in rows
        ]

    def next_due(self) -> dict[str, datetime]:
        """For each sink (ident) with a pending delivery, when its earliest is next due."""
        rows = self._con.execute(
            "SELECT sink, min(next_attempt_at) FROM watch_outbox WHERE status = 'pending' "
            "GROUP BY sink"
        ).fetchall()
        return {str(sink): _utc(at) for sink, at in rows}

    def record(
        self,
        item: OutboxItem,
        delivery: Delivery,
        now: datetime,
        *,
        retry_at: datetime | None,
    ) -> OutboxStatus:
        """Store one attempt's outcome; `retry_at` None means no attempt is left."""
        attempts = item.attempts + 1
        match delivery.outcome:
            case DeliveryOutcome.SENT:
                status = OutboxStatus.SENT
            case DeliveryOutcome.REFUSED:
                status = OutboxStatus.REFUSED
            case DeliveryOutcome.RETRY:
                status = OutboxStatus.PENDING if retry_at is not None else OutboxStatus.FAILED
        self._con.execute(
            "UPDATE watch_outbox SET status = ?, attempts = ?, next_attempt_at = ?, "
            "done_at = ?, reason = ? WHERE episode_id = ? AND sink = ? AND event = ?",
            [
                str(status),
                attempts,
                _utc(retry_at or now),
                None if status is OutboxStatus.PENDING else _utc(now),
                delivery.reason,
                item.episode_id,
                item.sink,
                str(item.event),
            ],
        )
        return status

    def prune(self, before: datetime, *, keep_pending_for: Sequence[str] = ()) -> int:
        """Delete the episodes resolved before `before` and their outbox rows, in one
        transaction; one with a pending delivery to a sink in `keep_pending_for` (idents)
        stays until it is done.  Returns how many episodes went."""
        con = self._con
        sinks = list(keep_pending_for)
        con.execute("BEGIN TRANSACTION")
        try:
            con.execute(
                "INSERT INTO watch_meta SELECT 'last_episode_id', CAST(max(episode_id) AS VARCHAR) "
                "FROM watch_episodes HAVING max(episode_id) IS NOT NULL "
                "ON CONFLICT (key) DO UPDATE SET value = CAST(greatest("
                "CAST(watch_meta.value AS BIGINT), CAST(excluded.value AS BIGINT)) AS VARCHAR)"
            )
            con.execute(
                "CREATE OR REPLACE TEMP TABLE watch_prune AS SELECT episode_id FROM watch_episodes "
                "WHERE resolved_at IS NOT NULL AND resolved_at < ? AND episode_id NOT IN ("
                "SELECT episode_id FROM watch_outbox WHERE status = 'pending' "
                "AND list_contains(?, sink))",
                [_utc(before), sinks],
            )
            con.execute(
                "DELETE FROM watch_outbox WHERE episode_id IN (SELECT episode_id FROM watch_prune)"
            )
            con.execute(
                "DELETE FROM watch_episodes "
                "WHERE episode_id IN (SELECT episode_id FROM watch_prune)"
            )
            (gone,) = con.execute("SELECT count(*) FROM watch_prune").fetchone() or (0,)
            con.execute("DROP TABLE watch_prune")
            con.execute("COMMIT")
        except BaseException:
            con.execute("ROLLBACK")
            raise
        return int(gone)

    def counts(self) -> dict[str, int]:
        """Outbox rows by status."""
        rows = self._con.execute(
            "SELECT status, count(*) FROM watch_outbox GROUP BY status"
        ).fetchall()
        return {str(s): int(n) for s, n in rows}


def _with(episode: Episode, *, resolved_at: datetime) -> Episode:
    return Episode(
        episode.episode_id,
        episode.key,
        episode.opened_at,
        episode.last_seen_at,
        resolved_at,
        episode.finding,
    )
