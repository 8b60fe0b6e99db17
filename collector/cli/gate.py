"""`errscope check` (the deploy gate) and `errscope findings` (what detection sees now).

Both read through a query source (`--db PATH` or `--api URL`) and take `--as-of TIME` to
evaluate as if that were now: every query is bounded by it.  `check` exits 0 healthy,
1 regression, 3 insufficient data, 2 on a usage error (bad flag, unreachable source);
with `--json` it prints one object documented in docs/detection.md.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Final, ParamSpec, TypeVar

import click
import orjson
import pyarrow as pa

from errscope.collector.catalog import load_catalog
from errscope.collector.cli._common import (
    duration_flag,
    handle_errors,
    open_source,
    raise_on_sigterm,
    render_table,
    source_options,
)
from errscope.collector.cli.settings import config_option
from errscope.collector.cli.trace_links import trace_url_option
from errscope.collector.units import parse_time
from errscope.queries.detect import (
    DEFAULT_CONFIG,
    DeployReport,
    detect_all,
    detect_deploy,
    with_codes,
)
from errscope.queries.evidence import gather_evidence
from errscope.queries.findings import Finding, Verdict, finding_dict, findings_json
from errscope.queries.gate import check_answer
from errscope.queries.source import held

__all__ = ["check", "findings"]

_DEFAULT_CODES: Final = ",".join(DEFAULT_CONFIG.codes)
# A time this far ahead of the local clock still counts as now (another machine's clock).
_CLOCK_SKEW: Final = timedelta(minutes=1)
_TABLE_COLUMNS: Final = (
    "kind",
    "service",
    "version",
    "tool",
    "code",
    "field",
    "ratio",
    "p_adjusted",
    "label",
    "summary",
)

P = ParamSpec("P")
R = TypeVar("R")


def _as_of(text: str | None, flag: str = "--as-of") -> datetime | None:
    """A past (or present) time; the future is refused: a gate judged "as of" a time
    that has not come yet would pass on data that does not exist."""
    if text is None:
        return None
    try:
        when = parse_time(text).astimezone(UTC)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint=flag) from None
    if when > datetime.now(UTC) + _CLOCK_SKEW:
        raise click.BadParameter("in the future", param_hint=flag)
    return when


def _known_by(text: str | None, as_of: datetime | None) -> datetime | None:
    """`--known-by`, never earlier than the time judged (`--as-of`, or now): rows received
    after it would be left out of a judgement of a later time."""
    known = _as_of(text, "--known-by")
    if known is not None and known < (as_of or datetime.now(UTC)) - _CLOCK_SKEW:
        raise click.BadParameter("earlier than --as-of (or now)", param_hint="--known-by")
    return known


def _codes(text: str, catalogs: Sequence[Path] = ()) -> tuple[str, ...]:
    """The codes to test, each one the catalog knows: a typo must not make a gate pass."""
    codes = tuple(dict.fromkeys(c.strip() for c in text.split(",") if c.strip()))
    if not codes:
        raise click.BadParameter("a comma-separated list of error codes", param_hint="--codes")
    known = load_catalog(catalogs).codes
    unknown = [c for c in codes if c not in known]
    if unknown:
        raise click.BadParameter(
            f"not in the error catalog: {', '.join(unknown)} (known: {', '.join(known)}; "
            "a code of your own needs --catalog FILE)",
            param_hint="--codes",
        )
    return codes


def _catalog_option(func: Callable[P, R]) -> Callable[P, R]:
    return click.option(
        "--catalog",
        "catalogs",
        multiple=True,
        type=click.Path(exists=True, dir_okay=False, path_type=Path),
        help="A user catalog file whose codes --codes may name (repeatable).",
    )(func)


def _source_options(func: Callable[P, R]) -> Callable[P, R]:
    """Where to read (`--db`, `--api`, `--token`) and the time judged (`--as-of`, `--known-by`)."""
    for option in reversed(
        [
            click.option(
                "--as-of",
                "as_of",
                help="Evaluate as if this were now (ISO 8601, or a duration ago such as 2h).",
            ),
            click.option(
                "--known-by",
                "known_by",
                help="Count only rows received by then (default: --as-of, a faithful replay); "
                "`now` for back-filled or imported data.",
            ),
        ]
    ):
        func = option(func)
    return source_options(func)


def _print_findings(items: Sequence[Finding], title: str) -> None:
    rows = []
    for f in items:
        d = finding_dict(f)
        d["label"] = ",".join(f.label)
        rows.append({k: d[k] for k in _TABLE_COLUMNS})
    if rows:
        render_table(pa.Table.from_pylist(rows), "table", title=title)


@click.command()
@config_option
@click.option("--service", required=True, help="The deployed service.")
@click.option("--version", "version", required=True, help="The version rolled out.")
@click.option("--environment", help="Only this environment.")
@click.option(
    "--wait",
    default="0s",
    show_default=True,
    help="Wait up to this long for a verdict, e.g. 15m (0s: judge once, now).",
)
@click.option("--interval", default="30s", show_default=True, help="How often to re-check.")
@click.option("--codes", default=_DEFAULT_CODES, show_default=True, help="Codes to gate on.")
@_catalog_option
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object (docs/detection.md).")
@trace_url_option
@_source_options
@handle_errors
def check(
    *,
    service: str,
    version: str,
    environment: str | None,
    wait: str,
    interval: str,
    codes: str,
    catalogs: tuple[Path, ...],
    as_json: bool,
    trace_url: str | None,
    db: str | None,
    api: str | None,
    token: str | None,
    as_of: str | None,
    known_by: str | None,
) -> None:
    """Gate a rollout: exit 0 healthy, 1 regression, 3 insufficient data, 2 usage error.

    Waits until a verdict is reached (healthy or regression) or --wait ends.  With
    --as-of the wait is replayed from that time on, without sleeping.
    """
    raise_on_sigterm()  # a cancelled pipeline job gets a line, not a silent 143
    wait_td = duration_flag(wait, "--wait")
    step = duration_flag(interval, "--interval")
    if step <= timedelta(0):
        raise click.BadParameter("must be positive", param_hint="--interval")
    config = with_codes(DEFAULT_CONFIG, _codes(codes, catalogs))
    start = _as_of(as_of)
    known = _known_by(known_by, start)
    moving_known = known_by is not None and known_by.strip().lower() == "now"
    source = open_source(db, api, token)
    now = start or datetime.now(UTC)
    deadline = now + wait_td
    while True:
        if moving_known:
            known = datetime.now(UTC)  # `now` keeps meaning now while the gate waits
        with held(source):  # one look, one open store; released before any wait
            report: DeployReport = detect_deploy(
                source,
                service,
                version,
                environment,
                as_of=now,
                known_by=None if known is None else max(known, now),
                config=config,
            )
        if report.verdict is not Verdict.INSUFFICIENT_DATA or now + step > deadline:
            break
        # A replay (--as-of) runs ahead without sleeping, but never past the clock: from
        # there on it waits for the data, as a live gate does.
        now += step
        lag = (now - datetime.now(UTC)).total_seconds()
        if lag > 0:
            # On stderr, so that --json's stdout stays one document.
            click.echo(
                f"waiting: {report.reason}; next look at {now:%H:%M:%S} UTC,"
                f" until {deadline:%H:%M:%S} UTC",
                err=True,
            )
            time.sleep(lag)
    if as_json:
        # The same object GET /v1/check answers (errscope.queries.gate).
        with held(source):
            answer = check_answer(
                source,
                report,
                service=service,
                version=version,
                environment=environment,
                as_of=now,
                trace_url=trace_url,
            )
        click.echo(orjson.dumps(answer).decode())
    else:
        click.echo(f"{report.verdict.upper()}: {service} {version} — {report.reason}")
        _print_findings(report.findings, "findings")
        _print_findings(report.notes, "notes (not counted against the deploy)")
        for f in report.findings:
            if f.correlation_ids:
                click.echo(f"  {f.tool or 'all tools'}/{f.code}: " + " ".join(f.correlation_ids))
    sys.exit(report.verdict.exit_code)


@click.command()
@config_option
@click.option("--service", help="Only this service.")
@click.option("--environment", help="Only this environment.")
@click.option("--codes", default=_DEFAULT_CODES, show_default=True, help="Codes tested on deploys.")
@_catalog_option
@click.option("--json", "as_json", is_flag=True, help="Print JSON (docs/detection.md).")
@click.option(
    "--long-looks",
    is_flag=True,
    help="Also judge the last day's deploys at +2 h, +6 h and +24 h (slower: reads up to"
    " two days of rows per deploy).",
)
@trace_url_option
@_source_options
@handle_errors
def findings(
    *,
    service: str | None,
    environment: str | None,
    codes: str,
    catalogs: tuple[Path, ...],
    as_json: bool,
    trace_url: str | None,
    db: str | None,
    api: str | None,
    token: str | None,
    as_of: str | None,
    known_by: str | None,
    long_looks: bool,
) -> None:
    """List current findings: deploy regressions, new signatures, spikes, loop misuse."""
    raise_on_sigterm()  # a Ctrl-C inside a DuckDB query is an interruption, not a bug
    config = with_codes(DEFAULT_CONFIG, _codes(codes, catalogs))
    source = open_source(db, api, token)
    when = _as_of(as_of)
    with held(source):  # one pass, one open store
        found = detect_all(
            source,
            as_of=when,
            known_by=_known_by(known_by, when),
            service=service,
            environment=environment,
            config=config,
            long_looks=long_looks,
        )
        evidence = gather_evidence(source, found, trace_url) if as_json else None
    if as_json:
        click.echo(findings_json(found, evidence))
    elif found:
        _print_findings(found, "findings")
    else:
        click.echo("no findings")
