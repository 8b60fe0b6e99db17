"""Detection on a production-shaped fleet: errscope's CLI beside three reference tests.

The fleet is written from what agent fleets look like in production, not from the
detector's internals: ~8 services whose total traffic spans two orders of magnitude, each
with 10-18 tools whose popularity is Zipf-shaped (most tools make under 5 calls a minute),
diurnal and weekly seasonality with an hourly wander of both traffic and error rates,
per-minute shared noise on error rates, traffic-only bursts, loop storms (a few
conversations retrying one field a dozen times), retries that share a trace, and
deploys done three ways (cut-over, rolling over 8-20 min, canary at 5-10 % for 20-45 min).
Ground truth sits on the deploys and on not_found:

- invalid_args regressions of 1.5x, 2x, 3x and 10x on one tool, in four traffic tiers
  (< 1, 1-5, 5-50, > 50 calls/min);
- slow regressions: nothing in the first hour, then the rate grows to 3x by +3 h;
- rollbacks: a 10x or 3x deploy rolled back after 20-35 min (the old version deployed
  again), then a fixed version 80-100 min later;
- healthy deploys, a third of them with a traffic burst and a quarter with a loop storm
  in their first 40 minutes;
- not_found spikes, broad (every tool of a service) and narrow (one tool), 1.5-10x for
  10-60 min.

Rows go into a real store file through `DuckDBStore.append_tool_calls`; deploys are marked
the way errscope users mark them: the sidecar's `auto` marker at a version's first row, and
for three deploys in four the pipeline's `errscope deploy --db FILE --time T` mark (the same
`add_deploys` call, source `cli`, without a process per mark).

The product is then asked as a user asks it: `errscope check --json --as-of D+5m/15m/60m`
for every deploy (and +6 h, +24 h when the broken tool is quiet or the harm slow), and
`errscope findings --json --as-of` for the spikes.  Beside it, in the same run and on the
same rows: (a) a naive rule, new-version invalid_args rate over 2x the hour before the
deploy; (b) an exact conditional binomial test per tool against the 2 h before, Bonferroni
over tools x looks at 0.01; (c) an oracle that knows each tool's true base rate and sees
Poisson counts of first attempts (no noise, no retries, no storms), with the same
Bonferroni level: its recall is the share any test could have seen.

Run: `python bench/detection_fleet.py --quick` (3 days of history, about 15 minutes),
`python bench/detection_fleet.py --days 6 --seeds 1,2,3 --json out.json` (the fuller run),
`python bench/detection_fleet.py --rows 17000000 --latency-only` (per-call latency on a
17M-row store beside a plain DuckDB GROUP BY over the same table).
"""

from __future__ import annotations

import argparse
import binascii
import json
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from scipy import stats

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from errscope.collector.record import TOOL_CALLS_SCHEMA, Deploy
from errscope.collector.store import DuckDBStore

ERRSCOPE = str(Path(sys.executable).with_name("errscope"))
ENV = "prod"
SIZES = (1.5, 2.0, 3.0, 10.0)
TIERS = ("<1", "1-5", "5-50", ">50")
QUIET = ("<1", "1-5")
FAST_LOOKS = (5, 15, 60)
LONG_LOOKS = (5, 15, 60, 360, 1440)
PRE_MIN = 150  # a deploy's previous version serves at least this long before it
WARM_MIN = 180
ALPHA = 0.01
SPIKE_LOOKS = (5, 10, 15, 30, 60)
# One `findings` call reports the spikes alarming as of its time (two 5-minute slots):
# checked on this fleet, none older shows.  A sweep every 10 min watches every minute.
SPIKE_REACH_MIN = 10

SERVICE_NAMES = (
    "support-agent",
    "billing-agent",
    "search-agent",
    "coding-agent",
    "travel-agent",
    "sales-agent",
    "hr-agent",
    "docs-agent",
)
# Total calls/min on a weekday average; the fleet's spread (two orders of magnitude).
SERVICE_RATES = (700.0, 320.0, 180.0, 110.0, 60.0, 30.0, 16.0, 8.0)
TOOL_NAMES = (
    "search_docs",
    "get_order",
    "get_customer",
    "list_invoices",
    "create_ticket",
    "update_ticket",
    "get_job",
    "run_query",
    "send_email",
    "lookup_sku",
    "get_weather",
    "book_flight",
    "cancel_booking",
    "refund_payment",
    "get_policy",
    "translate_text",
    "schedule_meeting",
    "export_report",
)
FIELDS = ("id", "since", "query", "limit", "status", "email")
OTHER_CODES = (("timeout", 0.004), ("internal_error", 0.0015), ("rate_limited", 0.001))


# ------------------------------------------------------------------ the fleet


@dataclass
class Tool:
    """One tool of a service: weekday-mean calls/min, base error rates, its fields."""

    name: str
    rate: float
    ia: float
    nf: float
    fields: tuple[str, ...]
    field_p: np.ndarray

    @property
    def tier(self) -> str:
        """The traffic tier of the issue (calls/min, weekday mean)."""
        return (
            "<1"
            if self.rate < 1
            else "1-5"
            if self.rate < 5
            else "5-50"
            if self.rate < 50
            else ">50"
        )


@dataclass
class Service:
    """A service and its tools."""

    name: str
    rate: float
    tools: list[Tool]


@dataclass
class Rollout:
    """One deploy of one service: when, to what, and how the traffic moved over."""

    service: int
    minute: int
    version: str
    strategy: str  # cutover | rolling | canary
    ramp_min: int = 0  # rolling: minutes to 100 %; canary: minutes at the canary share
    canary_share: float = 0.0
    marked: bool = True  # the pipeline ran `errscope deploy`
    effects: list[tuple[int, float, int | None, str]] = field(default_factory=list)
    # (tool, size, slow_start_min or None, field) for the invalid_args harm it carries

    def share(self, rel: np.ndarray) -> np.ndarray:
        """The new version's share of calls `rel` minutes after the deploy."""
        if self.strategy == "cutover":
            return np.where(rel < 0, 0.0, np.where(rel == 0, 0.85, 1.0))
        if self.strategy == "rolling":
            return np.clip((rel + 1) / self.ramp_min, 0, 1) * (rel >= 0)
        p = self.canary_share
        after = np.clip(p + (1 - p) * (rel - self.ramp_min + 1) / 5, p, 1)
        return np.where(rel < 0, 0.0, np.where(rel < self.ramp_min, p, after))

    def end(self) -> int:
        """Minutes after the deploy until the new version has every call."""
        return {"cutover": 1, "rolling": self.ramp_min, "canary": self.ramp_min + 5}[self.strategy]


@dataclass
class Event:
    """A scored deploy: what is true about it and when to look."""

    kind: str  # regression | slow | healthy | rollback_bad | rollback | fix
    service: int
    rollout: Rollout
    prev_version: str
    looks: tuple[int, ...]
    tool: int | None = None
    tier: str | None = None
    size: float = 1.0
    burst: bool = False
    storm: bool = False


@dataclass
class Spike:
    """A not_found spike: broad (tool None) or narrow."""

    service: int
    tool: int | None
    minute: int
    dur: int
    size: float


@dataclass
class Fleet:
    """The generated fleet and its ground truth."""

    start: datetime
    minutes: int
    services: list[Service]
    rollouts: list[Rollout]
    events: list[Event]
    spikes: list[Spike]
    bursts: list[tuple[int, int, int, float]]  # service, minute, dur, factor
    storms: list[tuple[int, int, int]]  # service, tool, minute
    # per service: calls[tool, minute, side] of first attempts (side 0 old, 1 new),
    # the true invalid_args base rate[tool, minute], version index per side[minute, side]
    calls: list[np.ndarray] = field(default_factory=list)
    base_ia: list[np.ndarray] = field(default_factory=list)
    side_version: list[list[list[str]]] = field(default_factory=list)
    rows: int = 0

    def ts(self, minute: float) -> datetime:
        """The wall time of a fleet minute."""
        return self.start + timedelta(minutes=minute)


def make_services(rng: np.random.Generator, scale: float) -> list[Service]:
    """Services with Zipf-shaped tool popularity and log-uniform base error rates."""
    services = []
    for name, rate in zip(SERVICE_NAMES, SERVICE_RATES, strict=True):
        k = int(rng.integers(10, 19))
        zipf = np.arange(1, k + 1) ** -float(rng.uniform(1.0, 1.4))
        shares = zipf / zipf.sum()
        names = rng.choice(TOOL_NAMES, size=k, replace=False)
        tools = []
        for tool_name, share in zip(names, shares, strict=True):
            n_fields = int(rng.integers(2, 5))
            p = rng.dirichlet(np.ones(n_fields) * 2)
            tools.append(
                Tool(
                    name=str(tool_name),
                    rate=rate * scale * float(share),
                    ia=float(np.exp(rng.uniform(np.log(0.004), np.log(0.04)))),
                    nf=float(np.exp(rng.uniform(np.log(0.005), np.log(0.05)))),
                    fields=tuple(rng.choice(FIELDS, size=n_fields, replace=False)),
                    field_p=p,
                )
            )
        services.append(Service(name=name, rate=rate * scale, tools=tools))
    return services


def season(start: datetime, minutes: int) -> np.ndarray:
    """Diurnal (trough at 04 UTC, peak at 16) and weekly (weekends at 55 %) traffic shape."""
    t = np.array([start + timedelta(minutes=int(m)) for m in range(0, minutes, 60)])
    hours = np.repeat(np.array([x.hour + 0.0 for x in t]), 60)[:minutes]
    hours = hours + (np.arange(minutes) % 60) / 60
    weekend = np.repeat(np.array([x.weekday() >= 5 for x in t]), 60)[:minutes]
    diurnal = 1 + 0.6 * np.sin(2 * np.pi * (hours - 10) / 24)
    return diurnal * np.where(weekend, 0.55, 1.0)


def hourly_wander(rng: np.random.Generator, minutes: int, sigma: float, size: int) -> np.ndarray:
    """A mean-reverting log-normal wander, one step per hour, linear within the hour."""
    hours = minutes // 60 + 2
    x = np.zeros((size, hours))
    for h in range(1, hours):
        x[:, h] = 0.8 * x[:, h - 1] + rng.normal(0, sigma, size)
    grid = np.arange(minutes) / 60
    out = np.empty((size, minutes))
    for i in range(size):
        out[i] = np.interp(grid, np.arange(hours), x[i])
    return np.exp(out - sigma**2 / (2 * (1 - 0.64)))


# ------------------------------------------------------------------ the schedule


def _hour_ok(rng: np.random.Generator, start: datetime, minute: int) -> bool:
    """Deploys cluster in working hours: accept a minute with a weight by its hour."""
    t = start + timedelta(minutes=minute)
    weight = 1.0 if 7 <= t.hour < 19 else 0.3
    return bool(rng.random() < weight * (0.4 if t.weekday() >= 5 else 1.0))


def plan(  # noqa: PLR0915 - one schedule reads best top to bottom
    rng: np.random.Generator,
    *,
    services: list[Service],
    start: datetime,
    minutes: int,
    reps: int,
    quick: bool,
) -> tuple[list[Rollout], list[Event], list[Spike]]:
    """Place every scored deploy in its own window of its service (no deploy inside)."""
    windows: dict[int, list[tuple[int, int]]] = defaultdict(list)
    counters = defaultdict(int)

    def version(s: int) -> str:
        counters[s] += 1
        return f"2.{counters[s]}.0"

    def place(post: int, svc_ok: list[int]) -> tuple[int, int] | None:
        for _ in range(4000):
            s = int(rng.choice(svc_ok))
            d = int(rng.integers(WARM_MIN, minutes - post))
            if not _hour_ok(rng, start, d):
                continue
            a, b = d - PRE_MIN, d + post
            if all(b <= x or a >= y for x, y in windows[s]):
                windows[s].append((a, b))
                return s, d
        return None

    def tools_in(tier: str) -> list[tuple[int, int]]:
        return [
            (s, t)
            for s, sv in enumerate(services)
            for t, tl in enumerate(sv.tools)
            if tl.tier == tier
        ]

    def strategy(rollout_kw: dict[str, object]) -> Rollout:
        kind = str(rng.choice(["cutover", "rolling", "canary"], p=[0.4, 0.4, 0.2]))
        ramp = int(rng.integers(8, 21)) if kind == "rolling" else int(rng.integers(20, 46))
        share = float(rng.uniform(0.05, 0.10))
        return Rollout(
            strategy=kind,
            ramp_min=ramp,
            canary_share=share,
            marked=bool(rng.random() < 0.75),
            **rollout_kw,
        )  # type: ignore[arg-type]

    specs: list[tuple[str, str | None, float]] = []
    quiet_sizes = (2.0, 3.0, 10.0) if quick else SIZES
    for _ in range(reps):
        specs += [("regression", tier, size) for tier in QUIET for size in quiet_sizes]
        specs += [("slow", "5-50", 3.0), ("slow", ">50", 3.0)]
    # healthy deploys watched to +24 h: the long looks' false alarms are counted on them
    specs += [("healthy", None, 1.0)] * (3 if quick else 3 * reps)
    long_n = len(specs)
    for _ in range(reps):
        specs += [("regression", tier, size) for tier in ("5-50", ">50") for size in SIZES]
        specs += [("rollback", "5-50", 10.0), ("rollback", ">50", 3.0)]
    n_healthy = 8 if quick else 14 * reps
    specs += [("healthy", None, 1.0)] * n_healthy
    rollouts: list[Rollout] = []
    events: list[Event] = []
    skipped = 0
    for i, (kind, tier, size) in enumerate(specs):
        long_ = i < long_n
        post = 1445 if long_ else (330 if kind == "rollback" else 65)
        if tier is None:
            cands = list(range(len(services)))
            target = None
        else:
            pairs = tools_in(tier)
            target_s = sorted({s for s, _ in pairs})
            cands = target_s
        where = place(post, cands)
        if where is None:
            skipped += 1
            continue
        s, d = where
        tool = None
        if tier is not None:
            tool = int(rng.choice([t for ss, t in tools_in(tier) if ss == s]))
            target = tool
        fld = services[s].tools[target].fields[0] if target is not None else ""
        if kind == "rollback":
            bad = strategy({"service": s, "minute": d, "version": version(s)})
            bad.strategy = "cutover" if rng.random() < 0.5 else "rolling"
            bad.ramp_min = min(bad.ramp_min, 10)
            bad.effects.append((tool, size, None, fld))  # type: ignore[arg-type]
            rb_min = d + int(rng.integers(20, 36))
            fix_min = rb_min + int(rng.integers(80, 101))
            rb = Rollout(service=s, minute=rb_min, version="?", strategy="cutover")
            fix = strategy({"service": s, "minute": fix_min, "version": version(s)})
            rollouts += [bad, rb, fix]
            events.append(Event("rollback_bad", s, bad, "?", (5, 15), tool, tier, size))
            events.append(Event("rollback", s, rb, "?", FAST_LOOKS))
            events.append(Event("fix", s, fix, "?", FAST_LOOKS))
            continue
        r = strategy({"service": s, "minute": d, "version": version(s)})
        if kind == "slow":
            r.effects.append((tool, size, 60, fld))  # type: ignore[arg-type]
        elif kind == "regression":
            r.effects.append((tool, size, None, fld))  # type: ignore[arg-type]
        rollouts.append(r)
        looks = LONG_LOOKS if long_ else FAST_LOOKS
        ev = Event(kind, s, r, "?", looks, tool, tier, size)
        if kind == "healthy":
            ev.burst = bool(rng.random() < 0.33)
            ev.storm = bool(rng.random() < 0.25)
        events.append(ev)
    if skipped:
        print(
            f"note: {skipped} scored deploys found no free window and were left out",
            file=sys.stderr,
        )
    # version strings in time order per service; a rollback redeploys the version before
    for s in range(len(services)):
        mine = sorted((r for r in rollouts if r.service == s), key=lambda r: r.minute)
        history = ["1.0.0"]
        for r in mine:
            if r.version == "?":
                r.version = history[-2]
            history.append(r.version)
    prev_of: dict[int, str] = {}
    for s in range(len(services)):
        mine = sorted((r for r in rollouts if r.service == s), key=lambda r: r.minute)
        last = "1.0.0"
        for r in mine:
            prev_of[id(r)] = last
            last = r.version
    for ev in events:
        ev.prev_version = prev_of[id(ev.rollout)]
    spikes = []
    spike_start = 1440 if minutes > 1440 + 120 else minutes // 2
    sizes = SIZES * (2 if quick else 3 * reps)
    for j, size in enumerate(sizes):
        s = int(rng.integers(0, len(services)))
        broad = (j // len(SIZES)) % 2 == 0  # every size both broad and narrow
        busy = [t for t, tl in enumerate(services[s].tools) if tl.rate >= 2]
        tool = None if broad or not busy else int(rng.choice(busy))
        spikes.append(
            Spike(
                s,
                tool,
                int(rng.integers(spike_start, minutes - 70)),
                int(rng.integers(10, 61)),
                size,
            )
        )
    return rollouts, events, spikes


# ------------------------------------------------------------------ rows


def _hex(rng: np.random.Generator, n: int, nbytes: int) -> pa.Array:
    """`n` random lower-case hex ids of `nbytes` bytes, as an Arrow string array."""
    raw = binascii.hexlify(rng.bytes(n * nbytes))
    return pa.array(np.frombuffer(raw, dtype=f"S{2 * nbytes}")).cast(pa.string())


def _dict(idx: np.ndarray, values: list[str]) -> pa.Array:
    return pa.DictionaryArray.from_arrays(pa.array(idx.astype(np.int32)), pa.array(values)).cast(
        pa.string()
    )


def generate(  # noqa: PLR0915 - the generator reads best top to bottom
    seed: int,
    *,
    days: float,
    scale: float,
    reps: int,
    quick: bool,
    db: Path,
) -> Fleet:
    """Build the fleet, write its rows and deploy marks into the store file `db`."""
    rng = np.random.default_rng(seed)
    minutes = int(days * 1440)
    # Anchored to today's midnight (UTC), not to the clock: runs on one day (a before and
    # an after) draw the same fleet for a seed, season and working hours included.
    end = datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    start = end - timedelta(minutes=minutes)
    services = make_services(rng, scale)
    rollouts, events, spikes = plan(
        rng, services=services, start=start, minutes=minutes, reps=reps, quick=quick
    )
    shape = season(start, minutes)
    fleet = Fleet(start, minutes, services, rollouts, events, spikes, [], [])
    # traffic bursts: ~2 per service-day at random, plus one in a third of healthy deploys
    for s in range(len(services)):
        for _ in range(rng.poisson(2 * days)):
            fleet.bursts.append(
                (
                    s,
                    int(rng.integers(0, minutes - 40)),
                    int(rng.integers(5, 31)),
                    float(rng.uniform(2, 6)),
                )
            )
        for _ in range(rng.poisson(1.5 * days)):
            fleet.storms.append((s, -1, int(rng.integers(60, minutes - 10))))
    for ev in events:
        d = ev.rollout.minute
        if ev.burst:
            fleet.bursts.append(
                (
                    ev.service,
                    d + int(rng.integers(0, 40)),
                    int(rng.integers(5, 31)),
                    float(rng.uniform(2, 6)),
                )
            )
        if ev.storm:
            fleet.storms.append((ev.service, -1, d + int(rng.integers(2, 40))))
    t_ms = (np.arange(minutes, dtype=np.int64) * 60_000) + int(start.timestamp() * 1000)
    with DuckDBStore(db) as store:
        for s, svc in enumerate(services):
            k = len(svc.tools)
            traffic = shape * hourly_wander(rng, minutes, 0.12, 1)[0]
            for bs, bm, bd, bf in fleet.bursts:
                if bs == s:
                    traffic[bm : bm + bd] *= bf
            err_wander = hourly_wander(rng, minutes, 0.15, k)  # per tool error-rate drift
            shock = rng.gamma(8.0, 1 / 8.0, minutes)  # per-minute shared error noise
            mine = sorted((r for r in rollouts if r.service == s), key=lambda r: r.minute)
            # side 0 = old version, side 1 = new version; between deploys all on side 1
            share = np.ones(minutes)
            ver = [["1.0.0", "1.0.0"] for _ in range(minutes)]
            side_ro: list[list[Rollout | None]] = [[None, None] for _ in range(minutes)]
            cur: Rollout | None = None
            cur_v = "1.0.0"
            bounds = [r.minute for r in mine] + [minutes]
            for j, r in enumerate(mine):
                if j == 0:
                    for m in range(r.minute):
                        side_ro[m] = [None, None]
                lo, hi = r.minute, bounds[j + 1]
                rel = np.arange(hi - lo)
                share[lo:hi] = r.share(rel)
                for m in range(lo, hi):
                    ver[m] = [cur_v, r.version]
                    side_ro[m] = [cur, r]
                cur, cur_v = r, r.version
            n = rng.poisson(np.outer([t.rate for t in svc.tools], traffic))
            n_new = rng.binomial(n, share[None, :])
            calls = np.stack([n - n_new, n_new], axis=2)
            base = np.array([t.ia for t in svc.tools])[:, None] * err_wander
            fleet.calls.append(calls)
            fleet.base_ia.append(base)
            fleet.side_version.append(ver)
            nf_mult = np.ones((k, minutes))
            for sp in spikes:
                if sp.service == s:
                    tools = range(k) if sp.tool is None else [sp.tool]
                    for t in tools:
                        nf_mult[t, sp.minute : sp.minute + sp.dur] *= sp.size
            cols: dict[str, list[np.ndarray]] = defaultdict(list)

            def emit(  # noqa: PLR0917 - one row group, positionally like a record
                minute_idx: np.ndarray,
                tool: int,
                vidx: np.ndarray,
                code: str,
                fld: np.ndarray | None,
                attempt: int,
                trace: np.ndarray | None,
                cols: dict[str, list[np.ndarray]] = cols,
            ) -> None:
                cols["m"].append(minute_idx)
                cols["tool"].append(np.full(len(minute_idx), tool, np.int32))
                cols["ver"].append(vidx)
                cols["code"].append(np.full(len(minute_idx), CODE_IDX[code], np.int32))
                cols["field"].append(
                    fld if fld is not None else np.full(len(minute_idx), -1, np.int32)
                )
                cols["attempt"].append(np.full(len(minute_idx), attempt, np.int32))
                cols["trace"].append(
                    trace if trace is not None else np.full(len(minute_idx), -1, np.int64)
                )

            versions = sorted({v for pair in ver for v in pair})
            v_index = {v: i for i, v in enumerate(versions)}
            ver_idx = np.array([[v_index[a], v_index[b]] for a, b in ver], dtype=np.int32)
            trace_counter = [0]

            def new_traces(count: int, trace_counter: list[int] = trace_counter) -> np.ndarray:
                out = np.arange(trace_counter[0], trace_counter[0] + count, dtype=np.int64)
                trace_counter[0] += count
                return out

            for t, tool in enumerate(svc.tools):
                fidx = np.array([FIELD_IDX[f] for f in tool.fields], dtype=np.int32)
                for side in (0, 1):
                    c = calls[t, :, side]
                    theta = np.ones(minutes)
                    reg_field = np.full(minutes, -1, np.int32)
                    for m0, m1 in _runs(side_ro, side):
                        r = side_ro[m0][side]
                        if r is None:
                            continue
                        for et, size, slow, ef in r.effects:
                            if et != t:
                                continue
                            rel = np.arange(m0, m1) - r.minute
                            if slow is None:
                                theta[m0:m1] = size
                            else:
                                theta[m0:m1] = 1 + (size - 1) * np.clip((rel - slow) / 120, 0, 1)
                            reg_field[m0:m1] = FIELD_IDX[ef]
                    p_ia = np.minimum(0.9, base[t] * shock * theta)
                    x_ia = rng.binomial(c, p_ia)
                    p_nf = np.minimum(0.9, tool.nf * err_wander[t] * shock * nf_mult[t])
                    x_nf = rng.binomial(c - x_ia, p_nf)
                    rest = c - x_ia - x_nf
                    others = []
                    for code, rate in OTHER_CODES:
                        x = rng.binomial(rest, rate)
                        rest = rest - x
                        others.append((code, x))
                    vcol = ver_idx[:, side]
                    # invalid_args first attempts: the excess goes to the regression's field
                    mi = np.repeat(np.arange(minutes), x_ia)
                    excess = np.where(theta > 1, 1 - 1 / theta, 0.0)[mi]
                    fld = fidx[rng.choice(len(fidx), size=len(mi), p=tool.field_p)]
                    to_reg = (rng.random(len(mi)) < excess) & (reg_field[mi] >= 0)
                    fld = np.where(to_reg, reg_field[mi], fld)
                    tr = new_traces(len(mi))
                    emit(mi, t, vcol[mi], "invalid_args", fld, 1, tr)
                    # a retry in the same trace for 40 % of them, failing again 35 % of times
                    retry = rng.random(len(mi)) < 0.4
                    again = rng.random(int(retry.sum())) < 0.35
                    rm, rf, rt = mi[retry], fld[retry], tr[retry]
                    emit(rm[again], t, vcol[rm[again]], "invalid_args", rf[again], 2, rt[again])
                    emit(rm[~again], t, vcol[rm[~again]], "ok", None, 2, rt[~again])
                    mn = np.repeat(np.arange(minutes), x_nf)
                    emit(mn, t, vcol[mn], "not_found", None, 1, None)
                    for code, x in others:
                        mo = np.repeat(np.arange(minutes), x)
                        emit(mo, t, vcol[mo], code, None, 1, None)
                    mk = np.repeat(np.arange(minutes), rest)
                    emit(mk, t, vcol[mk], "ok", None, 1, None)
            # loop storms: 3-10 conversations each retrying one field 6-15 times
            weights = np.sqrt([tl.rate for tl in svc.tools])
            for i, (ss, _, sm) in enumerate(fleet.storms):
                if ss != s or sm >= minutes - 5:
                    continue
                t = int(rng.choice(k, p=weights / weights.sum()))
                fleet.storms[i] = (ss, t, sm)
                fid = FIELD_IDX[svc.tools[t].fields[0]]
                for _ in range(int(rng.integers(3, 11))):
                    reps_n = int(rng.integers(6, 16))
                    mm = np.minimum(sm + np.sort(rng.integers(0, 4, reps_n)), minutes - 1)
                    side = (share[mm] >= 0.5).astype(int)
                    tr = new_traces(1)
                    for a in range(reps_n):
                        emit(
                            mm[a : a + 1],
                            t,
                            ver_idx[mm[a : a + 1], side[a]],
                            "invalid_args",
                            np.array([fid], np.int32),
                            a + 1,
                            tr,
                        )
            m = np.concatenate(cols["m"])
            nrows = len(m)
            trace = np.concatenate(cols["trace"])
            fresh = trace < 0
            trace[fresh] = new_traces(int(fresh.sum()))
            order = np.argsort(m, kind="stable")
            trace_ids_all = _hex(rng, trace_counter[0], 16)
            offs = rng.integers(0, 60_000, nrows)
            attempt = np.concatenate(cols["attempt"])
            offs = np.where(attempt > 1, np.minimum(offs + 1500 * attempt, 59_999), offs)
            ts_ms = t_ms[m] + offs
            fld_all = np.concatenate(cols["field"])
            code_all = np.concatenate(cols["code"])
            tbl = pa.table(
                {
                    "ts": pa.array(ts_ms, pa.timestamp("ms", tz="UTC")),
                    "received_at": pa.array(
                        ts_ms + rng.integers(200, 2500, nrows), pa.timestamp("ms", tz="UTC")
                    ),
                    "service": pa.array([svc.name] * 1).take(pa.array(np.zeros(nrows, np.int32))),
                    "version": _dict(np.concatenate(cols["ver"]), versions),
                    "environment": pa.array([ENV]).take(pa.array(np.zeros(nrows, np.int32))),
                    "tool": _dict(np.concatenate(cols["tool"]), [tl.name for tl in svc.tools]),
                    "code": _dict(code_all, list(CODES)),
                    "raw_code": pa.nulls(nrows, pa.string()),
                    "field": pa.array(
                        np.array(FIELDS, dtype=object)[np.maximum(fld_all, 0)], mask=fld_all < 0
                    ),
                    "trace_id": trace_ids_all.take(pa.array(trace)),
                    "span_id": _hex(rng, nrows, 8),
                    "call_id": pa.nulls(nrows, pa.string()),
                    "session_id": pa.nulls(nrows, pa.string()),
                    "correlation_id": pa.nulls(nrows, pa.string()),
                    "duration_ms": pa.array(rng.gamma(2.0, 60.0, nrows)),
                    "attempt": pa.array(attempt),
                    "retry_after_s": pa.nulls(nrows, pa.float64()),
                    "http_status": pa.nulls(nrows, pa.int32()),
                    "convention": pa.array(["genai"]).take(pa.array(np.zeros(nrows, np.int32))),
                    "source": pa.array(["error_type"]).take(pa.array(np.zeros(nrows, np.int32))),
                    "redactions": pa.array(np.zeros(nrows, np.int32)),
                }
            )
            call_ids = pc.binary_join_element_wise("call_", tbl["span_id"], "")
            corr = pc.binary_join_element_wise(
                "conv_", pc.utf8_slice_codeunits(tbl["trace_id"], 0, 12), ""
            )
            tbl = tbl.set_column(tbl.schema.get_field_index("call_id"), "call_id", call_ids)
            tbl = tbl.set_column(tbl.schema.get_field_index("session_id"), "session_id", corr)
            tbl = tbl.set_column(
                tbl.schema.get_field_index("correlation_id"), "correlation_id", corr
            )
            tbl = tbl.take(pa.array(order))
            # columns the store gained since (correlation ids by migration): null here
            for fld in TOOL_CALLS_SCHEMA:
                if fld.name not in tbl.schema.names:
                    tbl = tbl.append_column(fld.name, pa.nulls(nrows, fld.type))
            for lo in range(0, nrows, 400_000):
                store.append_tool_calls(tbl.slice(lo, 400_000))
            fleet.rows += nrows
            # deploy marks: the sidecar's auto marker at each version's first row, and the
            # pipeline's `errscope deploy` for the marked rollouts
            first = duckdb.sql("SELECT version, min(ts) FROM tbl GROUP BY version").fetchall()
            marks = [
                Deploy(service=svc.name, version=v, ts=t0, environment=ENV, source="auto")
                for v, t0 in first
            ]
            marks += [
                Deploy(
                    service=svc.name,
                    version=r.version,
                    environment=ENV,
                    source="cli",
                    ts=fleet.ts(r.minute) + timedelta(seconds=float(rng.uniform(0, 30))),
                )
                for r in mine
                if r.marked
            ]
            store.add_deploys(marks)
    return fleet


CODES = ("ok", "invalid_args", "not_found", "timeout", "internal_error", "rate_limited")
CODE_IDX = {c: i for i, c in enumerate(CODES)}
FIELD_IDX = {f: i for i, f in enumerate(FIELDS)}


def _runs(side_ro: list[list[Rollout | None]], side: int) -> list[tuple[int, int]]:
    """Maximal minute ranges in which `side` is served by one rollout."""
    out = []
    m0 = 0
    for m in range(1, len(side_ro) + 1):
        if m == len(side_ro) or side_ro[m][side] is not side_ro[m0][side]:
            out.append((m0, m))
            m0 = m
    return out


# ------------------------------------------------------------------ asking errscope


def run_cli(args: list[str]) -> tuple[int, dict[str, object] | None, float]:
    """Run one errscope command; its exit status, parsed JSON and wall seconds."""
    t0 = time.perf_counter()
    done = subprocess.run([ERRSCOPE, *args], capture_output=True, text=True, check=False)
    wall = time.perf_counter() - t0
    try:
        out = json.loads(done.stdout)
    except json.JSONDecodeError:
        out = None
        print(
            f"errscope {' '.join(args[:3])}: rc {done.returncode}: {done.stderr.strip()[:300]}",
            file=sys.stderr,
        )
    return done.returncode, out, wall


def iso(t: datetime) -> str:
    """ISO 8601 UTC, second precision."""
    return t.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass
class Timings:
    """Wall seconds of every CLI call, by command."""

    check: list[float] = field(default_factory=list)
    findings: list[float] = field(default_factory=list)


def ask_checks(
    fleet: Fleet, db: Path, timings: Timings, workers: int
) -> dict[tuple[int, int], dict[str, object]]:
    """`errscope check --as-of D+look` for every event and look; keyed by (event, look)."""
    end = fleet.ts(fleet.minutes)
    jobs = []
    for i, ev in enumerate(fleet.events):
        d = ev.rollout.minute
        for look in ev.looks:
            at = fleet.ts(d + look)
            if at > end:
                continue
            svc = fleet.services[ev.service].name
            args = [
                "check",
                "--service",
                svc,
                "--version",
                ev.rollout.version,
                "--environment",
                ENV,
                "--db",
                str(db),
                "--as-of",
                iso(at),
                "--json",
            ]
            jobs.append(((i, look), args))
    out: dict[tuple[int, int], dict[str, object]] = {}

    def one(job: tuple[tuple[int, int], list[str]]) -> None:
        key, args = job
        rc, doc, wall = run_cli(args)
        timings.check.append(wall)
        out[key] = {"rc": rc, "doc": doc}

    print(f"asking errscope check {len(jobs)} times ...", file=sys.stderr)
    with ThreadPoolExecutor(workers) as pool:
        list(pool.map(one, jobs))
    return out


def ask_findings(
    fleet: Fleet, db: Path, times: list[int], timings: Timings, workers: int
) -> dict[int, list[dict[str, object]]]:
    """`errscope findings --as-of` at each fleet minute; its findings by minute."""
    out: dict[int, list[dict[str, object]]] = {}

    def one(minute: int) -> None:
        _, doc, wall = run_cli(
            ["findings", "--db", str(db), "--as-of", iso(fleet.ts(minute)), "--json"]
        )
        timings.findings.append(wall)
        found = doc.get("findings", []) if isinstance(doc, dict) else []
        out[minute] = list(found) if isinstance(found, list) else []

    todo = sorted(set(times))
    print(f"asking errscope findings {len(todo)} times ...", file=sys.stderr)
    with ThreadPoolExecutor(workers) as pool:
        list(pool.map(one, todo))
    return out


# ------------------------------------------------------------------ reference tests


def _theta(ev: Event, tool: int, rel: np.ndarray) -> np.ndarray:
    theta = np.ones(len(rel))
    for et, size, slow, _ in ev.rollout.effects:
        if et == tool:
            theta = (
                np.full(len(rel), size)
                if slow is None
                else 1 + (size - 1) * np.clip((rel - slow) / 120, 0, 1)
            )
    return theta


def reference_tests(
    fleet: Fleet, db: Path, sims: int, rng: np.random.Generator
) -> dict[tuple[int, int], dict[str, bool]]:
    """Naive 2x, Bonferroni binomial and the Poisson oracle, per (event, look)."""
    con = duckdb.connect(str(db), read_only=True)
    out: dict[tuple[int, int], dict[str, bool]] = {}
    for i, ev in enumerate(fleet.events):
        svc = fleet.services[ev.service]
        k = len(svc.tools)
        alpha = ALPHA / (k * len(LONG_LOOKS))
        d = ev.rollout.minute
        names = [t.name for t in svc.tools]

        def counts(sql: str, *params: object) -> dict[str, tuple[int, int]]:
            rows = con.execute(sql, list(params)).fetchall()
            return {r[0]: (int(r[1]), int(r[2])) for r in rows}

        q = (
            "SELECT tool, count(*), count(*) FILTER (WHERE code = 'invalid_args') FROM tool_calls "
            "WHERE service = ? AND ts >= ? AND ts < ? {} GROUP BY tool"
        )
        pre60 = counts(q.format(""), svc.name, fleet.ts(d - 60), fleet.ts(d))
        pre120 = counts(
            q.format("AND version = ?"), svc.name, fleet.ts(d - 120), fleet.ts(d), ev.prev_version
        )
        # the oracle: true base rate of each tool on the new version, Poisson first attempts
        looks = [lk for lk in ev.looks if d + lk <= fleet.minutes]
        mu0 = np.zeros((k, len(looks)))
        mu1 = np.zeros((k, len(looks)))
        for t in range(k):
            for j, lk in enumerate(looks):
                sl = slice(d, d + lk)
                n1 = fleet.calls[ev.service][t, sl, 1]
                base = fleet.base_ia[ev.service][t, sl]
                mu0[t, j] = float((n1 * base).sum())
                mu1[t, j] = float((n1 * base * _theta(ev, t, np.arange(lk))).sum())
        crit = stats.poisson.isf(alpha, mu0) + 1  # smallest c with P(X >= c) <= alpha
        inc = np.diff(np.concatenate([np.zeros((k, 1)), mu1], axis=1), axis=1)
        paths = rng.poisson(np.broadcast_to(inc, (sims, *inc.shape))).cumsum(axis=2)
        oracle_hit = (paths >= crit[None]).any(axis=1)  # (sims, looks): any tool
        for j, lk in enumerate(looks):
            post = counts(
                q.format("AND version = ?"),
                svc.name,
                fleet.ts(d),
                fleet.ts(d + lk),
                ev.rollout.version,
            )
            naive = binom = False
            for name in names:
                n1, x1 = post.get(name, (0, 0))
                n0, x0 = pre60.get(name, (0, 0))
                if x1 > 0 and n1 > 0 and (n0 == 0 or x1 / n1 > 2 * x0 / n0):
                    naive = True
                m0, y0 = pre120.get(name, (0, 0))
                if x1 > 0 and m0 > 0 and n1 > 0:
                    p = n1 / (n1 + m0)
                    if stats.binomtest(x1, x1 + y0, p, alternative="greater").pvalue < alpha:
                        binom = True
            out[(i, lk)] = {
                "naive": naive,
                "binomial": binom,
                "oracle": float(oracle_hit[:, : j + 1].any(axis=1).mean()),  # type: ignore[dict-item]
            }
    con.close()
    return out


# ------------------------------------------------------------------ scoring


def outcomes(
    fleet: Fleet,
    checks: dict[tuple[int, int], dict[str, object]],
    refs: dict[tuple[int, int], dict[str, bool]],
    found: dict[int, list[dict[str, object]]],
) -> dict[str, object]:
    """Per-event and per-spike outcomes of one seed's fleet."""
    per_event = []
    for i, ev in enumerate(fleet.events):
        row: dict[str, object] = {
            "kind": ev.kind,
            "service": fleet.services[ev.service].name,
            "version": ev.rollout.version,
            "previous": ev.prev_version,
            "strategy": ev.rollout.strategy,
            "marked": ev.rollout.marked,
            "tier": ev.tier,
            "size": ev.size,
            "burst": ev.burst,
            "storm": ev.storm,
            "tool": fleet.services[ev.service].tools[ev.tool].name if ev.tool is not None else None,
            "deploy_at": iso(fleet.ts(ev.rollout.minute)),
            "looks": {},
        }
        es_hit = named = False
        for lk in ev.looks:
            c = checks.get((i, lk))
            if c is None:
                continue
            doc = c["doc"] if isinstance(c["doc"], dict) else {}
            verdict = doc.get("verdict")
            hit = verdict == "regression"
            es_hit = es_hit or hit
            tools = [f.get("tool") for f in doc.get("findings", []) or []]
            named = named or (hit and row["tool"] in tools)
            ref = refs[(i, lk)]
            row["looks"][lk] = {  # type: ignore[index]
                "errscope": es_hit,
                "verdict": verdict,
                "rc": c["rc"],
                "named_tool": named,
                "reason": doc.get("reason"),
                "naive": ref["naive"],
                "binomial": ref["binomial"],
                "oracle": ref["oracle"],
            }
        per_event.append(row)
    # cumulative "by look": errscope, naive, binomial hit at any look so far
    for row in per_event:
        acc = {"naive": False, "binomial": False}
        for lk in sorted(row["looks"]):  # type: ignore[call-overload]
            cell = row["looks"][lk]  # type: ignore[index]
            for key, before in acc.items():
                acc[key] = before or cell[key]
                cell[key] = acc[key]
    spike_rows, false_spikes, covered = spike_outcomes(fleet, found)
    return {
        "events": per_event,
        "spikes": spike_rows,
        "false_spikes": false_spikes,
        "service_days": covered,
    }


DETECTORS = ("errscope", "naive", "binomial", "oracle")


def tables(
    per_event: list[dict[str, object]],
    spike_rows: list[dict[str, object]],
    false_spikes: list[dict[str, object]],
    service_days: float,
) -> dict[str, object]:
    """Recall by tier x size x look, false alarms by condition, spike recall and false alarms."""
    dets = DETECTORS

    def rate(rows: list[dict[str, object]], det: str, look: int) -> tuple[float | None, int]:
        vals = [float(r["looks"][look][det]) for r in rows if look in r["looks"]]  # type: ignore[index, operator]
        return (sum(vals) / len(vals) if vals else None), len(vals)

    recall = []
    for kind in ("regression", "slow", "rollback_bad"):
        for tier in TIERS:
            for size in SIZES:
                rows = [
                    r
                    for r in per_event
                    if r["kind"] == kind and r["tier"] == tier and r["size"] == size
                ]
                if not rows:
                    continue
                for det in dets:
                    cell: dict[str, object] = {
                        "kind": kind,
                        "tier": tier,
                        "size": size,
                        "detector": det,
                        "n": len(rows),
                    }
                    for look in LONG_LOOKS:
                        cell[f"by_{look}"] = rate(rows, det, look)[0]
                    if det == "errscope":
                        cell["named_tool_60"] = _share(
                            [
                                r["looks"].get(60, r["looks"].get(15, {})).get("named_tool", False)
                                for r in rows
                            ]
                        )  # type: ignore[union-attr]
                    recall.append(cell)
    healthy = [r for r in per_event if r["kind"] in ("healthy", "rollback", "fix")]
    fa = []
    for group, rows in (
        ("all healthy", healthy),
        (
            "plain",
            [r for r in healthy if r["kind"] == "healthy" and not r["burst"] and not r["storm"]],
        ),
        ("with burst", [r for r in healthy if r["burst"]]),
        ("with storm", [r for r in healthy if r["storm"]]),
        ("rollback redeploy", [r for r in healthy if r["kind"] == "rollback"]),
        ("fix after rollback", [r for r in healthy if r["kind"] == "fix"]),
        ("canary", [r for r in healthy if r["strategy"] == "canary"]),
        ("watched to +24 h", [r for r in healthy if 1440 in r["looks"]]),  # type: ignore[operator]
        ("unmarked (auto only)", [r for r in healthy if not r["marked"]]),
    ):
        if not rows:
            continue
        cell = {"group": group, "n": len(rows)}
        for det in dets:
            cell[det] = 100 * (rate(rows, det, 60)[0] or 0.0)
            # any alarm at any look: +60 for most, +24 h for those watched that long
            last = [float(r["looks"][max(r["looks"])][det]) for r in rows if r["looks"]]  # type: ignore[call-overload, index]
            cell[f"{det}_any_look"] = 100 * sum(last) / len(last) if last else 0.0
        cell["insufficient_at_60"] = _share(
            [r["looks"].get(60, {}).get("verdict") == "insufficient_data" for r in rows]
        )  # type: ignore[union-attr]
        fa.append(cell)
    spike_table = []
    for size in SIZES:
        for scope in ("broad", "narrow", "all"):
            rows = [
                r
                for r in spike_rows
                if r["size"] == size and (scope == "all" or r["scope"] == scope)
            ]
            if rows:
                spike_table.append(
                    {
                        "size": size,
                        "scope": scope,
                        "n": len(rows),
                        **{
                            f"by_{lk}": _share([r["looks"][lk] for r in rows]) for lk in SPIKE_LOOKS
                        },
                    }
                )  # type: ignore[index]
    ge2 = [r for r in spike_rows if r["size"] >= 2]  # type: ignore[operator]
    return {
        "recall": recall,
        "false_alarms": fa,
        "spike_recall": spike_table,
        "spike_recall_ge2_by_60": _share([r["looks"][60] for r in ge2]),  # type: ignore[index]
        "false_spikes": len(false_spikes),
        "false_spike_examples": false_spikes[:5],
        "spike_service_days": service_days,
        "false_spikes_per_service_day": len(false_spikes) / service_days if service_days else None,
    }


def spike_outcomes(
    fleet: Fleet, found: dict[int, list[dict[str, object]]]
) -> tuple[list[dict[str, object]], list[dict[str, object]], float]:
    """Each true spike's detection by look; the spike findings matching no true spike."""
    spike_rows = []
    truth = fleet.spikes

    def matches(f: dict[str, object], sp: Spike) -> bool:
        if f.get("service") != fleet.services[sp.service].name:
            return False
        try:
            ws = datetime.fromisoformat(str(f["window_start"]))
            we = datetime.fromisoformat(str(f["window_end"]))
        except (KeyError, ValueError):
            return False
        lo, hi = fleet.ts(sp.minute - 5), fleet.ts(sp.minute + sp.dur + 10)
        if we < lo or ws > hi:
            return False
        return sp.tool is None or f.get("tool") in (
            None,
            fleet.services[sp.service].tools[sp.tool].name,
        )

    for sp in truth:
        hit = False
        cell = {
            "service": fleet.services[sp.service].name,
            "scope": "broad" if sp.tool is None else "narrow",
            "size": sp.size,
            "dur": sp.dur,
            "start": iso(fleet.ts(sp.minute)),
            "tool": None if sp.tool is None else fleet.services[sp.service].tools[sp.tool].name,
            # weekday-mean calls/min of what spiked (the service for a broad spike), and
            # the not_found it makes in a 5-minute slot before the spike
            "calls_per_min": fleet.services[sp.service].rate
            if sp.tool is None
            else fleet.services[sp.service].tools[sp.tool].rate,
            "not_found_per_slot": 5
            * sum(
                t.rate * t.nf
                for j, t in enumerate(fleet.services[sp.service].tools)
                if sp.tool in (None, j)
            ),
            "looks": {},
        }
        for lk in SPIKE_LOOKS:
            fs = [f for f in found.get(sp.minute + lk, []) if f.get("kind") == "spike"]
            hit = hit or any(matches(f, sp) for f in fs)
            cell["looks"][lk] = hit  # type: ignore[index]
        spike_rows.append(cell)
    seen: dict[tuple[object, ...], dict[str, object]] = {}
    for fs in found.values():
        for f in fs:
            if f.get("kind") == "spike":
                seen[(f.get("service"), f.get("tool"), f.get("window_start"))] = f
    false_spikes = [f for f in seen.values() if not any(matches(f, sp) for sp in truth)]
    return spike_rows, false_spikes, _covered_days(fleet, sorted(found))


def _share(values: list[object]) -> float | None:
    return sum(bool(v) for v in values) / len(values) if values else None


def _covered_days(fleet: Fleet, times: list[int]) -> float:
    """Service-days the findings calls watched, each call the last SPIKE_REACH_MIN minutes."""
    covered = {m for t in times for m in range(t - SPIKE_REACH_MIN, t)}
    return len(covered) / 1440 * len(fleet.services)


# ------------------------------------------------------------------ latency


def latency(db: Path, fleet: Fleet, repeat: int) -> dict[str, float]:
    """Median wall of `check` and `findings` on the store, beside anchors from the same run.

    Anchors: `errscope findings --help` (the CLI's start-up, no store), a fresh Python
    process running one plain `SELECT service, tool, code, count(*) ... GROUP BY` over
    the whole table in DuckDB, and that GROUP BY in this process.
    """
    end = fleet.minutes - 1
    busiest = max(fleet.rollouts, key=lambda r: fleet.services[r.service].rate)
    svc = fleet.services[busiest.service].name
    as_of = iso(fleet.ts(min(end, busiest.minute + 15)))
    walls: dict[str, list[float]] = defaultdict(list)
    group_by = "SELECT service, tool, code, count(*) FROM tool_calls GROUP BY ALL"
    probe = (
        f"import duckdb; duckdb.connect({str(db)!r}, read_only=True).sql({group_by!r}).fetchall()"
    )
    for _ in range(repeat):
        walls["check"].append(
            run_cli(
                [
                    "check",
                    "--service",
                    svc,
                    "--version",
                    busiest.version,
                    "--environment",
                    ENV,
                    "--db",
                    str(db),
                    "--as-of",
                    as_of,
                    "--json",
                ]
            )[2]
        )
        walls["findings"].append(
            run_cli(["findings", "--db", str(db), "--as-of", iso(fleet.ts(end)), "--json"])[2]
        )
        t0 = time.perf_counter()
        subprocess.run([ERRSCOPE, "findings", "--help"], capture_output=True, check=True)
        walls["startup (findings --help)"].append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-c", probe], capture_output=True, check=True)
        walls["python + duckdb GROUP BY (process)"].append(time.perf_counter() - t0)
        con = duckdb.connect(str(db), read_only=True)
        t0 = time.perf_counter()
        con.sql(group_by).fetchall()
        walls["duckdb GROUP BY (in process)"].append(time.perf_counter() - t0)
        con.close()
    return {k: statistics.median(v) for k, v in walls.items()}


# ------------------------------------------------------------------ report


def _pct(x: object) -> str:
    return "    -" if x is None else f"{100 * float(x):4.0f}%"  # type: ignore[arg-type]


def print_report(t: dict[str, object], lat: dict[str, float], rows: int) -> None:
    """The tables, for a terminal."""
    print("\nDeploy regressions: recall by look (minutes after the deploy), cumulative")
    print(
        f"{'kind':12} {'tier':>5} {'size':>5} {'detector':9} {'n':>3}  "
        f"{'+5':>5} {'+15':>5} {'+60':>5} {'+6h':>5} {'+24h':>5}  tool@60"
    )
    for c in t["recall"]:  # type: ignore[attr-defined]
        named = _pct(c.get("named_tool_60")) if c["detector"] == "errscope" else ""
        print(
            f"{c['kind']:12} {c['tier']:>5} {c['size']:5.1f} {c['detector']:9} {c['n']:3d}  "
            + " ".join(_pct(c[f"by_{lk}"]) for lk in LONG_LOOKS)
            + f"  {named}"
        )
    print(
        "\nFalse alarms per 100 healthy deploys (any alarm by +60 min | at any look, "
        "+24 h for those watched that long)"
    )
    print(
        f"{'group':22} {'n':>4} " + " ".join(f"{d:>15}" for d in DETECTORS) + "  es insufficient@60"
    )
    for c in t["false_alarms"]:  # type: ignore[attr-defined]
        print(
            f"{c['group']:22} {c['n']:4d} "
            + " ".join(f"{c[d]:7.1f}|{c[d + '_any_look']:<7.1f}" for d in DETECTORS)
            + f"  {_pct(c['insufficient_at_60'])}"
        )
    print("\nnot_found spikes (errscope findings): recall by look after the spike's start")
    for c in t["spike_recall"]:  # type: ignore[attr-defined]
        print(
            f"  {c['size']:5.1f}x {c['scope']:7} n={c['n']:3d} "
            + " ".join(f"+{lk}:{_pct(c[f'by_{lk}'])}" for lk in SPIKE_LOOKS)
        )
    print(
        f"  recall at >= 2x by +60: {_pct(t['spike_recall_ge2_by_60'])}; false spike alarms "
        f"{t['false_spikes']} over {t['spike_service_days']:.1f} service-days watched = "
        f"{t['false_spikes_per_service_day'] or 0:.2f} per service-day"
    )
    print(f"\nLatency on {rows:,} rows (median wall seconds)")
    for k, v in lat.items():
        print(f"  {k:40} {v:7.2f}")


def main() -> None:  # noqa: PLR0915
    """Parse flags, build each seed's fleet, ask errscope, score, print and write JSON."""
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--quick", action="store_true", help="3 days at 0.4x traffic, fewer events")
    ap.add_argument("--days", type=float, default=6.0)
    ap.add_argument("--seeds", default="1")
    ap.add_argument("--scale", type=float, default=1.0, help="traffic multiplier")
    ap.add_argument("--rows", type=int, default=0, help="scale traffic to about this many rows")
    ap.add_argument("--reps", type=int, default=2, help="regression cells per tier x size")
    ap.add_argument("--workers", type=int, default=2, help="errscope calls at once")
    ap.add_argument("--sims", type=int, default=2000, help="oracle Monte Carlo paths")
    ap.add_argument(
        "--sweep-min",
        type=int,
        default=0,
        help="findings every N min from day 2 on, for false spikes (default 30 quick, 60 full)",
    )
    ap.add_argument("--latency-only", action="store_true")
    ap.add_argument("--keep", type=Path, help="keep the store files in this folder")
    ap.add_argument("--json", type=Path)
    a = ap.parse_args()
    # 3 days: room for the quiet and slow cases' 24 h windows and healthy ones beside them
    days = 3.0 if a.quick else a.days
    reps = 1 if a.quick else a.reps
    scale = 0.4 if a.quick and a.scale == 1.0 else a.scale
    sweep = a.sweep_min or (30 if a.quick else 60)
    if a.rows:
        weekday_mean = 0.9
        scale = a.rows / (sum(SERVICE_RATES) * 1440 * days * weekday_mean * 1.01)
    seeds = [int(x) for x in a.seeds.split(",")]
    events: list[dict[str, object]] = []
    spikes: list[dict[str, object]] = []
    false_spikes: list[dict[str, object]] = []
    service_days = 0.0
    timings = Timings()
    lat: dict[str, float] = {}
    rows = 0
    folder = a.keep or Path(tempfile.mkdtemp(prefix="errscope-fleet-"))
    folder.mkdir(parents=True, exist_ok=True)
    t_start = time.perf_counter()
    for seed in seeds:
        db = folder / f"fleet-{seed}.duckdb"
        db.unlink(missing_ok=True)
        t0 = time.perf_counter()
        fleet = generate(seed, days=days, scale=scale, reps=reps, quick=a.quick, db=db)
        rows = fleet.rows
        tiers = defaultdict(int)
        for sv in fleet.services:
            for tl in sv.tools:
                tiers[tl.tier] += 1
        print(
            f"seed {seed}: {fleet.rows:,} rows, {len(fleet.rollouts)} deploys, "
            f"{len(fleet.events)} scored, {len(fleet.spikes)} spikes, tools by tier "
            f"{dict(tiers)}, written in {time.perf_counter() - t0:.0f} s",
            file=sys.stderr,
        )
        if a.latency_only:
            lat = latency(db, fleet, 5)
            continue
        checks = ask_checks(fleet, db, timings, a.workers)
        looks = [
            sp.minute + lk
            for sp in fleet.spikes
            for lk in SPIKE_LOOKS
            if sp.minute + lk <= fleet.minutes
        ]
        looks += list(range(1440, fleet.minutes, sweep))
        found = ask_findings(fleet, db, looks, timings, a.workers)
        refs = reference_tests(fleet, db, a.sims, np.random.default_rng(seed + 1000))
        out = outcomes(fleet, checks, refs, found)
        for r in out["events"]:  # type: ignore[attr-defined]
            r["seed"] = seed
        events += out["events"]  # type: ignore[arg-type]
        spikes += out["spikes"]  # type: ignore[arg-type]
        false_spikes += out["false_spikes"]  # type: ignore[arg-type]
        service_days += float(out["service_days"])  # type: ignore[arg-type]
        if seed == seeds[-1]:
            lat = latency(db, fleet, 3)
        print(f"seed {seed} done at {time.perf_counter() - t_start:.0f} s", file=sys.stderr)
    if timings.check:
        lat["check (median over the run)"] = statistics.median(timings.check)
    if timings.findings:
        lat["findings (median over the run)"] = statistics.median(timings.findings)
    t = tables(events, spikes, false_spikes, service_days) if events else {}
    if t:
        print_report(t, lat, rows)
    else:
        print(f"Latency on {rows:,} rows (median wall seconds)")
        for k, v in lat.items():
            print(f"  {k:40} {v:7.2f}")
    if a.json:
        a.json.write_text(
            json.dumps(
                {
                    "command": sys.argv,
                    "seeds": seeds,
                    "days": days,
                    "rows_last_seed": rows,
                    "latency_s": lat,
                    **t,
                    "events": events,
                    "spike_events": spikes,
                },
                indent=1,
                default=str,
            )
        )
    print(f"wall {time.perf_counter() - t_start:.0f} s; stores in {folder}", file=sys.stderr)


if __name__ == "__main__":
    main()
