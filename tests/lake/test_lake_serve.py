"""Three real `errscope serve` processes on one lake, fed by the OTel SDK's own exporters.

The scale-out promise end to end: several sidecars (separate OS processes, one DuckLake
with its catalog in PostgreSQL) take OTLP exports over HTTP and gRPC from several client
threads at once, some batches replayed to a different sidecar after they were
acknowledged and some sent to all three at the same moment, while one sidecar's query API
serves reads.  Afterwards the lake holds every acknowledged span exactly once, the three
sidecars' stored-counters add up to that number, and detection on the lake finds exactly
what it finds on the same traffic stored in an ordinary DuckDB file by a fourth sidecar.
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Tracer

from errscope.collector.store.duckdb import DuckDBStore
from errscope.collector.store.lake import DuckLakeStore
from errscope.queries.detect import detect_all, detect_deploy
from errscope.queries.findings import Finding, FindingKind, Verdict
from errscope.queries.source import ApiSource
from tests.queries.traffic import DEPLOY_TS, Scenario
from tests.sidecar.harness import Served, grpc_exporter, http_exporter, send

pytestmark = [pytest.mark.postgres, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
SERVICE = "billing-agent"
#: One deploy, 1.0 -> 2.0, after which get_job starts failing on a field it never failed on.
ALL_RECEIVED = datetime(2100, 1, 1, tzinfo=UTC)  # detection's known_by: every row counts
SCENARIO = Scenario(calls_per_min=20, minutes_before=60, minutes_after=10, new_field="jobId")
BATCH = 150  # spans per export request
READY_TIMEOUT_S = 120.0
SEND_ATTEMPTS = 4

Key = tuple[str, str]


# ------------------------------------------------------------------ processes


def _serve(store: str, log: Path, *extra: str) -> subprocess.Popen[str]:
    """Start `errscope serve` on `store` with every listener on an ephemeral port."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "ERRSCOPE_DUCKDB_EXTENSIONS": "wheel"}
    command = [sys.executable, "-m", "errscope.collector.cli", "serve", "--store", store, *extra]
    command += ["--otlp-grpc", "127.0.0.1:0", "--otlp-http", "127.0.0.1:0", "--api", "127.0.0.1:0"]
    with log.open("a") as log_file:
        return subprocess.Popen(
            command,
            stdout=subprocess.PIPE,
            stderr=log_file,
            text=True,
            env=env,
            cwd=ROOT,
        )


def _ready(process: subprocess.Popen[str], log: Path, deadline: float) -> Served:
    """Wait (bounded) for the ready line; the sidecar prints nothing else on stdout."""
    stdout = process.stdout
    assert stdout is not None
    try:
        readable, _, _ = select.select([stdout], [], [], max(deadline - time.monotonic(), 0.1))
        line = stdout.readline() if readable else ""
    finally:
        stdout.close()
    if not line:
        raise AssertionError(f"sidecar not ready in time: {log.read_text()[-3000:]}")
    ready = json.loads(line)
    return Served(process, ready["otlp_grpc"], ready["otlp_http"], ready["api"], log, log)


def _stop(process: subprocess.Popen[str]) -> int | None:
    """SIGTERM, wait, SIGKILL if it hangs; the exit code of a clean stop, else None."""
    if process.poll() is not None:
        return process.returncode
    process.send_signal(signal.SIGTERM)
    try:
        return process.wait(45)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(10)
        return None


@contextmanager
def _fleet(stores: Sequence[tuple[str, Sequence[str]]], tmp_path: Path) -> Iterator[list[Served]]:
    """Start every sidecar at once (a new lake's first ATTACH races too); always stop them."""
    processes: list[subprocess.Popen[str]] = []
    try:
        logs = [tmp_path / f"serve-{i}.log" for i in range(len(stores))]
        for (store, extra), log in zip(stores, logs, strict=True):
            processes.append(_serve(store, log, *extra))
        deadline = time.monotonic() + READY_TIMEOUT_S
        yield [_ready(p, log, deadline) for p, log in zip(processes, logs, strict=True)]
    finally:
        for process in processes:
            if process.stdout is not None and not process.stdout.closed:
                process.stdout.close()
            _stop(process)


# ------------------------------------------------------------------ traffic


def _spans(shift: timedelta) -> list[ReadableSpan]:
    """The scenario's calls as finished SDK tool spans, moved by `shift`, in time order."""
    memories: dict[str, InMemorySpanExporter] = {}
    tracers: dict[str, Tracer] = {}
    providers: list[TracerProvider] = []
    for version in ("1.0", "2.0"):
        resource = {
            "service.name": SERVICE,
            "service.version": version,
            "deployment.environment.name": "prod",
        }
        provider = TracerProvider(resource=Resource.create(resource))
        memories[version] = InMemorySpanExporter()
        provider.add_span_processor(SimpleSpanProcessor(memories[version]))
        tracers[version] = provider.get_tracer("tests.lake")
        providers.append(provider)
    for call in SCENARIO.calls():
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": call.tool,
            "errscope.code": call.code,
            "errscope.correlation_id": call.correlation_id,
        }
        if call.field:
            attributes["errscope.field"] = call.field
        start = int((call.ts + shift).timestamp() * 1e9)
        span = tracers[str(call.version)].start_span(
            f"execute_tool {call.tool}", attributes=attributes, start_time=start
        )
        span.end(end_time=start + 2_000_000)
    for provider in providers:
        provider.shutdown()
    spans = [s for m in memories.values() for s in m.get_finished_spans()]
    return sorted(spans, key=lambda s: s.start_time or 0)


def _key(span: ReadableSpan) -> Key:
    context = span.context
    assert context is not None
    return f"{context.trace_id:032x}", f"{context.span_id:016x}"


@dataclass
class Ledger:
    """What the clients were told: acknowledged keys, refused exports, batches never stored."""

    acked: set[Key] = field(default_factory=set)
    acked_exports: int = 0
    refused_exports: int = 0
    replays: int = 0
    lost: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def record(self, batch: Sequence[ReadableSpan], ok: bool) -> bool:
        """Note one export's answer; a refused one is re-sent by the caller."""
        with self.lock:
            if ok:
                self.acked.update(_key(s) for s in batch)
                self.acked_exports += 1
            else:
                self.refused_exports += 1
        return ok


class Clients:
    """One SDK exporter per (thread, sidecar, protocol), all shut down at the end."""

    def __init__(self, fleet: Sequence[Served]) -> None:
        self.fleet = fleet
        self._all: list[SpanExporter] = []

    def exporters(self) -> dict[tuple[int, str], SpanExporter]:
        made: dict[tuple[int, str], SpanExporter] = {}
        for i, served in enumerate(self.fleet):
            made[(i, "http")] = http_exporter(served, timeout=20)
            made[(i, "grpc")] = grpc_exporter(served, timeout=20)
        self._all.extend(made.values())
        return made

    def close(self) -> None:
        while self._all:
            self._all.pop().shutdown()


def _other(protocol: str) -> str:
    return "grpc" if protocol == "http" else "http"


def _deliver(
    ledger: Ledger,
    exporters: dict[tuple[int, str], SpanExporter],
    batch: Sequence[ReadableSpan],
    first: int,
    protocol: str,
    what: str,
) -> int | None:
    """Send until acknowledged, moving on to the next sidecar after a refusal (as a client
    with several endpoints would); the sidecar that acknowledged, or None."""
    n = len({i for i, _ in exporters})
    for attempt in range(SEND_ATTEMPTS):
        target = (first + attempt) % n
        if ledger.record(batch, send(exporters[(target, protocol)], batch)):
            return target
    with ledger.lock:
        ledger.lost.append(what)
    return None


def _sender(
    clients: Clients,
    batches: Sequence[Sequence[ReadableSpan]],
    thread: int,
    ledger: Ledger,
) -> None:
    """Deliver each batch to the sidecars in turn; replay every third one elsewhere."""
    exporters = clients.exporters()
    protocol = "http" if thread % 2 == 0 else "grpc"
    n = len(clients.fleet)
    for j, batch in enumerate(batches):
        target = _deliver(ledger, exporters, batch, thread + j, protocol, f"{thread}/{j}")
        if target is not None and j % 3 == 0:
            # A replay of an acknowledged batch, to another sidecar, by the other protocol.
            again = (target + 1) % n
            _deliver(ledger, exporters, batch, again, _other(protocol), f"{thread}/{j} replay")
            with ledger.lock:
                ledger.replays += 1


def _racer(clients: Clients, batches: Sequence[Sequence[ReadableSpan]], ledger: Ledger) -> None:
    """Send each batch to every sidecar at the same moment (the write-skew case)."""
    n = len(clients.fleet)
    barrier = threading.Barrier(n, timeout=60)

    def one(i: int) -> None:
        exporters = clients.exporters()
        for j, batch in enumerate(batches):
            barrier.wait()
            _deliver(ledger, exporters, batch, i, "http" if i % 2 else "grpc", f"race {j}/{i}")

    threads = [
        threading.Thread(target=one, args=(i,), name=f"race-{i}", daemon=True) for i in range(n)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)


@dataclass
class Reader:
    """Reads through one sidecar's query API while the others write."""

    source: ApiSource
    as_of: datetime
    since: datetime
    stop: threading.Event = field(default_factory=threading.Event)
    reads: int = 0
    errors: list[str] = field(default_factory=list)

    def run(self) -> None:
        while not self.stop.is_set():
            try:
                _total(self.source, self.since, self.as_of)
                detect_all(self.source, as_of=self.as_of)
                self.reads += 1
            except Exception as exc:  # noqa: BLE001 - collected and asserted on
                self.errors.append(f"{type(exc).__name__}: {exc}")
            self.stop.wait(0.2)


def _total(source: ApiSource, since: datetime, until: datetime) -> int:
    table = source.run(
        "error_rates", {"since": since, "until": until, "bucket_s": 7 * 86400}
    ).to_pylist()
    return sum(int(r["calls"]) for r in table)


def _mark(served: Served, version: str, ts: datetime) -> None:
    """Mark a deploy through the sidecar's API."""
    mark = {"service": SERVICE, "version": version, "environment": "prod", "ts": ts.isoformat()}
    request = urllib.request.Request(
        served.url("/v1/deploys"),
        data=json.dumps(mark).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        assert response.status == 201


def _stored_total(served: Served) -> int:
    status, body = served.get("/metrics")
    assert status == 200, body
    for line in body.decode().splitlines():
        if line.startswith("errscope_tool_calls_stored_total "):
            return int(float(line.split()[1]))
    raise AssertionError("no errscope_tool_calls_stored_total in /metrics")


def _summary(findings: Sequence[Finding]) -> list[tuple[object, ...]]:
    """What must agree between stores: what was found, where, and on which counts."""
    rows = [
        (
            f.kind.value,
            f.tool,
            f.code,
            f.field,
            f.version,
            f.calls_before,
            f.errors_before,
            f.calls_after,
            f.errors_after,
            f.traces_after,
        )
        for f in findings
    ]
    return sorted(rows, key=repr)


_ROWS = (
    "SELECT trace_id, span_id, ts, service, version, environment, tool, code, field, "
    "correlation_id FROM tool_calls ORDER BY trace_id, span_id"
)
_DUPLICATES = (
    "SELECT trace_id, span_id, count(*) FROM tool_calls GROUP BY trace_id, span_id "
    "HAVING count(*) > 1"
)
_EVER_INSERTED = (
    "SELECT count(*) FROM ducklake_table_insertions('lake', 'main', 'tool_calls', 0, $last)"
)
_DEPLOY_DUPLICATES = (
    "SELECT service, version, environment, source, count(*) FROM deploys "
    "GROUP BY ALL HAVING count(*) > 1"
)


# ------------------------------------------------------------------ the test


def test_three_sidecars_on_one_lake_store_each_acknowledged_span_once(
    lake_url: str, data_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Exactly the acknowledged spans, once each; detection as on a DuckDB file."""
    monkeypatch.setenv("ERRSCOPE_DUCKDB_EXTENSIONS", "wheel")
    started = time.monotonic()
    deploy_ts = datetime.now(UTC).replace(second=0, microsecond=0) - timedelta(minutes=20)
    shift = deploy_ts - DEPLOY_TS
    as_of = deploy_ts + timedelta(minutes=SCENARIO.minutes_after)
    since = deploy_ts - timedelta(days=2)
    spans = _spans(shift)
    all_keys = {_key(s) for s in spans}
    assert len(all_keys) == len(spans) > 3000
    batches = [spans[i : i + BATCH] for i in range(0, len(spans), BATCH)]
    raced = batches[5::9]  # a few batches every sidecar receives at the same moment
    regular = [b for b in batches if not any(b is r for r in raced)]
    threads = 4

    lake = ["--data-path", str(data_path)]
    file_store = tmp_path / "file.duckdb"
    stores = [(lake_url, lake)] * 3 + [(str(file_store), [])]
    # Leaving the block closes the clients before the sidecars stop (see `_fleet`).
    with _fleet(stores, tmp_path) as fleet, ExitStack() as stack:
        ready_s = time.monotonic() - started
        lakes, filed = fleet[:3], fleet[3]
        clients = Clients(lakes)
        stack.callback(clients.close)
        file_clients = Clients([filed])
        stack.callback(file_clients.close)

        # Deploy marks through the API of different sidecars; the 2.0 mark twice.
        for served, version, ts in (
            (lakes[0], "1.0", deploy_ts - timedelta(days=1)),
            (lakes[1], "2.0", deploy_ts),
            (lakes[2], "2.0", deploy_ts),
            (filed, "1.0", deploy_ts - timedelta(days=1)),
            (filed, "2.0", deploy_ts),
        ):
            _mark(served, version, ts)

        ledger, file_ledger = Ledger(), Ledger()
        reader = Reader(ApiSource(f"http://{lakes[2].api}"), as_of, since)
        workers = [
            threading.Thread(
                target=_sender,
                args=(clients, regular[t::threads], t, ledger),
                name=f"send-{t}",
                daemon=True,
            )
            for t in range(threads)
        ]
        workers.append(threading.Thread(target=_racer, args=(clients, raced, ledger), daemon=True))
        workers.append(
            threading.Thread(
                target=_sender, args=(file_clients, batches, 0, file_ledger), daemon=True
            )
        )
        reading = threading.Thread(target=reader.run, name="reader", daemon=True)
        reading.start()
        send_started = time.monotonic()
        try:
            for w in workers:
                w.start()
            deadline = time.monotonic() + 150
            for w in workers:
                w.join(max(deadline - time.monotonic(), 0.1))
            assert not any(w.is_alive() for w in workers), "senders did not finish in time"
        finally:
            reader.stop.set()
            reading.join(60)
        send_s = time.monotonic() - send_started

        # Every export was acknowledged (in the end), replays included.
        assert ledger.lost == []
        assert file_ledger.lost == []
        assert ledger.acked == all_keys == file_ledger.acked
        assert ledger.replays >= len(regular) // 3
        assert reader.errors == []
        assert reader.reads >= 1

        # Each sidecar counts only what it newly stored: the counts add up, nothing twice.
        assert sum(_stored_total(s) for s in lakes) == len(ledger.acked)
        assert _stored_total(filed) == len(file_ledger.acked)

        # Detection through a lake sidecar's API equals detection on the DuckDB file.
        lake_source = ApiSource(f"http://{lakes[0].api}")
        file_source = ApiSource(f"http://{filed.api}")
        assert _total(lake_source, since, as_of) == len(all_keys)
        # The spans were sent just now with times up to 10 minutes ago: judge that moment
        # on everything received since (known_by), as a post-incident review would.
        known = {"as_of": as_of, "known_by": ALL_RECEIVED}
        lake_findings = detect_all(lake_source, **known)
        file_findings = detect_all(file_source, **known)
        lake_report = detect_deploy(lake_source, SERVICE, "2.0", "prod", **known)
        file_report = detect_deploy(file_source, SERVICE, "2.0", "prod", **known)
        assert _summary(lake_findings) == _summary(file_findings)
        assert (lake_report.verdict, _summary(lake_report.findings)) == (
            file_report.verdict,
            _summary(file_report.findings),
        )
        # ... and it is not an empty comparison: the broken field is found both ways.
        assert lake_report.verdict is Verdict.REGRESSION
        found = {(f.kind, f.tool, f.code, f.field) for f in lake_findings}
        assert {
            (FindingKind.DEPLOY_REGRESSION, "get_job", "invalid_args", "jobId"),
            (FindingKind.NEW_SIGNATURE, "get_job", "invalid_args", "jobId"),
        } <= found

        # Clients first: a sidecar's SIGTERM drain waits for every open OTLP/HTTP keep-alive
        # connection (the SDK's HTTP exporter keeps one), so with them open it never exits.
        clients.close()
        file_clients.close()
        for served in fleet:
            assert _stop(served.process) == 0, served.log.read_text()[-3000:]

    # The lake itself: every acknowledged span once, the same rows as the file.
    with DuckLakeStore(lake_url, read_only=True) as store:
        cursor = store.cursor()
        assert cursor.execute(_DUPLICATES).fetchall() == []
        assert cursor.execute(_DEPLOY_DUPLICATES).fetchall() == []
        lake_rows = cursor.execute(_ROWS).fetchall()
        lake_deploys = cursor.execute("SELECT count(*) FROM deploys").fetchone()
        # Rows any commit ever inserted, copies since removed included.
        last = cursor.execute("SELECT max(snapshot_id) FROM lake.snapshots()").fetchone()
        assert last is not None
        ever = cursor.execute(_EVER_INSERTED, {"last": last[0]}).fetchone()
    with DuckDBStore(file_store, read_only=True) as store:
        file_rows = store.cursor().execute(_ROWS).fetchall()
    assert len(lake_rows) == len(ledger.acked)
    assert {(r[0], r[1]) for r in lake_rows} == ledger.acked
    assert lake_rows == file_rows
    assert lake_deploys == (4,)  # 1.0 and 2.0, each marked by the API and seen by a sidecar
    assert ever is not None
    assert ever[0] >= len(lake_rows)
    print(  # shown with -s: what happened and where the time went
        f"ready {ready_s:.1f}s; {len(spans)} spans, {ledger.replays} replays, {len(raced)} "
        f"batches raced to all sidecars, sent in {send_s:.1f}s ({ledger.acked_exports} "
        f"exports acknowledged, {ledger.refused_exports} refused and re-sent); "
        f"{ever[0] - len(lake_rows)} concurrent copies written and removed; "
        f"{reader.reads} concurrent reads; total {time.monotonic() - started:.1f}s"
    )
