"""Stack traces: find them in any string, keep their exceptions, redact them for humans.

Recognised: Python (chained "direct cause" / "during handling", exception groups, captured
locals), Java and Kotlin ("Caused by", "Suppressed", "... N more"), Node.js (uncaught source
excerpt, error properties, `{ cause }`, "Node.js vN"), .NET and Mono (" ---> " inner
exceptions, `[0x...] in <mvid>:0`), Go (panics, fatal errors, goroutine dumps), Rust (panics,
with or without a backtrace), Ruby and PHP. A trace is found after a log message on the same
line, with CRLF line ends, inside a JSON string (escaped `\\n` line breaks, up to three
levels deep), HTML-escaped, with terminal colour codes, and when cut off mid-frame by an
attribute length limit (it then runs to the end of the value).

Two outputs:

* `strip_traceback(text)` is the value that is kept on a span: frames, locals, source lines,
  error properties and the locations headers repeat go; each exception's type and message
  stay (keyword-assigned values masked, paths trimmed, home user names hidden; secrets are
  masked by the scrubber over the whole value), and so does the text around the trace. The
  output is re-escaped the way the trace was (JSON levels, HTML), so a record still parses.
* `redact_traceback(text)` is the copy for humans: exception types, frame function names,
  relative file names and line numbers; no absolute path prefixes, URL userinfo or queries,
  home directories, user names, source lines, local variables, argument values or
  error-property values, and messages scrubbed. A message is scrubbed whole (its full
  lines, a multi-line Rust panic message as one text, an exception's name with it) and only
  then cut. At most 8 KiB, with a fingerprint of language, exception type and frame
  functions that groups the same failure across line-number changes.

Cost is linear in the input: a value is first checked for marker literals (most values stop
there); otherwise each line is classified once with anchored patterns that only ever see a
line prefix of at most `_LINE_PREFIX_CHARS` characters and contain no nested or overlapping
quantifiers, so no line costs more than a constant; the scrubber, linear itself, sees each
kept line once. Nothing here raises on any string.
"""

from __future__ import annotations

import hashlib
import html
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final, Protocol


class _Masked(Protocol):
    @property
    def text(self) -> str: ...


class SecretScrubber(Protocol):
    """What this module needs of a scrubber (engine.Scrubber is one): passed in, so the
    engine, which strips tracebacks with this module, is not imported back here."""

    def scrub_secrets(self, value: str) -> _Masked: ...

    def contains_secret(self, value: str) -> bool: ...


__all__ = [
    "HUMAN_MAX_BYTES",
    "RedactedTraceback",
    "SecretScrubber",
    "redact_traceback",
    "strip_traceback",
    "strip_traceback_count",
]

HUMAN_MAX_BYTES: Final = 8 * 1024
UNKNOWN_TRACE: Final = "[REDACTED:traceback]"
_BOUNDARY: Final = "\x00"
_LINE_PREFIX_CHARS: Final = 2048
_MESSAGE_MAX_CHARS: Final = 300
_KEPT_MESSAGE_MAX_CHARS: Final = 2048
# Literals of which at least one appears in every trace format handled here.
_MARKERS: Final = (
    "Traceback (most recent call last)",
    "\tat ",
    "\\tat ",
    "   at ",
    "panic: ",
    "fatal error: ",
    "goroutine ",
    "panicked at",
    "stack backtrace:",
    "Stack trace:",
    ":in `",
    ":in '",
    "Uncaught ",
    "  at ",
    "Unhandled Exception",
    "UNHANDLED EXCEPTION",
)

# ── line patterns (applied to bounded line prefixes only) ────────────────────────────────
_PY_START = re.compile(r"(?:Exception Group )?Traceback \(most recent call last\):")
_PY_CHAIN = re.compile(
    r"\s*(?:The above exception was the direct cause of the following exception:"
    r"|During handling of the above exception, another exception occurred:)\s*$"
)
_PY_FRAME = re.compile(r'(\s*(?:[|+]\s*)*)File "([^"]{1,1000})", line (\d+)(?:, in (\S{1,300}))?')
_PY_EXC = re.compile(r"((?:[A-Za-z_]\w*\.)*[A-Z_]\w*)(?::\s|:$|$)")
_PY_GROUP_EXC = re.compile(r"\s*\|\s((?:[A-Za-z_]\w*\.)*[A-Z_]\w*)(?::\s|:$|$)")
_PY_GROUP_RULE = re.compile(r"\+[-+]*(?: \d+ -+)?$|[+-]+-{10,}$")
_NEW_RECORD = re.compile(r"(?:\d{4}-\d\d-\d\d|\[?(?:DEBUG|INFO|WARN|WARNING|ERROR|CRITICAL)\b)")

_AT_FRAME = re.compile(r"\s+at\s+\S")
_JAVA_FRAME = re.compile(
    r"\s+at\s+((?:[\w$<>-]+[./])*[\w$<>-]+)\(((?:[\w$.-]+\.(?:java|kt|kts|scala|groovy|clj)"
    r"(?::\d+)?)|Native Method|Unknown Source|[\w$.-]+)\)"
)
_NODE_FRAME = re.compile(
    r"\s+at\s+(?:async\s+)?(?:(?:new\s+)?([^\s(]{1,300}(?: \[as [^\]]{1,100}\])?)\s+\()?"
    r"([^\s()]{1,1000}?):(\d+):(\d+)\)?\s*\{?\s*$"
)
_NODE_SPECIAL = re.compile(r"\s+at\s+(?:async\s+)?([^\s(]{1,300})\s+\((native|<anonymous>)\)")
_DOTNET_FRAME = re.compile(
    r"\s+at\s+([\w.`<>$|\[\],+-]{1,500})\(([^)]{0,500})\)(?:\s+in\s+(.{1,1000}):line\s+(\d+))?"
)
# Mono: `at Ns.Type.Method (System.String id) [0x0001e] in /src/File.cs:16`, or `in <mvid>:0`
# for framework code without symbols; a wrapper frame starts `at (wrapper managed-to-native)`.
_MONO_FRAME = re.compile(
    r"\s+at\s+(?:\(wrapper [^)]{0,100}\)\s+)?([^\s(]{1,500}) \(([^)]{0,500})\)"
    r"(?:\s+\[0x[0-9a-fA-F]{1,16}\])?(?:\s+in\s+(\S{1,1000}?):(\d+))?\s*(?:<---)?\s*$"
)
_JAVA_HEADER = re.compile(
    r"(?:Exception in thread \"[^\"]{0,200}\"\s)?((?:[a-zA-Z_$][\w$]*\.)+[A-Z][\w$]*"
    r"|[A-Z][\w$]*(?:Exception|Error|Throwable))(?=:|\s*$)"
)
_NODE_HEADER = re.compile(
    r"(?:Uncaught\s)?([A-Z]\w*(?:Error|Exception)|Error)(?:\s\[[\w-]{1,80}\])?(?=:|\s*$)"
)
# Any class name, for a header line right before a Node frame (`class PaymentDeclined extends
# Error` prints `PaymentDeclined: ...`); matched at the line's start only.
_NODE_CLASS_HEADER = re.compile(
    r"(?<![^\s\"'>])(?:Uncaught\s)?([A-Z][\w$]{0,200})(?:\s\[[\w-]{1,80}\])?(?=:\s|\s*$)"
)
_DOTNET_HEADER = re.compile(
    r"(?:Unhandled [eE]xception\.\s)?((?:[A-Z]\w*\.)+[A-Z]\w*(?:Exception|Error))(?=:|\s*$)"
)
_HEADERS: Final = (("dotnet", _DOTNET_HEADER), ("java", _JAVA_HEADER), ("node", _NODE_HEADER))
_AT_CONTINUATION = re.compile(
    r"\s*(?:Caused by: |Suppressed: |\.\.\. \d+ (?:more|common frames omitted)"
    r"|---> |--- End of |<---|\[cause\]: |\[errors\]: |at\s"
    r"|\.\.\. \d+ lines matching cause stack trace \.\.\.)"
)
_CAUSED = re.compile(
    r"(\s*(?:Caused by: |Suppressed: |---> (?:\(Inner Exception #\d{1,6}\) )?|\[cause\]: ))(.*)"
)
_NODE_SOURCE_CARET = re.compile(r"\s*\^+\s*$")
_NODE_SOURCE_FILE = re.compile(r"\S+:\d+$")
_NODE_VERSION = re.compile(r"Node\.js v\d+")

_GO_START = re.compile(r"(panic: |fatal error: |goroutine \d+ \[[^\]]{1,100}\]:)")
_GO_LINE = re.compile(
    r"(?:goroutine \d+ \[[^\]]{0,100}\]:|\[signal |\t|\s+|created by |exit status \d+"
    r"|panic: |fatal error: |\[recovered\]|[\w./*()\[\]-]{1,300}\(.{0,500}\)$)"
)
_GO_CUT_FUNC = re.compile(r"[\w./*()\[\]{}?, -]{1,500}")
_GO_GOROUTINE = re.compile(r"goroutine (\d+) (\[[^\]]{0,100}\]):")
_GO_FUNC = re.compile(r"((?:created by )?[\w./*()\[\]-]{1,300}?)\((.{0,500})\)$")
_GO_FILE = re.compile(r"\t(\S{1,1000}\.go):(\d+)")

_RUST_START = re.compile(r"thread '[^']{0,200}'(?: \(\d+\))? panicked at ")
_RUST_LINE = re.compile(r"(?:note: |stack backtrace:|\s+\d+:\s|\s+at\s)")
_RUST_FRAME = re.compile(r"\s+\d+:\s+(?:0x[0-9a-f]+ - )?(\S{1,500})")
_RUST_AT = re.compile(r"(\s+at\s+)(\S{1,1000}?):(\d+)(?::(\d+))?\s*$")
_RUST_PANIC = re.compile(
    r"(thread '[^']{0,200}'(?: \(\d+\))? panicked at )(?:'(.*)', )?(\S{1,1000}?):(\d+):(\d+)(:?)"
)

_RUBY_START = re.compile(r"(\S{1,1000}?):(\d+):in [`']([^'`]{1,300})'?: (.*) \(([A-Z][\w:]*)\)\s*$")
_RUBY_FROM = re.compile(r"(\s+from )(\S{1,1000}?):(\d+):in [`']([^'`]{1,300})'")

_PHP_START = re.compile(
    r"(?:PHP )?(?:Fatal error: +Uncaught |Uncaught )([A-Z][\w\\]*)(?:: (.*?))?"
    r"(?: in (\S{1,1000}):(\d+))?\s*$"
)
_PHP_LINE = re.compile(r"(?:Stack trace:|#\d+ |\s+thrown in |Next [A-Z][\w\\]*)")
_PHP_FRAME = re.compile(r"#(\d+) (?:(\S{1,1000}?)\((\d+)\): )?([^(]{1,300})(?:\((.{0,2000})\))?")

_ABS_PATH = re.compile(
    r"(?:file://)?(?:[A-Za-z]:[\\/]|/|~[/\\])(?:[^\s\\/:\"'()<>]+[\\/])+[^\s\\/:\"'()<>]*"
)
# A URL's userinfo ("user:pw@"), query and fragment are where credentials ride in a frame path.
_URL = re.compile(r"([A-Za-z][\w+.-]{0,30}://)(?:[^/?#\s]*@)?([^?#]*)")
_VENDOR_DIRS: Final = ("site-packages", "dist-packages", "node_modules", "vendor", "gems")


@dataclass(frozen=True, slots=True)
class RedactedTraceback:
    """The human copy of the traces in a text, at most 8 KiB, with a grouping fingerprint.

    `exception_type` is the (outermost) exception type of the first trace, `language` its
    runtime, and `fingerprint` a hex digest of language, exception types and frame functions:
    stable across line-number and path changes, different when the failing code path differs.
    """

    text: str
    exception_type: str | None
    fingerprint: str
    language: str


@dataclass(slots=True)
class _Line:
    text: str  # content for matching (unescaped, entities decoded, colours removed), no line end
    start: int  # offsets of the raw content in the original text
    end: int
    next: int  # offset after the line end
    # The rest of a line after the JSON string that held an escaped trace: never part of one.
    boundary: bool = False
    depth: int = 0  # JSON string levels the raw line is escaped in (0: none, up to 3)
    html: bool = False  # the raw line carries HTML character references (`&quot;`)
    transformed: bool = False  # text differs from the raw slice (escapes, entities, colours)


@dataclass(slots=True)
class _Region:
    first: int  # line index
    last: int  # inclusive line index
    col: int  # raw offset in the text where the trace starts (text before it is kept)
    language: str
    exception_type: str | None
    head: int = -1  # line index of the header of a trace with `at` frames


def _has_marker(text: str) -> bool:
    return any(marker in text for marker in _MARKERS)


_REAL_NL = re.compile(r"\r\n|\r|\n")
# A run of backslashes before an `n`: `\n` is a line break one JSON level deep, `\\n` two
# levels, `\\\\n` three. The look-behind starts a run only at its first backslash, so a long
# run costs its length once, not its square.
_BACKSLASH_N = re.compile(r"(?<!\\)(\\+)n")
_JSON_ESCAPE = re.compile(r'\\(["\\/bfnrt]|u[0-9a-fA-F]{4})')
_JSON_SIMPLE: Final = {
    '"': '"',
    "\\": "\\",
    "/": "/",
    "t": "\t",
    "n": " ",
    "r": "",
    "b": "",
    "f": "",
}
_ANSI = re.compile(r"\x1b\[[0-9;?]{0,32}[A-Za-z]")
_HTML_ENTITY = re.compile(r"&(?:quot|amp|lt|gt|apos|#\d{1,7}|#[xX][0-9a-fA-F]{1,6});")
_MAX_DEPTH: Final = 3


def _json_unescape(match: re.Match[str]) -> str:
    code = match.group(1)
    if code.startswith("u"):
        char = chr(int(code[1:], 16))
        # A line break one level deeper is not one of this level's lines: read it as a space.
        return " " if char in "\r\n" else char
    return _JSON_SIMPLE[code]


def _unescape(text: str, depth: int) -> str:
    for _ in range(depth):
        text = _JSON_ESCAPE.sub(_json_unescape, text)
    return text


def _closing_quote(text: str, start: int, end: int, depth: int) -> int:
    """Offset of the `"` in text[start:end] that ends a JSON string `depth` levels deep, or -1.

    One level deep that is an unescaped quote (an even run of backslashes before it); two
    levels deep a quote after 1 (mod 4) backslashes, three levels after 3 (mod 8).
    """
    unit = 1 << depth
    want = (unit >> 1) - 1
    pos = text.find('"', start, end)
    while pos >= 0:
        slashes = 0
        # Runs of backslashes longer than 64 are not JSON escapes anyone writes; stop counting.
        while slashes < 64 and pos - slashes - 1 >= start and text[pos - slashes - 1] == "\\":
            slashes += 1
        if slashes % unit == want:
            return pos - want  # the backslashes that escape a deeper quote belong to it
        pos = text.find('"', pos + 1, end)
    return -1


def _escape_depth(segment: str) -> int:
    """How many JSON levels deep the line breaks of `segment` are escaped (0: none).

    The deepest level with two escaped line breaks wins. One stray `\\n` is more likely a
    Windows path (`C:\\new`), so two are required, or an escaped quote beside one.
    """
    counts = [0] * (_MAX_DEPTH + 1)
    for match in _BACKSLASH_N.finditer(segment):
        run = len(match.group(1))
        for depth in range(1, _MAX_DEPTH + 1):
            if run == 1 << (depth - 1):
                counts[depth] += 1
    for depth in range(_MAX_DEPTH, 0, -1):
        if counts[depth] >= 2 or (counts[depth] and '\\"' in segment and depth == 1):
            return depth
    return 0


def _readable(raw: str, depth: int) -> tuple[str, bool]:
    """A raw line as matched: JSON-unescaped, HTML references decoded, colour codes removed."""
    decoded = _unescape(raw, depth) if depth else raw
    html_refs = "&" in decoded and _HTML_ENTITY.search(decoded) is not None
    if html_refs:
        decoded = html.unescape(decoded)
    if "\x1b" in decoded:
        decoded = _ANSI.sub("", decoded)
    return decoded, html_refs


def _split(text: str) -> list[_Line]:
    lines: list[_Line] = []

    def add_plain(start: int, end: int, nxt: int, depth: int) -> None:
        raw = text[start:end]
        decoded, html_refs = _readable(raw, depth)
        decoded = decoded.removesuffix("\r")
        lines.append(_Line(decoded, start, end, nxt, False, depth, html_refs, decoded != raw))

    def add_escaped(start: int, end: int, nxt: int, depth: int, *, opening: bool) -> None:
        quote = -1 if opening else _closing_quote(text, start, end, depth)
        if quote < 0:
            add_plain(start, end, nxt, depth)
            return
        add_plain(start, quote, quote, depth)
        lines.append(_Line(text[quote:end], quote, end, nxt, boundary=True))

    def add(start: int, end: int, nxt: int) -> None:
        segment = text[start:end]
        depth = _escape_depth(segment) if "\\" in segment and _has_marker(segment) else 0
        if not depth:
            add_plain(start, end, nxt, 0)
            return
        unit = 1 << (depth - 1)
        pos = start
        opening = True  # the first piece holds the string's opening quote
        for match in _BACKSLASH_N.finditer(text, start, end):
            if len(match.group(1)) != unit:
                continue
            add_escaped(pos, match.start(), match.end(), depth, opening=opening)
            opening = False
            pos = match.end()
        add_escaped(pos, end, nxt, depth, opening=opening)

    pos = 0
    for match in _REAL_NL.finditer(text):
        add(pos, match.start(), match.end())
        pos = match.end()
    add(pos, len(text), len(text))
    return lines


def _head(line: _Line) -> str:
    """The matching text of a line where a trace may start (boundary lines included)."""
    return line.text[:_LINE_PREFIX_CHARS]


def _prefix(line: _Line) -> str:
    # A boundary line matches no trace pattern and is not blank, so every finder stops there.
    return _BOUNDARY if line.boundary else line.text[:_LINE_PREFIX_CHARS]


def _blank(line: _Line) -> bool:
    return not line.boundary and not line.text.strip()


def _indented(line: _Line) -> bool:
    return not line.boundary and line.text[:1] in (" ", "\t")


_UNSAFE_IN_NEEDLE = re.compile(r"[\"\\\t&<>'\x1b]")


def _raw_col(text: str, line: _Line, needle: str, fallback: int) -> int:
    """Raw offset of `needle` in `line` (escaped lines differ from their matching text).

    On a transformed line only the needle's start up to its first character that escaping,
    HTML or colour codes could change is looked for; if even that is absent, the trace starts
    at the line's start.
    """
    if not line.transformed:
        return min(line.start + fallback, line.end)
    cut = _UNSAFE_IN_NEEDLE.search(needle)
    needle = needle[: cut.start()] if cut else needle
    found = text.find(needle, line.start, line.end) if len(needle) >= 3 else -1
    return found if found >= 0 else line.start


# ── per-language region finders: (text, lines, index) -> region or None ───────────────────


def _python(text: str, lines: list[_Line], i: int) -> _Region | None:
    line = lines[i]
    match = _PY_START.search(_head(line))
    if match is None:
        return None
    before = line.text[: match.start()]
    col = (
        line.start
        if not before.strip(" \t|+")
        else _raw_col(text, line, match.group(), match.start())
    )
    group = match.group().startswith("Exception Group")
    exc: str | None = None
    n = len(lines)
    j = i + 1
    after_exc = False
    while j < n:
        cur = lines[j]
        body = _prefix(cur)
        if _blank(cur):
            chain = _chain_after_blank(lines, j)
            if chain >= 0:
                j = chain + 1
                after_exc = False
                continue
            if after_exc or _only_blank_after(lines, j):
                break
            j += 1
            continue
        if _PY_START.search(body) and not body[: body.find("Traceback")].strip(" \t|+"):
            group = group or "Exception Group" in body
            after_exc = False
            j += 1
            continue
        if _indented(cur) or body.startswith(("|", "+")):
            if group and exc is None:
                found = _PY_GROUP_EXC.match(body)
                if found and not body.lstrip().startswith("|   "):
                    exc = found.group(1)
            j += 1
            continue
        if after_exc:
            if _NEW_RECORD.match(body) or cur.boundary:
                break
            j += 1  # multi-line messages (pydantic's error details) belong to the trace
            continue
        found = _PY_EXC.match(body)
        if found is None:
            break
        if not group:
            exc = found.group(1)  # the last printed exception is the one that escaped
        after_exc = True
        j += 1
    last = j - 1
    while last > i and _blank(lines[last]):
        last -= 1
    return _Region(i, last, col, "python", exc)


def _chain_after_blank(lines: list[_Line], j: int) -> int:
    """Index of a Python chain sentence after the blank lines from `j`, or -1."""
    k = j + 1
    while k < len(lines) and _blank(lines[k]):
        k += 1
    return k if k < len(lines) and _PY_CHAIN.match(_prefix(lines[k])) else -1


def _only_blank_after(lines: list[_Line], j: int) -> bool:
    k = j + 1
    while k < len(lines) and _blank(lines[k]):
        k += 1
    return k >= len(lines)


def _at_frames(text: str, lines: list[_Line], i: int) -> _Region | None:
    """Java/Kotlin, Node.js and .NET: a header line followed by `at ...` frames."""
    n = len(lines)
    first_frame = i + 1
    # .NET prints inner exceptions (" ---> X: ...") between the header and the first frame.
    while first_frame < min(n, i + 4) and _CAUSED.match(_prefix(lines[first_frame])):
        first_frame += 1
    if first_frame >= n or not _AT_FRAME.match(_prefix(lines[first_frame])):
        return None
    runtime = _at_runtime(lines, i, first_frame)
    if runtime is None:
        return None
    language, header = runtime
    head = lines[i]
    found = _at_header(language, header, _head(head))
    if found is None:
        return None
    exc = found.group(1)
    col = _raw_col(text, head, found.group(), found.start())
    first = i
    # Uncaught Node errors are preceded by "file:line", the source line, a caret line, a blank.
    if language == "node" and not head.text[: found.start()].strip() and _node_excerpt(lines, i):
        first = i - 4
        source_file = _NODE_SOURCE_FILE.search(_head(lines[first]))
        needle = source_file.group().lstrip("\"'") if source_file else ""
        col = _raw_col(text, lines[first], needle, len(_head(lines[first])) - len(needle))
    j = i + 1
    in_props = False
    while j < n:
        body = _prefix(lines[j])
        if in_props:
            in_props = not body.startswith("}")
            j += 1
            continue
        if _AT_CONTINUATION.match(body):
            in_props = language == "node" and body.rstrip().endswith("{")
            j += 1
            continue
        if (
            language == "node"
            and body.startswith(("  ", "\t"))
            and lines[j - 1].text.rstrip().endswith("{")
        ):
            in_props = True
            continue
        break
    last = j - 1
    k = j
    while k < n and _blank(lines[k]):
        k += 1
    if language == "node" and k < n and _NODE_VERSION.match(_prefix(lines[k])):
        last = k
    return _Region(first, last, col, language, exc, head=i)


def _at_runtime(lines: list[_Line], i: int, first_frame: int) -> tuple[str, re.Pattern[str]] | None:
    """The runtime (and its header pattern) of the `at` frame at `first_frame`, or None."""
    frame = _prefix(lines[first_frame])
    if _JAVA_FRAME.match(frame) and not _NODE_FRAME.match(frame):
        return "java", _JAVA_HEADER
    if _NODE_FRAME.match(frame) or _NODE_SPECIAL.match(frame):
        return "node", _NODE_HEADER
    if _DOTNET_FRAME.match(frame) or _MONO_FRAME.match(frame):
        return "dotnet", _DOTNET_HEADER
    if first_frame != len(lines) - 1:
        return None
    # Cut off inside the first frame: Node's source excerpt or the header decides.
    if _node_excerpt(lines, i):
        return "node", _NODE_HEADER
    head_text = _head(lines[i])
    return next(
        ((lang, pattern) for lang, pattern in _HEADERS if pattern.search(head_text)),
        ("java", _JAVA_HEADER),
    )


def _node_excerpt(lines: list[_Line], i: int) -> bool:
    """Whether "file:line", a source line, a caret line and a blank come before line `i`."""
    return (
        i >= 4
        and _blank(lines[i - 1])
        and _NODE_SOURCE_CARET.match(_prefix(lines[i - 2])) is not None
        and _NODE_SOURCE_FILE.search(_prefix(lines[i - 4])) is not None
    )


def _at_header(language: str, header: re.Pattern[str], body: str) -> re.Match[str] | None:
    found = header.search(body)
    if found is None and language == "java":
        found = _DOTNET_HEADER.search(body)
    if found is None and language == "node":
        found = _NODE_CLASS_HEADER.search(body)
    return found


_AT_HEADERS: Final = {"java": _JAVA_HEADER, "node": _NODE_HEADER, "dotnet": _DOTNET_HEADER}


def _go(text: str, lines: list[_Line], i: int) -> _Region | None:
    line = lines[i]
    match = _GO_START.search(_head(line))
    if match is None:
        return None
    if match.group().startswith("goroutine") and match.start() != 0:
        return None
    # "panic: " also ends many log messages; require the goroutine header to follow.
    n = len(lines)
    k = i + 1
    while k < n and k <= i + 12 and not _prefix(lines[k]).startswith("goroutine "):
        k += 1
    if not match.group().startswith("goroutine") and (k >= n or k > i + 12):
        return None
    kind = match.group().rstrip(": ")
    exc = {"panic": "panic", "fatal error": "fatal error"}.get(kind, "goroutine dump")
    col = _raw_col(text, line, match.group(), match.start())
    j = i + 1
    while j < n:
        cur = lines[j]
        if _blank(cur) or _GO_LINE.match(_prefix(cur)):
            j += 1
            continue
        if j == n - 1 and _GO_CUT_FUNC.fullmatch(_prefix(cur)):
            j += 1  # cut off by a length limit inside a function line
        break
    last = j - 1
    while last > i and _blank(lines[last]):
        last -= 1
    return _Region(i, last, col, "go", exc)


def _rust(text: str, lines: list[_Line], i: int) -> _Region | None:
    line = lines[i]
    match = _RUST_START.search(_head(line))
    if match is None:
        if _head(line).startswith("stack backtrace:"):
            match = None
            col = line.start
        else:
            return None
    else:
        col = _raw_col(text, line, match.group(), match.start())
    n = len(lines)
    j = i + 1
    # The message of a >=1.73 panic runs until the "note:" or "stack backtrace:" line.
    k = j
    while k < n and k <= i + 40 and not _RUST_LINE.match(_prefix(lines[k])):
        k += 1
    if k < n and k <= i + 40 and match is not None and line.text.rstrip().endswith(":"):
        j = k
    elif match is not None and line.text.rstrip().endswith(":") and j < n:
        j += 1  # cut off: keep the one message line inside the trace
    while j < n and _RUST_LINE.match(_prefix(lines[j])):
        j += 1
    return _Region(i, j - 1, col, "rust", "panic")


def _ruby(text: str, lines: list[_Line], i: int) -> _Region | None:
    line = lines[i]
    match = _ruby_start(_head(line))
    if match is None:
        return None
    n = len(lines)
    j = i + 1
    while j < n and _RUBY_FROM.match(_prefix(lines[j])):
        j += 1
    if j == n - 1 and _indented(lines[j]) and "from ".startswith(lines[j].text.strip()[:5]):
        j += 1  # cut off by a length limit inside a "from" line
    col = _raw_col(text, line, match.group(), match.start())
    return _Region(i, j - 1, col, "ruby", match.group(5))


def _ruby_start(body: str) -> re.Match[str] | None:
    """Ruby's first line, also after a prefix (`"error": "/app/x.rb:3:in ...`)."""
    pos = body.find(":in ")
    if pos < 0:
        return None
    # The path starts after the last space, quote or tab before `:in`: one anchored match.
    start = max(body.rfind(c, 0, pos) for c in " \t\"'>") + 1
    return _RUBY_START.match(body, start)


def _php(text: str, lines: list[_Line], i: int) -> _Region | None:
    line = lines[i]
    body = _head(line)
    match = _PHP_START.search(body)
    if match is None:
        return None
    n = len(lines)
    followed = i + 1 < n and _PHP_LINE.match(_prefix(lines[i + 1]))
    if not followed and ("Uncaught " not in body or "Fatal error" not in body):
        return None
    col = _raw_col(text, line, match.group(), match.start())
    j = i + 1
    while j < n:
        if _PHP_LINE.match(_prefix(lines[j])):
            j += 1
        elif _blank(lines[j]) and j + 1 < n and _prefix(lines[j + 1]).startswith("Next "):
            j += 2  # a previous exception: "#2 {main}", a blank line, "Next X: ..."
        else:
            break
    return _Region(i, j - 1, col, "php", match.group(1).replace("\\\\", "\\"))


_FINDERS: Final[tuple[Callable[[str, list[_Line], int], _Region | None], ...]] = (
    _python,
    _at_frames,
    _go,
    _rust,
    _ruby,
    _php,
)


def _regions(text: str) -> tuple[list[_Line], list[_Region]]:
    if not text or not _has_marker(text):
        return [], []
    lines = _split(text)
    regions: list[_Region] = []
    i = 0
    n = len(lines)
    while i < n:
        region = None
        if lines[i].text.strip():
            for finder in _FINDERS:
                region = finder(text, lines, i)
                if region is not None:
                    break
        if region is None:
            i += 1
            continue
        regions.append(region)
        i = region.last + 1
    return lines, regions


# ── the kept value ──────────────────────────────────────────────────────────────────────
#
# Each renderer returns the lines of a trace that a kept value holds: exception types with
# their messages (cleaned by `clean`) and nothing of frames, source lines, locals, error
# properties, or the location a header repeats from the frames.


def _kept_python(lines: list[_Line], region: _Region, clean: Callable[[str], str]) -> list[str]:
    out: list[str] = []
    expect_exc = False  # only the first line after frames (or a group's rule) is an exception
    for index in range(region.first + 1, region.last + 1):
        line = lines[index].text
        body = line[:_LINE_PREFIX_CHARS]
        if _PY_FRAME.match(body):
            expect_exc = True
            continue
        if expect_exc and body.strip():
            plain = None if _indented(lines[index]) else _PY_EXC.match(body)
            found = _PY_GROUP_EXC.match(body) or plain
            if found is not None:
                out.append(clean(line[found.start(1) :].strip()))
                expect_exc = False
                continue
        if _PY_START.search(body) or _PY_CHAIN.match(body) or _PY_GROUP_RULE.match(body.strip()):
            expect_exc = True
    return out


def _kept_at(lines: list[_Line], region: _Region, clean: Callable[[str], str]) -> list[str]:
    out: list[str] = []
    for index in range(region.head, region.last + 1):
        line = lines[index].text
        body = line[:_LINE_PREFIX_CHARS]
        if index == region.head:
            header = _at_header(region.language, _AT_HEADERS[region.language], body)
            if header is not None:
                out.append(clean(line[header.start() :].strip()))
            continue
        caused = _CAUSED.match(body)
        if caused:
            out.append(clean(line.strip()))
    return out


def _kept_go(lines: list[_Line], region: _Region, clean: Callable[[str], str]) -> list[str]:
    out: list[str] = []
    for index in range(region.first, region.last + 1):
        line = lines[index].text
        if index == region.first:
            start = _GO_START.search(line[:_LINE_PREFIX_CHARS])
            line = line[start.start() :] if start else line
        # A re-panic prints its panics indented under the first: "\tpanic: ...".
        stripped = line.strip()
        if stripped.startswith(("panic: ", "fatal error: ", "[signal ")):
            out.append(clean(stripped))
    return out


def _kept_rust(lines: list[_Line], region: _Region, clean: Callable[[str], str]) -> list[str]:
    out: list[str] = []
    message: list[str] = []
    for index in range(region.first, region.last + 1):
        line = lines[index].text
        body = line[:_LINE_PREFIX_CHARS]
        panic = _RUST_PANIC.search(body)
        if panic:
            # "thread 'main' panicked at src/main.rs:5:5:" keeps the thread, not the location.
            lead, old_message = panic.group(1), panic.group(2)
            head = lead.removesuffix(" at ") + ":"
            out.append(head + (f" {clean(old_message)}" if old_message is not None else ""))
            continue
        if _RUST_FRAME.match(body) or _RUST_AT.match(body) or _RUST_LINE.match(body):
            if message:
                out.append(clean("\n".join(message)))
                message.clear()
            continue
        if body.strip():
            message.append(line.strip())
    if message:
        out.append(clean("\n".join(message)))
    return out


def _kept_ruby(lines: list[_Line], region: _Region, clean: Callable[[str], str]) -> list[str]:
    start = _ruby_start(lines[region.first].text[:_LINE_PREFIX_CHARS])
    if start is None:
        return []
    return [clean(f"{start.group(4)} ({start.group(5)})")]


_PHP_NEXT = re.compile(r"Next ([A-Z][\w\\]{0,300})(?:: (.*?))?(?: in (\S{1,1000}):(\d+))?\s*$")


def _kept_php(lines: list[_Line], region: _Region, clean: Callable[[str], str]) -> list[str]:
    out: list[str] = []
    for index in range(region.first, region.last + 1):
        line = lines[index].text
        body = line[:_LINE_PREFIX_CHARS]
        found = _PHP_START.search(body) if index == region.first else _PHP_NEXT.match(body)
        if found is None:
            continue
        # The header up to the type, the type, the message; not " in /path/File.php:11".
        message = found.group(2)
        if message is not None and len(line) > len(body):
            message = line[found.start(2) :]
        head = body[found.start() : found.end(1)]
        out.append(clean(head + (f": {message}" if message else "")))
    return out


_KEPT: Final[dict[str, Callable[[list[_Line], _Region, Callable[[str], str]], list[str]]]] = {
    "python": _kept_python,
    "java": _kept_at,
    "node": _kept_at,
    "dotnet": _kept_at,
    "go": _kept_go,
    "rust": _kept_rust,
    "ruby": _kept_ruby,
    "php": _kept_php,
}


def _encode_like(text: str, line: _Line) -> str:
    """`text` written the way the raw `line` is: HTML references, then JSON string levels."""
    if line.html:
        text = html.escape(text, quote=True)
    for _ in range(line.depth):
        text = json.dumps(text, ensure_ascii=False)[1:-1]
    return text


def strip_traceback_count(text: str, scrubber: SecretScrubber) -> tuple[str, int]:
    """The kept value's text before secret masking, and the number of traces reduced.

    Secrets that `scrubber`'s rules find are left for the
    caller's own pass over the whole value (`Scrubber.scrub`), which counts them per rule;
    values given to credential-like names that no rule finds are masked here.
    """
    stripped, _, count = _strip(text, scrubber)
    return stripped, count


def strip_traceback(text: str, scrubber: SecretScrubber) -> tuple[str, str | None]:
    """Reduce every trace in `text` to its exceptions; return the text and the first type.

    Each trace keeps its exception types and their messages (chained causes included), with
    keyword-assigned values masked, paths trimmed and user names hidden, and with secrets
    masked when `scrubber` is given (`Scrubber.scrub` masks them in the whole value anyway);
    frames, source lines, locals and error properties go. Text around a trace is kept as it
    is. The type is None when there is no trace. A trace whose exception cannot be known (a
    Python trace cut off before its last line) becomes `[REDACTED:traceback]`.
    """
    stripped, exc, _ = _strip(text, scrubber)
    if exc is None:
        return stripped, exc
    return scrubber.scrub_secrets(stripped).text, exc


def _strip(text: str, scrubber: SecretScrubber) -> tuple[str, str | None, int]:
    try:
        lines, regions = _regions(text)
    except RecursionError:  # pragma: no cover - nothing here recurses; fail closed anyway
        return UNKNOWN_TRACE, None, 1
    if not regions:
        return text, None, 0
    users = _users(text)
    is_secret = scrubber.contains_secret

    def clean(message: str) -> str:
        return _kept_message(message, is_secret, users)

    pieces: list[str] = []
    pos = 0
    for region in regions:
        first = lines[region.first]
        kept = _KEPT[region.language](lines, region, clean)
        newline = "\r\n" if text[first.end : first.next] == "\r\n" else "\n"
        body = newline.join(kept) if kept else (region.exception_type or UNKNOWN_TRACE)
        pieces.append(text[pos : region.col])
        pieces.append(_encode_like(body, first))
        pos = lines[region.last].end
    pieces.append(text[pos:])
    return "".join(pieces), regions[0].exception_type, len(regions)


# ── the human copy ──────────────────────────────────────────────────────────────────────


def _relpath(path: str) -> str:
    """A path without its absolute prefix: vendor-relative, or its last two components.

    A URL loses its userinfo, query and fragment first (Deno and browser bundles load code
    from `https://user:pw@host/app.js?token=...`); a home directory (`/home/<user>/`,
    `/Users/<user>/`, `C:\\Users\\<user>\\`, `~/`) goes with the user name in it.
    """
    url = _URL.match(path)
    if url:
        path = url.group(1) + url.group(2)
    path = path.removeprefix("file://")
    if path.startswith(("node:", "<")) or not path:
        return path
    home = _HOME_PREFIX.match(path)
    absolute = home is not None or path.startswith(("/", "\\")) or _DRIVE.match(path) is not None
    parts = [p for p in re.split(r"[\\/]", path[home.end() :] if home else path) if p]
    for index, part in enumerate(parts):
        if part in _VENDOR_DIRS and index + 1 < len(parts):
            return "/".join(parts[index:])
    if absolute or len(parts) > 2:
        return "/".join(parts[-2:])
    return "/".join(parts)


_HOME_PREFIX = re.compile(
    r"(?:[A-Za-z]:)?[\\/]+(?:home|Users|users)[\\/]+[^\\/]{1,100}[\\/]*|~[\\/]*"
)
_DRIVE = re.compile(r"[A-Za-z]:[\\/]")
# A user name as it appears in a home directory; JSON-escaped backslashes are allowed.
_HOME_USER = re.compile(r"(?:/home/|/Users/|\\Users\\{1,4})([A-Za-z0-9][\w.-]{1,63})")
_USER_PLACEHOLDER: Final = "<user>"
_MAX_USERS: Final = 8


def _users(text: str) -> tuple[str, ...]:
    """The user names of the home directories in `text` (a few, longest first)."""
    names: set[str] = set()
    for match in _HOME_USER.finditer(text):
        names.add(match.group(1))
        if len(names) >= _MAX_USERS:
            break
    return tuple(sorted(names, key=len, reverse=True))


def _hide_users(text: str, users: tuple[str, ...]) -> str:
    # A user name also shows outside paths (`alice-python/app.py`, `User alice not found`).
    for name in users:
        text = text.replace(name, _USER_PLACEHOLDER)
    return text


# A value given to a credential-like name: `token=<v>`, `session: <v>`, `api-key <v>`,
# `grant <v>`. With `=` or `:` any value of 4+ characters is masked; after a space only a
# credential-shaped one (12+ characters with letters and digits), so `session close failed`
# and `key 'acme' not found` stay readable. Bounded pieces, no nested quantifiers.
_KEYWORD_VALUE = re.compile(
    r"(?i)(?<![a-z0-9])((?:[a-z0-9]{1,20}[_.-]){0,2}"
    r"(?:token|secret|password|passwd|pwd|pass|passphrase|session|sess|sid|auth|authorization"
    r"|bearer|api[_-]?key|apikey|key|grant|credentials?|cookie|signature|sig|jwt)"
    r"(?:[_.-][a-z0-9]{1,20}){0,2})(\s{0,3}[=:]\s{0,3}['\"]?|\s{1,3})([^\s'\",;&)\]}>]{4,})"
)
_KEYWORD_MASK: Final = "[REDACTED:keyword-value]"
_NOT_VALUES: Final = frozenset(
    {"bearer", "basic", "digest", "token", "none", "null", "true", "false"}
)


def _mask_keyword_values(message: str, is_secret: Callable[[str], bool] | None) -> str:
    def mask(match: re.Match[str]) -> str:
        value = match.group(3)
        if value.startswith("[") or value.lower() in _NOT_VALUES:
            return match.group()
        if not match.group(2).strip() and not (
            len(value) >= 12 and re.search(r"\d", value) and re.search(r"[A-Za-z]", value)
        ):
            return match.group()
        if is_secret is not None and is_secret(value):
            return match.group()  # a rule masks it later, under its own id and count
        return match.group(1) + match.group(2) + _KEYWORD_MASK

    return _KEYWORD_VALUE.sub(mask, message)


def _tidy(
    message: str, users: tuple[str, ...], is_secret: Callable[[str], bool] | None = None
) -> str:
    """Keyword-assigned values masked, paths trimmed, user names hidden."""
    message = _mask_keyword_values(message, is_secret)
    message = _ABS_PATH.sub(lambda m: _relpath(m.group()), message)
    return _hide_users(message, users)


def _clean_message(
    message: str, scrubber: SecretScrubber | None, users: tuple[str, ...] = ()
) -> str:
    # Scrub, then cut: cut first, a token across the cut keeps a prefix too short for its
    # rule (an OpenAI key's first 30 characters were stored).
    if scrubber is not None:
        message = scrubber.scrub_secrets(message).text
    return _tidy(message[:_MESSAGE_MAX_CHARS], users)


def _safe_cut(message: str, limit: int) -> str:
    """`message` cut to `limit` characters at a space, so no token is left half-kept."""
    if len(message) <= limit:
        return message
    space = message.rfind(" ", 0, limit)
    return (message[:space] if space > 0 else "") + " …[cut]"


def _kept_message(message: str, is_secret: Callable[[str], bool], users: tuple[str, ...]) -> str:
    # Secrets are masked afterwards in the whole kept value (`Scrubber.scrub`), so each is
    # counted under its rule; a cut at a space leaves every token whole for that pass.
    return _tidy(_safe_cut(message, _KEPT_MESSAGE_MAX_CHARS), users, is_secret)


def _human_python(
    lines: list[_Line], region: _Region, scrub: Callable[[str], str], funcs: list[str]
) -> list[str]:
    out: list[str] = []
    # Only the first exception line after the frames (or after a group's rule) is the
    # exception; lines after it are the rest of its message (pydantic's input values, an
    # exception group member's "| DB_PASSWORD: ..." line) and are dropped.
    expect_exc = True
    for index in range(region.first, region.last + 1):
        # Patterns see the bounded prefix; what is kept is scrubbed from the whole line, then
        # cut, so a token across the prefix's end is not left too short for its rule.
        line = lines[index].text
        body = line[:_LINE_PREFIX_CHARS]
        if index == region.first:
            start = _PY_START.search(body)
            out.append(scrub(line[start.start() if start else 0 :].strip()))
            continue
        frame = _PY_FRAME.match(body)
        if frame:
            lead, path, lineno, func = frame.groups()
            funcs.append(func or "?")
            out.append(f'{lead}File "{_relpath(path)}", line {lineno}, in {func or "?"}')
            expect_exc = True
            continue
        stripped = body.strip()
        if _PY_START.search(body) or _PY_CHAIN.match(body) or _PY_GROUP_RULE.match(stripped):
            # Scrubbed too: a wrapped error's own line can carry the header after a secret
            # ("cmd psql postgresql://app:pw@db failed: Traceback (most recent call last):").
            out.append(scrub(line.rstrip()))
            expect_exc = True
            continue
        if not expect_exc or not stripped:
            continue
        exc = None if _indented(lines[index]) else _PY_EXC.match(body)
        found = _PY_GROUP_EXC.match(body) or exc
        if found is None:
            continue
        name = found.group(1)
        message = line[found.end(1) :].lstrip(":").strip()
        # The name is scrubbed with its message: a line that only looks like an exception
        # ("AKIA...", "DB_PASSWORD: ...") is a secret, or the context its value needs.
        kept = scrub(f"{name}: {message}" if message else name)
        funcs.append(name if kept.startswith(name) else "?")
        expect_exc = False
        out.append(body[: found.start(1)] + kept)
    return out


def _human_at(
    lines: list[_Line], region: _Region, scrub: Callable[[str], str], funcs: list[str]
) -> list[str]:
    out: list[str] = []
    for index in range(region.first, region.last + 1):
        line = lines[index].text
        body = line[:_LINE_PREFIX_CHARS]
        if index <= region.head:
            header = _at_header(region.language, _AT_HEADERS[region.language], body)
            if index < region.head or header is None:
                continue  # Node's source excerpt before the header: code, not kept
            rest = line[header.end() :].lstrip(":").strip()
            out.append(header.group(1) + (f": {scrub(rest)}" if rest else ""))
            continue
        java = _JAVA_FRAME.match(body) if region.language == "java" else None
        if java:
            funcs.append(java.group(1))
            out.append(f"\tat {java.group(1)}({java.group(2)})")
            continue
        node = _NODE_FRAME.match(body) if region.language == "node" else None
        if node:
            func, path, line_no, column = node.groups()
            funcs.append(func or "<anonymous>")
            where = f"{_relpath(path)}:{line_no}:{column}"
            out.append(f"    at {func} ({where})" if func else f"    at {where}")
            continue
        special = _NODE_SPECIAL.match(body) if region.language == "node" else None
        if special:
            funcs.append(special.group(1))
            out.append(f"    at {special.group(1)} ({special.group(2)})")
            continue
        dotnet = _human_dotnet_frame(body, scrub, funcs) if region.language == "dotnet" else None
        if dotnet is not None:
            out.append(dotnet)
            continue
        caused = _CAUSED.match(body)
        if caused:
            name, _, message = line[caused.end(1) :].partition(": ")
            # Scrubbed with its message: the name slot is free text ("Caused by: AKIA...").
            kept = scrub(f"{name.strip()}: {message}" if message else name.strip())
            funcs.append(name.strip() if kept.startswith(name.strip()) else "?")
            out.append(caused.group(1) + kept)
            continue
        if _ELISION.match(body):
            out.append(scrub(line.rstrip()))
            continue
        cut = _CUT_AT_FRAME.match(body) if index == len(lines) - 1 else None
        if cut:
            # The value ends inside this frame (a length limit): its function is still known.
            funcs.append(cut.group(1))
            out.append(f"    at {cut.group(1)} …[cut]")
    return out


def _human_dotnet_frame(body: str, scrub: Callable[[str], str], funcs: list[str]) -> str | None:
    """A .NET (`at X.M(String s) in /src/F.cs:line 5`) or Mono frame, redacted; else None."""
    dotnet = _DOTNET_FRAME.match(body)
    if dotnet:
        method, params, path, line_no = dotnet.groups()
        funcs.append(method)
        where = f" in {_relpath(path)}:line {line_no}" if path else ""
        # .NET prints parameter types and names, but a hand-made frame can hold values.
        return f"   at {method}({scrub(params) if params else ''}){where}"
    mono = _MONO_FRAME.match(body)
    if mono:
        method, params, path, line_no = mono.groups()
        funcs.append(method)
        # `in <mvid>:0` names an assembly without symbols: no file to show.
        where = f" in {_relpath(path)}:{line_no}" if path and not path.startswith("<") else ""
        return f"  at {method} ({scrub(params) if params else ''}){where}"
    return None


_ELISION = re.compile(
    r"\s*(?:\.\.\. \d+ (?:more|common frames omitted|lines matching cause stack trace \.\.\.)"
    r"|--- End of )"
)
_CUT_AT_FRAME = re.compile(r"\s+at\s+(?:async\s+)?(?:new\s+)?([\w$.<>\[\]`]{1,300})[\s(]")


def _human_go(
    lines: list[_Line], region: _Region, scrub: Callable[[str], str], funcs: list[str]
) -> list[str]:
    out: list[str] = []
    # A dump repeats a few wait reasons ("[chan receive]") thousands of times: scrub each once.
    reasons: dict[str, str] = {}
    for index in range(region.first, region.last + 1):
        line = lines[index].text
        if index == region.first:
            start = _GO_START.search(line[:_LINE_PREFIX_CHARS])
            line = line[start.start() :] if start else line
        body = line[:_LINE_PREFIX_CHARS]
        goroutine = _GO_GOROUTINE.match(body)
        if goroutine:
            # Go prints nothing after a goroutine header: whatever follows is not Go's; drop it.
            number, reason = goroutine.groups()
            if reason not in reasons:
                reasons[reason] = scrub(reason)
            out.append(f"goroutine {number} {reasons[reason]}:")
            continue
        if body.startswith(("panic: ", "fatal error: ")):
            kind, _, message = line.partition(": ")
            out.append(f"{kind}: {scrub(message)}" if message.strip() else f"{kind}:")
            continue
        if body.startswith("[signal ") or not body.strip():
            out.append(scrub(line.rstrip()) if body.strip() else "")
            continue
        file_line = _GO_FILE.match(body)
        if file_line:
            out.append(f"\t{_relpath(file_line.group(1))}:{file_line.group(2)}")
            continue
        if body.startswith("created by "):
            created = body.split(" in goroutine ", 1)[0].rstrip()
            funcs.append(created)
            out.append(created)
            continue
        func = _GO_FUNC.match(body.strip())
        if func:
            funcs.append(func.group(1))
            # Argument words are raw values (pointers, lengths, sometimes data): drop them.
            out.append(f"{func.group(1)}(...)")
    while out and not out[-1].strip():
        out.pop()
    return out


def _human_rust(
    lines: list[_Line], region: _Region, scrub: Callable[[str], str], funcs: list[str]
) -> list[str]:
    out: list[str] = []
    # The panic message may span lines (a PEM, a pretty-printed struct with "password:" a
    # line above its value): its lines are scrubbed as one text so a rule sees them together.
    message: list[str] = []

    def flush_message() -> None:
        if message:
            kept = scrub("\n".join(message)).split("\n")
            out.extend(piece.strip() for piece in kept if piece.strip())
            message.clear()

    for index in range(region.first, region.last + 1):
        line = lines[index].text
        body = line[:_LINE_PREFIX_CHARS]
        panic = _RUST_PANIC.search(body)
        frame = None if panic else _RUST_FRAME.match(body)
        at = None if panic or frame else _RUST_AT.match(body)
        if not (panic or frame or at or body.startswith(("note: ", "stack backtrace:"))):
            if body.strip():
                message.append(line)
            continue
        flush_message()
        if panic:
            lead, old_message, path, line_no, column, colon = panic.groups()
            where = f"{_relpath(path)}:{line_no}:{column}"
            if old_message is not None:
                out.append(f"{lead}'{scrub(old_message)}', {where}")
            else:
                out.append(f"{lead}{where}{colon}")
        elif frame:
            funcs.append(frame.group(1))
            out.append(body[: frame.start(1)] + frame.group(1))
        elif at:
            out.append(
                f"{at.group(1)}{_relpath(at.group(2))}:{at.group(3)}"
                + (f":{at.group(4)}" if at.group(4) else "")
            )
        else:
            out.append(scrub(line.rstrip()))
    flush_message()
    return out


def _human_ruby(
    lines: list[_Line], region: _Region, scrub: Callable[[str], str], funcs: list[str]
) -> list[str]:
    out: list[str] = []
    for index in range(region.first, region.last + 1):
        body = lines[index].text[:_LINE_PREFIX_CHARS]
        start = _ruby_start(body)
        if start:
            path, line_no, method, message, exc = start.groups()
            funcs.append(method)
            out.append(f"{_relpath(path)}:{line_no}:in '{method}': {scrub(message)} ({exc})")
            continue
        frame = _RUBY_FROM.match(body)
        if frame:
            lead, path, line_no, method = frame.groups()
            funcs.append(method)
            out.append(f"{lead}{_relpath(path)}:{line_no}:in '{method}'")
    return out


def _human_php(
    lines: list[_Line], region: _Region, scrub: Callable[[str], str], funcs: list[str]
) -> list[str]:
    out: list[str] = []
    for index in range(region.first, region.last + 1):
        line = lines[index].text
        body = line[:_LINE_PREFIX_CHARS]
        if index == region.first:
            start = _PHP_START.search(body)
            if start:
                exc, message, path, line_no = start.groups()
                if message is not None and len(line) > len(body):
                    # The message ran past the prefix: scrub all of it (" in path:N" included).
                    message, path = line[start.start(2) :], None
                where = f" in {_relpath(path)}:{line_no}" if path else ""
                out.append(f"Uncaught {exc}: {scrub(message or '')}{where}")
            continue
        frame = _PHP_FRAME.match(body)
        if frame:
            number, path, line_no, func, _args = frame.groups()
            funcs.append(func)
            where = f"{_relpath(path)}({line_no}): " if path else ""
            # Arguments are call-time values; the function name is enough to group.
            suffix = "(...)" if _args else ""
            out.append(f"#{number} {where}{func}{suffix}")
            continue
        thrown = re.match(r"(\s+thrown in )(\S+) on line (\d+)", body)
        if thrown:
            out.append(f"{thrown.group(1)}{_relpath(thrown.group(2))} on line {thrown.group(3)}")
            continue
        if body.startswith("Stack trace:"):
            out.append("Stack trace:")
        elif body.startswith("Next "):
            out.append(f"Next {scrub(line[5:].strip())}")  # the name with its message
    return out


_HUMAN: Final[
    dict[str, Callable[[list[_Line], _Region, Callable[[str], str], list[str]], list[str]]]
] = {
    "python": _human_python,
    "java": _human_at,
    "node": _human_at,
    "dotnet": _human_at,
    "go": _human_go,
    "rust": _human_rust,
    "ruby": _human_ruby,
    "php": _human_php,
}


def _cap(lines: list[str], limit: int) -> str:
    text = "\n".join(lines)
    if len(text.encode("utf-8", "surrogatepass")) <= limit:
        return text
    kept: list[str] = []
    used = 0
    budget = limit - 64  # room for the truncation note
    for line in lines:
        size = len(line.encode("utf-8", "surrogatepass")) + 1
        if used + size > budget:
            break
        kept.append(line)
        used += size
    kept.append(f"... [{len(lines) - len(kept)} lines truncated]")
    return "\n".join(kept)


def redact_traceback(text: str, scrubber: SecretScrubber) -> RedactedTraceback | None:
    """The redacted human copy of the traces in `text`, or None when it has none.

    Messages are scrubbed with `scrubber` and cut to 300 characters; the result is at most
    8 KiB of UTF-8. (`errscope.collector.scrub.redact_traceback` defaults the scrubber.)
    """
    lines, regions = _regions(text)
    if not regions:
        return None
    users = _users(text)

    def scrub(message: str) -> str:
        return _clean_message(message, scrubber, users)

    parts: list[str] = []
    funcs: list[str] = []
    for region in regions:
        rendered = _HUMAN[region.language](lines, region, scrub, funcs)
        if region.exception_type is None and region.language == "python":
            rendered.append("[traceback cut off]")
        if parts:
            parts.append("")
        parts.extend(rendered)
    first = regions[0]
    key = "\n".join([first.language, *(r.exception_type or "?" for r in regions), *funcs])
    fingerprint = hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()[:32]
    return RedactedTraceback(
        text=_hide_users(_cap(parts, HUMAN_MAX_BYTES), users),
        exception_type=first.exception_type,
        fingerprint=fingerprint,
        language=first.language,
    )
