"""Named queries: load `queries/*.sql`, bind their declared parameters, run them.

Each file holds one query behind a header:

    -- name: error_rates                      (must equal the file name)
    -- returns: what one row means
    -- param: since timestamp = 24h          -- optional description
    -- param: id text                        (no default: required)
    -- param: bucket_s integer 1..86400 = 60 (an integer's allowed range)

Parameter types are `text`, `integer`, `float`, `boolean` and `timestamp` (ISO 8601, `now`,
or a duration meaning that long ago).  A default of `null` makes a parameter optional.
An integer without a range is a count or a size: 0 to 10^9.
The loader refuses a parameter used in the SQL but not declared, or declared but unused.
Values are always bound by DuckDB (`$name`), never formatted into SQL text; only named
queries can run, so no SQL text ever comes from a caller.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from decimal import Decimal
from enum import StrEnum
from functools import cache
from importlib import resources
from pathlib import Path
from types import MappingProxyType
from typing import Final

import duckdb
import pyarrow as pa

from errscope.collector.errors import QueryError, QueryErrorKind
from errscope.collector.units import parse_time

__all__ = [
    "NamedQuery",
    "Param",
    "ParamType",
    "bind_params",
    "json_value",
    "load_queries",
    "run_query",
]


def json_value(value: object) -> object:
    """A query result value orjson cannot write, as JSON can: a DECIMAL (what DuckDB's
    sum of integers is) as a number, exact when integral; a date or time as ISO 8601.
    The CLI and the query API both write rows with it, so both print the same thing."""
    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    if isinstance(value, datetime | date | time):
        return value.isoformat()
    if isinstance(value, timedelta):
        return value.total_seconds()
    raise TypeError(type(value).__name__)


_HEADER_RE: Final = re.compile(r"--\s*(name|returns|param):\s*(.*)")
_PARAM_RE: Final = re.compile(
    r"(?P<name>[a-z_][a-z0-9_]*)\s+(?P<type>[a-z]+)(?:\s+(?P<lo>\d+)\.\.(?P<hi>\d+))?"
    r"(?:\s*=\s*(?P<default>\S+))?\s*(?:--\s*(?P<doc>.*))?"
)
# An integer parameter without a declared range: a count or a size, never negative.
_INTEGER_RANGE: Final = (0, 10**9)
_USE_RE: Final = re.compile(r"\$([a-z_][a-z0-9_]*)")
_NAME_RE: Final = re.compile(r"[a-z][a-z0-9_]*")
_TRUE: Final = frozenset({"1", "true", "yes", "on"})
_FALSE: Final = frozenset({"0", "false", "no", "off"})


class ParamType(StrEnum):
    """The types a named query's parameter may declare."""

    TEXT = "text"
    INTEGER = "integer"
    FLOAT = "float"
    BOOLEAN = "boolean"
    TIMESTAMP = "timestamp"


@dataclass(frozen=True, slots=True)
class Param:
    """One declared parameter: name, type, default (None = required) and description."""

    name: str
    type: ParamType
    default: str | None
    doc: str
    bounds: tuple[int, int] = _INTEGER_RANGE  # integers only: `NAME integer LO..HI`

    @property
    def required(self) -> bool:
        """True when the caller must give a value."""
        return self.default is None

    @property
    def shown_default(self) -> str | None:
        """The default as a listing shows it: None for a required parameter and for one
        whose default is `null` (optional, no value)."""
        return None if self.default == "null" else self.default


@dataclass(frozen=True, slots=True)
class NamedQuery:
    """A query loaded from a `.sql` file: its name, what it returns, parameters and SQL."""

    name: str
    returns: str
    params: tuple[Param, ...]
    sql: str

    def param(self, name: str) -> Param | None:
        """The declared parameter called `name`, if any."""
        return next((p for p in self.params if p.name == name), None)


def _bad_header(entry: str, message: str, fld: str | None = None) -> QueryError:
    return QueryError(QueryErrorKind.BAD_HEADER, message, entry=entry, field=fld)


def parse_query(name: str, text: str) -> NamedQuery:
    """Parse one query file's text; `name` is the file's stem."""
    header: dict[str, str] = {}
    params: list[Param] = []
    body: list[str] = []
    for line in text.splitlines():
        match = _HEADER_RE.fullmatch(line.strip()) if not body else None
        if match:
            key, value = match.group(1), match.group(2).strip()
            if key == "param":
                params.append(_parse_param(name, value))
            elif key in header:
                raise _bad_header(name, f"declares {key} twice", key)
            else:
                header[key] = value
        elif line.strip() or body:
            body.append(line)
    for key in ("name", "returns"):
        if not header.get(key):
            raise _bad_header(name, f"has no `-- {key}:` line", key)
    if header["name"] != name:
        raise _bad_header(name, "`-- name:` differs from the file name", "name")
    if len({p.name for p in params}) != len(params):
        raise _bad_header(name, "declares a parameter twice", "param")
    sql = "\n".join(body).strip()
    used = set(_USE_RE.findall(sql))
    declared = {p.name for p in params}
    for missing in sorted(used - declared):
        raise QueryError(
            QueryErrorKind.UNDECLARED_PARAM,
            "uses an undeclared parameter",
            entry=name,
            field=missing,
        )
    for unused in sorted(declared - used):
        raise QueryError(
            QueryErrorKind.UNUSED_PARAM,
            "declares a parameter it never uses",
            entry=name,
            field=unused,
        )
    return NamedQuery(name=name, returns=header["returns"], params=tuple(params), sql=sql)


def _parse_param(entry: str, spec: str) -> Param:
    match = _PARAM_RE.fullmatch(spec)
    if not match:
        raise _bad_header(entry, "a `-- param:` line is not `NAME TYPE [= DEFAULT]`", "param")
    try:
        ptype = ParamType(match.group("type"))
    except ValueError:
        raise _bad_header(entry, "unknown parameter type", match.group("name")) from None
    default = match.group("default")
    doc = (match.group("doc") or "").strip()
    param = Param(match.group("name"), ptype, default, doc)
    if match.group("lo") is not None:
        lo, hi = int(match.group("lo")), int(match.group("hi"))
        if ptype is not ParamType.INTEGER or lo > hi:
            raise _bad_header(entry, "a range LO..HI is for integers, LO <= HI", param.name)
        param = Param(param.name, ptype, default, doc, (lo, hi))
    if default is not None and default != "null":
        _convert(entry, param, default)  # a bad default is a header bug, found at load time
    return param


def load_queries(folder: Path | None = None) -> Mapping[str, NamedQuery]:
    """Every named query in `folder` (default: the `queries` package), by name."""
    found: dict[str, NamedQuery] = {}
    if folder is None:
        files = [
            (item.name, item.read_text("utf-8"))
            for item in resources.files("errscope.queries").iterdir()
            if item.name.endswith(".sql")
        ]
    else:
        files = [(p.name, p.read_text("utf-8")) for p in folder.glob("*.sql")]
    for filename, text in sorted(files):
        stem = filename.removesuffix(".sql")
        if not _NAME_RE.fullmatch(stem):
            raise _bad_header(stem, "query file names are lower-case identifiers")
        found[stem] = parse_query(stem, text)
    return MappingProxyType(found)


@cache
def default_queries() -> Mapping[str, NamedQuery]:
    """The queries shipped with errscope, loaded once per process."""
    return load_queries()


def _convert(entry: str, param: Param, raw: object) -> object:
    bad = QueryError(
        QueryErrorKind.BAD_PARAM_VALUE,
        f"must be {param.type}",
        entry=entry,
        field=param.name,
        hint=_TYPE_HINTS[param.type],
    )
    if raw is None:
        return None
    match param.type:
        case ParamType.TEXT:
            if not isinstance(raw, str):
                raise bad
            return raw
        case ParamType.INTEGER:
            if isinstance(raw, bool):
                raise bad
            if isinstance(raw, str) and re.fullmatch(r"-?\d{1,18}", raw.strip()):
                raw = int(raw)
            if not isinstance(raw, int):
                raise bad
            lo, hi = param.bounds
            if not lo <= raw <= hi:
                raise QueryError(
                    QueryErrorKind.BAD_PARAM_VALUE,
                    f"must be between {lo:,} and {hi:,}",
                    entry=entry,
                    field=param.name,
                )
            return raw
        case ParamType.FLOAT:
            if isinstance(raw, bool):
                raise bad
            if isinstance(raw, int | float):
                return float(raw)
            try:
                return float(str(raw))
            except ValueError:
                raise bad from None
        case ParamType.BOOLEAN:
            if isinstance(raw, bool):
                return raw
            lowered = str(raw).strip().lower()
            if lowered in _TRUE | _FALSE:
                return lowered in _TRUE
            raise bad
        case ParamType.TIMESTAMP:
            if isinstance(raw, datetime):
                return raw
            try:
                return parse_time(str(raw))
            except ValueError:
                raise bad from None


_TYPE_HINTS: Final = {
    ParamType.TEXT: "any text",
    ParamType.INTEGER: "a whole number such as 60",
    ParamType.FLOAT: "a number such as 0.5",
    ParamType.BOOLEAN: "true or false",
    ParamType.TIMESTAMP: "ISO 8601 (2026-11-30T09:00:00Z), `now`, or a duration ago such as 24h",
}


def bind_params(query: NamedQuery, given: Mapping[str, object]) -> dict[str, object]:
    """Check and convert the caller's values; fill defaults; refuse unknown or missing ones."""
    for name in given:
        if query.param(name) is None:
            known = ", ".join(p.name for p in query.params) or "none"
            raise QueryError(
                QueryErrorKind.UNKNOWN_PARAM,
                "is not a parameter of this query",
                entry=query.name,
                field=name,
                hint=f"parameters: {known}",
            )
    bound: dict[str, object] = {}
    for param in query.params:
        if param.name in given:
            bound[param.name] = _convert(query.name, param, given[param.name])
        elif param.required:
            raise QueryError(
                QueryErrorKind.MISSING_PARAM,
                "is required",
                entry=query.name,
                field=param.name,
                hint=f"pass --param {param.name}=VALUE ({param.type})",
            )
        else:
            default = param.default
            bound[param.name] = None if default == "null" else _convert(query.name, param, default)
    since, until = bound.get("since"), bound.get("until")
    if isinstance(since, datetime) and isinstance(until, datetime) and since > until:
        # An empty table would read as "nothing happened"; the window is the mistake.
        raise QueryError(
            QueryErrorKind.BAD_PARAM_VALUE,
            "is after until",
            entry=query.name,
            field="since",
            hint="since is the window's start: give an earlier time or a duration (24h)",
        )
    return bound


def get_query(name: str, queries: Mapping[str, NamedQuery] | None = None) -> NamedQuery:
    """The named query, or `QueryError(UNKNOWN_QUERY)` listing the names there are."""
    available = queries if queries is not None else default_queries()
    if name not in available:
        raise QueryError(
            QueryErrorKind.UNKNOWN_QUERY,
            "no such query",
            entry=name,
            hint="queries: " + ", ".join(sorted(available)),
        )
    return available[name]


def run_query(
    con: duckdb.DuckDBPyConnection,
    name: str,
    params: Mapping[str, object] | None = None,
    *,
    queries: Mapping[str, NamedQuery] | None = None,
) -> pa.Table:
    """Run a named query on `con` with bound parameters; return an Arrow table."""
    query = get_query(name, queries)
    bound = bind_params(query, params or {})
    try:
        return con.execute(query.sql, bound).to_arrow_table()
    except duckdb.Error as exc:
        raise QueryError(
            QueryErrorKind.FAILED, f"query failed ({type(exc).__name__})", entry=name
        ) from exc
