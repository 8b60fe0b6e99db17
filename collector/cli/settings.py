"""errscope.toml on the command line: `--config FILE`, and `errscope config --check/--show`.

A command decorated with `config_option` reads the file named by `--config` (or the
ERRSCOPE_CONFIG variable) before its other flags: the file's table for that command
becomes click's `default_map`, so click's own order applies — a flag over an ERRSCOPE_*
variable over the file over the default (errscope.collector.config says which defaults).
Each value in the file is checked as the flag would check its text, so a bad value is one
`error[bad_value] serve.otlp_grpc: ...` line naming the table and key, never the flag it
stands for.  The file's `[[matchers]]` reach the command through `file_matchers(ctx)`.

`errscope config --show` prints every setting of the commands that read the file,
with its value and where it came from; a token is shown as ****, and a password inside a
URL or connection string is masked.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from importlib import import_module
from typing import Any, Final, TypeVar

import click

from errscope.collector.cli._common import handle_errors
from errscope.collector.config import CONFIG_COMMANDS, CONFIG_ENV, ConfigFile, Matcher, load_file
from errscope.collector.errors import ConfigError, ConfigErrorKind

__all__ = ["config", "config_option", "file_matchers", "setting_keys"]

F = TypeVar("F", bound=Callable[..., Any])

_META_KEY: Final = "errscope.config"
# Settings whose value is a credential: shown as **** by `config --show`.  A webhook URL
# is one (Slack's carries its token in the path).
_SECRET_SETTINGS: Final = frozenset({"token", "webhook", "pagerduty_routing_key"})


def _check_webhooks(values: object) -> None:
    from errscope.collector.watch.sinks import check_webhook  # noqa: PLC0415 - only for [watch]

    for text in values if isinstance(values, list) else [values]:
        check_webhook(str(text))


# Values checked beyond their flag's type, as the command checks them when it starts
# (raising its ConfigError, whose message never holds the value).
_VALUE_CHECKS: Final[Mapping[tuple[str, str], Callable[[object], None]]] = {
    ("watch", "webhook"): _check_webhooks,
}


def _command(name: str) -> click.Command:
    from errscope.collector.cli.group import COMMANDS  # noqa: PLC0415 - group imports this module's users

    module_name, attr = COMMANDS[name].split(":")
    command: click.Command = getattr(import_module(module_name), attr)
    return command


def _key(param: click.Option) -> str:
    """The file's key for a flag: its long name, no dashes, `-` as `_` (--otlp-grpc: otlp_grpc)."""
    longest = max(param.opts, key=len)
    return longest.lstrip("-").replace("-", "_")


def _settings(command: click.Command) -> dict[str, click.Option]:
    """A command's file keys and the flags they stand for (not --config or --help)."""
    return {
        _key(param): param
        for param in command.params
        if isinstance(param, click.Option) and param.name not in (None, "config", "help")
    }


def setting_keys() -> dict[str, frozenset[str]]:
    """For each command that reads the file, the keys its table may hold."""
    return {name: frozenset(_settings(_command(name))) for name in CONFIG_COMMANDS}


def _expected(param: click.Option) -> str:
    if isinstance(param.type, click.Choice):
        return "must be one of " + ", ".join(str(c) for c in param.type.choices)
    return f"must be a valid {param.type.name}"


def _defaults(
    command: click.Command, ctx: click.Context, table: Mapping[str, object], file: ConfigFile
) -> dict[str, object]:
    """The file's table as click's default_map, each value checked as its flag would be."""
    options = _settings(command)
    defaults: dict[str, object] = {}
    for key, value in table.items():
        param = options[key]
        try:
            param.type_cast_value(ctx, value)
        except click.BadParameter as exc:
            # Not click's message: it repeats the value, and the file may hold a token;
            # a type whose messages never hold the value says what is wrong (trace_url).
            safe = getattr(param.type, "messages_hold_no_value", False)
            raise ConfigError(
                ConfigErrorKind.BAD_VALUE,
                exc.message if safe else _expected(param),
                entry=str(command.name),
                field=key,
                hint=f"in {file.path}; the same value as {max(param.opts, key=len)} takes",
            ) from None
        check = _VALUE_CHECKS.get((str(command.name), key))
        if check is not None:
            try:
                check(value)
            except ConfigError as exc:
                raise ConfigError(
                    exc.kind,
                    exc.message,
                    entry=str(command.name),
                    field=key,
                    hint=f"in {file.path}; {exc.hint}" if exc.hint else f"in {file.path}",
                ) from None
        if param.multiple and not isinstance(value, list):
            raise ConfigError(
                ConfigErrorKind.BAD_VALUE,
                "must be a list",
                entry=str(command.name),
                field=key,
                hint=f'in {file.path}; for example {key} = ["a", "b"]',
            )
        defaults[str(param.name)] = value  # _settings keeps named options only
    return defaults


def _load(ctx: click.Context, _param: click.Parameter, value: str | None) -> None:
    if not value:
        return
    file = load_file(value, setting_keys())
    ctx.meta[_META_KEY] = file
    table = file.tables.get(str(ctx.command.name), {})
    ctx.default_map = {**(ctx.default_map or {}), **_defaults(ctx.command, ctx, table, file)}


def config_option(func: F) -> F:
    """Give a command `--config FILE` (ERRSCOPE_CONFIG): errscope.toml's table as its defaults."""
    option = click.option(
        "--config",
        envvar=CONFIG_ENV,
        type=click.Path(dir_okay=False),
        is_eager=True,  # read before the other flags look up their defaults
        expose_value=False,
        callback=_load,
        help=f"errscope.toml: this command's table sets its defaults (or {CONFIG_ENV}).",
    )
    return option(func)


def file_matchers(ctx: click.Context) -> tuple[Matcher, ...]:
    """The `[[matchers]]` of the file this command read, if any."""
    file: ConfigFile | None = ctx.meta.get(_META_KEY)
    return file.matchers if file is not None else ()


def _shown(key: str, value: object) -> str:
    from errscope.collector.store.lake import mask_secrets  # noqa: PLC0415 - only for --show

    if value is None or value == ():
        return "-"
    if key in _SECRET_SETTINGS:
        return "****"
    if isinstance(value, tuple | list):
        return ", ".join(mask_secrets(str(v)) for v in value)
    return mask_secrets(str(value))


def _source(ctx: click.Context, param: click.Option, path: str | None) -> str:
    source = ctx.get_parameter_source(param.name or "")
    if source is click.core.ParameterSource.ENVIRONMENT:
        return f"env {param.envvar}"
    if source is click.core.ParameterSource.DEFAULT_MAP:
        return f"file {path}"
    return "default"


def _show(file: ConfigFile | None) -> None:
    path = str(file.path) if file else None
    for name in CONFIG_COMMANDS:
        command = _command(name)
        table = file.tables.get(name, {}) if file else {}
        probe = click.Context(command, info_name=name)
        default_map = _defaults(command, probe, table, file) if file else {}
        # resilient_parsing: report what a run would start from, without its required flags.
        ctx = command.make_context(name, [], default_map=default_map, resilient_parsing=True)
        click.echo(f"[{name}]")
        for key, param in sorted(_settings(command).items()):
            value = ctx.params.get(param.name or "")
            click.echo(f"  {key} = {_shown(key, value)}    ({_source(ctx, param, path)})")
    if file and file.matchers:
        click.echo(f"[[matchers]]  {len(file.matchers)} from {path}")


@click.command()
@click.option(
    "--check",
    "check_file",
    type=click.Path(dir_okay=False),
    help="Validate this errscope.toml and exit (0: valid; 2: one error line).",
)
@click.option(
    "--show",
    is_flag=True,
    help="Print the effective settings of every command that reads the file, with sources.",
)
@click.option(
    "--config",
    "config_file",
    envvar=CONFIG_ENV,
    type=click.Path(dir_okay=False),
    help=f"The file --show reads (or {CONFIG_ENV}).",
)
@handle_errors
def config(check_file: str | None, show: bool, config_file: str | None) -> None:
    """Check an errscope.toml, or show the effective settings and where each came from."""
    if check_file is None and not show:
        raise click.UsageError("give --check FILE or --show")
    if check_file is not None:
        file = load_file(check_file, setting_keys())
        for name, table in file.tables.items():
            command = _command(name)
            _defaults(command, click.Context(command, info_name=name), table, file)
        counts = ", ".join(f"{name}: {len(t)}" for name, t in sorted(file.tables.items()))
        click.echo(f"ok: {check_file} ({counts or 'no tables'}; {len(file.matchers)} matchers)")
        return
    path = config_file or os.environ.get(CONFIG_ENV)
    _show(load_file(path, setting_keys()) if path else None)
