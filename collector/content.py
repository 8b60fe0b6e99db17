"""Conversation content on the span path: which attributes hold it, and masking it in tracebacks.

`ContentPolicy` says whether a passed-on span keeps conversation content; `content_family`
names the family of an attribute key (`gen_ai.messages`, `vercel_ai`, ...) or None for a key
that holds no content; `mask_traceback_content` reduces a redacted traceback so it repeats
none of the call's argument values and, on its exception lines, no URL path or quoted
literal.  Pure functions over immutable constants, plus a bounded key cache that is safe to
share between threads (a lost race only recomputes an entry); nothing here raises on
malformed JSON, which is read as plain text.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from enum import StrEnum
from typing import Any, Final

import orjson

from errscope.collector import semconv as sc
from errscope.collector.spanview import AttrValue

__all__ = [
    "ContentPolicy",
    "arguments_unrecorded",
    "content_family",
    "mask_traceback_content",
]

CONTENT_RULE: Final = "content"  # counted as content:<family>
_MASK: Final = "[content]"
# Exception lines of a stored traceback keep their type and the shape of their message,
# never an argument: URLs lose their path and query, quoted literals their text.
_URL_RE: Final = re.compile(r"\b([a-zA-Z][a-zA-Z0-9+.-]{1,15}://[^\s/'\"?#]+)[^\s'\"]*")
_QUOTED_RE: Final = re.compile(r"\"[^\"\n]{1,512}\"|'[^'\n]{1,512}'|`[^`\n]{1,512}`")
_FRAME_LINE_RE: Final = re.compile(
    r"^\s*(?:File \"|at\s|\.\.\.|goroutine\s|\S+\.go:\d+|\S+\.(?:rs|rb|php):\d+|#\d+\s)"
)
_MIN_MASKED_CHARS: Final = 4
# When the call's arguments are unknown, an exception line keeps its type and, of its
# message, only what no argument can be: codes (`[Errno 13]`, `404`, `ENOENT`) and masks.
_EXC_HEAD_RE: Final = re.compile(
    r"^(\s*(?:Caused by:\s+|panic:\s+)?"
    r"(?:[A-Za-z_$][\w$]*(?:\.|::|\$))*[A-Za-z_$][\w$<>]*:)(\s.*)?$"
)
_STRUCTURE_RE: Final = re.compile(
    r"^\s*(?:Traceback \(most recent call last\):|The above exception was the direct cause"
    r" of the following exception:|During handling of the above exception, another exception"
    r" occurred:|Caused by:|Stack backtrace:|stack backtrace:|\[[^\]\s]*\])?\s*$"
)
_KEPT_PIECE_RE: Final = re.compile(
    r"\[Errno \d{1,5}\]|\[REDACTED:[\w:.-]{1,64}\]|['\"`]?\[content\]['\"`]?[:,.;)]?"
    r"|(?<![\w./-])(?:\d{1,5}|[A-Z][A-Z0-9_]{2,31})(?![\w/-]|\.\w)[:,.;)]?"
)
EXCEPTION_WORDS: Final = frozenset({sc.EXCEPTION_MESSAGE, sc.EXCEPTION_STACKTRACE})


class ContentPolicy(StrEnum):
    """What happens to conversation content on a passed-on span."""

    DROP = "drop"  # messages, prompts, arguments, results and exception messages dropped
    KEEP = "keep"  # kept, every string still scrubbed for secrets


_FAMILY_CACHE: dict[str, str | None] = {}
_FAMILY_CACHE_MAX: Final = 8192


def content_family(key: str) -> str | None:
    """The content family of an attribute key (`gen_ai.messages`, `vercel_ai`, ...), or None."""
    try:
        return _FAMILY_CACHE[key]
    except KeyError:
        pass
    found: str | None = None
    if key not in sc.CONTENT_KEEP:
        for family, exact, prefixes in sc.CONTENT_FAMILIES:
            if key in exact or key.startswith(prefixes):
                found = family
                break
    if len(_FAMILY_CACHE) >= _FAMILY_CACHE_MAX:
        _FAMILY_CACHE.clear()
    _FAMILY_CACHE[key] = found
    return found


def _json_leaves(value: AttrValue, out: list[str], depth: int = 0) -> None:
    """Every string (and number) leaf of an argument value, JSON text parsed."""
    if depth > 8 or len(out) > 64:
        return
    if isinstance(value, str):
        head = value.lstrip()[:1]
        if head in ("{", "[") and len(value) <= 65536:
            try:
                _json_leaves(_from_json(orjson.loads(value)), out, depth + 1)
            except orjson.JSONDecodeError:
                out.append(value)
            return
        out.append(value)
    elif isinstance(value, int | float) and not isinstance(value, bool):
        out.append(str(value))
    elif isinstance(value, tuple):
        for item in value:
            _json_leaves(item, out, depth + 1)
    elif isinstance(value, dict):
        for item in value.values():
            _json_leaves(item, out, depth + 1)


def _from_json(obj: Any) -> AttrValue:
    if isinstance(obj, dict):
        return {str(k): _from_json(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return tuple(_from_json(v) for v in obj)
    if isinstance(obj, str | int | float | bool):
        return obj
    return ""


def argument_values(attrs: Mapping[str, AttrValue]) -> list[str]:
    """The call's argument values, longest first: what a stored traceback must not repeat."""
    leaves: list[str] = []
    for key in sc.ARGUMENT_KEYS:
        value = attrs.get(key)
        if value is not None:
            _json_leaves(value, leaves)
    kept = {v for v in leaves if len(v) >= _MIN_MASKED_CHARS}
    # The python repr of a dict (LangChain's input_str) holds the values quoted: masked below.
    return sorted(kept, key=len, reverse=True)


def arguments_unrecorded(convention: str, attrs: Mapping[str, AttrValue]) -> bool:
    """True when the call's arguments are unknown: its convention records none, nor does it.

    An MCP span (the SDK's own telemetry, fastmcp's) carries no arguments by design, and the
    GenAI conventions make `gen_ai.tool.call.arguments` opt-in (autogen-core never writes it):
    no value is known to mask and its exception messages may repeat any of them.  The other
    conventions record the arguments (or, errscope's toolkit, scrub the message at source).
    """
    return convention in _ARGUMENTS_UNRECORDED and not any(key in attrs for key in sc.ARGUMENT_KEYS)


_ARGUMENTS_UNRECORDED: Final = frozenset({"mcp", "genai"})


def _free_text_masked(message: str) -> tuple[str, int]:
    """`message` with each run of free text between kept pieces (codes, masks) masked."""
    out: list[str] = []
    masked = 0
    at = 0
    for piece in _KEPT_PIECE_RE.finditer(message):
        gap = message[at : piece.start()]
        if gap.strip(" \t:,.;()-"):
            out.append(
                gap[: len(gap) - len(gap.lstrip())] + _MASK + (" " if gap[-1:].isspace() else "")
            )
            masked += 1
        else:
            out.append(gap)
        out.append(piece.group())
        at = piece.end()
    gap = message[at:]
    if gap.strip(" \t:,.;()-"):
        out.append(gap[: len(gap) - len(gap.lstrip())] + _MASK)
        masked += 1
    else:
        out.append(gap)
    return "".join(out), masked


def _unknown_arguments_line(line: str) -> tuple[str, int]:
    if _STRUCTURE_RE.match(line):
        return line, 0
    head = _EXC_HEAD_RE.match(line)
    if head is None:
        return _free_text_masked(line)
    message, masked = _free_text_masked(head.group(2) or "")
    return head.group(1) + message, masked


def mask_traceback_content(
    text: str, values: Sequence[str] = (), *, arguments_known: bool = True
) -> tuple[str, int]:
    """A redacted traceback without the call's content; and how many pieces were masked.

    Every argument value is masked wherever it appears; on the exception lines (not the
    frames) URLs keep only their scheme and host, and quoted literals lose their text.
    When the arguments are unknown (`arguments_unrecorded`), an exception line keeps only
    its type and, of its message, codes and masks: every run of free text becomes one mask.
    """
    masked = 0
    lines = []
    for original in text.split("\n"):
        line = original
        for value in values:
            if value in line:
                masked += line.count(value)
                line = line.replace(value, _MASK)
        if not _FRAME_LINE_RE.match(line):
            line, n_url = _URL_RE.subn(lambda m: f"{m.group(1)}/{_MASK}", line)
            line, n_quoted = _QUOTED_RE.subn(lambda m: f"{m.group()[0]}{_MASK}{m.group()[0]}", line)
            masked += n_url + n_quoted
            if not arguments_known:
                line, n_free = _unknown_arguments_line(line)
                masked += n_free
        lines.append(line)
    return "\n".join(lines), masked
