"""The `errscope` command line.

Every command turns an `ErrscopeError` into one line on stderr (`error[kind] entry.field:
message — hint`) and exit status 2; an unexpected failure prints one line with the
exception's type only (never its message, which may carry payload) and exits 70.  No
command ever prints a traceback unless ERRSCOPE_DEBUG=1.
"""

from __future__ import annotations

import csv
import io
import os
import signal
import sys
import threading
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from functools import wraps
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, ParamSpec, TypeVar

import click
import orjson

from errscope.collector import __version__
from errscope.collector.catalog import Catalog, load_catalog
from errscope.collector.errors import ErrscopeError, QueryError, QueryErrorKind
from errscope.collector.units import parse_duration

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = ["main"]

EXIT_USAGE: Final = 2
EXIT_INTERNAL: Final = 70
EXIT_INTERRUPTED: Final = 130  # 128 + SIGINT, as shells report it
EXIT_TERMINATED: Final = 143  # 128 + SIGTERM


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


_LOG_WIDTH: Final = 240  # columns of a table printed into a log rather than a terminal

P = ParamSpec("P")
R = TypeVar("R")


def _stderr(line: str) -> None:
    click.echo(line, err=True)


def handle_errors(func: Callable[P, R]) -> Callable[P, R]:
    """Map errscope errors to one line and exit 2; anything else to one line and exit 70."""

    @wraps(func)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return func(*args, **kwargs)
        except ErrscopeError as exc:
            _stderr(exc.describe())
            sys.exit(EXIT_USAGE)
        except (click.exceptions.Exit, click.ClickException, click.Abort):
            raise
        except KeyboardInterrupt:
            # Not click's "Aborted!" and exit 1, which `check` uses for "regression".
            _stderr("error[interrupted] stopped by the user; no verdict")
            sys.exit(EXIT_INTERRUPTED)
        except Terminated:
            _stderr("error[interrupted] terminated (SIGTERM); no verdict")
            sys.exit(EXIT_TERMINATED)
        except Exception as exc:
            if _stopped_by:  # the signal surfaced as a library's error (DuckDB mid-query)
                terminated = _stopped_by[0] == signal.SIGTERM
                _stderr(
                    "error[interrupted] "
                    + ("terminated (SIGTERM)" if terminated else "stopped by the user")
                    + "; no verdict"
                )
                sys.exit(EXIT_TERMINATED if terminated else EXIT_INTERRUPTED)
            if os.environ.get("ERRSCOPE_DEBUG") == "1":
                raise
            _stderr(f"error[internal] unexpected {type(exc).__name__}; rerun with ERRSCOPE_DEBUG=1")
            sys.exit(EXIT_INTERNAL)

    return wrapper


def describe_usage_error(exc: click.UsageError) -> str:
    """One line for a bad command line: a stable code, the flag, what is wrong, a hint."""
    command = exc.ctx.command_path if exc.ctx is not None else "errscope"
    hint = f"`{command} --help` lists the flags"
    if isinstance(exc, click.MissingParameter) and exc.param is not None:
        flag = (exc.param.opts or [exc.param.name or "?"])[0]
        return f"error[missing_flag] {flag}: required — {hint}"
    if isinstance(exc, click.NoSuchOption):
        known = ", ".join(sorted(exc.possibilities or ()))
        near = f" (did you mean {known}?)" if known else ""
        return f"error[unknown_flag] {exc.option_name}: no such flag{near} — {hint}"
    if isinstance(exc, click.BadParameter):
        named: str | None = exc.param_hint if isinstance(exc.param_hint, str) else None
        if named is None and exc.param is not None:
            named = (exc.param.opts or [exc.param.name or "?"])[0]
        flag = (named or "?").strip("'\"")
        return f"error[bad_flag] {flag}: {exc.message} — {hint}"
    if exc.ctx is not None and isinstance(exc.ctx.command, click.Group):
        return f"error[unknown_command] {exc.message} — `{command} --help` lists the commands"
    return f"error[usage] {exc.message} — {hint}"


class LazyGroup(click.Group):
    """A group whose stage commands are imported only when invoked (or listed for --help).

    `errscope serve` should not pay for scipy, Streamlit or rich tables it never uses: that
    is both start-up time and ~70 MB of resident memory in a long-running sidecar.
    """

    lazy: dict[str, str]

    def list_commands(self, ctx: click.Context) -> list[str]:
        """Every command, eager and lazy, sorted."""
        return sorted({*super().list_commands(ctx), *self.lazy})

    def main(self, *args: Any, **kwargs: Any) -> Any:
        """Run the CLI; a usage error is one `error[code] flag: message — hint` line, exit 2.

        The same shape as every other errscope error, so scripts can match the code; click's
        own three-line "Usage: … Error: Invalid value" has none.
        """
        if kwargs.get("standalone_mode", True) is False:
            return super().main(*args, **kwargs)
        try:
            return super().main(*args, **{**kwargs, "standalone_mode": False})
        except click.exceptions.Exit as exc:
            sys.exit(exc.exit_code)
        except click.Abort:
            _stderr("error[interrupted] stopped by the user")
            sys.exit(EXIT_INTERRUPTED)
        except click.UsageError as exc:
            no_args = getattr(click.exceptions, "NoArgsIsHelpError", ())
            _stderr(exc.format_message() if isinstance(exc, no_args) else describe_usage_error(exc))
            sys.exit(exc.exit_code)
        except click.ClickException as exc:
            _stderr(f"error[failed] {exc.format_message()}")
            sys.exit(exc.exit_code)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        """Import a lazy command's module on first use."""
        if cmd_name in self.lazy and cmd_name not in self.commands:
            from importlib import import_module  # noqa: PLC0415

            module_name, attr = self.lazy[cmd_name].split(":")
            command = getattr(import_module(module_name), attr)
            self.add_command(command, cmd_name)
        return super().get_command(ctx, cmd_name)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="errscope")
def main() -> None:
    """errscope: tool-call error codes in, secrets and tracebacks out."""


# ------------------------------------------------------------------ catalog


def _catalog_rows(catalog: Catalog) -> list[dict[str, Any]]:
    return [
        {
            "code": entry.name,
            "retry_by": str(entry.retry_by),
            "max_tries": entry.max_tries,
            "scope": str(entry.scope),
            "on_cap": str(entry.on_cap),
            "http": list(entry.http),
            "grpc": list(entry.grpc),
            "jsonrpc": list(entry.jsonrpc),
            "meaning": entry.meaning,
            "hint": entry.hint,
            "builtin": entry.builtin,
        }
        for entry in catalog.entries.values()
    ]


@main.command()
@click.option(
    "--check",
    "check_files",
    type=click.Path(dir_okay=False, path_type=Path),
    multiple=True,
    help="Validate a user catalog file (with the built-in one) and print the result.",
)
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table")
@handle_errors
def catalog(check_files: Sequence[Path], fmt: str) -> None:
    """Print the error catalog; with --check FILE, validate a user extension."""
    loaded = load_catalog(check_files)
    rows = _catalog_rows(loaded)
    if fmt == "json":
        click.echo(orjson.dumps({"sources": loaded.sources, "codes": rows}).decode())
        return
    from rich.table import Table  # noqa: PLC0415

    table = Table(title="errscope error catalog", show_lines=True)
    for column in ("code", "retry", "on cap", "maps from", "hint"):
        table.add_column(column, overflow="fold")
    for row in rows:
        maps = "; ".join(
            part
            for part in (
                "HTTP " + ", ".join(map(str, row["http"])) if row["http"] else "",
                "gRPC " + ", ".join(row["grpc"]) if row["grpc"] else "",
                "JSON-RPC " + ", ".join(map(str, row["jsonrpc"])) if row["jsonrpc"] else "",
            )
            if part
        )
        retry = f"{row['retry_by']}, {row['max_tries']} per {row['scope']}"
        table.add_row(row["code"], retry, row["on_cap"], maps, row["hint"])
    _console().print(table)
    if check_files:
        click.echo(f"ok: {', '.join(loaded.sources)} valid ({len(rows)} codes)")


# ------------------------------------------------------------------ query


def _parse_params(pairs: Sequence[str]) -> dict[str, object]:
    params: dict[str, object] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise QueryError(
                QueryErrorKind.BAD_PARAM_VALUE,
                "parameters are given as NAME=VALUE",
                field=key or None,
                hint="for example --param since=24h",
            )
        params[key.strip()] = value
    return params


def _console() -> Any:
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
    _console().print(out)
    return None


def open_source(db: str | Path | None, api: str | None, token: str | None) -> Any:
    """The query source chosen by --db or --api (exactly one)."""
    from errscope.queries.source import ApiSource, FileSource  # noqa: PLC0415 - the read side, on demand

    if (db is None) == (api is None):
        raise click.UsageError("give exactly one of --db PATH or --api URL")
    if db is not None:
        return FileSource(db)
    return ApiSource(str(api), token=token)


@main.command()
@click.argument("name", required=False)
@click.option("--db", help="A store file, or a ducklake:postgres:... URL.")
@click.option("--api", help="A running sidecar's query API, e.g. http://127.0.0.1:4320.")
@click.option("--token", envvar="ERRSCOPE_TOKEN", help="Bearer token for --api.")
@click.option("--param", "-p", "params", multiple=True, metavar="NAME=VALUE")
@click.option("--format", "fmt", type=click.Choice(["table", "csv", "json"]), default="table")
@click.option("--list", "list_only", is_flag=True, help="List the named queries and exit.")
@handle_errors
def query(
    *,
    name: str | None,
    db: str | None,
    api: str | None,
    token: str | None,
    params: Sequence[str],
    fmt: str,
    list_only: bool,
) -> None:
    """Run a named query (see --list); no SQL text is ever accepted."""
    raise_on_sigterm()  # a Ctrl-C inside a DuckDB query is an interruption, not a bug
    from errscope.queries.runner import default_queries, get_query  # noqa: PLC0415

    if list_only or name is None:
        for query_ in default_queries().values():
            args = " ".join(
                f"{p.name}={'REQUIRED' if p.required else p.default}" for p in query_.params
            )
            click.echo(f"{query_.name:<28} {query_.returns}" + (f"  [{args}]" if args else ""))
        return
    get_query(name)  # an unknown name is refused before any file is opened
    source = open_source(db, api, token)
    table = source.run(name, _parse_params(params))
    text = render_table(table, fmt, title=name)
    if text is not None:
        click.echo(text)


# ------------------------------------------------------------------ prune


def _duration(text: str, flag: str) -> timedelta:
    try:
        return parse_duration(text)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint=flag) from None


def _existing_store(db: str) -> Any:
    """A store to change in place: a DuckDB file that exists, or a `ducklake:` URL."""
    from errscope.collector.store import open_store  # noqa: PLC0415
    from errscope.collector.store.lake import LAKE_PREFIX  # noqa: PLC0415

    if not db.startswith(LAKE_PREFIX) and not Path(db).is_file():
        raise click.BadParameter("no such file (or a ducklake:postgres:... URL)", param_hint="--db")
    return open_store(db)


@main.command()
@click.option("--db", required=True, help="A store file, or a ducklake:postgres:... URL.")
@click.option("--older-than", "older_than", required=True, help="For example 30d, 12h.")
@handle_errors
def prune(db: str, older_than: str) -> None:
    """Delete rows older than a duration (retention)."""
    age = _duration(older_than, "--older-than")
    store = _existing_store(db)
    try:
        report = store.prune(age, now=datetime.now(UTC))
    finally:
        store.close()
    parts = ", ".join(f"{table} {count}" for table, count in report.deleted.items())
    click.echo(f"pruned rows older than {report.cutoff.isoformat()}: {parts}")


@main.command()
@click.option("--db", required=True, help="A ducklake:postgres:... URL.")
@click.option(
    "--keep-snapshots",
    default="1h",
    show_default=True,
    help="Snapshots older than this are expired (readers older than it must retry).",
)
@handle_errors
def maintain(db: str, keep_snapshots: str) -> None:
    """Compact a DuckLake store: merge small files, expire old snapshots, delete unused files.

    Run it from one place (one sidecar host, or cron), not from every pod.  A DuckDB file
    needs no maintenance (DuckDB checkpoints it).
    """
    from errscope.collector.store.lake import LAKE_PREFIX  # noqa: PLC0415

    if not db.startswith(LAKE_PREFIX):
        raise click.BadParameter(
            "maintenance is for a DuckLake store (ducklake:postgres:...); a DuckDB file needs none",
            param_hint="--db",
        )
    keep = _duration(keep_snapshots, "--keep-snapshots")
    store = _existing_store(db)
    try:
        report = store.maintain(keep_snapshots=keep)
    finally:
        store.close()
    click.echo(
        f"maintained: {report.merged_files} files merged, {report.expired_snapshots} snapshots "
        f"expired, {report.deleted_files} files deleted, {report.flushed_rows} inlined rows "
        f"flushed, {report.duplicates_removed} duplicate rows removed; "
        f"{report.data_files} data files"
    )


main.lazy = {
    "run": "errscope.collector.demo.run_cli:run",
    "serve": "errscope.collector.serve_cli:serve",
    "demo": "errscope.collector.demo.cli:demo",
    "dashboard": "errscope.collector.dashboard_cli:dashboard",
    "deploy": "errscope.collector.serve_cli:deploy",
    "check": "errscope.collector.gate_cli:check",
    "findings": "errscope.collector.gate_cli:findings",
    "scrub": "errscope.collector.scrub.cli:scrub",
    "migrate": "errscope.collector.lake_cli:migrate",
}

if __name__ == "__main__":
    main()
