"""errscope's own exceptions: one tree, each class with a closed set of kinds.

    ErrscopeError                 base; `.kind` (a StrEnum member), `.entry`, `.field`, `.hint`
    ├── CatalogError              the error catalog failed to load or validate
    ├── ConfigError               a configuration file, flag or environment value is bad
    ├── RecordError               a record cannot be stored as given (bad tool/field name, ...)
    ├── StoreError                the store cannot be opened, written or migrated
    ├── QueryError                a named query is unknown, badly declared or badly called
    └── RulesError                a scrub rule file cannot be loaded or compiled

Programs branch on `kind`; the message is for logs and never carries payload values
(only entry names, field names and counts).  Foreign exceptions are mapped at the boundary
to the most specific class here with `raise ... from exc`; `describe()` renders the one-line
form the CLI prints, so a user never sees a traceback.
"""

from __future__ import annotations

from enum import StrEnum
from typing import ClassVar

__all__ = [
    "CatalogError",
    "CatalogErrorKind",
    "ConfigError",
    "ConfigErrorKind",
    "ErrscopeError",
    "QueryError",
    "QueryErrorKind",
    "RecordError",
    "RecordErrorKind",
    "RulesError",
    "RulesErrorKind",
    "StoreError",
    "StoreErrorKind",
]


class CatalogErrorKind(StrEnum):
    """Why a catalog file was refused."""

    UNREADABLE = "unreadable"
    BAD_TOML = "bad_toml"
    MISSING_FIELD = "missing_field"
    UNKNOWN_KEY = "unknown_key"
    BAD_TYPE = "bad_type"
    BAD_VALUE = "bad_value"
    DUPLICATE_CODE = "duplicate_code"
    BAD_CODE_NAME = "bad_code_name"
    BAD_MAPPING = "bad_mapping"
    CONFLICTING_MAPPING = "conflicting_mapping"
    REDEFINED_BUILTIN = "redefined_builtin"
    RESERVED_CODE = "reserved_code"


class ConfigErrorKind(StrEnum):
    """Why a configuration value was refused."""

    UNREADABLE = "unreadable"
    BAD_TOML = "bad_toml"
    UNKNOWN_KEY = "unknown_key"
    BAD_VALUE = "bad_value"


class RecordErrorKind(StrEnum):
    """Why a record was refused by the store."""

    BAD_IDENTIFIER = "bad_identifier"
    TOO_LONG = "too_long"
    BAD_ID = "bad_id"
    BAD_CODE = "bad_code"
    BAD_VALUE = "bad_value"


class StoreErrorKind(StrEnum):
    """Why the store could not do what was asked."""

    LOCKED = "locked"
    UNREADABLE = "unreadable"
    WRITE_FAILED = "write_failed"
    SCHEMA_TOO_NEW = "schema_too_new"
    SCHEMA_TOO_OLD = "schema_too_old"
    MIGRATION_FAILED = "migration_failed"
    BAD_URL = "bad_url"
    BAD_SETTING = "bad_setting"


class QueryErrorKind(StrEnum):
    """Why a named query could not be run."""

    UNKNOWN_QUERY = "unknown_query"
    BAD_HEADER = "bad_header"
    UNDECLARED_PARAM = "undeclared_param"
    UNUSED_PARAM = "unused_param"
    MISSING_PARAM = "missing_param"
    UNKNOWN_PARAM = "unknown_param"
    BAD_PARAM_VALUE = "bad_param_value"
    FAILED = "failed"


class RulesErrorKind(StrEnum):
    """Why a scrub rule file was refused."""

    UNREADABLE = "unreadable"
    BAD_TOML = "bad_toml"
    MISSING_FIELD = "missing_field"
    UNKNOWN_KEY = "unknown_key"
    BAD_VALUE = "bad_value"
    DUPLICATE_RULE = "duplicate_rule"
    BAD_REGEX = "bad_regex"


class ErrscopeError(Exception):
    """Base of every error errscope raises on purpose.

    `kind` is a member of the subclass's closed kind enum; `entry` names the catalog entry,
    rule, query or file concerned; `field` names the offending field; `hint` says what to do.
    None of them may carry a value taken from user data.
    """

    kind_type: ClassVar[type[StrEnum]]

    def __init__(
        self,
        kind: StrEnum,
        message: str,
        *,
        entry: str | None = None,
        field: str | None = None,
        hint: str | None = None,
    ) -> None:
        if not isinstance(kind, self.kind_type):
            raise TypeError(f"{type(self).__name__} takes a {self.kind_type.__name__}")
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.entry = entry
        self.field = field
        self.hint = hint

    def describe(self) -> str:
        """The single line the CLI prints: `error[kind] entry.field: message (hint)`."""
        where = ".".join(part for part in (self.entry, self.field) if part)
        head = f"error[{self.kind}]" + (f" {where}" if where else "")
        tail = f" — {self.hint}" if self.hint else ""
        return f"{head}: {self.message}{tail}"

    def as_dict(self) -> dict[str, str | None]:
        """The canonical JSON error shape used by the CLI's --format json and the query API."""
        return {
            "error": str(self.kind),
            "message": self.message,
            "entry": self.entry,
            "field": self.field,
            "hint": self.hint,
        }


class CatalogError(ErrscopeError):
    """The error catalog (built-in or a user extension) is invalid."""

    kind_type = CatalogErrorKind


class ConfigError(ErrscopeError):
    """A configuration file, flag or environment value is invalid."""

    kind_type = ConfigErrorKind


class RecordError(ErrscopeError):
    """A record cannot be stored as given; nothing of it is written."""

    kind_type = RecordErrorKind


class StoreError(ErrscopeError):
    """The store cannot be opened, written or migrated."""

    kind_type = StoreErrorKind


class QueryError(ErrscopeError):
    """A named query is unknown, badly declared, or called with bad parameters."""

    kind_type = QueryErrorKind


class RulesError(ErrscopeError):
    """A scrub rule file cannot be loaded or one of its regexes cannot be compiled."""

    kind_type = RulesErrorKind
