"""The kept-value rule: a trace on a span keeps its exceptions and nothing of its frames.

`strip_traceback` and `strip_traceback_count` replace every region `runtimes` finds with
its exception types and messages (chained causes included; messages cleaned by
`messages.kept_message`), keep the text around it as it is, and re-escape the result the
way the trace was written (JSON levels, HTML), so a record still parses. A trace whose
exception cannot be known becomes `UNKNOWN_TRACE`. Nothing here raises on any string.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Final

from errscope.collector.scrub.tracebacks.lines import (
    LINE_PREFIX_CHARS,
    Line,
    encode_like,
    is_indented,
)
from errscope.collector.scrub.tracebacks.messages import SecretScrubber, home_users, kept_message
from errscope.collector.scrub.tracebacks.runtimes import (
    AT_HEADERS,
    CAUSED,
    GO_START,
    PHP_START,
    PY_CHAIN,
    PY_EXC,
    PY_FRAME,
    PY_GROUP_EXC,
    PY_GROUP_RULE,
    PY_START,
    RUST_AT,
    RUST_FRAME,
    RUST_LINE,
    RUST_PANIC,
    Region,
    at_header,
    find_regions,
    ruby_start,
)

UNKNOWN_TRACE: Final = "[REDACTED:traceback]"


#
# Each renderer returns the lines of a trace that a kept value holds: exception types with
# their messages (cleaned by `clean`) and nothing of frames, source lines, locals, error
# properties, or the location a header repeats from the frames.


def _kept_python(lines: list[Line], region: Region, clean: Callable[[str], str]) -> list[str]:
    out: list[str] = []
    expect_exc = False  # only the first line after frames (or a group's rule) is an exception
    for index in range(region.first + 1, region.last + 1):
        line = lines[index].text
        body = line[:LINE_PREFIX_CHARS]
        if PY_FRAME.match(body):
            expect_exc = True
            continue
        if expect_exc and body.strip():
            plain = None if is_indented(lines[index]) else PY_EXC.match(body)
            found = PY_GROUP_EXC.match(body) or plain
            if found is not None:
                out.append(clean(line[found.start(1) :].strip()))
                expect_exc = False
                continue
        if PY_START.search(body) or PY_CHAIN.match(body) or PY_GROUP_RULE.match(body.strip()):
            expect_exc = True
    return out


def _kept_at(lines: list[Line], region: Region, clean: Callable[[str], str]) -> list[str]:
    out: list[str] = []
    for index in range(region.head, region.last + 1):
        line = lines[index].text
        body = line[:LINE_PREFIX_CHARS]
        if index == region.head:
            header = at_header(region.language, AT_HEADERS[region.language], body)
            if header is not None:
                out.append(clean(line[header.start() :].strip()))
            continue
        caused = CAUSED.match(body)
        if caused:
            out.append(clean(line.strip()))
    return out


def _kept_go(lines: list[Line], region: Region, clean: Callable[[str], str]) -> list[str]:
    out: list[str] = []
    for index in range(region.first, region.last + 1):
        line = lines[index].text
        if index == region.first:
            start = GO_START.search(line[:LINE_PREFIX_CHARS])
            line = line[start.start() :] if start else line
        # A re-panic prints its panics indented under the first: "\tpanic: ...".
        stripped = line.strip()
        if stripped.startswith(("panic: ", "fatal error: ", "[signal ")):
            out.append(clean(stripped))
    return out


def _kept_rust(lines: list[Line], region: Region, clean: Callable[[str], str]) -> list[str]:
    out: list[str] = []
    message: list[str] = []
    for index in range(region.first, region.last + 1):
        line = lines[index].text
        body = line[:LINE_PREFIX_CHARS]
        panic = RUST_PANIC.search(body)
        if panic:
            # "thread 'main' panicked at src/main.rs:5:5:" keeps the thread, not the location.
            lead, old_message = panic.group(1), panic.group(2)
            head = lead.removesuffix(" at ") + ":"
            out.append(head + (f" {clean(old_message)}" if old_message is not None else ""))
            continue
        if RUST_FRAME.match(body) or RUST_AT.match(body) or RUST_LINE.match(body):
            if message:
                out.append(clean("\n".join(message)))
                message.clear()
            continue
        if body.strip():
            message.append(line.strip())
    if message:
        out.append(clean("\n".join(message)))
    return out


def _kept_ruby(lines: list[Line], region: Region, clean: Callable[[str], str]) -> list[str]:
    start = ruby_start(lines[region.first].text[:LINE_PREFIX_CHARS])
    if start is None:
        return []
    return [clean(f"{start.group(4)} ({start.group(5)})")]


_PHP_NEXT = re.compile(r"Next ([A-Z][\w\\]{0,300})(?:: (.*?))?(?: in (\S{1,1000}):(\d+))?\s*$")


def _kept_php(lines: list[Line], region: Region, clean: Callable[[str], str]) -> list[str]:
    out: list[str] = []
    for index in range(region.first, region.last + 1):
        line = lines[index].text
        body = line[:LINE_PREFIX_CHARS]
        found = PHP_START.search(body) if index == region.first else _PHP_NEXT.match(body)
        if found is None:
            continue
        # The header up to the type, the type, the message; not " in /path/File.php:11".
        message = found.group(2)
        if message is not None and len(line) > len(body):
            message = line[found.start(2) :]
        head = body[found.start() : found.end(1)]
        out.append(clean(head + (f": {message}" if message else "")))
    return out


_KEPT: Final[dict[str, Callable[[list[Line], Region, Callable[[str], str]], list[str]]]] = {
    "python": _kept_python,
    "java": _kept_at,
    "node": _kept_at,
    "dotnet": _kept_at,
    "go": _kept_go,
    "rust": _kept_rust,
    "ruby": _kept_ruby,
    "php": _kept_php,
}


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
        lines, regions = find_regions(text)
    except RecursionError:  # pragma: no cover - nothing here recurses; fail closed anyway
        return UNKNOWN_TRACE, None, 1
    if not regions:
        return text, None, 0
    users = home_users(text)
    is_secret = scrubber.contains_secret

    def clean(message: str) -> str:
        return kept_message(message, is_secret, users)

    pieces: list[str] = []
    pos = 0
    for region in regions:
        first = lines[region.first]
        kept = _KEPT[region.language](lines, region, clean)
        newline = "\r\n" if text[first.end : first.next] == "\r\n" else "\n"
        body = newline.join(kept) if kept else (region.exception_type or UNKNOWN_TRACE)
        pieces.append(text[pos : region.col])
        pieces.append(encode_like(body, first))
        pos = lines[region.last].end
    pieces.append(text[pos:])
    return "".join(pieces), regions[0].exception_type, len(regions)
