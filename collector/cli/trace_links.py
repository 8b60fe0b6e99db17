"""`--trace-url` (ERRSCOPE_TRACE_URL, `trace_url` in errscope.toml): where a trace is read.

One option for `serve`, `check`, `findings` and `dashboard`, its value checked as it is
read (flag, variable or file) by errscope.queries.links: a bad template is one error line
naming the placeholder or part that is wrong, never the value, which may hold credentials.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

import click

from errscope.collector.errors import ConfigError
from errscope.queries.links import TRACE_URL_ENV, expand_template

__all__ = ["TRACE_URL_ENV", "TraceUrl", "trace_url_option"]

F = TypeVar("F", bound=Callable[..., Any])

# Newer click types ParamType as generic; older releases pyproject allows cannot subscript it.
if TYPE_CHECKING:
    _TextType = click.ParamType[str | None, Any]
else:
    _TextType = click.ParamType


class TraceUrl(_TextType):
    """A trace URL preset or template; the text is kept as given (expanded when used)."""

    name = "trace URL template"
    #: Its messages name the problem, never the value: `errscope config` may show them.
    messages_hold_no_value = True

    def convert(
        self, value: Any, param: click.Parameter | None, ctx: click.Context | None
    ) -> str | None:
        """The text, once `expand_template` accepts it."""
        if value is None or value == "":
            return None
        try:
            expand_template(str(value))
        except ConfigError as exc:
            self.fail(exc.message, param, ctx)
        return str(value)


def trace_url_option(func: F) -> F:
    """Give a command `--trace-url` (ERRSCOPE_TRACE_URL)."""
    option = click.option(
        "--trace-url",
        envvar=TRACE_URL_ENV,
        type=TraceUrl(),
        help="Links to traces: jaeger:URL, tempo:GRAFANA_URL, honeycomb:TEAM/ENV, "
        "datadog[:URL], or a URL template with {trace_id} and {span_id}.",
    )
    return option(func)
