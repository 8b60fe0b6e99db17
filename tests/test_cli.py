"""The `errscope` command line, run as a real process: output, exit codes, and one-line errors."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Sequence
from datetime import timedelta
from pathlib import Path

import pytest

from errscope.collector.store.duckdb import DuckDBStore
from tests.factories import T0, held_by_another_process, make_call

ERRSCOPE = [sys.executable, "-m", "errscope.collector.cli"]


def run(args: Sequence[str], **kwargs: object) -> subprocess.CompletedProcess[str]:
    """Run errscope with `args`; never raises on a non-zero exit."""
    env = {**os.environ, "COLUMNS": "200"}
    return subprocess.run(
        [*ERRSCOPE, *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,  # a busy machine can take a minute to start Python
        check=False,
        **kwargs,
    )  # type: ignore[call-overload]


@pytest.fixture
def db(tmp_path: Path) -> Path:
    """A store file with a few calls, closed so the CLI can open it."""
    path = tmp_path / "errscope.duckdb"
    with DuckDBStore(path) as store:
        store.append_tool_calls(
            [
                make_call(code="ok"),
                make_call(code="invalid_args", field="job_id"),
                make_call(code="not_found"),
                make_call(ts=T0 - timedelta(days=45)),
            ]
        )
    return path


def test_catalog_prints_every_code() -> None:
    """`errscope catalog` prints each code with its retry policy."""
    result = run(["catalog"])
    assert result.returncode == 0, result.stderr
    for code in (
        "invalid_args",
        "not_found",
        "denied",
        "rate_limited",
        "timeout",
        "internal_error",
    ):
        assert code in result.stdout


def test_catalog_json() -> None:
    """`errscope catalog --format json` is machine-readable."""
    result = run(["catalog", "--format", "json"])
    codes = {entry["code"]: entry for entry in json.loads(result.stdout)["codes"]}
    assert codes["denied"]["max_tries"] == 1
    assert codes["invalid_args"]["scope"] == "field"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param(
            "[codes.quota]\nmeaning='x'\nretry_by='nobody'\nmax_tries=1\nscope='call'\non_cap='stop'\nhint='h'\ncolor='#000000'\nbogus=1\n",
            "error[unknown_key] codes.quota.bogus",
            id="unknown-key",
        ),
        pytest.param(
            "[codes.not_found]\nmeaning='x'\n",
            "error[redefined_builtin] codes.not_found",
            id="redefined",
        ),
        pytest.param(
            "[mappings.denied]\nhttp=[404]\n",
            "error[conflicting_mapping] mappings.denied.http",
            id="two-codes-one-status",
        ),
    ],
)
def test_catalog_check_bad_file(tmp_path: Path, text: str, expected: str) -> None:
    """A bad user catalog exits 2 with one line naming the entry and field, no traceback."""
    path = tmp_path / "user.toml"
    path.write_text(text)
    result = run(["catalog", "--check", str(path)])
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith(expected)
    assert "Traceback" not in result.stderr


def test_catalog_check_good_file(tmp_path: Path) -> None:
    """A valid user catalog is reported valid."""
    path = tmp_path / "user.toml"
    path.write_text("[mappings.not_found]\nexceptions = ['orders.MissingOrder']\n")
    result = run(["catalog", "--check", str(path)])
    assert result.returncode == 0, result.stderr
    assert "valid" in result.stdout


@pytest.mark.parametrize("fmt", ["table", "csv", "json"])
def test_query_formats(db: Path, fmt: str) -> None:
    """`errscope query` prints a named query's rows as a table, CSV or JSON."""
    result = run(
        [
            "query",
            "error_rates",
            "--db",
            str(db),
            "-p",
            "since=2026-11-30T08:00:00Z",
            "-p",
            "until=2026-11-30T10:00:00Z",
            "--format",
            fmt,
        ]
    )
    assert result.returncode == 0, result.stderr
    assert "invalid_args" in result.stdout
    if fmt == "json":
        rows = json.loads(result.stdout)
        assert sum(r["calls"] for r in rows) == 3
    if fmt == "csv":
        assert result.stdout.splitlines()[0] == "bucket,service,tool,code,calls"


def test_query_unknown_name_lists_names(db: Path) -> None:
    """An unknown query name exits 2 and lists the names there are."""
    result = run(["query", "nope", "--db", str(db)])
    assert result.returncode == 2
    assert "error[unknown_query] nope" in result.stderr
    assert "calls_by_correlation" in result.stderr
    assert "error_rates" in result.stderr


def test_query_missing_param_is_named(db: Path) -> None:
    """A missing required parameter is named in one line."""
    result = run(["query", "calls_by_correlation", "--db", str(db)])
    assert result.returncode == 2
    assert result.stderr.startswith("error[missing_param] calls_by_correlation.id")


def test_query_bad_param_value(db: Path) -> None:
    """A parameter of the wrong type is refused with a hint of the right one."""
    result = run(["query", "error_rates", "--db", str(db), "-p", "bucket_s=often"])
    assert result.returncode == 2
    assert "error[bad_param_value] error_rates.bucket_s" in result.stderr


def test_query_list() -> None:
    """`errscope query --list` names every query with its parameters."""
    result = run(["query", "--list"])
    assert "calls_by_correlation" in result.stdout
    assert "id=REQUIRED" in result.stdout


def test_query_on_file_held_by_sidecar(db: Path) -> None:
    """A database held by another process gives one line saying to read through the query API."""
    with held_by_another_process(db):
        result = run(["query", "error_rates", "--db", str(db)])
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1
    assert lines[0].startswith("error[locked]")
    assert "holds the file" in lines[0]
    assert "--api" in lines[0]


def test_query_missing_file(tmp_path: Path) -> None:
    """A database path that does not exist is one clear line, and no file is created."""
    missing = tmp_path / "nope.duckdb"
    result = run(["query", "error_rates", "--db", str(missing)])
    assert result.returncode == 2
    assert "error[unreadable]" in result.stderr
    assert not missing.exists()


def test_prune(db: Path) -> None:
    """`errscope prune --older-than 30d` deletes old rows and says how many."""
    result = run(["prune", "--db", str(db), "--older-than", "30d"])
    assert result.returncode == 0, result.stderr
    assert "tool_calls 1" in result.stdout
    with DuckDBStore(db, read_only=True) as store:
        assert store.count("tool_calls") == 3


def test_prune_bad_duration(db: Path) -> None:
    """A bad duration is a usage error, not a traceback."""
    result = run(["prune", "--db", str(db), "--older-than", "a while"])
    assert result.returncode == 2
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize(
    "args",
    [
        pytest.param(["prune", "--older-than", "99999999h"], id="prune"),
        pytest.param(
            ["check", "--service", "s", "--version", "1", "--as-of", "99999999h"], id="as-of"
        ),
        pytest.param(
            ["check", "--service", "s", "--version", "1", "--wait", "99999999h"], id="wait"
        ),
        pytest.param(["findings", "--as-of", "99999999h"], id="findings"),
        pytest.param(
            ["deploy", "--service", "s", "--version", "1", "--time", "99999999h"], id="deploy"
        ),
    ],
)
def test_a_huge_duration_is_a_usage_error(db: Path, args: list[str]) -> None:
    """A duration past datetime's range is refused in one line naming the flag, exit 2."""
    result = run([*args, "--db", str(db)])
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    assert "longer than 1,000 years" in result.stderr
    with DuckDBStore(db, read_only=True) as store:
        assert store.count("tool_calls") == 4  # nothing pruned
        assert store.count("deploys") == 0


@pytest.mark.parametrize("command", ["check", "findings"])
def test_an_unknown_code_is_refused_not_passed(db: Path, command: str) -> None:
    """A misspelled --codes is a usage error (2): a gate must not pass on a code nobody has."""
    args = ["--service", "s", "--version", "1"] if command == "check" else []
    result = run([command, *args, "--db", str(db), "--codes", "invalid_args,bogus"])
    assert result.returncode == 2, result.stdout
    assert "not in the error catalog: bogus" in result.stderr
    assert "invalid_args" in result.stderr  # the known codes are listed


def test_a_code_from_a_user_catalog_is_accepted(db: Path, tmp_path: Path) -> None:
    """--catalog FILE adds a team's own codes to what --codes may name."""
    catalog = tmp_path / "codes.toml"
    catalog.write_text(
        "[codes.quota_exceeded]\n"
        'meaning = "quota for the month is used up"\nretry_by = "nobody"\nmax_tries = 1\n'
        'scope = "call"\non_cap = "stop"\nhint = "say when the quota resets"\n'
        'color = "#123456"\n'
    )
    assert run(["catalog", "--check", str(catalog)]).returncode == 0
    result = run(
        ["findings", "--db", str(db), "--codes", "quota_exceeded", "--catalog", str(catalog)]
    )
    assert result.returncode == 0, result.stderr


def test_a_store_path_under_a_file_is_one_line(tmp_path: Path) -> None:
    """A store whose folder cannot be made is `unreadable`, exit 2, not an internal error."""
    blocker = tmp_path / "plain-file"
    blocker.write_text("not a folder")
    result = run(["deploy", "--service", "s", "--version", "1", "--db", str(blocker / "x.duckdb")])
    assert result.returncode == 2
    assert result.stderr.startswith("error[unreadable]"), result.stderr
    result = run(
        [
            "serve",
            "--store",
            str(blocker / "x.duckdb"),
            "--otlp-grpc",
            "127.0.0.1:0",
            "--otlp-http",
            "off",
            "--api",
            "off",
        ]
    )
    assert result.returncode == 2
    assert result.stderr.startswith("error[unreadable]"), result.stderr
    assert "cannot create the store's folder" in result.stderr


def test_deploy_into_a_missing_store_is_refused(tmp_path: Path) -> None:
    """`deploy --db` with a mistyped path does not start a new store nobody reads."""
    missing = tmp_path / "typo.duckdb"
    result = run(["deploy", "--service", "s", "--version", "1", "--db", str(missing)])
    assert result.returncode == 2
    assert "error[unreadable]" in result.stderr
    assert not missing.exists()


def test_a_future_deploy_time_is_refused(db: Path) -> None:
    """A deploy marked in the future would sit in every chart's future: refused."""
    result = run(
        ["deploy", "--service", "s", "--version", "1", "--db", str(db), "--time", "2099-01-01"]
    )
    assert result.returncode == 2
    assert "in the future" in result.stderr


@pytest.mark.parametrize(
    ("param", "message"),
    [
        ("bucket_s=0", "must be between 1 and 31,622,400"),
        ("bucket_s=-1", "must be between 1 and 31,622,400"),
        ("limit=-1", "must be between 0 and 1,000,000,000"),
    ],
)
def test_an_integer_out_of_range_is_named(db: Path, param: str, message: str) -> None:
    """Out-of-range integers are refused by name before DuckDB sees them."""
    name = "loop_misuse" if param.startswith("limit") else "error_rates"
    result = run(["query", name, "--db", str(db), "-p", param])
    assert result.returncode == 2
    assert result.stderr.startswith(
        f"error[bad_param_value] {name}.{param.split('=', maxsplit=1)[0]}: {message}"
    )


def test_a_table_in_a_log_is_not_folded(db: Path) -> None:
    """Off a terminal with no COLUMNS (a CI log), a table keeps each row on one line."""
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    result = subprocess.run(
        [*ERRSCOPE, "query", "code_mix_by_version", "--db", str(db), "-p", "since=3650d"],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    header = next(line for line in lines if "service" in line)
    for column in ("environment", "version", "code", "calls", "share", "first_seen", "last_seen"):
        assert column in header
    row = next(line for line in lines if "invalid_args" in line)
    assert "billing-agent" in row
    assert row.count("2026-11-30") == 2  # first and last seen, unfolded


@pytest.mark.parametrize(
    ("args", "line"),
    [
        pytest.param(
            ["check", "--service", "s", "--version", "1", "--db", "x", "--wait", "5x"],
            "error[bad_flag] --wait: not a duration",
            id="bad-value",
        ),
        pytest.param(["check", "--service", "s"], "error[missing_flag] --version:", id="missing"),
        pytest.param(["check", "--bogus"], "error[unknown_flag] --bogus:", id="unknown-flag"),
        pytest.param(["nosuchcmd"], "error[unknown_command] No such command", id="unknown-cmd"),
        pytest.param(
            ["check", "--service", "s", "--version", "1"],
            "error[usage] give exactly one of --db PATH or --api URL",
            id="usage",
        ),
    ],
)
def test_a_bad_command_line_is_one_coded_line(args: list[str], line: str) -> None:
    """Flag mistakes read like every other errscope error: one `error[code]` line, exit 2,
    a hint naming where the flags are listed (not click's three-line Usage block)."""
    result = run(args)
    assert result.returncode == 2, result.stderr
    assert result.stderr.startswith(line), result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert "--help` lists the" in result.stderr


# ------------------------------------------------------------------ inputs from a review


def test_query_json_writes_decimal_sums_as_numbers(db: Path) -> None:
    """`minute_rollup` sums integers, which DuckDB returns as DECIMAL: `--format json` died
    with an internal error on it.  They are JSON numbers now."""
    result = run(
        [
            "query",
            "minute_rollup",
            "--db",
            str(db),
            "-p",
            "since=2026-11-30T08:00:00Z",
            "-p",
            "until=2026-11-30T12:00:00Z",
            "--format",
            "json",
        ]
    )
    assert result.returncode == 0, result.stderr
    rows = json.loads(result.stdout)
    assert rows
    assert all(isinstance(r["calls"], int) for r in rows)


def test_deploy_never_prints_the_password_of_its_api_url(tmp_path: Path) -> None:
    """`--api http://user:password@host` was echoed whole in the error line."""
    result = run(
        ["deploy", "--service", "a", "--version", "1", "--api", "http://ci:hunter2pass@127.0.0.1:9"]
    )
    assert result.returncode == 2
    assert "hunter2pass" not in result.stderr + result.stdout
    assert "ci:***@" in result.stderr


@pytest.mark.parametrize("command", ["deploy", "findings"])
@pytest.mark.parametrize("url", ["http://[::1", "foo", "ftp://host"])
def test_a_malformed_api_url_is_a_usage_error(command: str, url: str) -> None:
    """A URL that does not parse was an internal error (exit 70); it is one line, exit 2."""
    args = ["--service", "a", "--version", "1"] if command == "deploy" else []
    result = run([command, *args, "--api", url])
    assert result.returncode == 2, result.stderr
    assert result.stderr.startswith("error[")
    assert "\n" not in result.stderr.strip()


def test_deploy_refuses_an_answer_that_is_not_the_sidecars(tmp_path: Path) -> None:
    """Any web server answering 200 made `deploy` print "marked": nothing was."""
    import http.server
    import threading

    class Page(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.end_headers()
            self.wfile.write(b"<html>hello</html>")

        def log_message(self, *_: object) -> None:
            """No access log: the test reads the CLI's output, not the server's."""

    server = http.server.HTTPServer(("127.0.0.1", 0), Page)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        result = run(
            [
                "deploy",
                "--service",
                "a",
                "--version",
                "1",
                "--api",
                f"http://127.0.0.1:{server.server_port}",
            ]
        )
    finally:
        server.shutdown()
        server.server_close()
    assert result.returncode == 2, result.stdout
    assert "marked" not in result.stdout
    assert "not an errscope sidecar's" in result.stderr


def _foreign(path: Path) -> Path:
    import duckdb

    with duckdb.connect(str(path)) as con:
        con.execute("CREATE TABLE invoices (id INTEGER)")
    return path


@pytest.mark.parametrize(
    "args",
    [
        pytest.param(["deploy", "--service", "a", "--version", "1", "--db"], id="deploy"),
        pytest.param(["prune", "--older-than", "30d", "--db"], id="prune"),
    ],
)
def test_a_database_that_is_not_a_store_is_never_written(tmp_path: Path, args: list[str]) -> None:
    """`--db` at someone else's DuckDB file added errscope's five tables to it."""
    import duckdb

    path = _foreign(tmp_path / "theirs.duckdb")
    result = run([*args, str(path)])
    assert result.returncode == 2, result.stdout
    assert "not an errscope store" in result.stderr
    with duckdb.connect(str(path), read_only=True) as con:
        assert con.execute("SHOW TABLES").fetchall() == [("invoices",)]


def test_migrate_from_a_database_that_is_not_a_store(tmp_path: Path) -> None:
    """An internal error that left an empty destination behind; now one line and nothing."""
    source = _foreign(tmp_path / "theirs.duckdb")
    target = tmp_path / "copy.duckdb"
    result = run(["migrate", "--from", str(source), "--to", str(target)])
    assert result.returncode == 2, result.stderr
    assert "not an errscope store" in result.stderr
    assert not target.exists()


def test_scrub_jsonl_keeps_big_integers_and_refuses_deep_nesting() -> None:
    """orjson reads an integer past 64 bits as a float (an id came back changed), and a
    line nested 100,000 deep was a traceback."""
    big = '{"id": 12345678901234567890123, "text": "a"}\n'
    result = run(["scrub", "--jsonl"], input=big)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["id"] == 12345678901234567890123
    deep = '{"id": 1, "x": ' + "[" * 100_000 + "]" * 100_000 + ', "text": "a"}\n'
    result = run(["scrub", "--jsonl"], input=deep)
    assert result.returncode == 2
    assert result.stderr.startswith("error[bad_input] line 1")
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize("flag", ["--api", "--otlp-http"])
def test_run_needs_the_api_and_otlp_http(tmp_path: Path, flag: str) -> None:
    """`errscope run --api off` was a KeyError traceback: the demo and the dashboard use
    both listeners."""
    result = run(["run", "--data-dir", str(tmp_path / "d"), flag, "off"])
    assert result.returncode == 2
    assert result.stderr.startswith(f"error[bad_flag] {flag}:")


def test_a_failed_first_run_leaves_no_empty_store(tmp_path: Path) -> None:
    """A first `errscope run` whose sidecar could not bind left an empty store, and the
    next run took it for data and skipped the back-fill."""
    import socket

    data = tmp_path / "d"
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        result = run(
            [
                "run",
                "--data-dir",
                str(data),
                "--api",
                f"127.0.0.1:{port}",
                "--otlp-grpc",
                "127.0.0.1:0",
                "--otlp-http",
                "127.0.0.1:0",
                "--no-dashboard",
            ]
        )
    assert result.returncode == 1
    assert "cannot bind" in result.stderr
    assert not (data / "errscope.duckdb").exists()


@pytest.mark.parametrize(
    ("args", "flag"),
    [
        pytest.param(["--api", "http://[::1"], "--api", id="bad-url"),
        pytest.param(
            [
                "--host",
                "nosuchhost.invalid",
                "--token",
                "0123456789abcdef0123",
                "--api",
                "http://127.0.0.1:9",
            ],
            "--host",
            id="bad-host",
        ),
    ],
)
def test_dashboard_flag_mistakes_are_one_line(args: list[str], flag: str) -> None:
    """A URL that does not parse or a host that does not resolve was a traceback."""
    result = run(["dashboard", "--port", "0", *args])
    assert result.returncode == 2, result.stderr
    assert result.stderr.startswith(f"error[bad_flag] {flag}:")
    assert "Traceback" not in result.stderr
