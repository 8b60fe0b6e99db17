"""normalise: derive exactly one catalog code for a tool-call span, and say which signal decided.

Over 600 lines on purpose: the precedence below is one ladder in `_Normaliser`, whose rungs
share the span's parsed observation and exception names; split, the order would live in
two places.


Precedence (the first signal present wins; each sets `source`):

1. `error_type` — an explicit code: `errscope.code`, or `error.type` when it is a catalog
   code or one of its specific aliases.  A snake_case code the catalog does not know is
   `unknown` (a handler bug); the raw code is kept only when short, safe and not a secret.
2. `observation` — a structured observation in the tool's result, in each convention's
   result attribute, also when the span status is OK: `{"error": "not_found", ...}`,
   `{"error": {"code": ...}}`, an MCP result with `isError`, a LangChain ToolMessage (also
   in its serialised `{"lc": 1, "type": "constructor", ...}` form), a Python dict repr.
3. `http` — `http.response.status_code` (or the old `http.status_code`) >= 400, a numeric
   `error.type`, or the same on an HTTP CLIENT child span of the tool span (auto-instrumented
   HTTP clients put the status there, not on the tool span).
4. `rpc` — `rpc.status_code`, `rpc.response.status_code`, `rpc.grpc.status_code` and
   JSON-RPC codes (`rpc.jsonrpc.error_code`, or a negative `rpc.status_code`/`error.type`).
5. `marker` — pydantic-ai's validation failure stage and validation retry cause.
6. `exception` — the exception types the span names (exception events, a class-shaped
   `error.type`, the cause of a chained Python traceback), each looked up in the catalog;
   a number as `exception.type` (Node writes DOMException codes: "23") names nothing.  A
   generic wrapper (`ToolRetryError`, `ToolException`, Go's `*url.Error`, a bare `Error`)
   and a type the catalog does not map let the text decide (7) before the fallback.  A
   `TypeError` whose message is Python refusing the arguments (`got an unexpected keyword
   argument`, `missing 1 required positional argument`) is invalid_args, not a bug.
   Control-flow exceptions (LangGraph interrupts, pydantic-ai deferrals) are not errors.
7. `text` — the error only as text (a status description, an exception message, the
   result of a failed call, a short result of a successful one): a dict repr's `'error'`
   value, a leading `ClassName:` looked up in the exception table, an HTTP status
   (`HTTP 404`, `403: ...`, `429 Too Many Requests`), then a phrase table (`timed out`,
   `permission denied`, `not found`, ...).  Read for a code and a retry-after only; the
   text itself is never kept.
8. `marker` — weak markers: a generic `error.type` (`tool_error`, `_OTHER`), a LangChain
   ToolMessage or MCP result flagged as an error, pydantic-ai's ModelRetry.
9. `status` — span status ERROR with nothing else: internal_error; otherwise `ok`.

Result payloads are parsed only up to `MAX_PARSE_BYTES`; a cut-off payload is searched
with RE2 (linear time) for an `"error": "<code>"` pair.  Never raises on odd input.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping, Sequence
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
_ERROR_PAIR_RE: Final = re2.compile(r'["\']error["\']\s*:\s*["\']([A-Za-z0-9_.-]{1,64})["\']')
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
_VALIDATION_CAUSES: Final = frozenset({"validation_error"})
# Generic wrappers: the framework's own exception around the real cause, or one type for
# every failure.  Their code is the cause's (a chained traceback, the message), else their
# own catalog mapping.
_WRAPPERS: Final = frozenset(
    {
        "ToolRetryError",
        "ToolException",
        "UserError",
        "UnexpectedToolError",
        "AgentToolExecutionError",
        "ToolInvocationError",
        "FunctionExecutionException",  # Semantic Kernel's, for a bad argument and a failed call
        "McpError",
        "MCPError",
        "ExceptionGroup",
        "BaseExceptionGroup",
        "wrapError",
        "wrapErrors",
        "joinError",
        "errorString",
        "Error",
        "Exception",
        "RuntimeException",
        "ExecutionException",
        "CompletionException",
        "UndeclaredThrowableException",
        "InvocationTargetException",
    }
)
# How much of any one text the text signals read (they are searched with RE2: linear).
_TEXT_CHARS: Final = 4096
_SHORT_RESULT_CHARS: Final = 300  # a successful call's result read for a timeout notice
# `ClassName: message`, `ClassName(args)`, and a Java/Go `pkg.Class: message` at the start.
_CLASS_PREFIX_RE: Final = re2.compile(
    r"(?m)^\s*\*?((?:[A-Za-z_$][A-Za-z0-9_$]*\.)*[A-Za-z_$][A-Za-z0-9_$]*"
    r"(?:Error|Exception|Timeout|Exceeded|Denied|Refused|NotFound|Interrupted)[A-Za-z0-9_]*)"
    r"\s*[:(\n]"
)
# Exception header lines of a (possibly chained) traceback, cause first.
_CHAIN_LINE_RE: Final = re2.compile(
    r"(?m)^((?:[A-Za-z_][A-Za-z0-9_]*\.)*[A-Za-z_][A-Za-z0-9_]*"
    r"(?:Error|Exception|Timeout|Exceeded|Denied|NotFound|Retry[A-Za-z]*))(?::|$)"
)
_DIRECT_CAUSE: Final = "The above exception was the direct cause"
_HTTP_TEXT_RES: Final = (
    re2.compile(r"\bHTTP(?:/[0-9](?:\.[0-9])?)?[ :]+([1-5][0-9][0-9])\b"),
    re2.compile(r"^\s*([45][0-9][0-9])\s*(?::|-|\s[A-Z])"),
    re2.compile(
        r"\b([45][0-9][0-9])[ :]+(?i:too many requests|not found|forbidden|unauthori[sz]ed"
        r"|bad request|unprocessable|request timeout|gateway timeout|conflict|gone"
        r"|internal server error|service unavailable|bad gateway|payment required)"
    ),
    re2.compile(r"(?i)\bstatus(?:[ _-]?code)?\s*[=:]?\s*([45][0-9][0-9])\b"),
)
_RETRY_AFTER_TEXT_RE: Final = re2.compile(
    r"(?i)retry[ _-]?after\D{0,3}([0-9]{1,6}(?:\.[0-9]{1,3})?)\s*(?:s\b|sec|seconds|\)|$)"
)
_DICT_ERROR_RE: Final = re2.compile(
    r"""['"]error['"]\s*:\s*(?:"((?:[^"\\]|\\.)*)"|'((?:[^'\\]|\\.)*)')"""
)
# Python's own call refusing to bind the model's arguments to the tool's signature.
_SIGNATURE_ERROR: Final = (
    r"\bgot an unexpected keyword argument\b"
    r"|\bmissing [0-9]+ required (?:positional |keyword-only )?arguments?\b"
    r"|\btakes [0-9]+ positional arguments? but [0-9]+ (?:was|were) given\b"
    r"|\bgot multiple values for argument\b"
)
# Phrases, in order: the first that matches decides.  Only for a call that failed, except
# the timeout notice, which frameworks write as the result of a call they report as OK.
_PHRASES: Final = (
    (
        "timeout",
        re2.compile(
            r"(?i)\btimed[ -]?out\b|\bdeadline exceeded\b|\btimeout exceeded\b"
            r"|\btime-?out of [0-9]+ ?m?s exceeded|\bdue to timeout\b|\bClient\.Timeout\b"
        ),
    ),
    (
        "rate_limited",
        re2.compile(r"(?i)\brate[ _-]?limit|\btoo many requests\b|\bquota exceeded\b|\bthrottl"),
    ),
    (
        "denied",
        re2.compile(
            r"(?i)\bpermission denied\b|\baccess denied\b|\bforbidden\b|\bnot allowed\b"
            r"|\bnot authori[sz]ed\b|\bunauthori[sz]ed\b|\bexecution[ -]denied\b"
        ),
    ),
    (
        "invalid_args",
        re2.compile(
            r"(?i)\binvalid (?:tool )?(?:argument|input|parameter)s?\b"
            r"|\bvalidation (?:error|failed)\b"
            r"|\bmissing (?:required )?(?:argument|field|parameter|property)\b"
            r"|\brequired (?:argument|field|parameter|property)\b|\bfield required\b"
            r"|\bis not of type\b|\bis a required property\b"  # jsonschema's messages
            r"|\bis expected to be parsed to\b"  # Semantic Kernel's argument conversion
            rf"|{_SIGNATURE_ERROR}"
        ),
    ),
    (
        "not_found",
        re2.compile(
            r"(?i)\bnot found\b|\bno such\b|\b(?:does|do)(?: not|n't) exist\b|\bunknown tool\b"
        ),
    ),
)
_TIMEOUT_NOTICE_RE: Final = re2.compile(r"(?i)\btimed[ -]?out\b")
# A TypeError is a bug in the tool (internal_error) unless it is Python refusing to bind the
# model's arguments to the tool's signature: frameworks that call the function without a
# schema check (LlamaIndex's FunctionTool, Haystack's Tool) report bad arguments this way.
_SIGNATURE_ERROR_RE: Final = re2.compile(_SIGNATURE_ERROR)


class Source(StrEnum):
    """Which signal decided a call's code (stored as `source`)."""

    ERROR_TYPE = "error_type"
    OBSERVATION = "observation"
    HTTP = "http"
    RPC = "rpc"
    MARKER = "marker"
    EXCEPTION = "exception"
    TEXT = "text"
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
    text: str | None = None  # a flagged result's own words, read by the text signals


def _exception_name(value: str) -> str:
    """An exception type as the catalog names it: Go's `*pkg.Type` without the pointer
    star, Java's nested `Outer$Inner` as `Outer.Inner`, no quotes or spaces."""
    return value.strip().lstrip("*&").replace("$", ".").strip("'\"")


def _class_like(value: str) -> bool:
    """True for an error.type that names a class (`TimeoutError`, `java.net.X`, `*url.Error`)."""
    return "." in value or value[:1].isupper() or value[:1] in "*&"


def _child_http(children: Sequence[SpanView]) -> tuple[int | None, str | None]:
    """The HTTP status and error.type of the tool span's failed HTTP child, if any.

    Auto-instrumented HTTP clients (undici, otelhttp) record the response on a CLIENT
    child of the tool span; the tool span itself only has the message.
    """
    status: int | None = None
    error_type: str | None = None
    for child in children:
        attrs = child.attributes
        code = _int(attrs.get(sc.HTTP_RESPONSE_STATUS_CODE, attrs.get(sc.HTTP_STATUS_CODE_OLD)))
        if code is not None and code >= 400 and status is None:
            status = code
        kind = _text(attrs.get(sc.ERROR_TYPE))
        is_http = sc.HTTP_REQUEST_METHOD in attrs or sc.URL_FULL in attrs
        if kind and _int(kind) is None and child.status.code == STATUS_ERROR and is_http:
            error_type = error_type or kind
    return status, error_type


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
        if head.lstrip().startswith('"') and len(text) <= MAX_PARSE_BYTES:
            # a result JSON-encoded once more (OpenInference's DSPy tool spans): the text it holds
            try:
                inner = orjson.loads(head)
            except orjson.JSONDecodeError:
                return None
            # once only: a text quoted again and again is no result (and no recursion)
            nested = isinstance(inner, str) and not inner.lstrip().startswith('"')
            return self._parse_result(inner) if nested else None
        if not head.lstrip().startswith(("{", "[")):
            return None
        try:
            parsed = orjson.loads(head)
        except orjson.JSONDecodeError:
            return self._scan(head)
        return self._from_object(parsed, depth=0)

    def _parse_any(self, value: Any, depth: int) -> _Observation | None:
        """A nested result: an object, or a text that holds one."""
        if isinstance(value, str) and depth <= 4:
            return self._parse_result(value)
        return self._from_object(value, depth + 1)

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
        kwargs = obj.get("kwargs")
        if obj.get("lc") == 1 and obj.get("type") == "constructor" and isinstance(kwargs, dict):
            # LangChain's serialised message (Python and JS): the message is in kwargs
            ids = obj.get("id")
            if isinstance(ids, list) and ids and ids[-1] == "ToolMessage":
                return self._langchain(kwargs, depth)
            return None
        output = obj.get("output")
        if isinstance(output, dict) and len(obj) <= 2:
            return self._from_object(output, depth + 1)  # OpenLLMetry's {"output": ...}
        result = obj.get("result")
        if isinstance(result, str) and set(obj) <= {"result", "is_error"}:
            # OpenLLMetry's MCP output `{"result": <the tool's text>, "is_error": ...}`
            return self._parse_result(result)
        if obj.get("isError") is True:
            return self._mcp(obj, depth)
        if obj.get("isError") is False and isinstance(obj.get("content"), list):
            # An MCP result the server called a success: a structured error the tool
            # returned as its text (`{"error": "not_found"}`) is still that error.
            for item in obj["content"][:8]:
                if isinstance(item, dict) and isinstance(item.get("text"), str):
                    inner = self._parse_result(item["text"])
                    if inner is not None and inner.code:
                        return inner
            return None
        if "raw_output" in obj and isinstance(obj.get("blocks"), list):
            # LlamaIndex's ToolOutput: the tool's own return value is `raw_output`
            return self._parse_any(obj["raw_output"], depth)
        error = obj.get("error")
        if error is None or error is False:
            return None
        found = _Observation()
        if isinstance(error, str):
            decided = self.code_from_string(error)
            if decided is None:
                found.marker = True
                found.text = error  # `{"error": "<message>"}`: the words decide (Haystack's)
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
            words = content if isinstance(content, str) else None
            return _Observation(marker=True, call_id=call, text=words)
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
        if inner is not None:
            return inner
        words = None
        if isinstance(content, list) and content and isinstance(content[0], dict):
            first = content[0].get("text")
            words = first if isinstance(first, str) else None
        return _Observation(marker=True, text=words)

    # -------------------------------------------------------- text signals

    def from_text(self, text: str, *, failed: bool = True) -> tuple[str, float | None] | None:
        """(code, retry_after_s) read from an error told only as text, or None.

        A failed call's text: a dict repr's 'error' value first (the SDK's own message
        around it says nothing), then a leading class name the exception table maps, an
        HTTP status, the phrase table.  A successful call's text decides only a timeout.
        """
        head = text[:_TEXT_CHARS]
        if not head.strip():
            return None
        retry = _RETRY_AFTER_TEXT_RE.search(head)
        retry_after = _number(retry.group(1)) if retry else None
        if not failed:
            if len(head) <= _SHORT_RESULT_CHARS and _TIMEOUT_NOTICE_RE.search(head):
                return Code.TIMEOUT.value, None
            return None
        inner = _DICT_ERROR_RE.search(head)
        if inner is not None:
            found = self.from_text(inner.group(1) or inner.group(2) or "")
            if found is not None:
                return found[0], found[1] or retry_after
        for prefix in _CLASS_PREFIX_RE.findall(head):  # the first line, or a stack's head
            name = _exception_name(prefix)
            mapped = self.catalog.for_exception(name)
            if mapped is not None and name.rsplit(".", 1)[-1] not in _WRAPPERS:
                return mapped, retry_after
        for pattern in _HTTP_TEXT_RES:
            match = pattern.search(head)
            if match is not None:
                mapped = self.catalog.for_http(int(match.group(1)))
                if mapped is not None:
                    return mapped, retry_after
        for code, pattern in _PHRASES:
            if pattern.search(head):
                return code, retry_after
        return None

    def _texts(self, view: SpanView) -> list[str]:
        """What a failed span says in words: exception messages, the status description."""
        texts = []
        for event in reversed(view.events):
            if event.name == sc.EXCEPTION_EVENT:
                message = _text(event.attributes.get(sc.EXCEPTION_MESSAGE))
                if message:
                    texts.append(message)
                stack = _text(event.attributes.get(sc.EXCEPTION_STACKTRACE))
                if stack and not message:
                    texts.append(stack[:_TEXT_CHARS])  # Node's stack starts `Name: message`
        if view.status.message:
            texts.append(view.status.message)
        return texts

    def _chain_types(self, view: SpanView) -> list[str]:
        """Exception types a chained traceback names, cause first (Python prints it first)."""
        out: list[str] = []
        for event in reversed(view.events):
            stack = _text(event.attributes.get(sc.EXCEPTION_STACKTRACE))
            if event.name == sc.EXCEPTION_EVENT and stack and _DIRECT_CAUSE in stack:
                out.extend(m for m in _CHAIN_LINE_RE.findall(stack[:MAX_PARSE_BYTES]))
        message = view.status.message
        if _DIRECT_CAUSE in message:
            out.extend(_CHAIN_LINE_RE.findall(message[:MAX_PARSE_BYTES]))
        return out

    # -------------------------------------------------------- the ladder

    def normalise(  # noqa: PLR0915 - the ladder reads top to bottom, one step after another
        self, view: SpanView, children: Sequence[SpanView] = ()
    ) -> Outcome:
        attrs = view.attributes
        http_status = _int(
            attrs.get(sc.HTTP_RESPONSE_STATUS_CODE, attrs.get(sc.HTTP_STATUS_CODE_OLD))
        )
        attempt = _int(
            attrs.get(
                sc.ERRSCOPE_ATTEMPT,
                attrs.get(sc.PYDANTIC_AI_RETRY_ATTEMPT, attrs.get(sc.CREWAI_TOOL_RUN_ATTEMPTS)),
            )
        )
        retry_after = _number(attrs.get(sc.ERRSCOPE_RETRY_AFTER_S)) or self._retry_after_header(
            attrs
        )
        field = _text(attrs.get(sc.ERRSCOPE_FIELD))
        field = field if field and is_identifier(field) else None
        observation = self.observation(attrs)
        child_status, child_type = _child_http(children)
        if http_status is None or http_status < 400:
            http_status = child_status or http_status
        kept_status = http_status if http_status and 100 <= http_status <= 599 else None
        # A retry counter past any real one is noise, and the column is 32-bit: a value
        # over 2**31 - 1 failed the whole grouped commit, other clients' spans with it.
        kept_attempt = attempt if attempt is not None and 0 <= attempt <= _MAX_ATTEMPT else None
        found_call_id = observation.call_id if observation else None
        # Haystack marks a failed call only with `haystack.tool.error`; its span status is UNSET
        failed = view.status.code == STATUS_ERROR or attrs.get(sc.HAYSTACK_TOOL_ERROR) is True

        def outcome(
            code: str, source: Source, raw: str | None = None, text_retry: float | None = None
        ) -> Outcome:
            obs_field = observation.field if observation else None
            obs_retry = observation.retry_after_s if observation else None
            return Outcome(
                code=code,
                source=source,
                raw_code=raw if code == Code.UNKNOWN else None,
                field=(field or obs_field) if code != Code.OK else None,
                retry_after_s=(obs_retry or retry_after or text_retry) if code != Code.OK else None,
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
        error_number = _int(error_type) if error_type else _int(attrs.get(sc.ERROR_TYPE))
        class_like = error_type is not None and error_number is None and _class_like(error_type)
        if error_type is not None and error_number is None:
            if error_type in _WEAK_ERROR_TYPES:
                weak = self.catalog.for_error_type(error_type) or Code.INTERNAL_ERROR.value
            elif not class_like:
                decided = self.code_from_string(error_type)
                if decided is not None:
                    return outcome(decided[0], Source.ERROR_TYPE, decided[1])
        # 2. structured observation in the result
        if observation is not None and observation.code is not None:
            return outcome(observation.code, Source.OBSERVATION, observation.raw)
        # 3. HTTP: the span's own status, a numeric error.type, an HTTP child span's status
        for status in (http_status, error_number):
            if status is not None and 400 <= status <= 599:
                mapped = self.catalog.for_http(status)
                if mapped is not None:
                    return outcome(mapped, Source.HTTP)
        # 4. RPC and JSON-RPC
        rpc = self._rpc(attrs, error_number)
        if rpc is not None:
            return outcome(rpc, Source.RPC)
        # 5. strong framework markers
        if _text(attrs.get(sc.PYDANTIC_AI_FAILURE_STAGE)) == "validation" or (
            _text(attrs.get(sc.PYDANTIC_AI_RETRY_CAUSE)) in _VALIDATION_CAUSES
        ):
            return outcome(Code.INVALID_ARGS.value, Source.MARKER)
        # 6. exception types: the events', a class-shaped error.type, a child's timeout
        types = self._exception_types(view)
        if class_like and error_type is not None:
            types.append(error_type)
        if child_type is not None:
            types.append(child_type)
        named = [_exception_name(t) for t in types if not _int(t) and t.strip()]
        for name in named:
            if name.rsplit(".", 1)[-1] in _NOT_ERRORS:
                return outcome(Code.OK.value, Source.EXCEPTION)
        if any(n.rsplit(".", 1)[-1] == "TypeError" for n in named) and any(
            _SIGNATURE_ERROR_RE.search(t[:_TEXT_CHARS]) for t in self._texts(view)
        ):
            return outcome(Code.INVALID_ARGS.value, Source.EXCEPTION)
        wrapper_code: str | None = None
        chain = [_exception_name(t) for t in self._chain_types(view)]
        for name in [*named, *chain]:
            mapped = self.catalog.for_exception(name)
            if mapped is None:
                continue
            if name.rsplit(".", 1)[-1] in _WRAPPERS:
                wrapper_code = wrapper_code or mapped
                continue
            return outcome(mapped, Source.EXCEPTION)
        # 7. the error told only as text
        signalled = failed or bool(named) or error_type is not None or observation is not None
        texts = self._texts(view) if signalled else []
        if observation is not None and observation.text:
            texts.append(observation.text)
        for text in texts:
            found = self.from_text(text)
            if found is not None:
                return outcome(found[0], Source.TEXT, text_retry=found[1])
        if not signalled:
            result = self._result_text(attrs)
            found = self.from_text(result, failed=False) if result else None
            if found is not None:
                return outcome(found[0], Source.TEXT)
        if _text(attrs.get(sc.PYDANTIC_AI_RETRY_CAUSE)) == "model_retry":
            return outcome(Code.INVALID_ARGS.value, Source.MARKER)  # ModelRetry, no words
        if wrapper_code is not None:
            return outcome(wrapper_code, Source.EXCEPTION)
        if named:
            return outcome(self.catalog.fallback["exception"], Source.EXCEPTION)
        # 8. weak markers
        if weak is not None:
            return outcome(weak, Source.MARKER)
        if observation is not None and observation.marker:
            return outcome(self.catalog.fallback["status_error"], Source.MARKER)
        # an error.type none of the above could read still says the call failed
        # (OpenTelemetry sets it only on failures): unknown, never ok
        if error_type and error_number is None:
            safe = is_safe_raw_code(error_type) and not self.is_secret(error_type)
            return outcome(Code.UNKNOWN.value, Source.ERROR_TYPE, error_type if safe else None)
        # 9. span status
        if failed:
            return outcome(self.catalog.fallback["status_error"], Source.STATUS)
        return outcome(Code.OK.value, Source.STATUS)

    @staticmethod
    def _result_text(attrs: Mapping[str, AttrValue]) -> str | None:
        for key in sc.RESULT_KEYS:
            value = attrs.get(key)
            if isinstance(value, str) and value:
                return value
        return None

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

    @staticmethod
    def _exception_types(view: SpanView) -> list[str]:
        out = []
        for event in reversed(view.events):
            if event.name == sc.EXCEPTION_EVENT:
                value = _text(event.attributes.get(sc.EXCEPTION_TYPE))
                if value and len(value) <= 256:
                    out.append(value)
        return out

    @staticmethod
    def _retry_after_header(attrs: Mapping[str, AttrValue]) -> float | None:
        value = attrs.get(sc.HTTP_RETRY_AFTER)
        first = value[0] if isinstance(value, tuple) and value else value
        return _number(first) if isinstance(first, str | int | float) else None


def normalise(
    view: SpanView,
    catalog: Catalog,
    *,
    is_secret: Callable[[str], bool] = lambda _: False,
    children: Sequence[SpanView] = (),
) -> Outcome:
    """The one code for a tool-call span, with its source and the facts kept beside it.

    `children` are the span's direct children seen in the same export request (an HTTP
    client span there may hold the status the tool span lacks).
    """
    return _Normaliser(catalog, is_secret).normalise(view, children)


def code_from_text(text: str, catalog: Catalog, *, failed: bool = True) -> str | None:
    """The code an error told only as text maps to (the text signals of step 7), or None."""
    found = _Normaliser(catalog, lambda _: False).from_text(text, failed=failed)
    return found[0] if found else None
