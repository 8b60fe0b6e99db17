"""`errscope watch` on the command line: errscope.toml's [watch] table, refusals as one line
that never repeats a webhook URL, and `config --show` masking the webhooks."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ERRSCOPE = [sys.executable, "-m", "errscope.collector.cli"]
SECRET = "XcliSecretToken99"
HOOK = f"https://hooks.example.invalid/services/T0/B0/{SECRET}"


def _run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*ERRSCOPE, *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={**os.environ, **(env or {})},
    )


@pytest.mark.parametrize(
    ("table", "args", "line"),
    [
        pytest.param(
            f'webhook = ["teams={HOOK}"]',
            [],
            "error[bad_value] watch.webhook: must be FORMAT=URL",
            id="file-webhook-of-no-known-format",
        ),
        pytest.param(
            f'webhook = ["pagerduty={HOOK}"]',
            [],
            "error[bad_value] --pagerduty-routing-key: a pagerduty webhook needs",
            id="pagerduty-without-a-key",
        ),
        pytest.param(
            'metrics = "0.0.0.0:0"',
            [],
            "error[bad_value] metrics: /metrics binds loopback",
            id="public-metrics-without-insecure",
        ),
        pytest.param(
            'interval = "0s"',
            [],
            "error[bad_flag] --interval: must be positive",
            id="file-interval-zero",
        ),
        pytest.param(
            'interval = "0s"',
            ["--interval", "2m", "--db", "x", "--api", "http://127.0.0.1:9"],
            "error[usage] give exactly one of --db PATH or --api URL",
            id="flag-over-file",
        ),
    ],
)
def test_a_bad_setting_is_one_line_without_the_url(
    tmp_path: Path, table: str, args: list[str], line: str
) -> None:
    """A [watch] table's bad value (or a flag's) stops `errscope watch` before it starts,
    exit 2, with one error line naming the setting and never the webhook URL."""
    config = tmp_path / "errscope.toml"
    config.write_text(f'[watch]\napi = "http://127.0.0.1:9"\n{table}\n')
    result = _run("watch", "--config", str(config), "--state", str(tmp_path / "w.duckdb"), *args)
    assert result.returncode == 2, result.stderr
    assert result.stderr.startswith(line), result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert SECRET not in result.stderr + result.stdout


def test_config_show_masks_the_webhooks(tmp_path: Path) -> None:
    """`errscope config --check` accepts a [watch] table and `--show` prints its webhooks
    as **** with their source, like a token."""
    config = tmp_path / "errscope.toml"
    config.write_text(f'[watch]\nwebhook = ["slack={HOOK}"]\ninterval = "30s"\n')
    checked = _run("config", "--check", str(config))
    assert checked.returncode == 0, checked.stderr
    assert "watch: 2" in checked.stdout
    shown = _run("config", "--show", "--config", str(config))
    assert shown.returncode == 0, shown.stderr
    watch = shown.stdout.split("[watch]")[1]
    assert f"webhook = ****    (file {config})" in watch
    assert f"interval = 30s    (file {config})" in watch
    assert SECRET not in shown.stdout


@pytest.mark.parametrize(
    ("webhook", "line"),
    [
        pytest.param(
            f"teams={HOOK}",
            "error[bad_value] watch.webhook: must be FORMAT=URL with FORMAT one of",
            id="unknown-kind",
        ),
        pytest.param(
            f"slack=ftp://u:{SECRET}@host/x",
            "error[bad_value] watch.webhook: a webhook must be an http(s) URL",
            id="not-http",
        ),
        pytest.param(
            f"json=https://host:{SECRET}/x",
            "error[bad_value] watch.webhook: a webhook must be an http(s) URL",
            id="port-not-a-number",
        ),
        pytest.param(f"json={HOOK}", None, id="good"),
    ],
)
def test_config_check_validates_webhooks_as_watch_does(
    tmp_path: Path, webhook: str, line: str | None
) -> None:
    """`errscope config --check` refuses a [watch] webhook of an unknown kind or a bad URL
    with the same one line `errscope watch` stops with, never repeating the URL."""
    config = tmp_path / "errscope.toml"
    config.write_text(f'[watch]\napi = "http://127.0.0.1:9"\nwebhook = ["{webhook}"]\n')
    checked = _run("config", "--check", str(config))
    if line is None:
        assert checked.returncode == 0, checked.stderr
        return
    started = _run("watch", "--config", str(config), "--state", str(tmp_path / "w.duckdb"))
    for result in (checked, started):
        assert result.returncode == 2, result.stderr
        assert result.stderr.startswith(line), result.stderr
        assert len(result.stderr.strip().splitlines()) == 1
        assert SECRET not in result.stderr + result.stdout
    assert checked.stderr == started.stderr


def test_config_show_has_the_watch_trace_url_and_state_keep(tmp_path: Path) -> None:
    """`config --show` lists [watch]'s trace_url (from the file) and state_keep (30d default)."""
    config = tmp_path / "errscope.toml"
    config.write_text('[watch]\ntrace_url = "jaeger:http://jaeger:16686"\n')
    assert _run("config", "--check", str(config)).returncode == 0
    shown = _run("config", "--show", "--config", str(config))
    assert shown.returncode == 0, shown.stderr
    watch = shown.stdout.split("[watch]")[1]
    assert f"trace_url = jaeger:http://jaeger:16686    (file {config})" in watch
    assert "state_keep = 30d    (default)" in watch
