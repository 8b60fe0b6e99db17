"""`errscope demo`: back-fill hours of realistic agent traffic into a sidecar, then go live.

    errscope demo                          # 24 h of history to 127.0.0.1:4318, then exit
    errscope demo --live                   # ... then keep traffic flowing until Ctrl-C
    errscope demo --hours 3 --no-backfill --live

The sidecar must be running (`errscope serve`); the command checks its health first and
stops with one line when there is none.  Progress goes to stderr; when the back-fill is
done, one JSON line on stdout says what was written and where the story's moments are
(`{"event": "backfilled", ...}`).  SIGTERM and SIGINT stop live traffic, flush what is
queued and exit 0.
"""

from __future__ import annotations

import json
import signal
import sys
import threading
import urllib.error
import urllib.request
from datetime import datetime
from types import FrameType
from typing import Final

import click
from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

from errscope.collector.demo.runner import DEFAULT_RATE, BackfillReport, Demo, DemoOptions
from errscope.collector.demo.send import DEFAULT_API, DEFAULT_ENDPOINT, Target
from errscope.collector.demo.story import MIN_HOURS
from errscope.collector.signals import set_soon

__all__ = ["backfill_with_progress", "demo", "sidecar_health", "stop_on_signals"]

_HEALTH_TIMEOUT_S: Final = 5.0
EXIT_NO_SIDECAR: Final = 2
EXIT_DROPPED: Final = 1


def sidecar_health(target: Target) -> str | None:
    """None when the sidecar answers /healthz (or there is no API to ask), else why not."""
    if not target.api:
        return None
    url = f"{target.api.rstrip('/')}/healthz"
    try:
        with urllib.request.urlopen(url, timeout=_HEALTH_TIMEOUT_S) as response:  # noqa: S310
            return None if response.status == 200 else f"HTTP {response.status}"
    except urllib.error.HTTPError as exc:
        return f"HTTP {exc.code}"
    except (urllib.error.URLError, OSError, ValueError) as exc:
        return type(exc).__name__


def backfill_with_progress(
    demo: Demo, *, console: Console | None = None, stop: threading.Event | None = None
) -> BackfillReport:
    """Run the back-fill with a rich progress bar (simulated time, tool calls) on stderr."""
    console = console or Console(stderr=True)
    columns = (
        TextColumn("[bold]back-fill[/]"),
        BarColumn(),
        TextColumn("{task.percentage:>3.0f}%"),
        TextColumn("{task.fields[at]}"),
        TextColumn("{task.fields[calls]} tool calls"),
        TimeElapsedColumn(),
    )
    with Progress(*columns, console=console, transient=False) as progress:
        task = progress.add_task("back-fill", total=1.0, at="", calls=0)

        def update(done: float, at: datetime, calls: int) -> None:
            progress.update(task, completed=done, at=f"{at:%a %H:%M}Z", calls=calls)

        report = demo.backfill(progress=update, stop=stop)
        if not report.interrupted:
            progress.update(task, completed=1.0)
    return report


def stop_on_signals(stop: threading.Event) -> dict[int, object]:
    """Set `stop` on SIGTERM/SIGINT (main thread only); returns the previous handlers."""

    def handler(_signum: int, _frame: FrameType | None) -> None:
        set_soon(stop)  # stop.set() here can deadlock inside stop.wait() (collector.signals)

    if threading.current_thread() is not threading.main_thread():
        return {}
    return {s: signal.signal(s, handler) for s in (signal.SIGTERM, signal.SIGINT)}


@click.command()
@click.option(
    "--endpoint",
    default=DEFAULT_ENDPOINT,
    show_default=True,
    help="The sidecar's OTLP/HTTP base URL (/v1/traces is appended).",
)
@click.option(
    "--api",
    default=DEFAULT_API,
    show_default=True,
    help="The sidecar's API, for the health check and the deploy marker ('' to skip both).",
)
@click.option("--token", envvar="ERRSCOPE_TOKEN", help="Bearer token (or ERRSCOPE_TOKEN).")
@click.option(
    "--hours",
    type=click.FloatRange(min=MIN_HOURS, max=24 * 7),
    default=24.0,
    show_default=True,
    help="Hours of history to back-fill, ending now.",
)
@click.option("--backfill/--no-backfill", default=True, show_default=True)
@click.option(
    "--live/--no-live",
    default=False,
    show_default=True,
    help="After the back-fill, keep traffic flowing until SIGTERM/Ctrl-C.",
)
@click.option("--seed", type=int, default=7, show_default=True, help="Replays the same story.")
@click.option(
    "--rate",
    type=click.FloatRange(min=0, min_open=True),
    default=DEFAULT_RATE,
    show_default=True,
    help="Conversations per minute across the fleet at its busiest (~2.5 tool calls each).",
)
@click.option("--environment", default="prod", show_default=True)
def demo(
    *,
    endpoint: str,
    api: str,
    token: str | None,
    hours: float,
    backfill: bool,
    live: bool,
    seed: int,
    rate: float,
    environment: str,
) -> None:
    """Realistic agent traffic through the real path, with a bad deploy to catch."""
    target = Target(endpoint=endpoint, api=api or None, token=token or None)
    problem = sidecar_health(target)
    if problem is not None:
        click.echo(
            f"error[no_sidecar] {target.api}: no healthy sidecar ({problem}) — "
            "start one with `errscope serve`",
            err=True,
        )
        sys.exit(EXIT_NO_SIDECAR)
    runner = Demo(
        DemoOptions(target=target, hours=hours, seed=seed, rate=rate, environment=environment)
    )
    stop = threading.Event()
    previous = stop_on_signals(stop)
    dropped = 0
    try:
        if backfill:
            report = backfill_with_progress(runner, stop=stop)
            dropped = report.spans_failed
            click.echo(json.dumps(report.summary()))
            if dropped:
                click.echo(f"warning: the sidecar did not accept {dropped} spans", err=True)
        if live and not stop.is_set():
            click.echo(f"live: {rate:g} conversations per minute until Ctrl-C", err=True)
            played = runner.live(stop)
            click.echo(f"live: stopped after {played} conversations", err=True)
    finally:
        runner.close()
        for sig, handler in previous.items():
            signal.signal(sig, handler)  # type: ignore[arg-type]
    if dropped:
        sys.exit(EXIT_DROPPED)
