"""One configuration: the defaults, errscope.toml, ERRSCOPE_* variables and flags, once.

Every default address, path and limit that more than one module needs is named here and
nowhere else.  A setting is resolved in this order, each over the one before it:

    the default below  <  errscope.toml  <  an ERRSCOPE_* variable  <  a flag

The file is optional: `--config FILE` on `serve`, `dashboard`, `check`, `findings` and
`watch`, or
the ERRSCOPE_CONFIG variable.  It holds one table per command, whose keys are that
command's flags without the dashes and with `_` for `-` (`[serve] otlp_grpc = "..."`, a
repeatable flag as a list), plus what flags cannot say well: `[[matchers]]`, user rules for
tool spans.  Example (docs/operations.md has the full list):

    [serve]
    store = "data/errscope.duckdb"
    catalog = ["catalog.local.toml"]

    [[matchers]]                  # spans named "tool:*" whose attribute kind = "tool"
    name_glob = "tool:*"
    equals = { kind = "tool" }
    tool_attribute = "tool.id"    # where the tool's name is; the span name otherwise

`load_file` validates the file's shape and refuses it with one `ConfigError` naming
`table.key` (printed as `error[unknown_key] serve.otlp_grcp: ...`, like the catalog); the
CLI checks each key's value against its flag (errscope.collector.cli).  Nothing here reads
the environment or the command line, and nothing here imports the CLI.
"""

from __future__ import annotations

import fnmatch
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from errscope.collector.errors import ConfigError, ConfigErrorKind

__all__ = [
    "API_ADDRESS",
    "API_URL",
    "CONFIG_COMMANDS",
    "CONFIG_ENV",
    "DASHBOARD_PORT",
    "OTLP_GRPC_ADDRESS",
    "OTLP_GRPC_URL",
    "OTLP_HTTP_ADDRESS",
    "OTLP_HTTP_URL",
    "STORE_FILE_NAME",
    "STORE_PATH",
    "WATCH_METRICS_ADDRESS",
    "WATCH_STATE_PATH",
    "ConfigFile",
    "Matcher",
    "load_file",
]

# --- defaults: loopback only (any other address needs a token)
OTLP_GRPC_ADDRESS: Final = "127.0.0.1:4317"
OTLP_HTTP_ADDRESS: Final = "127.0.0.1:4318"
API_ADDRESS: Final = "127.0.0.1:4320"
OTLP_GRPC_URL: Final = f"http://{OTLP_GRPC_ADDRESS}"
OTLP_HTTP_URL: Final = f"http://{OTLP_HTTP_ADDRESS}"
API_URL: Final = f"http://{API_ADDRESS}"
# How long a command waits on the sidecar's API for an answer (queries, gates, deploy marks).
API_TIMEOUT_S: Final = 30.0
DASHBOARD_PORT: Final = 8501
STORE_FILE_NAME: Final = "errscope.duckdb"
STORE_PATH: Final = f"data/{STORE_FILE_NAME}"
WATCH_METRICS_ADDRESS: Final = "127.0.0.1:4321"  # `errscope watch`'s /metrics, beside the API
WATCH_STATE_PATH: Final = "data/errscope-watch.duckdb"  # the watch's own file, not the store

# --- the file
CONFIG_ENV: Final = "ERRSCOPE_CONFIG"
# The commands that read the file: one table each.
CONFIG_COMMANDS: Final = ("serve", "dashboard", "check", "findings", "watch")
_MATCHER_KEYS: Final = frozenset({"name_glob", "equals", "tool_attribute"})


def _non_empty_text(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


@dataclass(frozen=True, slots=True)
class Matcher:
    """A user rule for tool spans: a name matching `name_glob` and attributes equal to `equals`.

    `tool_attribute` names the attribute holding the tool name; without it the span name is
    the tool name.  An empty matcher (no glob, no equals) matches nothing.  It is
    configuration, so it lives here; errscope.collector.classify applies it, after the
    conventions it knows.
    """

    name_glob: str | None = None
    equals: tuple[tuple[str, str], ...] = ()
    tool_attribute: str | None = None

    def matches(self, name: str, attributes: Mapping[str, object]) -> bool:
        """True when every configured condition holds for a span of this name and attributes."""
        if self.name_glob is None and not self.equals:
            return False
        if self.name_glob is not None and not fnmatch.fnmatchcase(name, self.name_glob):
            return False
        return all(_non_empty_text(attributes.get(k)) == v for k, v in self.equals)


@dataclass(frozen=True, slots=True)
class ConfigFile:
    """A validated errscope.toml: per-command flag values, and the user's tool-span matchers.

    `tables[command]` maps a flag's parameter name (`otlp_grpc`) to the file's value, still
    unchecked against the flag's type: the CLI converts it as it would the flag's text.
    """

    path: Path
    tables: Mapping[str, Mapping[str, object]] = field(default_factory=dict)
    matchers: tuple[Matcher, ...] = ()


def _refuse(kind: ConfigErrorKind, message: str, entry: str, key: str, hint: str) -> ConfigError:
    return ConfigError(kind, message, entry=entry, field=key, hint=hint)


def _matcher(index: int, raw: object) -> Matcher:
    entry = f"matchers[{index}]"
    if not isinstance(raw, dict):
        raise _refuse(ConfigErrorKind.BAD_VALUE, "must be a table", entry, "", "write [[matchers]]")
    for key in raw:
        if key not in _MATCHER_KEYS:
            raise _refuse(
                ConfigErrorKind.UNKNOWN_KEY,
                "not a matcher key",
                entry,
                key,
                "a matcher has name_glob, equals and tool_attribute",
            )
    glob = raw.get("name_glob")
    equals = raw.get("equals", {})
    tool_attribute = raw.get("tool_attribute")
    for key, value in (("name_glob", glob), ("tool_attribute", tool_attribute)):
        if value is not None and (not isinstance(value, str) or not value):
            raise _refuse(ConfigErrorKind.BAD_VALUE, "must be a non-empty string", entry, key, "")
    if not isinstance(equals, dict) or not all(
        isinstance(k, str) and k and isinstance(v, str) for k, v in equals.items()
    ):
        raise _refuse(
            ConfigErrorKind.BAD_VALUE,
            "must map attribute names to strings",
            entry,
            "equals",
            'for example equals = { "kind" = "tool" }',
        )
    if glob is None and not equals:
        # An empty matcher matches nothing: certainly not what was meant.
        raise _refuse(
            ConfigErrorKind.BAD_VALUE,
            "matches nothing",
            entry,
            "name_glob",
            "give name_glob, equals, or both",
        )
    return Matcher(
        name_glob=glob,
        equals=tuple(sorted(equals.items())),
        tool_attribute=tool_attribute,
    )


def load_file(path: str | Path, known: Mapping[str, frozenset[str]]) -> ConfigFile:
    """Read and validate errscope.toml; `known[command]` is the set of that command's keys.

    Raises ConfigError (UNREADABLE, BAD_TOML, UNKNOWN_KEY, BAD_VALUE) naming the table and
    key; the message never repeats a value from the file (it may hold a token).
    """
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(
            ConfigErrorKind.UNREADABLE,
            f"cannot read ({type(exc).__name__})",
            entry=str(path),
            hint="give a readable UTF-8 TOML file (--config FILE or ERRSCOPE_CONFIG)",
        ) from exc
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        # tomllib's message names the line and column, never the value.
        raise ConfigError(
            ConfigErrorKind.BAD_TOML, str(exc), entry=str(path), hint="check the TOML syntax"
        ) from exc
    tables: dict[str, dict[str, object]] = {}
    matchers: tuple[Matcher, ...] = ()
    for name, value in data.items():
        if name == "matchers":
            if not isinstance(value, list):
                raise _refuse(ConfigErrorKind.BAD_VALUE, "must be an array of tables", name, "", "")
            matchers = tuple(_matcher(i, raw) for i, raw in enumerate(value))
            continue
        if name not in known:
            raise _refuse(
                ConfigErrorKind.UNKNOWN_KEY,
                "not a table errscope reads",
                name,
                "",
                f"tables: {', '.join(sorted(known))}, matchers",
            )
        if not isinstance(value, dict):
            raise _refuse(ConfigErrorKind.BAD_VALUE, "must be a table", name, "", f"[{name}]")
        for key in value:
            if key not in known[name]:
                raise _refuse(
                    ConfigErrorKind.UNKNOWN_KEY,
                    f"not a setting of `errscope {name}`",
                    name,
                    key,
                    f"`errscope {name} --help` lists them (write otlp_grpc for --otlp-grpc)",
                )
        tables[name] = dict(value)
    return ConfigFile(path=path, tables=tables, matchers=matchers)
