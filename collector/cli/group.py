"""The `errscope` click group and its command registry.

Every command lives in its own module of this package and is imported only when it runs
(or when `--help` lists it): `errscope serve` should not pay for scipy, Streamlit or rich
tables it never uses — that is both start-up time and ~70 MB of resident memory in a
long-running sidecar.  A bad command line is one `error[code] flag: message — hint` line
and exit 2, the same shape as every other errscope error (see `_common`).
"""

from __future__ import annotations

import sys
from importlib import import_module
from typing import Any, Final

import click

from errscope.collector import __version__
from errscope.collector.cli._common import EXIT_INTERRUPTED, EXIT_USAGE, stderr
from errscope.collector.errors import ErrscopeError

__all__ = ["COMMANDS", "LazyGroup", "describe_usage_error", "main"]

COMMANDS: Final[dict[str, str]] = {
    "catalog": "errscope.collector.cli.catalog:catalog",
    "check": "errscope.collector.cli.gate:check",
    "config": "errscope.collector.cli.settings:config",
    "dashboard": "errscope.collector.cli.dashboard:dashboard",
    "demo": "errscope.collector.cli.demo:demo",
    "deploy": "errscope.collector.cli.serve:deploy",
    "findings": "errscope.collector.cli.gate:findings",
    "maintain": "errscope.collector.cli.store:maintain",
    "migrate": "errscope.collector.cli.migrate:migrate",
    "prune": "errscope.collector.cli.store:prune",
    "query": "errscope.collector.cli.query:query",
    "run": "errscope.collector.cli.run:run",
    "scrub": "errscope.collector.cli.scrub:scrub",
    "serve": "errscope.collector.cli.serve:serve",
    "watch": "errscope.collector.cli.watch:watch",
}
"""Command name → `module:attribute` of its click command."""


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
    """A group whose commands are imported only when invoked (or listed for --help)."""

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
            stderr("error[interrupted] stopped by the user")
            sys.exit(EXIT_INTERRUPTED)
        except click.UsageError as exc:
            no_args = getattr(click.exceptions, "NoArgsIsHelpError", ())
            stderr(exc.format_message() if isinstance(exc, no_args) else describe_usage_error(exc))
            sys.exit(exc.exit_code)
        except click.ClickException as exc:
            stderr(f"error[failed] {exc.format_message()}")
            sys.exit(exc.exit_code)
        except ErrscopeError as exc:  # raised while reading flags: a bad errscope.toml
            stderr(exc.describe())
            sys.exit(EXIT_USAGE)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        """Import a lazy command's module on first use."""
        if cmd_name in self.lazy and cmd_name not in self.commands:
            module_name, attr = self.lazy[cmd_name].split(":")
            command = getattr(import_module(module_name), attr)
            self.add_command(command, cmd_name)
        return super().get_command(ctx, cmd_name)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="errscope")
def main() -> None:
    """errscope: tool-call error codes in, secrets and tracebacks out."""


main.lazy = COMMANDS
