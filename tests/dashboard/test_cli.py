"""`errscope dashboard`: flags are checked before Streamlit starts; the child gets the source."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
from click.testing import CliRunner

from errscope.collector.cli import dashboard as dashboard_cli
from errscope.collector.cli.dashboard import child_environment, dashboard, streamlit_command


@pytest.mark.parametrize(
    ("args", "message"),
    [
        pytest.param([], "exactly one of --db PATH or --api URL", id="no-source"),
        pytest.param(["--api", "http://127.0.0.1:1", "--db", "x.duckdb"], "exactly one", id="both"),
        pytest.param(["--api", "ftp://host"], "http(s) URL", id="bad-url"),
        pytest.param(["--db", "/nonexistent/errscope.duckdb"], "no such file", id="missing-db"),
        pytest.param(
            ["--api", "http://127.0.0.1:1", "--as-of", "yesterday-ish"], "--as-of", id="bad-as-of"
        ),
        pytest.param(
            ["--api", "http://127.0.0.1:1", "--refresh", "soon"], "--refresh", id="bad-refresh"
        ),
    ],
)
def test_bad_flags_exit_2_before_streamlit_starts(
    monkeypatch: pytest.MonkeyPatch, args: list[str], message: str
) -> None:
    """A usage error is one message and exit status 2; no child process is started."""
    monkeypatch.setattr(dashboard_cli.subprocess, "Popen", _no_child)
    result = CliRunner().invoke(dashboard, args)
    assert result.exit_code == 2
    assert message in result.output


def test_a_port_in_use_is_a_usage_error_before_streamlit_starts(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A taken --port exits 2 naming the flag, not after printing a URL that never works."""
    monkeypatch.setattr(dashboard_cli.subprocess, "Popen", _no_child)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = CliRunner().invoke(dashboard, ["--api", "http://127.0.0.1:1", "--port", str(port)])
    assert result.exit_code == 2, result.output
    assert "--port" in result.output
    assert "http://" not in result.output.replace("http://127.0.0.1:1", "")


def _no_child(*_: object, **__: object) -> None:
    raise AssertionError("Streamlit must not start on bad flags")


def test_child_gets_the_source_in_its_environment(tmp_path: Path) -> None:
    """--db is passed as an absolute path; stale settings from the parent are dropped."""
    db = tmp_path / "store.duckdb"
    env = child_environment(
        {"ERRSCOPE_DASHBOARD_API": "http://stale", "ERRSCOPE_TOKEN": "stale", "PATH": "/bin"},
        api=None,
        token=None,
        db=db,
        as_of=None,
        refresh_s=30,
    )
    assert env["ERRSCOPE_DASHBOARD_DB"] == str(db.resolve())
    assert "ERRSCOPE_DASHBOARD_API" not in env
    assert "ERRSCOPE_TOKEN" not in env
    assert env["ERRSCOPE_DASHBOARD_REFRESH_S"] == "30"
    assert env["PATH"] == "/bin"


def test_streamlit_runs_headless_on_loopback_without_telemetry() -> None:
    """The child binds 127.0.0.1 on the given port, headless, with usage stats off."""
    argv = streamlit_command(8765)
    assert argv[1:4] == ["-m", "streamlit", "run"]
    assert Path(argv[4]).name == "app.py"
    assert Path(argv[4]).is_file()
    pairs = dict(zip(argv[5::2], argv[6::2], strict=True))
    assert pairs["--server.port"] == "8765"
    assert pairs["--server.address"] == "127.0.0.1"
    assert pairs["--server.headless"] == "true"
    assert pairs["--browser.gatherUsageStats"] == "false"


def test_token_travels_in_the_environment_not_argv(monkeypatch: pytest.MonkeyPatch) -> None:
    """The token is handed to Streamlit in ERRSCOPE_TOKEN, never on its command line."""
    seen: dict[str, object] = {}

    class FakeChild:
        def __init__(self, argv: list[str], env: dict[str, str]) -> None:
            seen["argv"], seen["env"] = argv, env

        def wait(self) -> int:
            return 0

        def send_signal(self, _: int) -> None:
            pass

    monkeypatch.setattr(dashboard_cli.subprocess, "Popen", FakeChild)
    result = CliRunner().invoke(
        dashboard,
        ["--api", "http://127.0.0.1:4320", "--token", "s3cret-token-value", "--port", "0"],
    )
    assert result.exit_code == 0, result.output
    assert "s3cret-token-value" not in " ".join(seen["argv"])  # type: ignore[arg-type]
    assert seen["env"]["ERRSCOPE_TOKEN"] == "s3cret-token-value"  # type: ignore[index]
    assert "http://127.0.0.1:" in result.output
