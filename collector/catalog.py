"""The error catalog: load, validate and look up the closed set of tool-call codes.

`load_catalog()` reads the built-in `catalog.toml` and any user files, validates every
entry and returns an immutable `Catalog`.  Every failure is one `CatalogError` whose
`kind` is closed (`CatalogErrorKind`) and which names the entry and the field.  User
files may add codes and mappings; they may not redefine a built-in code or move a
mapping without saying so (`override = true`, `replace = true`).

The lookups (`for_http`, `for_grpc`, `for_jsonrpc`, `for_exception`, `for_error_type`)
are pure dictionary reads on frozen data, safe from any thread.
"""

from __future__ import annotations

import fnmatch
import re
import tomllib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum
from functools import cache
from importlib import resources
from pathlib import Path
from types import MappingProxyType
from typing import Any, Final

from errscope.collector.errors import CatalogError, CatalogErrorKind

__all__ = [
    "BUILTIN_CODES",
    "CapAction",
    "Catalog",
    "Code",
    "CodeEntry",
    "RetryBy",
    "RetryScope",
    "default_catalog",
    "load_catalog",
]


class Code(StrEnum):
    """The built-in codes, plus `ok` and `unknown`; branch on these with `match`."""

    OK = "ok"
    INVALID_ARGS = "invalid_args"
    NOT_FOUND = "not_found"
    DENIED = "denied"
    RATE_LIMITED = "rate_limited"
    TIMEOUT = "timeout"
    INTERNAL_ERROR = "internal_error"
    UNKNOWN = "unknown"


BUILTIN_CODES: Final = frozenset(c.value for c in Code if c not in (Code.OK, Code.UNKNOWN))
_RESERVED: Final = frozenset({Code.OK.value, Code.UNKNOWN.value})


class RetryBy(StrEnum):
    """Who may retry a failed call."""

    MODEL = "model"
    RUNTIME = "runtime"
    NOBODY = "nobody"


class RetryScope(StrEnum):
    """What the tries of a code are counted over."""

    FIELD = "field"
    CALL = "call"
    IDS = "ids"
    TRACE = "trace"


class CapAction(StrEnum):
    """What the runtime does once a code's tries are used up."""

    STOP = "stop"
    HANDOFF = "handoff"
    RETRY_AFTER = "retry_after"


# The 17 canonical gRPC codes (google/rpc/code.proto), by name and number.
GRPC_CODES: Final[Mapping[str, int]] = MappingProxyType(
    {
        "OK": 0,
        "CANCELLED": 1,
        "UNKNOWN": 2,
        "INVALID_ARGUMENT": 3,
        "DEADLINE_EXCEEDED": 4,
        "NOT_FOUND": 5,
        "ALREADY_EXISTS": 6,
        "PERMISSION_DENIED": 7,
        "RESOURCE_EXHAUSTED": 8,
        "FAILED_PRECONDITION": 9,
        "ABORTED": 10,
        "OUT_OF_RANGE": 11,
        "UNIMPLEMENTED": 12,
        "INTERNAL": 13,
        "UNAVAILABLE": 14,
        "DATA_LOSS": 15,
        "UNAUTHENTICATED": 16,
    }
)
_GRPC_BY_NUMBER: Final = MappingProxyType({n: name for name, n in GRPC_CODES.items()})

_CODE_NAME_RE: Final = re.compile(r"[a-z][a-z0-9_]{1,31}")
_EXCEPTION_RE: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*")
_GLOB_RE: Final = re.compile(r"[A-Za-z0-9_*]+")
_ERROR_TYPE_RE: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]{0,63}")
_COLOR_RE: Final = re.compile(r"#[0-9a-fA-F]{6}")

_REQUIRED: Final = ("meaning", "retry_by", "max_tries", "scope", "on_cap", "hint", "color")
_MAPPING_KEYS: Final = ("http", "grpc", "jsonrpc", "error_types", "exceptions", "exception_globs")
_ENTRY_KEYS: Final = frozenset(_REQUIRED + _MAPPING_KEYS + ("override",))
_FALLBACK_KEYS: Final = ("http_4xx", "http_5xx", "grpc", "jsonrpc", "exception", "status_error")
_TOP_KEYS: Final = frozenset({"version", "reserved", "fallback", "codes", "mappings"})


@dataclass(frozen=True, slots=True)
class CodeEntry:
    """One catalog code: its retry policy, hint guidance, colour and mapped statuses."""

    name: str
    meaning: str
    retry_by: RetryBy
    max_tries: int
    scope: RetryScope
    on_cap: CapAction
    hint: str
    color: str
    builtin: bool
    http: tuple[int, ...] = ()
    grpc: tuple[str, ...] = ()
    jsonrpc: tuple[int, ...] = ()
    error_types: tuple[str, ...] = ()
    exceptions: tuple[str, ...] = ()
    exception_globs: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Catalog:
    """An immutable, validated error catalog with O(1) lookups from statuses to codes."""

    entries: Mapping[str, CodeEntry]
    reserved: Mapping[str, str]
    fallback: Mapping[str, str]
    sources: tuple[str, ...]
    _http: Mapping[int, str] = field(repr=False)
    _grpc: Mapping[str, str] = field(repr=False)
    _jsonrpc: Mapping[int, str] = field(repr=False)
    _error_types: Mapping[str, str] = field(repr=False)
    _exceptions: Mapping[str, str] = field(repr=False)
    _globs: tuple[tuple[str, str], ...] = field(repr=False)

    @property
    def codes(self) -> tuple[str, ...]:
        """Every error code in catalog order (built-ins first), without ok and unknown."""
        return tuple(self.entries)

    def is_code(self, value: str) -> bool:
        """True for a catalog code, `ok` or `unknown`."""
        return value in self.entries or value in _RESERVED

    def color(self, code: str) -> str:
        """The dashboard colour of a code; ok and unknown have fixed colours."""
        if code == Code.OK:
            return "#54a24b"
        entry = self.entries.get(code)
        return entry.color if entry else "#4c78a8"

    def for_http(self, status: int) -> str | None:
        """The code for an HTTP status; None for a success (< 400) or a nonsense value."""
        if status in self._http:
            return self._http[status]
        if 400 <= status < 500:
            return self.fallback["http_4xx"]
        if 500 <= status < 600:
            return self.fallback["http_5xx"]
        return None

    def for_grpc(self, status: int | str) -> str | None:
        """The code for a gRPC status given by number, name or numeric string; None for OK."""
        name = status if isinstance(status, str) else _GRPC_BY_NUMBER.get(status)
        if isinstance(status, str) and status.isdigit():
            name = _GRPC_BY_NUMBER.get(int(status))
        if name is None:
            return None
        name = name.upper()
        if name == "OK":
            return None
        return self._grpc.get(name, self.fallback["grpc"] if name in GRPC_CODES else None)

    def for_jsonrpc(self, code: int) -> str:
        """The code for a JSON-RPC / MCP error code."""
        return self._jsonrpc.get(code, self.fallback["jsonrpc"])

    def for_error_type(self, value: str) -> str | None:
        """The code an `error.type` value names: a code itself, an alias, or None."""
        if value in self.entries:
            return value
        return self._error_types.get(value)

    def for_exception(self, type_name: str) -> str | None:
        """The code for an exception type: full dotted name, then last segment, then globs."""
        if type_name in self._exceptions:
            return self._exceptions[type_name]
        last = type_name.rsplit(".", 1)[-1]
        if last in self._exceptions:
            return self._exceptions[last]
        for pattern, code in self._globs:
            if fnmatch.fnmatchcase(last, pattern):
                return code
        return None


# ---------------------------------------------------------------- loading


def _fail(kind: CatalogErrorKind, message: str, entry: str, fld: str | None = None) -> CatalogError:
    return CatalogError(kind, message, entry=entry, field=fld, hint=_HINTS.get(kind))


_HINTS: Final = {
    CatalogErrorKind.UNKNOWN_KEY: "see the field list at the top of collector/catalog.toml",
    CatalogErrorKind.REDEFINED_BUILTIN: "add `override = true` to the entry to replace it",
    CatalogErrorKind.CONFLICTING_MAPPING: (
        "a status maps to one code; add `replace = true` under [mappings.<code>] to move it"
    ),
    CatalogErrorKind.BAD_CODE_NAME: "code names are lower-case identifiers, 2-32 characters",
}


def _read(path: Path | None, text: str | None, name: str) -> dict[str, Any]:
    try:
        raw = text if text is not None else Path(str(path)).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise _fail(
            CatalogErrorKind.UNREADABLE, f"cannot read ({type(exc).__name__})", name
        ) from exc
    try:
        return tomllib.loads(raw)
    except tomllib.TOMLDecodeError as exc:
        # tomllib's message gives line and column only, never the offending value.
        raise _fail(CatalogErrorKind.BAD_TOML, str(exc), name) from exc


def _want(value: Any, kind: type | tuple[type, ...], entry: str, fld: str) -> Any:
    if not isinstance(value, kind) or (isinstance(value, bool) and kind is not bool):
        want = kind.__name__ if isinstance(kind, type) else "/".join(k.__name__ for k in kind)
        raise _fail(CatalogErrorKind.BAD_TYPE, f"must be {want}", entry, fld)
    return value


def _enum(enum: type[StrEnum], value: Any, entry: str, fld: str) -> Any:
    _want(value, str, entry, fld)
    try:
        return enum(value)
    except ValueError as exc:
        allowed = ", ".join(m.value for m in enum)
        raise _fail(CatalogErrorKind.BAD_VALUE, f"must be one of {allowed}", entry, fld) from exc


def _mapping_list(raw: Mapping[str, Any], key: str, entry: str) -> tuple[Any, ...]:
    values = _want(raw.get(key, []), list, entry, key)
    out = [_mapping_value(key, v, entry) for v in values]
    if len(set(out)) != len(out):
        raise _fail(CatalogErrorKind.BAD_MAPPING, "lists a value twice", entry, key)
    return tuple(out)


def _mapping_value(key: str, v: Any, entry: str) -> Any:
    bad = _fail(
        CatalogErrorKind.BAD_MAPPING, f"holds a value that is not a valid {key}", entry, key
    )
    match key:
        case "http":
            if not isinstance(v, int) or isinstance(v, bool) or not 400 <= v <= 599:
                raise bad
        case "grpc":
            if not isinstance(v, str) or v not in GRPC_CODES or v == "OK":
                raise bad
        case "jsonrpc":
            if not isinstance(v, int) or isinstance(v, bool) or not -32768 <= v <= -32000:
                raise bad
        case "error_types":
            if not isinstance(v, str) or not _ERROR_TYPE_RE.fullmatch(v):
                raise bad
        case "exceptions":
            if not isinstance(v, str) or not _EXCEPTION_RE.fullmatch(v):
                raise bad
        case "exception_globs":
            if not isinstance(v, str) or not _GLOB_RE.fullmatch(v) or "*" not in v:
                raise bad
    return v


def _parse_entry(name: str, raw: Any, *, builtin: bool) -> CodeEntry:
    entry = f"codes.{name}"
    _want(raw, dict, entry, "")
    if not _CODE_NAME_RE.fullmatch(name):
        raise _fail(CatalogErrorKind.BAD_CODE_NAME, "is not a valid code name", entry)
    if name in _RESERVED:
        raise _fail(CatalogErrorKind.RESERVED_CODE, "ok and unknown are reserved", entry)
    for key in raw:
        if key not in _ENTRY_KEYS:
            raise _fail(CatalogErrorKind.UNKNOWN_KEY, "unknown key", entry, key)
    for key in _REQUIRED:
        if key not in raw:
            raise _fail(CatalogErrorKind.MISSING_FIELD, "is required", entry, key)
    max_tries = _want(raw["max_tries"], int, entry, "max_tries")
    if not 1 <= max_tries <= 100:
        raise _fail(CatalogErrorKind.BAD_VALUE, "must be between 1 and 100", entry, "max_tries")
    color = _want(raw["color"], str, entry, "color")
    if not _COLOR_RE.fullmatch(color):
        raise _fail(CatalogErrorKind.BAD_VALUE, "must be #rrggbb", entry, "color")
    for key in ("meaning", "hint"):
        if not _want(raw[key], str, entry, key).strip():
            raise _fail(CatalogErrorKind.BAD_VALUE, "must not be empty", entry, key)
    return CodeEntry(
        name=name,
        meaning=raw["meaning"].strip(),
        retry_by=_enum(RetryBy, raw["retry_by"], entry, "retry_by"),
        max_tries=max_tries,
        scope=_enum(RetryScope, raw["scope"], entry, "scope"),
        on_cap=_enum(CapAction, raw["on_cap"], entry, "on_cap"),
        hint=raw["hint"].strip(),
        color=color,
        builtin=builtin,
        **{key: _mapping_list(raw, key, entry) for key in _MAPPING_KEYS},
    )


@dataclass
class _Builder:
    entries: dict[str, CodeEntry] = field(default_factory=dict)
    reserved: dict[str, str] = field(default_factory=dict)
    fallback: dict[str, str] = field(default_factory=dict)
    sources: list[str] = field(default_factory=list)

    def add_file(self, data: dict[str, Any], name: str, *, builtin: bool) -> None:
        for key in data:
            if key not in _TOP_KEYS:
                raise _fail(CatalogErrorKind.UNKNOWN_KEY, "unknown top-level key", name, key)
        version = data.get("version", 1)
        if version != 1:
            raise _fail(
                CatalogErrorKind.BAD_VALUE, "only catalog version 1 is known", name, "version"
            )
        if builtin:
            self._reserved_and_fallback(data, name)
        elif "reserved" in data or "fallback" in data:
            key = "reserved" if "reserved" in data else "fallback"
            raise _fail(
                CatalogErrorKind.REDEFINED_BUILTIN, "only the built-in catalog sets this", name, key
            )
        codes = _want(data.get("codes", {}), dict, name, "codes")
        for code, raw in codes.items():
            self._add_code(code, raw, builtin=builtin)
        mappings = _want(data.get("mappings", {}), dict, name, "mappings")
        for code, raw in mappings.items():
            self._add_mappings(code, raw)
        self.sources.append(name)

    def _reserved_and_fallback(self, data: dict[str, Any], name: str) -> None:
        reserved = _want(data.get("reserved", {}), dict, name, "reserved")
        for code in _RESERVED:
            self.reserved[code] = _want(reserved.get(code, ""), str, "reserved", code)
        fallback = _want(data.get("fallback", {}), dict, name, "fallback")
        for key in _FALLBACK_KEYS:
            if key not in fallback:
                raise _fail(CatalogErrorKind.MISSING_FIELD, "is required", "fallback", key)
            self.fallback[key] = _want(fallback[key], str, "fallback", key)

    def _add_code(self, code: str, raw: Any, *, builtin: bool) -> None:
        if code in self.entries:
            existing = self.entries[code]
            if existing.builtin and not builtin:
                if not (isinstance(raw, dict) and raw.get("override") is True):
                    raise _fail(
                        CatalogErrorKind.REDEFINED_BUILTIN,
                        "redefines a built-in code",
                        f"codes.{code}",
                    )
            else:
                raise _fail(CatalogErrorKind.DUPLICATE_CODE, "is defined twice", f"codes.{code}")
        self.entries[code] = _parse_entry(code, raw, builtin=builtin)

    def _add_mappings(self, code: str, raw: Any) -> None:
        entry = f"mappings.{code}"
        _want(raw, dict, entry, "")
        if code not in self.entries:
            raise _fail(CatalogErrorKind.BAD_MAPPING, "names a code that does not exist", entry)
        replace_flag = raw.get("replace", False)
        _want(replace_flag, bool, entry, "replace")
        for key in raw:
            if key not in _MAPPING_KEYS and key != "replace":
                raise _fail(CatalogErrorKind.UNKNOWN_KEY, "unknown key", entry, key)
        added = {key: _mapping_list(raw, key, entry) for key in _MAPPING_KEYS if key in raw}
        if not replace_flag:
            for key, values in added.items():
                for other in self.entries.values():
                    clash = next((v for v in values if v in getattr(other, key)), None)
                    if clash is not None and other.name != code:
                        raise _fail(
                            CatalogErrorKind.CONFLICTING_MAPPING,
                            f"{key} value {clash!r} is already mapped by {other.name}",
                            entry,
                            key,
                        )
        if replace_flag:
            # Move the named values: take them off whichever code held them before.
            for other_name, other in list(self.entries.items()):
                if other_name == code:
                    continue
                stripped: dict[str, Any] = {
                    key: tuple(v for v in getattr(other, key) if v not in values)
                    for key, values in added.items()
                }
                self.entries[other_name] = replace(other, **stripped)
        target = self.entries[code]
        merged: dict[str, Any] = {key: getattr(target, key) + tuple(added[key]) for key in added}
        self.entries[code] = replace(target, **merged)

    def build(self) -> Catalog:
        for key, code in self.fallback.items():
            if code not in self.entries:
                raise _fail(
                    CatalogErrorKind.BAD_MAPPING,
                    "names a code that does not exist",
                    "fallback",
                    key,
                )
        tables: dict[str, dict[Any, str]] = {key: {} for key in _MAPPING_KEYS}
        for name, entry in self.entries.items():
            for key in _MAPPING_KEYS:
                for value in getattr(entry, key):
                    holder = tables[key].setdefault(value, name)
                    if holder != name:
                        raise _fail(
                            CatalogErrorKind.CONFLICTING_MAPPING,
                            f"{key} value {value!r} is also mapped by {holder}",
                            f"codes.{name}",
                            key,
                        )
        return Catalog(
            entries=MappingProxyType(dict(self.entries)),
            reserved=MappingProxyType(dict(self.reserved)),
            fallback=MappingProxyType(dict(self.fallback)),
            sources=tuple(self.sources),
            _http=MappingProxyType(tables["http"]),
            _grpc=MappingProxyType(tables["grpc"]),
            _jsonrpc=MappingProxyType(tables["jsonrpc"]),
            _error_types=MappingProxyType(tables["error_types"]),
            _exceptions=MappingProxyType(tables["exceptions"]),
            _globs=tuple(tables["exception_globs"].items()),
        )


def builtin_catalog_text() -> str:
    """The text of the built-in catalog.toml shipped with the package."""
    catalog = resources.files("errscope.collector").joinpath("catalog.toml")
    return catalog.read_text(encoding="utf-8")


def load_catalog(
    user_files: Sequence[Path] = (), *, user_texts: Iterable[tuple[str, str]] = ()
) -> Catalog:
    """Load the built-in catalog plus user files (paths) or texts ((name, toml) pairs)."""
    builder = _Builder()
    builder.add_file(
        _read(None, builtin_catalog_text(), "catalog.toml"), "catalog.toml", builtin=True
    )
    for path in user_files:
        builder.add_file(_read(path, None, str(path)), str(path), builtin=False)
    for name, text in user_texts:
        builder.add_file(_read(None, text, name), name, builtin=False)
    return builder.build()


@cache
def default_catalog() -> Catalog:
    """The built-in catalog, loaded once per process."""
    return load_catalog()
