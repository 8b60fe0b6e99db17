"""`errscope watch`: detection every minute, open findings on /metrics, episodes to webhooks.

A process of its own beside the sidecar (detection's scipy stays out of the sidecar): it
reads through `--api` (a running sidecar) or `--db` (a lake, or a file no sidecar holds),
keeps its episodes and deliveries in `--state` (its own DuckDB file: the sidecar holds the
store), serves /metrics on a loopback port, and posts each episode once to every
`--webhook FORMAT=URL`, with a resolve when it clears, carrying `--trace-url` links to
the first failing calls and traceback samples.  Resolved episodes older than
`--state-keep` are deleted at each run.  Prints one JSON ready line
(`{"event": "ready", "metrics": "127.0.0.1:PORT"}`), runs until SIGTERM or Ctrl-C, exits 0.
"""

from __future__ import annotations

import signal
import threading
from pathlib import Path

import click
import orjson

from errscope.collector.cli._common import duration_flag, handle_errors, open_source, source_options
from errscope.collector.cli.gate import _DEFAULT_CODES, _catalog_option, _codes
from errscope.collector.cli.settings import config_option
from errscope.collector.cli.trace_links import trace_url_option
from errscope.collector.config import WATCH_METRICS_ADDRESS, WATCH_STATE_PATH
from errscope.collector.errors import ConfigError, ConfigErrorKind
from errscope.collector.ports import is_loopback
from errscope.collector.sidecar.config import join_address, parse_address
from errscope.collector.signals import set_soon

__all__ = ["watch"]


@click.command()
@config_option
@source_options
@click.option(
    "--state",
    envvar="ERRSCOPE_WATCH_STATE",
    default=WATCH_STATE_PATH,
    show_default=True,
    help="The watch's own DuckDB file: episodes and deliveries (one watch per file).",
)
@click.option(
    "--state-keep",
    default="30d",
    show_default=True,
    help="Resolved episodes (and their deliveries) older than this leave the state file.",
)
@click.option(
    "--metrics",
    default=WATCH_METRICS_ADDRESS,
    show_default=True,
    help="Address of /metrics ('off' to disable).",
)
@click.option("--insecure", is_flag=True, help="Allow /metrics on a non-loopback address.")
@click.option("--interval", default="1m", show_default=True, help="How often to run detection.")
@click.option(
    "--resolve-after",
    default="5m",
    show_default=True,
    help="A finding unseen this long has cleared (a flicker stays one episode).",
)
@click.option(
    "--webhook",
    "webhooks",
    multiple=True,
    envvar="ERRSCOPE_WATCH_WEBHOOK",
    help="FORMAT=URL with FORMAT json, slack or pagerduty (repeatable; space-separated in "
    "the variable).  The URL is a credential: it is never logged.",
)
@click.option(
    "--pagerduty-routing-key",
    envvar="ERRSCOPE_PAGERDUTY_ROUTING_KEY",
    help="The Events v2 integration key for pagerduty webhooks.",
)
@click.option(
    "--webhook-rate",
    type=click.FloatRange(min=0.1),
    default=20.0,
    show_default=True,
    help="At most this many posts a minute to each webhook; more wait their turn.",
)
@click.option(
    "--webhook-attempts",
    type=click.IntRange(min=1),
    default=8,
    show_default=True,
    help="Tries per message (429, 5xx and no answer are retried).",
)
@click.option(
    "--webhook-backoff",
    default="1s",
    show_default=True,
    help="Wait before the first retry; doubles each time, up to 5m.",
)
@click.option("--service", help="Only this service.")
@click.option("--environment", help="Only this environment.")
@click.option("--codes", default=_DEFAULT_CODES, show_default=True, help="Codes tested on deploys.")
@_catalog_option
@trace_url_option
@click.option(
    "--log-format", type=click.Choice(["text", "json"]), default="text", show_default=True
)
@handle_errors
def watch(
    *,
    db: str | None,
    api: str | None,
    token: str | None,
    state: str,
    state_keep: str,
    metrics: str,
    insecure: bool,
    interval: str,
    resolve_after: str,
    webhooks: tuple[str, ...],
    pagerduty_routing_key: str | None,
    webhook_rate: float,
    webhook_attempts: int,
    webhook_backoff: str,
    service: str | None,
    environment: str | None,
    codes: str,
    catalogs: tuple[Path, ...],
    trace_url: str | None,
    log_format: str,
) -> None:
    """Watch for findings: Prometheus metrics on /metrics, each episode once to webhooks.

    Exit status: 0 when stopped by SIGTERM or Ctrl-C; 2 for a bad flag or a state file
    another watch holds.  A source it cannot read (the sidecar not up yet) is logged and
    retried at each run, and clears no finding.
    """
    from errscope.collector.sidecar.process import configure_logging  # noqa: PLC0415 - one log format
    from errscope.collector.watch.http import MetricsServer  # noqa: PLC0415 - the watch on demand
    from errscope.collector.watch.loop import WatchConfig, Watcher  # noqa: PLC0415
    from errscope.collector.watch.sinks import parse_sink  # noqa: PLC0415
    from errscope.collector.watch.state import WatchState  # noqa: PLC0415
    from errscope.queries.detect import DEFAULT_CONFIG, with_codes  # noqa: PLC0415

    configure_logging(log_format)
    step = duration_flag(interval, "--interval").total_seconds()
    if step <= 0:
        raise click.BadParameter("must be positive", param_hint="--interval")
    keep = duration_flag(state_keep, "--state-keep").total_seconds()
    if keep <= 0:
        raise click.BadParameter("must be positive", param_hint="--state-keep")
    backoff = duration_flag(webhook_backoff, "--webhook-backoff").total_seconds()
    sinks = [
        parse_sink(text, index=i, routing_key=pagerduty_routing_key)
        for i, text in enumerate(webhooks)
    ]
    config = WatchConfig(
        interval_s=step,
        resolve_after_s=duration_flag(resolve_after, "--resolve-after").total_seconds(),
        rate_per_min=webhook_rate,
        max_attempts=webhook_attempts,
        backoff_s=max(backoff, 0.001),
        keep_s=keep,
        service=service,
        environment=environment,
        detect=with_codes(DEFAULT_CONFIG, _codes(codes, catalogs)),
        trace_url=trace_url,
    )
    address = None if metrics.lower() in ("", "off", "none") else metrics
    bind = parse_address(address, "metrics") if address else None
    if bind is not None and not is_loopback(bind[0]) and not insecure:
        raise ConfigError(
            ConfigErrorKind.BAD_VALUE,
            "/metrics binds loopback unless told otherwise",
            field="metrics",
            hint="pass --insecure to serve it on a trusted network",
        )
    source = open_source(db, api, token)
    stop = threading.Event()

    def on_signal(_signum: int, _frame: object) -> None:
        set_soon(stop)  # not stop.set(): it can deadlock inside stop.wait() (collector.signals)

    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, on_signal)
    with WatchState(state) as watch_state:
        watcher = Watcher(source, watch_state, sinks, config)
        server = None
        if bind is not None:
            try:
                server = MetricsServer(
                    bind[0], bind[1], watcher.exposition, lambda: {"status": "ok"}
                )
            except OSError as exc:
                raise ConfigError(
                    ConfigErrorKind.BAD_VALUE, f"cannot bind ({exc.strerror})", field="metrics"
                ) from None
            server.start()
        ready = {"event": "ready", "source": source.describe(), "webhooks": len(sinks)}
        if server is not None and bind is not None:
            ready["metrics"] = join_address(bind[0], server.port)
        click.echo(orjson.dumps(ready).decode())
        try:
            watcher.serve(stop)
        finally:
            if server is not None:
                server.stop()
