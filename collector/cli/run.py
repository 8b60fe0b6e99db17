"""`errscope run` (what `make run` calls): sidecar, demo history, dashboard, live traffic.

    errscope run --data-dir data

1. starts `errscope serve` on the store `<data-dir>/errscope.duckdb` and waits for its ready
   line (logs go to `<data-dir>/logs/sidecar.log`);
2. on a new store, back-fills the demo's history through it (`errscope demo`'s story);
   an existing store keeps its data (`--reset` starts over);
3. starts `errscope dashboard --api ...` when that command exists, and waits until it
   answers (logs in `<data-dir>/logs/dashboard.log`); without it, says so and goes on;
4. prints the URLs and the two variables that point any OTLP exporter at the sidecar;
5. keeps the demo's traffic flowing until Ctrl-C or SIGTERM, then stops the dashboard and
   the sidecar (which drains and commits) and exits 0.

Each child runs in its own process group and is stopped by group — SIGTERM, then SIGKILL
after a grace period — so nothing is left running, whatever the child started itself
(Streamlit's workers included).  If the sidecar dies, everything stops and the exit status
is 1.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import IO, Final

import click

from errscope.collector.cli.demo import backfill_with_progress, stop_on_signals
from errscope.collector.config import (
    API_ADDRESS,
    DASHBOARD_PORT,
    OTLP_GRPC_ADDRESS,
    OTLP_HTTP_ADDRESS,
    STORE_FILE_NAME,
)
from errscope.collector.demo.runner import DEFAULT_RATE, Demo, DemoOptions
from errscope.collector.demo.send import Target
from errscope.collector.demo.story import MIN_HOURS

__all__ = ["Child", "run", "stop_child"]

STORE_NAME: Final = STORE_FILE_NAME
_READY_TIMEOUT_S: Final = 60.0
_DASHBOARD_TIMEOUT_S: Final = 90.0
_GRACE_S: Final = 20.0
_POLL_S: Final = 0.25
EXIT_FAILED: Final = 1


@dataclass
class Child:
    """A child process in its own process group, its output copied to a log file."""

    name: str
    process: subprocess.Popen[str]
    log_path: Path
    lines: queue.Queue[str] = field(default_factory=queue.Queue)
    log_start: int = 0  # where this run's lines begin in the (appended) log file

    def alive(self) -> bool:
        """Whether the process is still running."""
        return self.process.poll() is None


def _errscope(*args: str) -> list[str]:
    """argv of an errscope subcommand run by this interpreter (no PATH lookup)."""
    return [sys.executable, "-m", "errscope.collector.cli", *args]


def _pump(stream: IO[str], log: IO[str], lines: queue.Queue[str]) -> None:
    """Copy a child's stdout to its log file and hand every line to the waiting parent."""
    with stream, log:
        for line in stream:
            log.write(line)
            log.flush()
            lines.put(line)


def start_child(name: str, argv: Sequence[str], log_dir: Path, env: dict[str, str]) -> Child:
    """Start `argv` in a new session; stdout and stderr go to `<log_dir>/<name>.log`."""
    log_dir.mkdir(parents=True, exist_ok=True)
    log_path = log_dir / f"{name}.log"
    log = log_path.open("a", encoding="utf-8")
    log_start = log.tell()
    process = subprocess.Popen(  # noqa: S603 - our own interpreter and arguments
        list(argv),
        stdout=subprocess.PIPE,
        stderr=log,
        stdin=subprocess.DEVNULL,
        text=True,
        env=env,
        start_new_session=True,
    )
    child = Child(name, process, log_path, log_start=log_start)
    assert process.stdout is not None  # noqa: S101 - stdout=PIPE above
    threading.Thread(
        target=_pump, args=(process.stdout, log, child.lines), name=f"{name}-log", daemon=True
    ).start()
    return child


def stop_child(child: Child, *, grace_s: float = _GRACE_S) -> int | None:
    """SIGTERM the child's process group, SIGKILL it after `grace_s`; the exit status."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(child.process.pid, sig)
        except ProcessLookupError:
            break  # the whole group is gone
        try:
            child.process.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            continue
        # The leader is gone; make sure nothing it started outlives it.
        with contextlib.suppress(ProcessLookupError):
            os.killpg(child.process.pid, signal.SIGKILL)
        break
    return child.process.poll()


def _wait_ready(child: Child, stop: threading.Event) -> dict[str, str] | None:
    """The sidecar's ready line, or None when it exited, timed out, or we were stopped."""
    deadline = time.monotonic() + _READY_TIMEOUT_S
    while time.monotonic() < deadline and not stop.is_set():
        try:
            line = child.lines.get(timeout=_POLL_S)
        except queue.Empty:
            if not child.alive():
                return None
            continue
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if isinstance(event, dict) and event.get("event") == "ready":
            return {str(k): str(v) for k, v in event.items()}
    return None


def _wait_http(url: str, child: Child, stop: threading.Event, timeout_s: float) -> bool:
    """Poll `url` until it answers 200, the child exits, time runs out, or we are stopped."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and not stop.is_set() and child.alive():
        try:
            with urllib.request.urlopen(url, timeout=2) as response:  # noqa: S310 - loopback
                if response.status == 200:
                    return True
        except (urllib.error.URLError, OSError):
            pass  # not up yet: poll again until the deadline
        stop.wait(0.5)
    return False


def _tail(path: Path, lines: int = 8, *, start: int = 0) -> str:
    """The last `lines` lines of `path` written from byte `start` on (this run's)."""
    try:
        with path.open("rb") as log:
            log.seek(start)
            text = log.read().decode("utf-8", errors="replace")
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-lines:])


def _has_command(name: str) -> bool:
    ctx = click.get_current_context(silent=True)
    if ctx is None:
        return False
    root = ctx.find_root()
    # list_commands, not .commands: errscope's group loads most commands lazily, and
    # `dashboard` is one of them (the dashboard was never started).
    return isinstance(root.command, click.Group) and name in root.command.list_commands(root)


def _reset(store: Path) -> None:
    for path in (store, store.with_name(store.name + ".wal")):
        path.unlink(missing_ok=True)


def _banner(
    addresses: dict[str, str], dashboard_url: str | None, log_dir: Path, *, live: bool = True
) -> str:
    http = addresses.get("otlp_http", "")
    lines = [
        "",
        "errscope is running",
        f"  dashboard   {dashboard_url or '(not started)'}",
        f"  query API   http://{addresses.get('api', '')}",
        f"  OTLP/HTTP   http://{http}",
        f"  OTLP/gRPC   {addresses.get('otlp_grpc', '')}",
        f"  logs        {log_dir}/",
        "",
        "Point your own service at it:",
        f"  export OTEL_EXPORTER_OTLP_ENDPOINT=http://{http}",
        "  export OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf",
        "",
        "Demo traffic keeps flowing. Ctrl-C stops everything."
        if live
        else "No live demo traffic (--no-live). Ctrl-C stops everything.",
    ]
    return "\n".join(lines)


@click.command()
@click.option(
    "--data-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("data"),
    show_default=True,
    help="Where the store and the logs live.",
)
@click.option("--otlp-grpc", default=OTLP_GRPC_ADDRESS, show_default=True)
@click.option("--otlp-http", default=OTLP_HTTP_ADDRESS, show_default=True)
@click.option("--api", default=API_ADDRESS, show_default=True)
@click.option(
    "--dashboard-port",
    type=click.IntRange(0, 65535),
    default=DASHBOARD_PORT,
    show_default=True,
    help="0 picks a free port.",
)
@click.option("--dashboard/--no-dashboard", "with_dashboard", default=True, show_default=True)
@click.option("--token", envvar="ERRSCOPE_TOKEN", help="Bearer token for the sidecar.")
@click.option(
    "--hours", type=click.FloatRange(min=MIN_HOURS, max=24 * 7), default=24.0, show_default=True
)
@click.option("--seed", type=int, default=7, show_default=True)
@click.option(
    "--rate", type=click.FloatRange(min=0, min_open=True), default=DEFAULT_RATE, show_default=True
)
@click.option("--live/--no-live", default=True, show_default=True, help="Keep demo traffic.")
@click.option("--reset", is_flag=True, help="Delete the store first and back-fill again.")
def run(
    *,
    data_dir: Path,
    otlp_grpc: str,
    otlp_http: str,
    api: str,
    dashboard_port: int,
    with_dashboard: bool,
    token: str | None,
    hours: float,
    seed: int,
    rate: float,
    live: bool,
    reset: bool,
) -> None:
    """Sidecar + demo history + dashboard on ./data, until Ctrl-C (what `make run` does)."""
    for flag, value in (("--otlp-http", otlp_http), ("--api", api)):
        if value.strip().lower() in ("", "off", "none"):
            # The demo sends over OTLP/HTTP and the dashboard reads through the API.
            raise click.BadParameter(
                "errscope run needs it (the demo and dashboard use it)", param_hint=flag
            )
    data_dir.mkdir(parents=True, exist_ok=True)
    store = data_dir / STORE_NAME
    if reset:
        _reset(store)
    env = dict(os.environ)
    if token:
        env["ERRSCOPE_TOKEN"] = token
    session = _Session(
        store=store,
        log_dir=data_dir / "logs",
        env=env,
        fresh=not store.exists(),
        token=token or None,
        options=DemoOptions(target=Target(), hours=hours, seed=seed, rate=rate),
    )
    previous = stop_on_signals(session.stop)
    try:
        status = session.start_sidecar(otlp_grpc=otlp_grpc, otlp_http=otlp_http, api=api)
        if status and session.fresh:
            # The store a failed first start made is empty: left there, the next run would
            # take it for data and skip the back-fill.
            session.close()
            _reset(store)
        if status == 0:
            status = session.serve(
                dashboard_port=dashboard_port if with_dashboard else None, live=live
            )
    finally:
        session.close()
        for sig, handler in previous.items():
            signal.signal(sig, handler)  # type: ignore[arg-type]
        click.echo("stopped: nothing left running", err=True)
    if status:
        sys.exit(status)


@dataclass
class _Session:
    """The children and the demo of one `errscope run`, and how to stop them all."""

    store: Path
    log_dir: Path
    env: dict[str, str]
    fresh: bool
    token: str | None
    options: DemoOptions
    stop: threading.Event = field(default_factory=threading.Event)
    children: list[Child] = field(default_factory=list)
    demo: Demo | None = None
    addresses: dict[str, str] = field(default_factory=dict)

    def start_sidecar(self, *, otlp_grpc: str, otlp_http: str, api: str) -> int:
        """Start `errscope serve` and wait for its ready line; 0 when it is serving."""
        argv = _errscope("serve", "--otlp-grpc", otlp_grpc, "--otlp-http", otlp_http)
        argv += ["--api", api, "--store", str(self.store)]
        sidecar = start_child("sidecar", argv, self.log_dir, self.env)
        self.children.append(sidecar)
        addresses = _wait_ready(sidecar, self.stop)
        if addresses is None:
            return 0 if self.stop.is_set() else _report_failed_start(sidecar)
        self.addresses = addresses
        shown = " ".join(f"{k}={v}" for k, v in addresses.items() if k != "event")
        click.echo(f"sidecar ready: {shown}")
        return 0

    def serve(self, *, dashboard_port: int | None, live: bool) -> int:
        """Back-fill (on a new store), start the dashboard, then demo traffic until stopped."""
        if self.stop.is_set():
            return 0
        sidecar = self.children[0]
        target = Target(
            endpoint=f"http://{self.addresses['otlp_http']}",
            api=f"http://{self.addresses['api']}",
            token=self.token,
        )
        self.demo = demo = Demo(replace(self.options, target=target))
        if self.fresh:
            report = backfill_with_progress(demo, stop=self.stop)
            click.echo(
                f"back-fill {'interrupted after' if report.interrupted else 'done:'} "
                f"{report.tool_calls} tool calls from {report.timeline.start:%a %H:%M} UTC"
            )
        else:
            click.echo(f"{self.store} already has data: no back-fill (--reset starts over)")
        dashboard_url = None
        if dashboard_port is not None and not self.stop.is_set():
            dashboard_url = _start_dashboard(
                self.children,
                target=target,
                port=dashboard_port,
                log_dir=self.log_dir,
                env=self.env,
                stop=self.stop,
            )
        if self.stop.is_set():
            return 0 if sidecar.alive() else EXIT_FAILED
        click.echo(_banner(self.addresses, dashboard_url, self.log_dir, live=live))
        threading.Thread(
            target=_watch, args=(sidecar, self.stop), name="sidecar-watch", daemon=True
        ).start()
        if live:
            demo.live(self.stop)
        else:
            self.stop.wait()
        if not sidecar.alive():
            click.echo(f"error[sidecar] the sidecar exited; see {sidecar.log_path}", err=True)
            return EXIT_FAILED
        return 0

    def close(self) -> None:
        """Flush the demo, then stop the children, the sidecar last (it drains and commits)."""
        self.stop.set()
        if self.demo is not None:
            self.demo.close()
        for child in reversed(self.children):
            stop_child(child)


def _start_dashboard(
    children: list[Child],
    *,
    target: Target,
    port: int,
    log_dir: Path,
    env: dict[str, str],
    stop: threading.Event,
) -> str | None:
    """Start `errscope dashboard` on the sidecar's API; its URL once it answers, else None."""
    if not _has_command("dashboard"):
        click.echo(
            "note: this errscope has no `dashboard` command yet; the sidecar and the "
            "query API are running without it",
            err=True,
        )
        return None
    if not port:
        from errscope.collector.cli.dashboard import free_port  # noqa: PLC0415 - only for port 0

        port = free_port()
    board = start_child(
        "dashboard",
        _errscope("dashboard", "--port", str(port), "--api", target.api or ""),
        log_dir,
        env,
    )
    children.append(board)
    url = f"http://127.0.0.1:{port}"
    if _wait_http(f"{url}/_stcore/health", board, stop, _DASHBOARD_TIMEOUT_S):
        return url
    if not stop.is_set():
        click.echo(f"warning: the dashboard did not come up; see {board.log_path}", err=True)
    return None


def _report_failed_start(sidecar: Child) -> int:
    click.echo(
        f"error[sidecar] the sidecar did not start; {sidecar.log_path}:\n"
        + _tail(sidecar.log_path, start=sidecar.log_start),
        err=True,
    )
    return EXIT_FAILED


def _watch(child: Child, stop: threading.Event) -> None:
    """Set `stop` when the child exits on its own."""
    while not stop.wait(1.0):
        if not child.alive():
            stop.set()
