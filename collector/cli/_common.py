"""What every errscope command shares: exit statuses, one-line errors, signals, sources, tables.

`handle_errors` is the one error boundary of a command: an `ErrscopeError` becomes one line
on stderr (`error[kind] entry.field: message — hint`) and exit 2; Ctrl-C exit 130 and SIGTERM
exit 143, each with one `error[interrupted]` line and no verdict (never click's "Aborted!"
and exit 1, which `check` uses for "regression"); anything else one line naming the
exception's type only (never its message, which may carry payload) and exit 70.  No command
prints a traceback unless ERRSCOPE_DEBUG=1.

Heavy modules (rich, DuckDB, the read side) are imported inside the helpers that need them,
so importing this module costs a command nothing it does not use.
"""

from __future__ import annotations

import csv
import io
import os
import signal
import sys
import threading
from collections.abc import Callable
from datetime import datetime, timedelta
from functools import wraps
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, NoReturn, ParamSpec, TypeVar

import click
import orjson

from errscope.collector.config import API_URL
from errscope.collector.errors import ErrscopeError
from errscope.collector.units import parse_duration

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = [
    "EXIT_INTERNAL",
    "EXIT_INTERRUPTED",
    "EXIT_TERMINATED",
    "EXIT_USAGE",
    "Terminated",
    "console",
    "duration_flag",
    "handle_errors",
    "open_source",
    "raise_on_sigterm",
    "render_table",
    "source_options",
    "stderr",
]

EXIT_USAGE: Final = 2
EXIT_INTERNAL: Final = 70
EXIT_INTERRUPTED: Final = 130  # 128 + SIGINT, as shells report it
EXIT_TERMINATED: Final = 143  # 128 + SIGTERM

_LOG_WIDTH: Final = 240  # columns of a table printed into a log rather than a terminal

P = ParamSpec("P")
R = TypeVar("R")


class Terminated(Exception):  # noqa: N818 - it names the signal, not a failure
    """SIGTERM arrived (a CI job cancelled): stop like Ctrl-C, with no verdict."""


# The stopping signal that arrived, if any: a signal landing inside a library call (DuckDB
# mid-query) can surface as that library's own exception instead of ours.
_stopped_by: list[int] = []


def raise_on_sigterm() -> None:
    """Turn SIGTERM into `Terminated` in the main thread, so a waiting command says why;
    note SIGINT too, so an interrupted query reads as interrupted, not as a crash."""
    if threading.current_thread() is not threading.main_thread():
        return

    def _raise(signum: int, _frame: object) -> None:
        _stopped_by.append(signum)
        raise Terminated

    def _interrupt(signum: int, frame: object) -> None:
        _stopped_by.append(signum)
        signal.default_int_handler(signum, frame)  # type: ignore[arg-type]

    signal.signal(signal.SIGTERM, _raise)
    signal.signal(signal.SIGINT, _interrupt)


def stderr(line: str) -> None:
    """Write one line to stderr."""
    click.echo(line, err=True)


def _exit_interrupted(*, terminated: bool) -> NoReturn:
    stderr(
        "error[interrupted] "
        + ("terminated (SIGTERM)" if terminated else "stopped by the user")
        + "; no verdict"
    )
    sys.exit(EXIT_TERMINATED if terminated else EXIT_INTERRUPTED)


def handle_errors(func: Callable[P, R]) -> Callable[P, R]:
    """Map errscope errors to one line and exit 2, interruptions to 130 (Ctrl-C) or 143
    (SIGTERM), anything else to one line and exit 70 (see the module docstring)."""

    @wraps(func)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return func(*args, **kwargs)
        except ErrscopeError as exc:
            stderr(exc.describe())
            sys.exit(EXIT_USAGE)
        except (click.exceptions.Exit, click.ClickException, click.Abort):
            raise
        except KeyboardInterrupt:
            _exit_interrupted(terminated=False)
        except Terminated:
            _exit_interrupted(terminated=True)
        except Exception as exc:
            if _stopped_by:  # the signal surfaced as a library's error (DuckDB mid-query)
                _exit_interrupted(terminated=_stopped_by[0] == signal.SIGTERM)
            if os.environ.get("ERRSCOPE_DEBUG") == "1":
                raise
            stderr(f"error[internal] unexpected {type(exc).__name__}; rerun with ERRSCOPE_DEBUG=1")
            sys.exit(EXIT_INTERNAL)

    return wrapper


def duration_flag(text: str, flag: str) -> timedelta:
    """`text` as a duration (30d, 12h); a bad one is a usage error naming `flag`."""
    try:
        return parse_duration(text)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint=flag) from None


def source_options(func: Callable[P, R]) -> Callable[P, R]:
    """`--db`, `--api` and `--token`: where a reading command finds its query source."""
    for option in reversed(
        [
            click.option("--db", help="A store file, or a ducklake:postgres:... URL."),
            click.option("--api", help=f"A running sidecar's query API, e.g. {API_URL}."),
            click.option("--token", envvar="ERRSCOPE_TOKEN", help="Bearer token for --api."),
        ]
    ):
        func = option(func)
    return func


def open_source(db: str | Path | None, api: str | None, token: str | None) -> Any:
    """The query source chosen by --db or --api (exactly one)."""
    from errscope.queries.source import ApiSource, FileSource  # noqa: PLC0415 - the read side, on demand

    if (db is None) == (api is None):
        raise click.UsageError("give exactly one of --db PATH or --api URL")
    if db is not None:
        return FileSource(db)
    return ApiSource(str(api), token=token)


def console() -> Any:
    """A rich console; off a terminal (a CI log) wide enough not to fold a table's columns.

    Rich assumes 80 columns when stdout is not a terminal, which wraps a findings table
    into columns five characters wide.  COLUMNS, when set, wins.
    """
    from rich.console import Console  # noqa: PLC0415 - rich only when printing a table

    wide = not sys.stdout.isatty() and not os.environ.get("COLUMNS")
    return Console(width=_LOG_WIDTH if wide else None)


def render_table(table: pa.Table, fmt: str, *, title: str | None = None) -> str | None:
    """Render an Arrow table as csv or json text; for `table`, print it and return None."""
    from rich.table import Table  # noqa: PLC0415 - rich only when printing a table

    from errscope.queries.runner import json_value  # noqa: PLC0415 - DuckDB only for commands that query

    rows = table.to_pylist()
    if fmt == "json":
        return orjson.dumps(rows, default=json_value, option=orjson.OPT_NAIVE_UTC).decode()
    if fmt == "csv":
        buffer = io.StringIO()
        writer = csv.writer(buffer, lineterminator="\n")
        writer.writerow(table.column_names)
        for row in rows:
            writer.writerow(
                [
                    "" if v is None else v.isoformat() if isinstance(v, datetime) else v
                    for v in row.values()
                ]
            )
        return buffer.getvalue().rstrip("\n")
    out = Table(title=title)
    for name in table.column_names:
        out.add_column(name, overflow="fold")
    for row in rows:
        out.add_row(*("" if v is None else str(v) for v in row.values()))
    console().print(out)
    return None
