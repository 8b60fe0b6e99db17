"""The error catalog: the built-in file, user extensions, and every loading failure."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from errscope.collector.catalog import (
    BUILTIN_CODES,
    Code,
    builtin_catalog_text,
    default_catalog,
    load_catalog,
)
from errscope.collector.errors import CatalogError, CatalogErrorKind

_VALID_ENTRY = """
meaning = "quota for the month is used up"
retry_by = "nobody"
max_tries = 1
scope = "call"
on_cap = "stop"
hint = "say when the quota resets"
color = "#123456"
"""


def test_builtin_catalog_matches_code_enum() -> None:
    """The Code enum and catalog.toml list the same built-in codes, in the same order."""
    catalog = default_catalog()
    assert set(catalog.codes) == BUILTIN_CODES
    assert list(catalog.codes) == [c.value for c in Code if c not in (Code.OK, Code.UNKNOWN)]
    assert set(catalog.reserved) == {"ok", "unknown"}


def test_builtin_catalog_says_why_for_each_ambiguous_mapping() -> None:
    """Each ambiguous mapping named in the issue has a comment explaining the choice."""
    text = builtin_catalog_text()
    for word in ("KeyError", "ValueError", "409", "UNIMPLEMENTED", "FAILED_PRECONDITION", "499"):
        line = next(i for i, line in enumerate(text.splitlines()) if word in line)
        context = "\n".join(text.splitlines()[max(0, line - 6) : line + 1])
        assert "#" in context, word


@pytest.mark.parametrize(
    ("lookup", "value", "expected"),
    [
        pytest.param("http", 404, "not_found", id="http-404"),
        pytest.param("http", 410, "not_found", id="http-410-gone"),
        pytest.param("http", 422, "invalid_args", id="http-422"),
        pytest.param("http", 409, "invalid_args", id="http-409-conflict-is-the-models-to-fix"),
        pytest.param("http", 418, "invalid_args", id="http-unmapped-4xx-falls-back"),
        pytest.param("http", 429, "rate_limited", id="http-429"),
        pytest.param("http", 401, "denied", id="http-401"),
        pytest.param("http", 504, "timeout", id="http-504"),
        pytest.param("http", 501, "internal_error", id="http-501-wiring-bug"),
        pytest.param("http", 599, "internal_error", id="http-unmapped-5xx"),
        pytest.param("http", 200, None, id="http-200-is-no-error"),
        pytest.param("grpc", 5, "not_found", id="grpc-number"),
        pytest.param("grpc", "5", "not_found", id="grpc-numeric-string"),
        pytest.param("grpc", "DEADLINE_EXCEEDED", "timeout", id="grpc-name"),
        pytest.param("grpc", "UNIMPLEMENTED", "internal_error", id="grpc-unimplemented"),
        pytest.param("grpc", 0, None, id="grpc-ok"),
        pytest.param("grpc", "BOGUS", None, id="grpc-not-a-status"),
        pytest.param("jsonrpc", -32602, "invalid_args", id="jsonrpc-invalid-params"),
        pytest.param("jsonrpc", -32002, "not_found", id="mcp-resource-not-found"),
        pytest.param("jsonrpc", -32042, "denied", id="mcp-url-elicitation"),
        pytest.param("jsonrpc", -32050, "internal_error", id="jsonrpc-server-range-fallback"),
        pytest.param("exception", "PermissionError", "denied", id="exc-builtin"),
        pytest.param("exception", "httpx.ReadTimeout", "timeout", id="exc-dotted"),
        pytest.param(
            "exception",
            "pydantic_core._pydantic_core.ValidationError",
            "invalid_args",
            id="exc-pydantic",
        ),
        pytest.param("exception", "myapp.errors.ValueError", "invalid_args", id="exc-last-segment"),
        pytest.param("exception", "shop.OrderNotFound", "not_found", id="exc-glob"),
        pytest.param("exception", "KeyError", "internal_error", id="exc-keyerror-is-a-bug"),
        pytest.param("exception", "weird.Thing", None, id="exc-unmapped"),
        pytest.param("error_type", "tool_error", "internal_error", id="mcp-tool-error"),
        pytest.param("error_type", "not_found", "not_found", id="error-type-is-code"),
        pytest.param("error_type", "rate_limited", "rate_limited", id="error-type-alias"),
        pytest.param("error_type", "java.net.UnknownHostException", None, id="error-type-unmapped"),
    ],
)
def test_lookup_table(lookup: str, value: object, expected: str | None) -> None:
    """Statuses and exception names map to the documented code."""
    catalog = default_catalog()
    result = getattr(catalog, f"for_{lookup}")(value)
    assert result == expected


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "user.toml"
    path.write_text(text)
    return path


@pytest.mark.parametrize(
    ("text", "kind", "entry", "field"),
    [
        pytest.param("codes = [", CatalogErrorKind.BAD_TOML, None, None, id="bad-toml"),
        pytest.param(
            "colour = 1", CatalogErrorKind.UNKNOWN_KEY, None, "colour", id="unknown-top-key"
        ),
        pytest.param(
            "[codes.quota]" + _VALID_ENTRY + "colr = 'x'\n",
            CatalogErrorKind.UNKNOWN_KEY,
            "codes.quota",
            "colr",
            id="unknown-entry-key",
        ),
        pytest.param(
            "[codes.quota]\nmeaning = 'x'\n",
            CatalogErrorKind.MISSING_FIELD,
            "codes.quota",
            "retry_by",
            id="missing-field",
        ),
        pytest.param(
            "[codes.Quota]" + _VALID_ENTRY,
            CatalogErrorKind.BAD_CODE_NAME,
            "codes.Quota",
            None,
            id="bad-code-name",
        ),
        pytest.param(
            "[codes.ok]" + _VALID_ENTRY,
            CatalogErrorKind.RESERVED_CODE,
            "codes.ok",
            None,
            id="reserved-code",
        ),
        pytest.param(
            "[codes.not_found]" + _VALID_ENTRY,
            CatalogErrorKind.REDEFINED_BUILTIN,
            "codes.not_found",
            None,
            id="redefined-builtin",
        ),
        pytest.param(
            "[codes.quota]" + _VALID_ENTRY.replace('"nobody"', '"everyone"'),
            CatalogErrorKind.BAD_VALUE,
            "codes.quota",
            "retry_by",
            id="bad-enum-value",
        ),
        pytest.param(
            "[codes.quota]" + _VALID_ENTRY.replace("max_tries = 1", "max_tries = '1'"),
            CatalogErrorKind.BAD_TYPE,
            "codes.quota",
            "max_tries",
            id="bad-type",
        ),
        pytest.param(
            "[codes.quota]" + _VALID_ENTRY.replace("max_tries = 1", "max_tries = 0"),
            CatalogErrorKind.BAD_VALUE,
            "codes.quota",
            "max_tries",
            id="zero-tries",
        ),
        pytest.param(
            "[codes.quota]" + _VALID_ENTRY + "http = [200]\n",
            CatalogErrorKind.BAD_MAPPING,
            "codes.quota",
            "http",
            id="success-status-mapped",
        ),
        pytest.param(
            "[codes.quota]" + _VALID_ENTRY + "grpc = ['NOPE']\n",
            CatalogErrorKind.BAD_MAPPING,
            "codes.quota",
            "grpc",
            id="unknown-grpc-name",
        ),
        pytest.param(
            "[codes.quota]" + _VALID_ENTRY + "http = [402, 402]\n",
            CatalogErrorKind.BAD_MAPPING,
            "codes.quota",
            "http",
            id="value-listed-twice",
        ),
        pytest.param(
            "[codes.quota]" + _VALID_ENTRY + "http = [404]\n",
            CatalogErrorKind.CONFLICTING_MAPPING,
            "codes.quota",
            "http",
            id="two-codes-one-status",
        ),
        pytest.param(
            "[codes.quota]" + _VALID_ENTRY + "exceptions = ['PermissionError']\n",
            CatalogErrorKind.CONFLICTING_MAPPING,
            "codes.quota",
            "exceptions",
            id="two-codes-one-exception",
        ),
        pytest.param(
            "[mappings.not_found]\nexceptions = ['KeyError']\n",
            CatalogErrorKind.CONFLICTING_MAPPING,
            "mappings.not_found",
            "exceptions",
            id="move-without-replace",
        ),
        pytest.param(
            "[mappings.nosuch]\nhttp = [402]\n",
            CatalogErrorKind.BAD_MAPPING,
            "mappings.nosuch",
            None,
            id="mapping-to-missing-code",
        ),
        pytest.param(
            "[reserved]\nok = 'x'\n",
            CatalogErrorKind.REDEFINED_BUILTIN,
            None,
            "reserved",
            id="user-sets-reserved",
        ),
        pytest.param(
            "version = 2\n", CatalogErrorKind.BAD_VALUE, None, "version", id="future-version"
        ),
    ],
)
def test_bad_user_catalog(
    tmp_path: Path, text: str, kind: CatalogErrorKind, entry: str | None, field: str | None
) -> None:
    """Each bad user catalog fails with one typed error naming the entry and the field."""
    path = _write(tmp_path, text)
    with pytest.raises(CatalogError) as caught:
        load_catalog([path])
    assert caught.value.kind is kind
    assert caught.value.entry == (entry if entry is not None else str(path))
    assert caught.value.field == field
    assert "\n" not in caught.value.describe()


def test_duplicate_code_across_user_files(tmp_path: Path) -> None:
    """Two user files defining the same new code is a duplicate_code error."""
    one = tmp_path / "one.toml"
    two = tmp_path / "two.toml"
    one.write_text("[codes.quota]" + _VALID_ENTRY)
    two.write_text("[codes.quota]" + _VALID_ENTRY)
    with pytest.raises(CatalogError) as caught:
        load_catalog([one, two])
    assert caught.value.kind is CatalogErrorKind.DUPLICATE_CODE
    assert caught.value.entry == "codes.quota"


def test_unreadable_file(tmp_path: Path) -> None:
    """A missing file is an `unreadable` error naming the file."""
    with pytest.raises(CatalogError) as caught:
        load_catalog([tmp_path / "missing.toml"])
    assert caught.value.kind is CatalogErrorKind.UNREADABLE


def test_valid_user_extension(tmp_path: Path) -> None:
    """A user file adds a code with its own mappings and moves KeyError explicitly."""
    path = _write(
        tmp_path,
        "[codes.quota_exceeded]"
        + _VALID_ENTRY
        + "http = [402]\nexceptions = ['billing.QuotaExceeded']\n"
        + "[mappings.not_found]\nreplace = true\nexceptions = ['KeyError']\n",
    )
    catalog = load_catalog([path])
    assert catalog.codes[-1] == "quota_exceeded"
    assert catalog.for_http(402) == "quota_exceeded"
    assert catalog.for_exception("billing.QuotaExceeded") == "quota_exceeded"
    assert catalog.for_exception("KeyError") == "not_found"
    assert "KeyError" not in catalog.entries["internal_error"].exceptions
    assert catalog.sources == ("catalog.toml", str(path))
    # the built-in catalog object is untouched
    assert default_catalog().for_exception("KeyError") == "internal_error"


def test_override_builtin_explicitly(tmp_path: Path) -> None:
    """`override = true` lets a user file replace a built-in entry on purpose."""
    path = _write(tmp_path, "[codes.denied]" + _VALID_ENTRY + "override = true\n")
    catalog = load_catalog([path])
    assert catalog.entries["denied"].hint == "say when the quota resets"
    assert catalog.for_http(403) == "invalid_args"  # its statuses went with it: fallback


def test_catalog_is_immutable() -> None:
    """The loaded catalog cannot be changed by callers."""
    catalog = default_catalog()
    with pytest.raises(TypeError):
        catalog.entries["x"] = catalog.entries["denied"]  # type: ignore[index]


def test_builtin_file_is_plain_toml() -> None:
    """catalog.toml parses with the standard library alone (users can read it with any tool)."""
    data = tomllib.loads(builtin_catalog_text())
    assert data["version"] == 1
