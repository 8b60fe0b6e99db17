"""Links to a trace in the tracing backend: a URL template, its presets, and `trace_url`.

One setting, `trace_url` (errscope.toml, ERRSCOPE_TRACE_URL or `--trace-url`), says where
a human reads a trace.  It is either a preset or a template of one's own:

    jaeger:BASE          BASE/trace/{trace_id}?uiFind={span_id}           (Jaeger UI)
    tempo:BASE           BASE/explore?schemaVersion=1&panes=...           (Grafana Explore, a
                         TraceQL query for the trace id on the data source whose uid is `tempo`)
    honeycomb:TEAM/ENV   https://ui.honeycomb.io/TEAM/environments/ENV/trace?trace_id=...&span=...
    datadog[:BASE]       BASE/apm/trace/{dd_trace_id}?spanID={dd_span_id}  (BASE defaults
                         to https://app.datadoghq.com)
    https://...          a template: {trace_id} (32 hex), {span_id} (16 hex), and Datadog's
                         decimal forms {dd_trace_id} / {dd_span_id} (the low 64 bits, which
                         is how Datadog maps an OpenTelemetry id); `{{` and `}}` are braces

`expand_template` turns either into one checked template, or raises `ConfigError` (kind
BAD_VALUE, field `trace_url`) naming the placeholder or part that is wrong, never echoing
the value (a URL may carry credentials).  `trace_url` fills a template with ids; it never
raises, and answers None when there is no template or the ids are not OpenTelemetry ids.
Pure functions, no I/O, safe from any thread.
"""

from __future__ import annotations

import json
import re
import string
from functools import lru_cache
from typing import Final
from urllib.parse import quote, urlsplit

from errscope.collector.errors import ConfigError, ConfigErrorKind

__all__ = ["PLACEHOLDERS", "PRESETS", "TRACE_URL_ENV", "expand_template", "trace_url"]

#: The variable that sets it (the CLI's --trace-url; the dashboard's process reads it).
TRACE_URL_ENV: Final = "ERRSCOPE_TRACE_URL"

#: The placeholders a template may use.
PLACEHOLDERS: Final = ("trace_id", "span_id", "dd_trace_id", "dd_span_id")
#: The preset names, each written `name:ARGUMENT` (`datadog` alone takes its default site).
PRESETS: Final = ("jaeger", "tempo", "honeycomb", "datadog")

_FIELD: Final = "trace_url"
_HINT: Final = (
    "a preset (jaeger:BASE, tempo:BASE, honeycomb:TEAM/ENV, datadog[:BASE]) or an http(s) URL "
    "with {trace_id}; the README's Links to traces lists them"
)
_TRACE_ID: Final = re.compile(r"[0-9a-f]{32}")
_SPAN_ID: Final = re.compile(r"[0-9a-f]{16}")
_DATADOG_BASE: Final = "https://app.datadoghq.com"
_HONEYCOMB_BASE: Final = "https://ui.honeycomb.io"
# Grafana's data source uid the tempo preset names; another uid needs a template.
_TEMPO_DATASOURCE: Final = "tempo"
_MARK: Final = "ERRSCOPETRACEID"  # stands for {trace_id} while the Explore state is encoded


def _refuse(message: str) -> ConfigError:
    return ConfigError(ConfigErrorKind.BAD_VALUE, message, field=_FIELD, hint=_HINT)


def _base(argument: str, preset: str) -> str:
    parts = urlsplit(argument)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise _refuse(f"the {preset} preset takes an http(s) base URL: {preset}:https://host")
    return argument.rstrip("/")


def _escape(text: str) -> str:
    """Literal text inside a template: its braces doubled."""
    return text.replace("{", "{{").replace("}", "}}")


def _tempo(base: str) -> str:
    panes = {
        "a": {
            "datasource": _TEMPO_DATASOURCE,
            "queries": [
                {
                    "refId": "A",
                    "datasource": {"type": "tempo", "uid": _TEMPO_DATASOURCE},
                    "queryType": "traceql",
                    "query": _MARK,
                }
            ],
            "range": {"from": "now-1h", "to": "now"},
        }
    }
    state = quote(json.dumps(panes, separators=(",", ":")), safe="")
    return _escape(f"{base}/explore?schemaVersion=1&panes=") + state.replace(_MARK, "{trace_id}")


def _preset(name: str, argument: str) -> str:
    match name:
        case "jaeger":
            return _escape(_base(argument, name)) + "/trace/{trace_id}?uiFind={span_id}"
        case "tempo":
            return _tempo(_base(argument, name))
        case "honeycomb":
            team, _, env = argument.partition("/")
            if not re.fullmatch(r"[A-Za-z0-9_.-]+", team) or not re.fullmatch(
                r"[A-Za-z0-9_.-]+", env
            ):
                raise _refuse("the honeycomb preset takes TEAM/ENVIRONMENT: honeycomb:acme/prod")
            return (
                f"{_HONEYCOMB_BASE}/{team}/environments/{env}/trace"
                "?trace_id={trace_id}&span={span_id}"
            )
        case "datadog":
            base = _base(argument, name) if argument else _DATADOG_BASE
            return _escape(base) + "/apm/trace/{dd_trace_id}?spanID={dd_span_id}"
    raise _refuse("not a preset")  # pragma: no cover - the caller matched a preset name


def _check_template(template: str) -> None:
    try:
        parsed = list(string.Formatter().parse(template))
    except ValueError:
        raise _refuse("unbalanced braces; write {{ and }} for literal braces") from None
    fields: set[str] = set()
    for _, name, spec, conversion in parsed:
        if name is None:
            continue
        if name not in PLACEHOLDERS:
            shown = name if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]{0,31}", name) else "?"
            raise _refuse(f"unknown placeholder {{{shown}}}; use {', '.join(PLACEHOLDERS)}")
        if spec or conversion:
            raise _refuse(f"placeholder {{{name}}} takes no format spec or conversion")
        fields.add(name)
    if not fields & {"trace_id", "dd_trace_id"}:
        raise _refuse("the template never names the trace: put {trace_id} in it")
    parts = urlsplit(template)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise _refuse("must be an http(s) URL")


@lru_cache(maxsize=64)
def expand_template(text: str) -> str:
    """The checked template a `trace_url` setting stands for (a preset expanded).

    Raises ConfigError (BAD_VALUE, field `trace_url`): an unknown preset, a bad preset
    argument, an unknown placeholder, unbalanced braces, no trace id, not http(s).
    """
    text = text.strip()
    name, sep, argument = text.partition(":")
    if name in PRESETS and (sep or name == "datadog") and not argument.startswith("//"):
        template = _preset(name, argument)
    elif name in ("http", "https"):
        template = text
    else:
        raise _refuse("neither a preset nor an http(s) URL")
    _check_template(template)
    return template


def _decimal_low64(hex_id: str) -> str:
    return str(int(hex_id[-16:], 16))


def trace_url(template: str | None, trace_id: str | None, span_id: str | None = None) -> str | None:
    """The link to a trace (and span), or None: no template, a bad one, or ids that are not
    OpenTelemetry's (32 and 16 lowercase hex).  A missing span id leaves its place empty."""
    if not template or trace_id is None or not _TRACE_ID.fullmatch(trace_id):
        return None
    try:
        checked = expand_template(template)
    except ConfigError:
        return None  # refused at config load; a caller handing one in gets no link
    span = span_id if span_id is not None and _SPAN_ID.fullmatch(span_id) else None
    return checked.format(
        trace_id=trace_id,
        span_id=span or "",
        dd_trace_id=_decimal_low64(trace_id),
        dd_span_id=_decimal_low64(span) if span else "",
    )
