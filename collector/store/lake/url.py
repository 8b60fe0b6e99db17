"""DuckLake store URLs: `ducklake:postgres:<libpq conninfo>`, parsed and never echoed.

`parse_lake_url` refuses a malformed URL with `StoreError(BAD_URL)` saying what is wrong;
every message that quotes a URL or a DuckDB error passes through `mask_secrets`, which
hides libpq passwords and the environment's S3 credentials.  Over-masking is harmless;
under-masking is a severity-one bug.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Final

from errscope.collector.errors import StoreError, StoreErrorKind

__all__ = ["LAKE_PREFIX", "LakeUrl", "mask_secrets", "parse_lake_url", "sql_literal"]

LAKE_PREFIX: Final = "ducklake:"
# A libpq password: single-quoted with backslash escapes, or a run of characters where `\ `
# escapes a space, and then any further words up to the next `key=`: a malformed string
# (`password="two words"`) must not show its second half.  Over-masking is harmless.
_PASSWORD_KV_RE: Final = re.compile(
    r"""(password\s*=\s*)('(?:[^'\\]|\\.)*'?|"?(?:\\.|[^\s\\"])+(?:\s+(?![A-Za-z_]+\s*=)[^\s"]+)*)""",
    re.IGNORECASE,
)
# userinfo `user:password@` (the user may be empty); greedy to the token's last `@`, so a
# password holding an unescaped `@` is hidden whole.
_PASSWORD_URI_RE: Final = re.compile(r"(://[^:/@\s]*:)(\S*)(@)")
_KEYWORD_RE: Final = re.compile(r"[a-z_]+")


def mask_secrets(text: str) -> str:
    """`text` with every libpq password (`password=...`, `user:pw@`) replaced by `***`, and
    the S3 credentials of the environment too (an object store's error may quote them)."""
    text = _PASSWORD_KV_RE.sub(r"\1***", text)
    text = _PASSWORD_URI_RE.sub(r"\1***\3", text)
    for name in ("AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_ACCESS_KEY_ID"):
        value = os.environ.get(name) or ""
        if len(value) >= 8 and value in text:
            text = text.replace(value, "***")
    return text


@dataclass(frozen=True, slots=True)
class LakeUrl:
    """A parsed `ducklake:postgres:<libpq connection string>` store URL."""

    catalog: str
    conninfo: str

    @property
    def attach_path(self) -> str:
        """What DuckDB's ATTACH takes."""
        return f"{LAKE_PREFIX}{self.catalog}:{self.conninfo}"

    def masked(self) -> str:
        """The URL with its password hidden, for messages and banners."""
        return mask_secrets(self.attach_path)


def _bad_url(message: str, url: str, hint: str) -> StoreError:
    return StoreError(StoreErrorKind.BAD_URL, message, entry=mask_secrets(url), hint=hint)


_URL_HINT: Final = (
    "ducklake:postgres:dbname=errscope host=db.internal user=errscope "
    "(a libpq key=value string or postgresql:// URI)"
)


def _check_keyword_conninfo(url: str, conninfo: str) -> None:
    """Tokenise a libpq key=value string well enough to refuse obvious mistakes."""
    i, n = 0, len(conninfo)
    while i < n:
        while i < n and conninfo[i].isspace():
            i += 1
        if i >= n:
            break
        eq = conninfo.find("=", i)
        if eq < 0:
            raise _bad_url("connection string has a word without `=`", url, _URL_HINT)
        key = conninfo[i:eq].strip()
        if not _KEYWORD_RE.fullmatch(key):
            raise _bad_url("connection string has a bad keyword", url, _URL_HINT)
        i = eq + 1
        while i < n and conninfo[i].isspace():
            i += 1
        if i < n and conninfo[i] == "'":
            i += 1
            while i < n and conninfo[i] != "'":
                i += 2 if conninfo[i] == "\\" else 1
            if i >= n:
                raise _bad_url("connection string has an unclosed quote", url, _URL_HINT)
            i += 1
        else:
            start = i
            while i < n and not conninfo[i].isspace():
                i += 1
            if i == start:
                raise _bad_url(f"connection string gives `{key}` no value", url, _URL_HINT)


def parse_lake_url(url: str) -> LakeUrl:
    """Parse `ducklake:postgres:<conninfo>`; raise `StoreError(BAD_URL)` saying what is wrong."""
    if not url.startswith(LAKE_PREFIX):
        raise _bad_url("not a DuckLake URL", url, _URL_HINT)
    catalog, sep, conninfo = url.removeprefix(LAKE_PREFIX).partition(":")
    if not sep or catalog != "postgres":
        raise _bad_url(
            "only a PostgreSQL catalog is supported (many writers need one)", url, _URL_HINT
        )
    conninfo = conninfo.strip()
    if not conninfo:
        raise _bad_url("no connection string after ducklake:postgres:", url, _URL_HINT)
    if conninfo.startswith(("postgres://", "postgresql://")):
        if not conninfo.split("://", 1)[1]:
            raise _bad_url("connection URI has no host or database", url, _URL_HINT)
    else:
        _check_keyword_conninfo(url, conninfo)
    return LakeUrl(catalog=catalog, conninfo=conninfo)


def sql_literal(value: str) -> str:
    """`value` as a single-quoted SQL string literal (for ATTACH, LOAD and SECRET text,
    which take no bound parameters)."""
    return "'" + value.replace("'", "''") + "'"
