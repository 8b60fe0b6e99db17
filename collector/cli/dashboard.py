"""`errscope dashboard`: run the Streamlit app (dashboards/app.py) against one query source.

The app reads a running sidecar's query API (`--api URL`, with `--token`) or a DuckDB
file that no sidecar holds (`--db PATH`).  This command validates the flags, then runs
`streamlit run dashboards/app.py` as a child process bound to 127.0.0.1, handing the
source over in environment variables (the token never appears on a command line), and
forwards SIGINT/SIGTERM to it.  It prints one line with the URL once the child starts;
the exit status is the child's.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from importlib.util import find_spec
from pathlib import Path
from types import FrameType
from typing import Final

import click

from errscope.collector.cli.settings import config_option
from errscope.collector.cli.trace_links import trace_url_option
from errscope.collector.config import API_URL, DASHBOARD_PORT
from errscope.collector.errors import ErrscopeError
from errscope.collector.ports import bind_refusal, is_loopback
from errscope.collector.units import parse_duration, parse_time
from errscope.queries.links import TRACE_URL_ENV
from errscope.queries.source import ApiSource

__all__ = ["dashboard"]

_ADDRESS: Final = "127.0.0.1"
_DEFAULT_PORT: Final = DASHBOARD_PORT
ENV_API: Final = "ERRSCOPE_DASHBOARD_API"
ENV_DB: Final = "ERRSCOPE_DASHBOARD_DB"
ENV_TOKEN: Final = "ERRSCOPE_TOKEN"  # noqa: S105 - a variable name, not a secret
ENV_AS_OF: Final = "ERRSCOPE_DASHBOARD_AS_OF"
ENV_REFRESH_S: Final = "ERRSCOPE_DASHBOARD_REFRESH_S"


def app_path() -> Path:
    """The Streamlit entry point shipped in the `dashboards` package."""
    spec = find_spec("errscope.dashboards")
    if spec is None or spec.origin is None:
        raise click.ClickException("the dashboards package is not installed")
    return Path(spec.origin).parent / "app.py"


def free_port(host: str = _ADDRESS) -> int:
    """A TCP port free on `host` right now (Streamlit needs a concrete port); IPv4 or IPv6
    as `host` is; a host that cannot be bound is a bad --host."""
    try:
        family, kind, proto, _, address = socket.getaddrinfo(host, 0, type=socket.SOCK_STREAM)[0]
        with socket.socket(family, kind, proto) as sock:
            sock.bind(address)
            port: int = sock.getsockname()[1]
            return port
    except OSError as exc:
        raise click.BadParameter(
            f"cannot listen on {host} ({exc.strerror or type(exc).__name__})",
            param_hint="--host",
        ) from None


def check_port_free(host: str, port: int) -> None:
    """Refuse a port another process holds before Streamlit starts (it would print the URL,
    then fail on its own with exit 1)."""
    refusal = bind_refusal(host, port)  # a host that does not resolve: Streamlit says so
    if refusal is not None:
        raise click.BadParameter(
            f"cannot listen on {host}:{port} ({refusal}); pick another, or 0 for a free one",
            param_hint="--port",
        )


def streamlit_command(port: int, host: str = _ADDRESS) -> list[str]:
    """The child's argv: the app on `host`:`port`, headless, no telemetry, no reloader."""
    return [
        sys.executable,
        "-m",
        "streamlit",
        "run",
        str(app_path()),
        "--server.port",
        str(port),
        "--server.address",
        host,
        "--server.headless",
        "true",
        "--browser.gatherUsageStats",
        "false",
        "--server.fileWatcherType",
        "none",
        "--server.runOnSave",
        "false",
        "--client.toolbarMode",
        "viewer",
    ]


def child_environment(
    base: dict[str, str],
    *,
    api: str | None,
    token: str | None,
    db: Path | None,
    as_of: str | None,
    refresh_s: int,
    trace_url: str | None = None,
) -> dict[str, str]:
    """`base` with the dashboard's source settings set and stale ones removed."""
    stale = (ENV_API, ENV_DB, ENV_TOKEN, ENV_AS_OF, TRACE_URL_ENV)
    env = {k: v for k, v in base.items() if k not in stale}
    if trace_url:
        env[TRACE_URL_ENV] = trace_url
    if api is not None:
        env[ENV_API] = api
    if token:
        env[ENV_TOKEN] = token
    if db is not None:
        env[ENV_DB] = str(db.resolve())
    if as_of is not None:
        env[ENV_AS_OF] = as_of
    env[ENV_REFRESH_S] = str(refresh_s)
    return env


def _check_flags(api: str | None, db: Path | None, as_of: str | None, refresh: str) -> int:
    if (api is None) == (db is None):
        raise click.UsageError("give exactly one of --db PATH or --api URL")
    if api is not None:
        try:
            ApiSource(api)
        except ErrscopeError as exc:
            raise click.BadParameter(exc.message, param_hint="--api") from None
    if db is not None and not db.is_file():
        raise click.BadParameter("no such file", param_hint="--db")
    if as_of is not None:
        try:
            parse_time(as_of)
        except ValueError as exc:
            raise click.BadParameter(str(exc), param_hint="--as-of") from None
    if refresh in ("0", "off"):
        return 0
    try:
        return max(1, round(parse_duration(refresh).total_seconds()))
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--refresh") from None


@click.command()
@config_option
@click.option(
    "--port",
    type=click.IntRange(0, 65535),
    default=_DEFAULT_PORT,
    show_default=True,
    help="Port on 127.0.0.1; 0 picks a free one.",
)
@click.option(
    "--host",
    default=_ADDRESS,
    show_default=True,
    help="Address to listen on; anything but loopback needs a token (e.g. inside a container).",
)
@click.option("--api", help=f"A running sidecar's query API, e.g. {API_URL}.")
@click.option("--token", envvar=ENV_TOKEN, help="Bearer token for --api (or ERRSCOPE_TOKEN).")
@click.option(
    "--db",
    type=click.Path(dir_okay=False, path_type=Path),
    help="A DuckDB store file that no running sidecar holds.",
)
@click.option("--as-of", "as_of", help="Pin 'now' (ISO 8601), for an old copied file.")
@click.option(
    "--refresh",
    default="0",
    show_default=True,
    help="Auto-refresh interval offered by default, e.g. 30s (0: off).",
)
@trace_url_option
def dashboard(
    *,
    host: str,
    port: int,
    api: str | None,
    token: str | None,
    db: Path | None,
    as_of: str | None,
    refresh: str,
    trace_url: str | None,
) -> None:
    """Open the Streamlit dashboard on a sidecar's query API or a database file."""
    refresh_s = _check_flags(api, db, as_of, refresh)
    if not is_loopback(host) and not token:
        # The dashboard has no login of its own: off loopback it must at least sit on a
        # token-protected sidecar, and behind an authenticating proxy (docs/dashboard.md).
        raise click.UsageError("--host other than loopback needs --token (or ERRSCOPE_TOKEN)")
    free = free_port(host)  # also refuses a host this machine cannot listen on
    if port:
        check_port_free(host, port)
    port = port or free
    env = child_environment(
        dict(os.environ),
        api=api,
        token=token,
        db=db,
        as_of=as_of,
        refresh_s=refresh_s,
        trace_url=trace_url,
    )
    child = subprocess.Popen(streamlit_command(port, host), env=env)  # noqa: S603 - our own argv

    def forward(signum: int, _frame: FrameType | None) -> None:
        child.send_signal(signum)

    previous = {s: signal.signal(s, forward) for s in (signal.SIGINT, signal.SIGTERM)}
    shown = f"[{host}]" if ":" in host else host  # an IPv6 address in a URL
    click.echo(f"errscope dashboard: http://{shown}:{port}", err=False)
    try:
        code = child.wait()
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
    if code not in (0, -signal.SIGINT, -signal.SIGTERM):
        sys.exit(code if code > 0 else 1)
