"""`errscope serve` and `errscope deploy`: run the sidecar, mark a deploy."""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.request
from datetime import UTC, datetime, timedelta
from http import HTTPStatus
from pathlib import Path

import click

from errscope.collector.cli._common import handle_errors
from errscope.collector.cli.scrub import pii_groups, scrubber_options
from errscope.collector.cli.settings import config_option, file_matchers
from errscope.collector.cli.trace_links import trace_url_option
from errscope.collector.config import (
    API_ADDRESS,
    API_TIMEOUT_S,
    API_URL,
    OTLP_GRPC_ADDRESS,
    OTLP_HTTP_ADDRESS,
    STORE_PATH,
)
from errscope.collector.errors import ConfigError, ConfigErrorKind, StoreError, StoreErrorKind
from errscope.collector.pipeline import ContentPolicy, NonToolPolicy
from errscope.collector.record import Deploy
from errscope.collector.scrub import default_scrubber
from errscope.collector.sidecar.api import refuse_secret_labels
from errscope.collector.sidecar.config import DEFAULT_STORE_MEMORY, ServeConfig
from errscope.collector.sidecar.process import configure_logging, run
from errscope.collector.store.duckdb import DuckDBStore
from errscope.collector.store.lake import mask_secrets
from errscope.collector.units import parse_time
from errscope.queries.source import split_http_url

__all__ = ["deploy", "serve"]


def _off(value: str) -> str | None:
    return None if value.lower() in ("", "off", "none") else value


@click.command()
@config_option
@click.option(
    "--otlp-grpc",
    default=OTLP_GRPC_ADDRESS,
    show_default=True,
    help="OTLP/gRPC address ('off' to disable).",
)
@click.option(
    "--otlp-http",
    default=OTLP_HTTP_ADDRESS,
    show_default=True,
    help="OTLP/HTTP address ('off' to disable).",
)
@click.option(
    "--api",
    default=API_ADDRESS,
    show_default=True,
    help="Query API address ('off' to disable).",
)
@click.option(
    "--store",
    envvar="ERRSCOPE_STORE",
    default=STORE_PATH,
    show_default=True,
    help="A DuckDB file path, or ducklake:postgres:<conninfo> (with --data-path).",
)
@click.option("--data-path", envvar="ERRSCOPE_DATA_PATH", help="DuckLake Parquet folder or URL.")
@click.option("--token", envvar="ERRSCOPE_TOKEN", help="Bearer token required on ingest and API.")
@click.option("--insecure", is_flag=True, help="Allow a non-loopback bind without a token.")
@click.option(
    "--forward",
    envvar="ERRSCOPE_FORWARD",
    help="Forward scrubbed spans to http://HOST:PORT or grpc://HOST:PORT ('off' for none).",
)
@click.option(
    "--store-memory",
    envvar="ERRSCOPE_STORE_MEMORY",
    default=DEFAULT_STORE_MEMORY,
    show_default=True,
    help="Bound on DuckDB's memory for a file store ('default': DuckDB's own, 80% of RAM).",
)
@click.option("--max-body-bytes", type=int, default=16 * 1024 * 1024, show_default=True)
@click.option(
    "--max-inflight-bytes",
    type=int,
    default=64 * 1024 * 1024,
    show_default=True,
    help="Admission bound; over it clients get the retryable overload answer.",
)
@click.option(
    "--non-tool",
    type=click.Choice([p.value for p in NonToolPolicy]),
    default="scrub",
    show_default=True,
)
@click.option(
    "--content",
    type=click.Choice([p.value for p in ContentPolicy]),
    envvar="ERRSCOPE_CONTENT",
    default=ContentPolicy.DROP.value,
    show_default=True,
    help="Conversation content in forwarded spans: drop it, or keep it (still scrubbed).",
)
@click.option(
    "--log-format", type=click.Choice(["text", "json"]), default="text", show_default=True
)
@click.option(
    "--catalog",
    "catalogs",
    multiple=True,
    type=click.Path(exists=True, dir_okay=False),
    help="A user catalog file; its codes are stored as themselves, not as unknown (repeatable).",
)
@trace_url_option
@scrubber_options
@handle_errors
def serve(
    *,
    otlp_grpc: str,
    otlp_http: str,
    api: str,
    store: str,
    data_path: str | None,
    token: str | None,
    insecure: bool,
    forward: str | None,
    store_memory: str,
    max_body_bytes: int,
    max_inflight_bytes: int,
    non_tool: str,
    content: str,
    log_format: str,
    catalogs: tuple[str, ...],
    trace_url: str | None,
    rule_files: tuple[Path, ...],
    pii: bool,
    pii_off: tuple[str, ...],
) -> None:
    """Run the sidecar: OTLP in, stored tool-call codes, query API, optional forwarding.

    Exit status: 0 after a clean drain; 2 for a bad flag or a store that cannot be opened;
    74 when the store's final checkpoint fails on SIGTERM (a full disk: the acknowledged
    spans stay in its write-ahead log, folded in at the next start).
    """
    configure_logging(log_format)
    config = ServeConfig(
        otlp_grpc=_off(otlp_grpc),
        otlp_http=_off(otlp_http),
        api=_off(api),
        store=store,
        data_path=data_path or None,
        token=token or None,
        insecure=insecure,
        forward=_off(forward) if forward else None,
        store_memory=None if store_memory == "default" else store_memory,
        max_body_bytes=max_body_bytes,
        max_inflight_bytes=max_inflight_bytes,
        non_tool=NonToolPolicy(non_tool),
        content=ContentPolicy(content),
        catalog_files=tuple(catalogs),
        matchers=file_matchers(click.get_current_context()),
        trace_url=trace_url,
        rule_files=tuple(str(f) for f in rule_files),
        pii_groups=pii_groups(pii=pii, pii_off=pii_off),
    )
    raise SystemExit(run(config))


@click.command()
@click.option("--service", required=True)
@click.option("--version", "version_", required=True)
@click.option("--environment")
@click.option("--time", "when", help="When the deploy happened (ISO 8601 or e.g. 5m); default now.")
@click.option("--api", default=None, help=f"Sidecar API (default {API_URL} unless --db).")
@click.option("--token", envvar="ERRSCOPE_TOKEN")
@click.option(
    "--db",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Write to a store file no sidecar holds.",
)
@handle_errors
def deploy(
    *,
    service: str,
    version_: str,
    environment: str | None,
    when: str | None,
    api: str | None,
    token: str | None,
    db: Path | None,
) -> None:
    """Mark a deploy of SERVICE at VERSION (a pipeline calls this after a rollout)."""
    try:
        ts = parse_time(when) if when else datetime.now(UTC)
    except ValueError as exc:
        raise click.BadParameter(
            f"{exc} (ISO 8601 or a duration ago)", param_hint="--time"
        ) from None
    if ts > datetime.now(UTC) + timedelta(minutes=5):
        raise click.BadParameter("in the future", param_hint="--time")
    mark = Deploy(service=service, version=version_, environment=environment, ts=ts, source="cli")
    mark.validate()
    # Checked here too, so a label holding a secret never leaves this machine.
    refuse_secret_labels(mark, default_scrubber())
    if db is not None:
        if not db.exists():  # a mistyped path must not start a new, unread store
            raise StoreError(
                StoreErrorKind.UNREADABLE,
                "database file does not exist",
                entry=str(db),
                hint="pass the path of a store written by `errscope serve` or `errscope run`",
            )
        with DuckDBStore(db) as store:
            store.add_deploys([mark])
        click.echo(f"marked {service} {version_} at {ts.isoformat()} in {db}")
        return
    base = (api or os.environ.get("ERRSCOPE_API") or API_URL).rstrip("/")
    if split_http_url(base) is None:
        raise ConfigError(
            ConfigErrorKind.BAD_VALUE,
            "the sidecar's API address must be an http(s) URL",
            entry=mask_secrets(base),
            field="api",
            hint=f"for example {API_URL}",
        )
    url = base + "/v1/deploys"
    shown = mask_secrets(url)  # an URL's password never reaches the terminal
    body = json.dumps(
        {
            "service": service,
            "version": version_,
            "environment": environment,
            "ts": ts.isoformat(),
            "source": "cli",
        }
    ).encode()
    headers = {"Content-Type": "application/json"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    request = urllib.request.Request(url, data=body, headers=headers, method="POST")  # noqa: S310
    try:
        with urllib.request.urlopen(request, timeout=API_TIMEOUT_S) as response:  # noqa: S310
            answer = response.read(4096)
    except urllib.error.HTTPError as exc:
        raise _refused(exc, shown) from None
    except OSError as exc:
        raise ConfigError(
            ConfigErrorKind.UNREADABLE,
            f"cannot reach the sidecar ({type(exc).__name__})",
            entry=shown,
            hint="is `errscope serve` running? or pass --db PATH",
        ) from None
    if response.status != HTTPStatus.CREATED or not _is_deploy_answer(answer):
        # Some other server (a web page) answered 200: nothing was marked.
        raise ConfigError(
            ConfigErrorKind.UNREADABLE,
            f"the answer (HTTP {response.status}) is not an errscope sidecar's",
            entry=shown,
            field="api",
            hint="point --api at the sidecar's API address (its --api flag)",
        )
    click.echo(f"marked {service} {version_} at {ts.isoformat()}")


def _is_deploy_answer(body: bytes) -> bool:
    """Whether `body` is what `POST /v1/deploys` answers: the mark, as JSON."""
    try:
        answer = json.loads(body)
    except ValueError:
        return False
    return isinstance(answer, dict) and {"service", "version", "ts"} <= answer.keys()


def _refused(exc: urllib.error.HTTPError, url: str) -> ConfigError:
    """The sidecar's own one-line reason for refusing a deploy mark, with the status."""
    try:
        answer = json.loads(exc.read(4096))
        reason = str(answer.get("message") or answer.get("error") or "")[:200]
    except (OSError, ValueError, AttributeError):
        reason = ""
    if exc.code == 401:
        return ConfigError(
            ConfigErrorKind.BAD_VALUE,
            "the sidecar refused the token (HTTP 401)",
            entry=url,
            field="token",
            hint="pass the sidecar's token with --token or ERRSCOPE_TOKEN",
        )
    message = f"the sidecar answered HTTP {exc.code}" + (f": {reason}" if reason else "")
    return ConfigError(ConfigErrorKind.BAD_VALUE, message, entry=url)
