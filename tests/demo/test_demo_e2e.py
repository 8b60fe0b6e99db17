"""End to end: the demo's back-fill through a real `errscope serve`, then detection and the store.

One back-fill (3 hours, the shortest history the story holds) is sent with the real OTLP
exporter to a real sidecar subprocess on a temporary store; the sidecar is then stopped
(it drains, commits and exits 0) and the store file is read directly.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import duckdb
import pytest

from errscope.collector.demo import BackfillReport, Demo, DemoOptions, Target
from errscope.collector.demo.fleet import (
    BILLING,
    BILLING_NEW,
    BROKEN_FIELD,
    BROKEN_TOOL,
    OPS,
    SPIKE_TOOL,
    SUPPORT,
)
from errscope.queries import detect
from errscope.queries.findings import FindingKind, Verdict
from errscope.queries.source import FileSource
from tests.demo.procs import ERRSCOPE, start, stop

pytestmark = pytest.mark.slow

HOURS = 3.0


@dataclass(frozen=True)
class Backfilled:
    report: BackfillReport
    store: Path


# The back-fill sends hours of history in seconds, so every row is received after the
# history's end: judge that end on everything received since (a replay with the default
# known_by would know nothing, as a live gate at that time would have).
KNOWN_NOW = datetime(2100, 1, 1, tzinfo=UTC)


@pytest.fixture(scope="module")
def backfilled(tmp_path_factory: pytest.TempPathFactory) -> Backfilled:
    tmp = tmp_path_factory.mktemp("demo")
    store = tmp / "errscope.duckdb"
    argv = [*ERRSCOPE, "serve", "--store", str(store)]
    argv += ["--otlp-grpc", "127.0.0.1:0", "--otlp-http", "127.0.0.1:0", "--api", "127.0.0.1:0"]
    sidecar = start(argv, tmp / "sidecar.log")
    demo: Demo | None = None
    try:
        ready = sidecar.wait_json("ready", timeout_s=60)
        target = Target(endpoint=f"http://{ready['otlp_http']}", api=f"http://{ready['api']}")
        demo = Demo(DemoOptions(target=target, hours=HOURS, seed=7))
        report = demo.backfill()
        demo.close()
        demo = None
        assert stop(sidecar) == 0, sidecar.tail()
    finally:
        if demo is not None:
            demo.close()
        stop(sidecar)
    return Backfilled(report, store)


def test_every_span_is_accepted_and_the_deploy_is_marked(backfilled: Backfilled) -> None:
    """The sidecar acknowledged every exported span, and the deploy mark got through."""
    report = backfilled.report
    assert not report.interrupted
    assert report.spans_failed == 0
    assert report.spans_exported > report.tool_calls > 1000
    assert report.deploy_marked, report.deploy_mark_reason
    with duckdb.connect(str(backfilled.store), read_only=True) as con:
        stored = con.execute("SELECT count(*) FROM tool_calls").fetchone()
        marks = con.execute(
            "SELECT min(ts), list(DISTINCT source) FROM deploys WHERE service = ? AND version = ?",
            [BILLING, BILLING_NEW],
        ).fetchone()
    assert stored is not None
    assert stored[0] == report.tool_calls
    assert marks is not None
    assert marks[0] == report.timeline.deploy_at  # the API mark is exact; 'auto' comes later
    assert "api" in marks[1]


def test_detection_flags_the_broken_tool_and_field(backfilled: Backfilled) -> None:
    """As of the end of the back-fill, the deploy is a regression of search_invoices' since."""
    report = detect.detect_deploy(
        FileSource(backfilled.store),
        BILLING,
        BILLING_NEW,
        "prod",
        as_of=backfilled.report.timeline.end,
        known_by=KNOWN_NOW,
    )
    assert report.verdict is Verdict.REGRESSION, report.reason
    flagged = {
        (f.tool, f.code, f.field)
        for f in report.findings
        if f.kind in (FindingKind.DEPLOY_REGRESSION, FindingKind.NEW_SIGNATURE)
    }
    assert (BROKEN_TOOL, "invalid_args", BROKEN_FIELD) in flagged
    # Only the broken tool regressed: no other tool is named.
    assert {tool for tool, _, _ in flagged} <= {BROKEN_TOOL, None}


def test_the_not_found_spike_is_not_deploy_related(backfilled: Backfilled) -> None:
    """support-agent's get_order spike is found and labelled not deploy-related."""
    spikes = detect.detect_spikes(
        FileSource(backfilled.store), as_of=backfilled.report.timeline.end, known_by=KNOWN_NOW
    )
    found = {(f.service, f.tool): f for f in spikes}
    assert (SUPPORT, SPIKE_TOOL) in found, [f.summary for f in spikes]
    assert "not_deploy_related" in found[(SUPPORT, SPIKE_TOOL)].label
    assert found[(SUPPORT, SPIKE_TOOL)].traces_after > 0  # failing traces, not left at 0
    assert all(f.service != BILLING for f in spikes)


def test_the_story_s_other_behaviours_are_in_the_store(backfilled: Backfilled) -> None:
    """Guessed ids, retry after denied, an unknown code, tracebacks and redaction counts."""
    misuse = detect.detect_loop_misuse(
        FileSource(backfilled.store), as_of=backfilled.report.timeline.end, known_by=KNOWN_NOW
    )
    rules = {(f.service, f.tool, f.label[0]) for f in misuse}
    assert (SUPPORT, SPIKE_TOOL, "not_found_repeated") in rules
    assert (SUPPORT, "cancel_order", "retry_after_denied") in rules
    with duckdb.connect(str(backfilled.store), read_only=True) as con:
        unknown = con.execute(
            "SELECT DISTINCT raw_code FROM tool_calls WHERE code = 'unknown'"
        ).fetchall()
        tracebacks = con.execute("SELECT DISTINCT service FROM tracebacks").fetchall()
        redacted = con.execute(
            "SELECT DISTINCT service FROM redactions WHERE rule NOT LIKE 'exception%'"
        ).fetchall()
    assert unknown == [("quota_exhausted",)]
    assert {s for (s,) in tracebacks} == {SUPPORT, OPS}
    assert {OPS, SUPPORT} <= {s for (s,) in redacted}


def test_no_planted_secret_is_anywhere_in_the_store(backfilled: Backfilled) -> None:
    """No random core of any planted secret is in any string column of any table, or the file."""
    cores = {s.core for s in backfilled.report.planted}
    assert len(cores) >= 16
    scanned = 0
    with duckdb.connect(str(backfilled.store), read_only=True) as con:
        columns = con.execute(
            "SELECT table_name, column_name FROM information_schema.columns "
            "WHERE table_schema = 'main' AND data_type IN ('VARCHAR', 'VARCHAR[]', 'JSON')"
        ).fetchall()
        tables = {t for (t,) in con.execute("SHOW TABLES").fetchall()}
        assert {"tool_calls", "deploys", "tracebacks", "redactions"} <= tables
        for table, column in columns:
            values = con.execute(f'SELECT DISTINCT "{column}"::VARCHAR FROM "{table}"').fetchall()
            for (value,) in values:
                if value is None:
                    continue
                scanned += 1
                leaked = [core for core in cores if core in value]
                assert not leaked, f"{table}.{column} holds a planted secret"
    assert scanned > 100
    raw = backfilled.store.read_bytes()
    assert not [core for core in cores if core.encode() in raw]
