"""normalise: derive exactly one catalog code for a tool-call span, and say which signal decided.

Precedence (the first signal present wins; each sets `source`):

1. `error_type` — an explicit code: `errscope.code`, or `error.type` when it is a catalog
   code or one of its specific aliases.  A snake_case code the catalog does not know is
   `unknown` (a handler bug); the raw code is kept only when short, safe and not a secret.
2. `observation` — a structured observation in the tool's result, in each convention's
   result attribute, also when the span status is OK: `{"error": "not_found", ...}`,
   `{"error": {"code": ...}}`, an MCP result with `isError`, a LangChain ToolMessage.
3. `http` — `http.response.status_code` (or the old `http.status_code`) >= 400.
4. `rpc` — `rpc.status_code`, `rpc.response.status_code`, `rpc.grpc.status_code` and
   JSON-RPC codes (`rpc.jsonrpc.error_code`, or a negative `rpc.status_code`/`error.type`).
5. `marker` — framework markers: pydantic-ai's validation failure stage and retry cause, a
   LangChain ToolMessage with `"status": "error"`, MCP `isError`/`error.type=tool_error`.
6. `exception` — the last exception event's `exception.type`: full dotted name, then the
   last segment, then the catalog's globs; unmapped types fall back to internal_error.
   Control-flow exceptions (LangGraph interrupts, pydantic-ai deferrals) are not errors.
7. `status` — span status ERROR with nothing else: internal_error; otherwise `ok`.

Result payloads are parsed only up to `MAX_PARSE_BYTES`; a cut-off payload is searched
with RE2 (linear time) for an `"error": "<code>"` pair.  Never raises on odd input.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Final

import orjson
import re2

from errscope.collector import semconv as sc
from errscope.collector.catalog import Catalog, Code
from errscope.collector.record import is_identifier, is_safe_id, is_safe_raw_code
from errscope.collector.spanview import STATUS_ERROR, AttrValue, SpanView

__all__ = ["MAX_PARSE_BYTES", "Outcome", "Source", "normalise"]

MAX_PARSE_BYTES: Final = 64 * 1024
_CODE_LIKE_RE: Final = re.compile(r"[a-z][a-z0-9_]{0,47}")
_ERROR_PAIR_RE: Final = re2.compile(r'"error"\s*:\s*"([A-Za-z0-9_.-]{1,64})"')
_FIELD_PAIR_RE: Final = re2.compile(r'"field"\s*:\s*"([A-Za-z0-9_.\[\]]{1,128})"')
_CALL_ID_PAIR_RE: Final = re2.compile(r'"tool_call_id"\s*:\s*"([A-Za-z0-9_.:-]{1,128})"')
# error.type values instrumentations put when they know nothing specific: they decide only
# when no better signal exists.
_WEAK_ERROR_TYPES: Final = frozenset({"tool_error", "_OTHER", "internal", "internal_error"})
_NOT_ERRORS: Final = frozenset(
    {
        "GraphInterrupt",
        "NodeInterrupt",
        "Command",
        "ParentCommand",
        "CallDeferred",
        "ApprovalRequired",
    }
)
_VALIDATION_CAUSES: Final = frozenset({"validation_error", "model_retry"})


class Source(StrEnum):
    """Which signal decided a call's code (stored as `source`)."""

    ERROR_TYPE = "error_type"
    OBSERVATION = "observation"
    HTTP = "http"
    RPC = "rpc"
    MARKER = "marker"
    EXCEPTION = "exception"
    STATUS = "status"
    PIPELINE = "pipeline"


@dataclass(frozen=True, slots=True)
class Outcome:
    """The normalised result of one call: code, why, and the few facts kept beside it."""

    code: str
    source: Source
    raw_code: str | None = None
    field: str | None = None
    retry_after_s: float | None = None
    http_status: int | None = None
    attempt: int | None = None
    call_id: str | None = None  # found inside a result (LangChain puts it only there)


@dataclass(slots=True)
class _Observation:
    code: str | None = None
    raw: str | None = None
    field: str | None = None
    retry_after_s: float | None = None
    marker: bool = False  # an error flag with no code (LangChain status, MCP isError)
    call_id: str | None = None


_MAX_ATTEMPT: Final = 1_000_000


def _int(value: AttrValue | None) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and re.fullmatch(r"-?\d{1,6}", value.strip()):
        return int(value)
    return None


def _number(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        return None
    try:
        number = float(value)
    except ValueError:
        return None
    return number if math.isfinite(number) and 0 <= number <= 86400 * 7 else None


def _text(value: AttrValue | None) -> str | None:
    return value if isinstance(value, str) and value else None


class _Normaliser:
    def __init__(self, catalog: Catalog, is_secret: Callable[[str], bool]) -> None:
        self.catalog = catalog
        self.is_secret = is_secret

    # -------------------------------------------------------- code strings

    def code_from_string(self, value: str) -> tuple[str, str | None] | None:
        """(code, raw_code) for a reported code string, or None when it is not code-like."""
        if value == Code.OK or value in self.catalog.entries:
            return value, None
        mapped = self.catalog.for_error_type(value)
        if mapped is not None and value not in _WEAK_ERROR_TYPES:
            return mapped, None
        if _CODE_LIKE_RE.fullmatch(value):
            raw = value if is_safe_raw_code(value) and not self.is_secret(value) else None
            return Code.UNKNOWN.value, raw
        return None

    # -------------------------------------------------------- observations

    def observation(self, attrs: Mapping[str, AttrValue]) -> _Observation | None:
        for key in sc.RESULT_KEYS:
            value = attrs.get(key)
            if isinstance(value, str) and value:
                found = self._parse_result(value)
                if found is not None:
                    return found
            elif isinstance(value, dict):
                found = self._from_object(value, depth=0)
                if found is not None:
                    return found
        return None

    def _parse_result(self, text: str) -> _Observation | None:
        head = text[:MAX_PARSE_BYTES]
        if not head.lstrip().startswith(("{", "[")):
            return None
        try:
            parsed = orjson.loads(head)
        except orjson.JSONDecodeError:
            return self._scan(head)
        return self._from_object(parsed, depth=0)

    def _scan(self, text: str) -> _Observation | None:
        """A cut-off payload: find `"error": "code"` and friends without parsing."""
        match = _ERROR_PAIR_RE.search(text)
        if match is None:
            if '"status": "error"' in text or '"status":"error"' in text:
                call = _CALL_ID_PAIR_RE.search(text)
                return _Observation(marker=True, call_id=call.group(1) if call else None)
            return None
        decided = self.code_from_string(match.group(1))
        field = _FIELD_PAIR_RE.search(text)
        return _Observation(
            code=decided[0] if decided else None,
            raw=decided[1] if decided else None,
            field=field.group(1) if field else None,
        )

    def _from_object(self, obj: Any, depth: int) -> _Observation | None:
        if depth > 4 or not isinstance(obj, dict):
            return None
        if obj.get("type") == "tool" and isinstance(obj.get("data"), dict):
            return self._langchain(obj["data"], depth)
        if obj.get("isError") is True:
            return self._mcp(obj, depth)
        error = obj.get("error")
        if error is None or error is False:
            return None
        found = _Observation()
        if isinstance(error, str):
            decided = self.code_from_string(error)
            if decided is None:
                found.marker = True
            else:
                found.code, found.raw = decided
        elif isinstance(error, dict):
            found.code, found.raw, found.marker = self._error_object(error)
        else:
            found.marker = True
        field = obj.get("field")
        if isinstance(field, str) and is_identifier(field):
            found.field = field
        found.retry_after_s = _number(obj.get("retry_after", obj.get("retry_after_s")))
        return found

    def _error_object(self, error: Mapping[str, Any]) -> tuple[str | None, str | None, bool]:
        code = error.get("code")
        if isinstance(code, str):
            decided = self.code_from_string(code)
            if decided is not None:
                return decided[0], decided[1], False
        if isinstance(code, int) and not isinstance(code, bool):
            if -32768 <= code <= -32000:
                return self.catalog.for_jsonrpc(code), None, False
            mapped = self.catalog.for_http(code)
            if mapped is not None:
                return mapped, None, False
        return None, None, True

    def _langchain(self, data: Mapping[str, Any], depth: int) -> _Observation | None:
        call_id = data.get("tool_call_id")
        call = call_id if isinstance(call_id, str) and is_safe_id(call_id) else None
        content = data.get("content")
        inner = self._parse_result(content) if isinstance(content, str) else None
        if inner is not None:
            inner.call_id = call
            return inner
        if data.get("status") == "error":
            return _Observation(marker=True, call_id=call)
        return _Observation(call_id=call) if call else None

    def _mcp(self, result: Mapping[str, Any], depth: int) -> _Observation:
        content = result.get("content")
        if isinstance(content, list):
            for item in content[:8]:
                if isinstance(item, dict) and isinstance(item.get("text"), str):
                    inner = self._parse_result(item["text"])
                    if inner is not None and (inner.code or inner.marker):
                        return inner
        structured = result.get("structuredContent")
        inner = self._from_object(structured, depth + 1) if structured is not None else None
        return inner if inner is not None else _Observation(marker=True)

    # -------------------------------------------------------- the ladder

    def normalise(self, view: SpanView) -> Outcome:
        attrs = view.attributes
        http_status = _int(
            attrs.get(sc.HTTP_RESPONSE_STATUS_CODE, attrs.get(sc.HTTP_STATUS_CODE_OLD))
        )
        attempt = _int(attrs.get(sc.ERRSCOPE_ATTEMPT, attrs.get(sc.PYDANTIC_AI_RETRY_ATTEMPT)))
        retry_after = _number(attrs.get(sc.ERRSCOPE_RETRY_AFTER_S)) or self._retry_after_header(
            attrs
        )
        field = _text(attrs.get(sc.ERRSCOPE_FIELD))
        field = field if field and is_identifier(field) else None
        observation = self.observation(attrs)
        kept_status = http_status if http_status and 100 <= http_status <= 599 else None
        # A retry counter past any real one is noise, and the column is 32-bit: a value
        # over 2**31 - 1 failed the whole grouped commit, other clients' spans with it.
        kept_attempt = attempt if attempt is not None and 0 <= attempt <= _MAX_ATTEMPT else None
        found_call_id = observation.call_id if observation else None

        def outcome(code: str, source: Source, raw: str | None = None) -> Outcome:
            obs_field = observation.field if observation else None
            obs_retry = observation.retry_after_s if observation else None
            return Outcome(
                code=code,
                source=source,
                raw_code=raw if code == Code.UNKNOWN else None,
                field=(field or obs_field) if code != Code.OK else None,
                retry_after_s=(obs_retry or retry_after) if code != Code.OK else None,
                http_status=kept_status,
                attempt=kept_attempt,
                call_id=found_call_id,
            )

        # 1. explicit codes
        weak: str | None = None
        explicit = _text(attrs.get(sc.ERRSCOPE_CODE))
        if explicit is not None:
            decided = self.code_from_string(explicit)
            if decided is not None:
                return outcome(decided[0], Source.ERROR_TYPE, decided[1])
        error_type = _text(attrs.get(sc.ERROR_TYPE))
        error_number = _int(error_type) if error_type else None
        if error_type is not None and error_number is None:
            if error_type in _WEAK_ERROR_TYPES:
                weak = self.catalog.for_error_type(error_type) or Code.INTERNAL_ERROR.value
            elif "." not in error_type and not error_type[:1].isupper():
                decided = self.code_from_string(error_type)
                if decided is not None:
                    return outcome(decided[0], Source.ERROR_TYPE, decided[1])
        # 2. structured observation in the result
        if observation is not None and observation.code is not None:
            return outcome(observation.code, Source.OBSERVATION, observation.raw)
        # 3. HTTP
        for status in (http_status, error_number):
            if status is not None and 400 <= status <= 599:
                mapped = self.catalog.for_http(status)
                if mapped is not None:
                    return outcome(mapped, Source.HTTP)
        # 4. RPC and JSON-RPC
        rpc = self._rpc(attrs, error_number)
        if rpc is not None:
            return outcome(rpc, Source.RPC)
        # 5. framework markers
        marker = self._marker(attrs, observation) or weak
        if marker is not None:
            return outcome(marker, Source.MARKER)
        # 6. exception type
        exc_type = self._exception_type(view) or (
            error_type if error_type and ("." in error_type or error_type[:1].isupper()) else None
        )
        if exc_type is not None:
            last = exc_type.rsplit(".", 1)[-1]
            if last in _NOT_ERRORS:
                return outcome(Code.OK.value, Source.EXCEPTION)
            mapped = self.catalog.for_exception(exc_type)
            return outcome(mapped or self.catalog.fallback["exception"], Source.EXCEPTION)
        # 7. an error.type none of the above could read still says the call failed
        # (OpenTelemetry sets it only on failures): unknown, never ok
        if error_type and error_number is None:
            safe = is_safe_raw_code(error_type) and not self.is_secret(error_type)
            return outcome(Code.UNKNOWN.value, Source.ERROR_TYPE, error_type if safe else None)
        # 8. span status
        if view.status.code == STATUS_ERROR:
            return outcome(self.catalog.fallback["status_error"], Source.STATUS)
        return outcome(Code.OK.value, Source.STATUS)

    def _rpc(self, attrs: Mapping[str, AttrValue], error_number: int | None) -> str | None:
        for key in (sc.RPC_STATUS_CODE, sc.RPC_RESPONSE_STATUS_CODE, sc.RPC_GRPC_STATUS_CODE):
            value = attrs.get(key)
            number = _int(value)
            if number is not None and number < 0:
                return self.catalog.for_jsonrpc(number)
            if number is not None:
                mapped = self.catalog.for_grpc(number)
            elif isinstance(value, str):
                mapped = self.catalog.for_grpc(value.strip().upper())
            else:
                mapped = None
            if mapped is not None:
                return mapped
        jsonrpc = _int(attrs.get(sc.RPC_JSONRPC_ERROR_CODE))
        if jsonrpc is None and error_number is not None and error_number < 0:
            jsonrpc = error_number
        if jsonrpc is not None and jsonrpc < 0:
            return self.catalog.for_jsonrpc(jsonrpc)
        return None

    def _marker(
        self, attrs: Mapping[str, AttrValue], observation: _Observation | None
    ) -> str | None:
        if _text(attrs.get(sc.PYDANTIC_AI_FAILURE_STAGE)) == "validation":
            return Code.INVALID_ARGS.value
        if _text(attrs.get(sc.PYDANTIC_AI_RETRY_CAUSE)) in _VALIDATION_CAUSES:
            return Code.INVALID_ARGS.value
        if observation is not None and observation.marker:
            return self.catalog.fallback["status_error"]
        return None

    @staticmethod
    def _exception_type(view: SpanView) -> str | None:
        for event in reversed(view.events):
            if event.name == sc.EXCEPTION_EVENT:
                value = _text(event.attributes.get(sc.EXCEPTION_TYPE))
                if value and len(value) <= 256:
                    return value
        return None

    @staticmethod
    def _retry_after_header(attrs: Mapping[str, AttrValue]) -> float | None:
        value = attrs.get(sc.HTTP_RETRY_AFTER)
        first = value[0] if isinstance(value, tuple) and value else value
        return _number(first) if isinstance(first, str | int | float) else None


def normalise(
    view: SpanView, catalog: Catalog, *, is_secret: Callable[[str], bool] = lambda _: False
) -> Outcome:
    """The one code for a tool-call span, with its source and the facts kept beside it."""
    return _Normaliser(catalog, is_secret).normalise(view)
