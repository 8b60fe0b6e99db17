"""`errscope check` and `errscope findings` on a store file: exit codes and the JSON shape."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import IO, Any

import orjson
import pytest
from click.testing import CliRunner

from errscope.collector.cli.gate import check, findings
from errscope.collector.record import Deploy, ToolCall
from errscope.collector.store.duckdb import DuckDBStore
from tests.queries.traffic import DEPLOY_TS, Scenario

REQUIRED_KEYS = {
    "kind",
    "service",
    "version",
    "environment",
    "tool",
    "code",
    "field",
    "detected_at",
    "window_start",
    "window_end",
    "calls_before",
    "errors_before",
    "calls_after",
    "errors_after",
    "ratio",
    "ratio_ci",
    "p_adjusted",
    "label",
    "correlation_ids",
}


def _db(tmp_path: Path, scenario: Scenario) -> Path:
    path = tmp_path / "errscope.duckdb"
    with DuckDBStore(path) as store:
        scenario.load(store)
    return path


def _as_of(minutes: int) -> str:
    return (DEPLOY_TS + timedelta(minutes=minutes)).isoformat()


def _check_json(db: Path, minutes: int) -> dict[str, Any]:
    """`check --json` on billing-agent 2.0 in prod, as of `minutes` after the deploy."""
    args = ["--service", "billing-agent", "--version", "2.0", "--environment", "prod"]
    result = CliRunner().invoke(
        check, [*args, "--db", str(db), "--as-of", _as_of(minutes), "--json"]
    )
    body: dict[str, Any] = orjson.loads(result.output)
    return body


@pytest.mark.parametrize(
    ("scenario", "minutes", "exit_code", "verdict"),
    [
        pytest.param(Scenario(), 20, 0, "healthy", id="healthy"),
        pytest.param(Scenario(rates_new={"get_job": 0.09}), 20, 1, "regression", id="regression"),
        pytest.param(Scenario(), 3, 3, "insufficient_data", id="insufficient"),
    ],
)
def test_check_exit_codes_and_json(
    tmp_path: Path, scenario: Scenario, minutes: int, exit_code: int, verdict: str
) -> None:
    """check exits 0/1/3 by verdict and prints the documented JSON object."""
    db = _db(tmp_path, scenario)
    args = [
        "--service",
        "billing-agent",
        "--version",
        "2.0",
        "--environment",
        "prod",
        "--db",
        str(db),
        "--as-of",
        _as_of(minutes),
        "--json",
    ]
    result = CliRunner().invoke(check, args)
    assert result.exit_code == exit_code, result.output
    body = orjson.loads(result.output)
    assert body["verdict"] == verdict
    for finding in body["findings"]:
        assert finding.keys() >= REQUIRED_KEYS


def test_check_replays_the_wait_from_as_of(tmp_path: Path) -> None:
    """With --as-of and --wait, check re-evaluates later times until a verdict is reached."""
    db = _db(tmp_path, Scenario())
    args = [
        "--service",
        "billing-agent",
        "--version",
        "2.0",
        "--db",
        str(db),
        "--as-of",
        _as_of(3),
        "--wait",
        "20m",
        "--interval",
        "1m",
        "--json",
    ]
    result = CliRunner().invoke(check, args)
    assert result.exit_code == 0, result.output
    assert orjson.loads(result.output)["as_of"] == "2026-11-30T10:15:00Z"


@pytest.mark.parametrize(
    "extra",
    [
        pytest.param(["--wait", "soon"], id="bad-wait"),
        pytest.param(["--codes", ""], id="no-codes"),
        pytest.param([], id="no-source"),
    ],
)
def test_check_usage_errors_exit_2(tmp_path: Path, extra: list[str]) -> None:
    """A bad flag or a missing source is a usage error (exit 2), never a verdict."""
    db = _db(tmp_path, Scenario(minutes_before=1, minutes_after=1))
    args = ["--service", "billing-agent", "--version", "2.0", *extra]
    if extra:
        args += ["--db", str(db)]
    result = CliRunner().invoke(check, args)
    assert result.exit_code == 2


def test_findings_lists_the_regression_as_json(tmp_path: Path) -> None:
    """findings --json lists the current deploy regression with the documented keys."""
    db = _db(tmp_path, Scenario(rates_new={"get_job": 0.09}))
    result = CliRunner().invoke(findings, ["--db", str(db), "--as-of", _as_of(20), "--json"])
    assert result.exit_code == 0, result.output
    body = orjson.loads(result.output)
    kinds = {(f["kind"], f["tool"]) for f in body["findings"]}
    assert ("deploy_regression", "get_job") in kinds
    assert all(f.keys() >= REQUIRED_KEYS for f in body["findings"])


def test_findings_table_output(tmp_path: Path) -> None:
    """findings without --json prints a table, or says there are none."""
    db = _db(tmp_path, Scenario())
    result = CliRunner().invoke(findings, ["--db", str(db), "--as-of", _as_of(20)])
    assert result.exit_code == 0, result.output
    assert "no findings" in result.output


def test_check_refuses_to_guess_the_environment(tmp_path: Path) -> None:
    """A version deployed to two environments is judged in the one named, never in one
    picked silently (a broken staging hid behind a clean prod)."""
    db = _db(tmp_path, Scenario())
    with DuckDBStore(db) as store:
        store.add_deploys([Deploy("billing-agent", "2.0", DEPLOY_TS, "staging")])
    base = ["--service", "billing-agent", "--version", "2.0", "--db", str(db)]
    result = CliRunner().invoke(check, [*base, "--as-of", _as_of(20)])
    assert result.exit_code == 2, result.output
    assert "several environments: prod, staging" in result.output
    assert "--environment" in result.output
    named = CliRunner().invoke(check, [*base, "--environment", "prod", "--as-of", _as_of(20)])
    assert named.exit_code == 0, named.output


def test_a_pass_needs_fifteen_minutes_observed_not_fifteen_buckets(tmp_path: Path) -> None:
    """A deploy marked at 10:00:50 has 13 min 11 s of data at 10:14:01: not yet healthy."""
    path = tmp_path / "errscope.duckdb"
    marked = DEPLOY_TS + timedelta(seconds=50)
    with DuckDBStore(path) as store:
        store.append_tool_calls(Scenario().calls())
        store.add_deploys(
            [
                Deploy("billing-agent", "1.0", DEPLOY_TS - timedelta(days=1), "prod"),
                Deploy("billing-agent", "2.0", marked, "prod"),
            ]
        )
    base = ["--service", "billing-agent", "--version", "2.0", "--environment", "prod"]
    early = (marked + timedelta(minutes=13, seconds=11)).isoformat()
    result = CliRunner().invoke(check, [*base, "--db", str(path), "--as-of", early, "--json"])
    assert result.exit_code == 3, result.output
    assert "observed 13 min 11 s" in orjson.loads(result.output)["reason"]
    later = (marked + timedelta(minutes=15)).isoformat()
    result = CliRunner().invoke(check, [*base, "--db", str(path), "--as-of", later])
    assert result.exit_code == 0, result.output


def test_after_a_rollback_the_baseline_is_the_version_that_was_serving(tmp_path: Path) -> None:
    """1.0 -> 2.0 (broken) -> rolled back to 1.0 -> 2.1 (as broken): 2.1 is judged against
    1.0, which was serving, not against 2.0, which the markers list before it."""
    from tests.queries.traffic import call

    def minutes(first: int, last: int, version: str, every: int) -> list[ToolCall]:
        rows = []
        for minute in range(first, last):
            start = DEPLOY_TS + timedelta(minutes=minute)
            for tool in ("get_job", "list_jobs"):
                for i in range(60):
                    failing = i % every == 0
                    rows.append(
                        call(
                            start + timedelta(seconds=i),
                            tool=tool,
                            version=version,
                            code="invalid_args" if failing else "ok",
                            field="job_id" if failing else None,
                        )
                    )
        return rows

    path = tmp_path / "errscope.duckdb"
    with DuckDBStore(path) as store:
        store.append_tool_calls(
            minutes(-120, -60, "1.0", 30)
            + minutes(-60, -30, "2.0", 10)  # 2.0 fails three times as often
            + minutes(-30, 0, "1.0", 30)  # rolled back
            + minutes(0, 20, "2.1", 10)  # as broken as 2.0
        )
        store.add_deploys(
            [
                Deploy("billing-agent", "1.0", DEPLOY_TS - timedelta(days=1), "prod"),
                Deploy("billing-agent", "2.0", DEPLOY_TS - timedelta(minutes=60), "prod"),
                Deploy("billing-agent", "2.1", DEPLOY_TS, "prod"),
            ]
        )
    args = ["--service", "billing-agent", "--version", "2.1", "--environment", "prod"]
    result = CliRunner().invoke(check, [*args, "--db", str(path), "--as-of", _as_of(20), "--json"])
    assert result.exit_code == 1, result.output
    body = orjson.loads(result.output)
    assert body["verdict"] == "regression"
    assert {f["previous_version"] for f in body["findings"]} == {"1.0"}


def test_as_of_knows_only_what_had_been_received(tmp_path: Path) -> None:
    """Calls stamped 10:00-10:30 but received at 11:30 (a skewed clock, a back-fill) were
    unknown to a gate at 10:30: replayed as of then, the verdict is what it was then."""
    from dataclasses import replace

    late = DEPLOY_TS + timedelta(minutes=90)
    calls = [
        replace(c, received_at=late) if c.version == "2.0" else c
        for c in Scenario(rates_new={"get_job": 0.09}).calls()
    ]
    path = tmp_path / "errscope.duckdb"
    with DuckDBStore(path) as store:
        store.append_tool_calls(calls)
        store.add_deploys(
            [
                Deploy("billing-agent", "1.0", DEPLOY_TS - timedelta(days=1), "prod"),
                Deploy("billing-agent", "2.0", DEPLOY_TS, "prod"),
            ]
        )
    args = ["--service", "billing-agent", "--version", "2.0", "--environment", "prod"]
    then = CliRunner().invoke(check, [*args, "--db", str(path), "--as-of", _as_of(30)])
    assert then.exit_code == 3, then.output
    after = CliRunner().invoke(check, [*args, "--db", str(path), "--as-of", _as_of(95)])
    assert after.exit_code == 1, after.output


def test_detected_at_is_the_evaluation_time(tmp_path: Path) -> None:
    """Past the 2-hour horizon the window ends at the horizon, but detected_at is as-of."""
    body = _check_json(_db(tmp_path, Scenario(rates_new={"get_job": 0.09})), 150)
    assert body["verdict"] == "regression", body
    for finding in body["findings"]:
        assert finding["detected_at"] == body["as_of"]
        assert finding["window_end"] <= body["as_of"]


def test_the_reason_names_the_tool_not_the_pool_behind_it(tmp_path: Path) -> None:
    """A one-tool regression's reason names that tool, not also the service-wide pool."""
    body = _check_json(_db(tmp_path, Scenario(rates_new={"get_job": 0.3})), 20)
    assert body["verdict"] == "regression", body
    assert body["reason"].startswith("regression: get_job/invalid_args x")
    assert "*/" not in body["reason"]


def test_known_by_now_reads_back_filled_rows_at_an_earlier_as_of(tmp_path: Path) -> None:
    """Rows received today for yesterday's times (a back-fill, an import) are invisible to a
    faithful as-of replay; --known-by now counts them, and the regression is found."""
    scenario = Scenario(rates_new={"get_job": 0.09})
    today = datetime.now(UTC)
    path = tmp_path / "errscope.duckdb"
    with DuckDBStore(path) as store:
        store.append_tool_calls([replace(c, received_at=today) for c in scenario.calls()])
        store.add_deploys(
            [
                Deploy("billing-agent", "1.0", DEPLOY_TS - timedelta(days=1), "prod"),
                Deploy("billing-agent", "2.0", DEPLOY_TS, "prod"),
            ]
        )
    base = ["--service", "billing-agent", "--version", "2.0", "--environment", "prod"]
    base += ["--db", str(path), "--as-of", _as_of(20)]
    replay = CliRunner().invoke(check, base)
    assert replay.exit_code == 3, replay.output
    known = CliRunner().invoke(check, [*base, "--known-by", "now"])
    assert known.exit_code == 1, known.output
    listed = CliRunner().invoke(findings, [*base[6:], "--known-by", "now", "--json"])
    assert listed.exit_code == 0, listed.output
    kinds = {f["kind"] for f in orjson.loads(listed.output)["findings"]}
    assert "deploy_regression" in kinds


# ------------------------------------------------------------------ the gate's own inputs

_GATE = ["--service", "billing-agent", "--version", "2.0", "--environment", "prod"]


@pytest.mark.parametrize("as_of", ["+15min", "9999-12-31T23:59:59Z"])
def test_a_future_as_of_is_refused(tmp_path: Path, as_of: str) -> None:
    """A gate judged "as of" a time to come passed on data that does not exist yet (and
    year 9999 overflowed): both are usage errors now."""
    if as_of == "+15min":
        as_of = (datetime.now(UTC) + timedelta(minutes=15)).isoformat()
    db = _db(tmp_path, Scenario(minutes_before=1, minutes_after=1))
    result = CliRunner().invoke(check, [*_GATE, "--db", str(db), "--as-of", as_of])
    assert result.exit_code == 2, result.output
    assert "in the future" in result.output


def test_known_by_before_as_of_is_refused(tmp_path: Path) -> None:
    """`--known-by` earlier than the time judged froze the data while `--wait` moved on:
    a regression passed on two minutes of rows."""
    db = _db(tmp_path, Scenario(rates_new={"get_job": 0.09}))
    result = CliRunner().invoke(
        check,
        [*_GATE, "--db", str(db), "--as-of", _as_of(5), "--known-by", _as_of(2)],
    )
    assert result.exit_code == 2, result.output
    assert "--known-by" in result.output


def test_a_repeated_code_does_not_weaken_the_gate(tmp_path: Path) -> None:
    """`--codes invalid_args,invalid_args` added a test of nothing to the adjusted family:
    the same regression read INSUFFICIENT DATA.  Codes are tested once each."""
    db = _db(tmp_path, Scenario(rates_new={"get_job": 0.09}))
    base = [*_GATE, "--db", str(db), "--as-of", _as_of(20), "--json"]
    once = CliRunner().invoke(check, [*base, "--codes", "invalid_args"])
    twice = CliRunner().invoke(check, [*base, "--codes", "invalid_args, invalid_args"])
    assert once.exit_code == twice.exit_code == 1, twice.output
    assert orjson.loads(once.output)["findings"] == orjson.loads(twice.output)["findings"]


def test_a_replay_does_not_run_past_the_clock(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A deploy 5 minutes old, replayed from its start with `--wait 30m`: the replay ran
    ahead of the clock and passed at once on minutes not yet lived.  Now it waits for
    real time like a live gate, so it is still waiting when interrupted."""
    import signal
    import subprocess
    import sys

    from tests.queries import traffic

    deployed = datetime.now(UTC).replace(second=0, microsecond=0) - timedelta(minutes=5)
    monkeypatch.setattr(traffic, "DEPLOY_TS", deployed)
    db = _db(tmp_path, Scenario(minutes_after=5))
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "errscope.collector.cli",
            "check",
            *_GATE,
            "--db",
            str(db),
            "--as-of",
            deployed.isoformat(),
            "--wait",
            "30m",
            "--interval",
            "1m",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    # The replay of the first 5 minutes is quick; then it must say it waits for the clock.
    assert process.stderr is not None
    first = _first_line(process.stderr, deadline_s=300)
    still_waiting = process.poll() is None
    process.send_signal(signal.SIGINT)
    stdout, stderr = process.communicate(timeout=60)
    assert first.startswith("waiting: "), first + stdout + stderr
    assert still_waiting, stdout + stderr
    assert process.returncode == 130


def _first_line(stream: IO[str], *, deadline_s: float) -> str:
    """The first line `stream` gives within `deadline_s` (a thread reads it, so a process
    that never writes fails the test at the deadline instead of hanging it)."""
    import threading

    got: list[str] = []
    reader = threading.Thread(target=lambda: got.append(stream.readline()), daemon=True)
    reader.start()
    reader.join(deadline_s)
    return got[0] if got else ""


def test_check_json_names_the_environment_it_judged(tmp_path: Path) -> None:
    """Without --environment, a version deployed to one environment is judged there, and
    the JSON says which (it said null while its findings said prod)."""
    db = _db(tmp_path, Scenario())
    result = CliRunner().invoke(
        check,
        [
            *("--service", "billing-agent", "--version", "2.0", "--db", str(db)),
            *("--as-of", _as_of(20), "--json"),
        ],
    )
    assert result.exit_code == 0, result.output
    assert orjson.loads(result.output)["environment"] == "prod"


@pytest.mark.parametrize(
    ("command", "args"),
    [
        pytest.param(check, [*_GATE, "--known-by", "2h"], id="check-without-as-of"),
        pytest.param(findings, ["--as-of", "1h", "--known-by", "2h"], id="findings"),
    ],
)
def test_known_by_before_the_time_judged_is_refused_everywhere(
    tmp_path: Path, command: Any, args: list[str]
) -> None:
    """`check --known-by 2h` without --as-of was silently overridden by now, and
    `findings` took a --known-by before its --as-of: both are refused, as documented."""
    db = _db(tmp_path, Scenario(minutes_before=1, minutes_after=1))
    result = CliRunner().invoke(command, [*args, "--db", str(db)])
    assert result.exit_code == 2, result.output
    assert "--known-by" in result.output
