"""`errscope query`: run a named query on a store file or a sidecar's API; table, CSV or JSON."""

from __future__ import annotations

from collections.abc import Sequence

import click

from errscope.collector.cli._common import (
    handle_errors,
    open_source,
    raise_on_sigterm,
    render_table,
    source_options,
)
from errscope.collector.errors import QueryError, QueryErrorKind

__all__ = ["query"]


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


@click.command()
@click.argument("name", required=False)
@source_options
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
