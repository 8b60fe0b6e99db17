"""Reading a value's lines as a trace reader sees them, and writing a kept line back.

A value is split into `Line`s once: CRLF/CR/LF breaks and JSON-escaped `\\n` breaks (up to
`_MAX_DEPTH` string levels), with JSON escapes, HTML character references and terminal
colour codes undone in the text that patterns see, while each line keeps its raw offsets,
its escape depth and whether it carried entities, so `encode_like` can write a kept line
the way the raw one was. `has_marker` is the prefilter that lets most values skip all this.

Promises: linear in the input (a backslash run costs its length once); patterns elsewhere
see at most `LINE_PREFIX_CHARS` of a line (`line_head`, `line_prefix`); nothing raises.
"""

from __future__ import annotations

import html
import json
import re
from dataclasses import dataclass
from typing import Final

_BOUNDARY: Final = "\x00"
LINE_PREFIX_CHARS: Final = 2048
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


@dataclass(slots=True)
class Line:
    text: str  # content for matching (unescaped, entities decoded, colours removed), no line end
    start: int  # offsets of the raw content in the original text
    end: int
    next: int  # offset after the line end
    # The rest of a line after the JSON string that held an escaped trace: never part of one.
    boundary: bool = False
    depth: int = 0  # JSON string levels the raw line is escaped in (0: none, up to 3)
    html: bool = False  # the raw line carries HTML character references (`&quot;`)
    transformed: bool = False  # text differs from the raw slice (escapes, entities, colours)


def has_marker(text: str) -> bool:
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


def split_lines(text: str) -> list[Line]:
    lines: list[Line] = []

    def add_plain(start: int, end: int, nxt: int, depth: int) -> None:
        raw = text[start:end]
        decoded, html_refs = _readable(raw, depth)
        decoded = decoded.removesuffix("\r")
        lines.append(Line(decoded, start, end, nxt, False, depth, html_refs, decoded != raw))

    def add_escaped(start: int, end: int, nxt: int, depth: int, *, opening: bool) -> None:
        quote = -1 if opening else _closing_quote(text, start, end, depth)
        if quote < 0:
            add_plain(start, end, nxt, depth)
            return
        add_plain(start, quote, quote, depth)
        lines.append(Line(text[quote:end], quote, end, nxt, boundary=True))

    def add(start: int, end: int, nxt: int) -> None:
        segment = text[start:end]
        depth = _escape_depth(segment) if "\\" in segment and has_marker(segment) else 0
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


def line_head(line: Line) -> str:
    """The matching text of a line where a trace may start (boundary lines included)."""
    return line.text[:LINE_PREFIX_CHARS]


def line_prefix(line: Line) -> str:
    # A boundary line matches no trace pattern and is not blank, so every finder stops there.
    return _BOUNDARY if line.boundary else line.text[:LINE_PREFIX_CHARS]


def is_blank(line: Line) -> bool:
    return not line.boundary and not line.text.strip()


def is_indented(line: Line) -> bool:
    return not line.boundary and line.text[:1] in (" ", "\t")


_UNSAFE_IN_NEEDLE = re.compile(r"[\"\\\t&<>'\x1b]")


def raw_col(text: str, line: Line, needle: str, fallback: int) -> int:
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


def encode_like(text: str, line: Line) -> str:
    """`text` written the way the raw `line` is: HTML references, then JSON string levels."""
    if line.html:
        text = html.escape(text, quote=True)
    for _ in range(line.depth):
        text = json.dumps(text, ensure_ascii=False)[1:-1]
    return text
