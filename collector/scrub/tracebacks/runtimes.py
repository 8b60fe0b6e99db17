"""Recognising each runtime's trace forms: where a trace starts, runs and ends.

One finder per form (Python, `at`-frame runtimes: Java/Kotlin, Node.js, .NET/Mono; Go, Rust,
Ruby, PHP) takes the split lines and an index and returns the `Region` a trace covers, with
its language and outermost exception type, or None; `find_regions` runs them over a value.
The frame, header and exception patterns here are shared with `kept` and `redact`, which
render a region; they are anchored, see only bounded line prefixes and have no nested or
overlapping quantifiers, so each line costs a constant. Nothing here raises.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from errscope.collector.scrub.tracebacks.lines import (
    Line,
    has_marker,
    is_blank,
    is_indented,
    line_head,
    line_prefix,
    raw_col,
    split_lines,
)

PY_START = re.compile(r"(?:Exception Group )?Traceback \(most recent call last\):")
PY_CHAIN = re.compile(
    r"\s*(?:The above exception was the direct cause of the following exception:"
    r"|During handling of the above exception, another exception occurred:)\s*$"
)
PY_FRAME = re.compile(r'(\s*(?:[|+]\s*)*)File "([^"]{1,1000})", line (\d+)(?:, in (\S{1,300}))?')
PY_EXC = re.compile(r"((?:[A-Za-z_]\w*\.)*[A-Z_]\w*)(?::\s|:$|$)")
PY_GROUP_EXC = re.compile(r"\s*\|\s((?:[A-Za-z_]\w*\.)*[A-Z_]\w*)(?::\s|:$|$)")
PY_GROUP_RULE = re.compile(r"\+[-+]*(?: \d+ -+)?$|[+-]+-{10,}$")
_NEW_RECORD = re.compile(r"(?:\d{4}-\d\d-\d\d|\[?(?:DEBUG|INFO|WARN|WARNING|ERROR|CRITICAL)\b)")

_AT_FRAME = re.compile(r"\s+at\s+\S")
JAVA_FRAME = re.compile(
    r"\s+at\s+((?:[\w$<>-]+[./])*[\w$<>-]+)\(((?:[\w$.-]+\.(?:java|kt|kts|scala|groovy|clj)"
    r"(?::\d+)?)|Native Method|Unknown Source|[\w$.-]+)\)"
)
NODE_FRAME = re.compile(
    r"\s+at\s+(?:async\s+)?(?:(?:new\s+)?([^\s(]{1,300}(?: \[as [^\]]{1,100}\])?)\s+\()?"
    r"([^\s()]{1,1000}?):(\d+):(\d+)\)?\s*\{?\s*$"
)
NODE_SPECIAL = re.compile(r"\s+at\s+(?:async\s+)?([^\s(]{1,300})\s+\((native|<anonymous>)\)")
DOTNET_FRAME = re.compile(
    r"\s+at\s+([\w.`<>$|\[\],+-]{1,500})\(([^)]{0,500})\)(?:\s+in\s+(.{1,1000}):line\s+(\d+))?"
)
# Mono: `at Ns.Type.Method (System.String id) [0x0001e] in /src/File.cs:16`, or `in <mvid>:0`
# for framework code without symbols; a wrapper frame starts `at (wrapper managed-to-native)`.
MONO_FRAME = re.compile(
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
CAUSED = re.compile(
    r"(\s*(?:Caused by: |Suppressed: |---> (?:\(Inner Exception #\d{1,6}\) )?|\[cause\]: ))(.*)"
)
_NODE_SOURCE_CARET = re.compile(r"\s*\^+\s*$")
_NODE_SOURCE_FILE = re.compile(r"\S+:\d+$")
_NODE_VERSION = re.compile(r"Node\.js v\d+")

GO_START = re.compile(r"(panic: |fatal error: |goroutine \d+ \[[^\]]{1,100}\]:)")
_GO_LINE = re.compile(
    r"(?:goroutine \d+ \[[^\]]{0,100}\]:|\[signal |\t|\s+|created by |exit status \d+"
    r"|panic: |fatal error: |\[recovered\]|[\w./*()\[\]-]{1,300}\(.{0,500}\)$)"
)
_GO_CUT_FUNC = re.compile(r"[\w./*()\[\]{}?, -]{1,500}")
GO_GOROUTINE = re.compile(r"goroutine (\d+) (\[[^\]]{0,100}\]):")
GO_FUNC = re.compile(r"((?:created by )?[\w./*()\[\]-]{1,300}?)\((.{0,500})\)$")
GO_FILE = re.compile(r"\t(\S{1,1000}\.go):(\d+)")

_RUST_START = re.compile(r"thread '[^']{0,200}'(?: \(\d+\))? panicked at ")
RUST_LINE = re.compile(r"(?:note: |stack backtrace:|\s+\d+:\s|\s+at\s)")
RUST_FRAME = re.compile(r"\s+\d+:\s+(?:0x[0-9a-f]+ - )?(\S{1,500})")
RUST_AT = re.compile(r"(\s+at\s+)(\S{1,1000}?):(\d+)(?::(\d+))?\s*$")
RUST_PANIC = re.compile(
    r"(thread '[^']{0,200}'(?: \(\d+\))? panicked at )(?:'(.*)', )?(\S{1,1000}?):(\d+):(\d+)(:?)"
)

_RUBY_START = re.compile(r"(\S{1,1000}?):(\d+):in [`']([^'`]{1,300})'?: (.*) \(([A-Z][\w:]*)\)\s*$")
RUBY_FROM = re.compile(r"(\s+from )(\S{1,1000}?):(\d+):in [`']([^'`]{1,300})'")

PHP_START = re.compile(
    r"(?:PHP )?(?:Fatal error: +Uncaught |Uncaught )([A-Z][\w\\]*)(?:: (.*?))?"
    r"(?: in (\S{1,1000}):(\d+))?\s*$"
)
_PHP_LINE = re.compile(r"(?:Stack trace:|#\d+ |\s+thrown in |Next [A-Z][\w\\]*)")
PHP_FRAME = re.compile(r"#(\d+) (?:(\S{1,1000}?)\((\d+)\): )?([^(]{1,300})(?:\((.{0,2000})\))?")


@dataclass(slots=True)
class Region:
    first: int  # line index
    last: int  # inclusive line index
    col: int  # raw offset in the text where the trace starts (text before it is kept)
    language: str
    exception_type: str | None
    head: int = -1  # line index of the header of a trace with `at` frames


def _python(text: str, lines: list[Line], i: int) -> Region | None:
    line = lines[i]
    match = PY_START.search(line_head(line))
    if match is None:
        return None
    before = line.text[: match.start()]
    col = (
        line.start
        if not before.strip(" \t|+")
        else raw_col(text, line, match.group(), match.start())
    )
    group = match.group().startswith("Exception Group")
    exc: str | None = None
    n = len(lines)
    j = i + 1
    after_exc = False
    while j < n:
        cur = lines[j]
        body = line_prefix(cur)
        if is_blank(cur):
            chain = _chain_after_blank(lines, j)
            if chain >= 0:
                j = chain + 1
                after_exc = False
                continue
            if after_exc or _only_blank_after(lines, j):
                break
            j += 1
            continue
        if PY_START.search(body) and not body[: body.find("Traceback")].strip(" \t|+"):
            group = group or "Exception Group" in body
            after_exc = False
            j += 1
            continue
        if is_indented(cur) or body.startswith(("|", "+")):
            if group and exc is None:
                found = PY_GROUP_EXC.match(body)
                if found and not body.lstrip().startswith("|   "):
                    exc = found.group(1)
            j += 1
            continue
        if after_exc:
            if _NEW_RECORD.match(body) or cur.boundary:
                break
            j += 1  # multi-line messages (pydantic's error details) belong to the trace
            continue
        found = PY_EXC.match(body)
        if found is None:
            break
        if not group:
            exc = found.group(1)  # the last printed exception is the one that escaped
        after_exc = True
        j += 1
    last = j - 1
    while last > i and is_blank(lines[last]):
        last -= 1
    return Region(i, last, col, "python", exc)


def _chain_after_blank(lines: list[Line], j: int) -> int:
    """Index of a Python chain sentence after the blank lines from `j`, or -1."""
    k = j + 1
    while k < len(lines) and is_blank(lines[k]):
        k += 1
    return k if k < len(lines) and PY_CHAIN.match(line_prefix(lines[k])) else -1


def _only_blank_after(lines: list[Line], j: int) -> bool:
    k = j + 1
    while k < len(lines) and is_blank(lines[k]):
        k += 1
    return k >= len(lines)


def _at_frames(text: str, lines: list[Line], i: int) -> Region | None:
    """Java/Kotlin, Node.js and .NET: a header line followed by `at ...` frames."""
    n = len(lines)
    first_frame = i + 1
    # .NET prints inner exceptions (" ---> X: ...") between the header and the first frame.
    while first_frame < min(n, i + 4) and CAUSED.match(line_prefix(lines[first_frame])):
        first_frame += 1
    if first_frame >= n or not _AT_FRAME.match(line_prefix(lines[first_frame])):
        return None
    runtime = _at_runtime(lines, i, first_frame)
    if runtime is None:
        return None
    language, header = runtime
    head = lines[i]
    found = at_header(language, header, line_head(head))
    if found is None:
        return None
    exc = found.group(1)
    col = raw_col(text, head, found.group(), found.start())
    first = i
    # Uncaught Node errors are preceded by "file:line", the source line, a caret line, a blank.
    if language == "node" and not head.text[: found.start()].strip() and _node_excerpt(lines, i):
        first = i - 4
        source_file = _NODE_SOURCE_FILE.search(line_head(lines[first]))
        needle = source_file.group().lstrip("\"'") if source_file else ""
        col = raw_col(text, lines[first], needle, len(line_head(lines[first])) - len(needle))
    j = i + 1
    in_props = False
    while j < n:
        body = line_prefix(lines[j])
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
    while k < n and is_blank(lines[k]):
        k += 1
    if language == "node" and k < n and _NODE_VERSION.match(line_prefix(lines[k])):
        last = k
    return Region(first, last, col, language, exc, head=i)


def _at_runtime(lines: list[Line], i: int, first_frame: int) -> tuple[str, re.Pattern[str]] | None:
    """The runtime (and its header pattern) of the `at` frame at `first_frame`, or None."""
    frame = line_prefix(lines[first_frame])
    if JAVA_FRAME.match(frame) and not NODE_FRAME.match(frame):
        return "java", _JAVA_HEADER
    if NODE_FRAME.match(frame) or NODE_SPECIAL.match(frame):
        return "node", _NODE_HEADER
    if DOTNET_FRAME.match(frame) or MONO_FRAME.match(frame):
        return "dotnet", _DOTNET_HEADER
    if first_frame != len(lines) - 1:
        return None
    # Cut off inside the first frame: Node's source excerpt or the header decides.
    if _node_excerpt(lines, i):
        return "node", _NODE_HEADER
    head_text = line_head(lines[i])
    return next(
        ((lang, pattern) for lang, pattern in _HEADERS if pattern.search(head_text)),
        ("java", _JAVA_HEADER),
    )


def _node_excerpt(lines: list[Line], i: int) -> bool:
    """Whether "file:line", a source line, a caret line and a blank come before line `i`."""
    return (
        i >= 4
        and is_blank(lines[i - 1])
        and _NODE_SOURCE_CARET.match(line_prefix(lines[i - 2])) is not None
        and _NODE_SOURCE_FILE.search(line_prefix(lines[i - 4])) is not None
    )


def at_header(language: str, header: re.Pattern[str], body: str) -> re.Match[str] | None:
    found = header.search(body)
    if found is None and language == "java":
        found = _DOTNET_HEADER.search(body)
    if found is None and language == "node":
        found = _NODE_CLASS_HEADER.search(body)
    return found


AT_HEADERS: Final = {"java": _JAVA_HEADER, "node": _NODE_HEADER, "dotnet": _DOTNET_HEADER}


def _go(text: str, lines: list[Line], i: int) -> Region | None:
    line = lines[i]
    match = GO_START.search(line_head(line))
    if match is None:
        return None
    if match.group().startswith("goroutine") and match.start() != 0:
        return None
    # "panic: " also ends many log messages; require the goroutine header to follow.
    n = len(lines)
    k = i + 1
    while k < n and k <= i + 12 and not line_prefix(lines[k]).startswith("goroutine "):
        k += 1
    if not match.group().startswith("goroutine") and (k >= n or k > i + 12):
        return None
    kind = match.group().rstrip(": ")
    exc = {"panic": "panic", "fatal error": "fatal error"}.get(kind, "goroutine dump")
    col = raw_col(text, line, match.group(), match.start())
    j = i + 1
    while j < n:
        cur = lines[j]
        if is_blank(cur) or _GO_LINE.match(line_prefix(cur)):
            j += 1
            continue
        if j == n - 1 and _GO_CUT_FUNC.fullmatch(line_prefix(cur)):
            j += 1  # cut off by a length limit inside a function line
        break
    last = j - 1
    while last > i and is_blank(lines[last]):
        last -= 1
    return Region(i, last, col, "go", exc)


def _rust(text: str, lines: list[Line], i: int) -> Region | None:
    line = lines[i]
    match = _RUST_START.search(line_head(line))
    if match is None:
        if line_head(line).startswith("stack backtrace:"):
            match = None
            col = line.start
        else:
            return None
    else:
        col = raw_col(text, line, match.group(), match.start())
    n = len(lines)
    j = i + 1
    # The message of a >=1.73 panic runs until the "note:" or "stack backtrace:" line.
    k = j
    while k < n and k <= i + 40 and not RUST_LINE.match(line_prefix(lines[k])):
        k += 1
    if k < n and k <= i + 40 and match is not None and line.text.rstrip().endswith(":"):
        j = k
    elif match is not None and line.text.rstrip().endswith(":") and j < n:
        j += 1  # cut off: keep the one message line inside the trace
    while j < n and RUST_LINE.match(line_prefix(lines[j])):
        j += 1
    return Region(i, j - 1, col, "rust", "panic")


def _ruby(text: str, lines: list[Line], i: int) -> Region | None:
    line = lines[i]
    match = ruby_start(line_head(line))
    if match is None:
        return None
    n = len(lines)
    j = i + 1
    while j < n and RUBY_FROM.match(line_prefix(lines[j])):
        j += 1
    if j == n - 1 and is_indented(lines[j]) and "from ".startswith(lines[j].text.strip()[:5]):
        j += 1  # cut off by a length limit inside a "from" line
    col = raw_col(text, line, match.group(), match.start())
    return Region(i, j - 1, col, "ruby", match.group(5))


def ruby_start(body: str) -> re.Match[str] | None:
    """Ruby's first line, also after a prefix (`"error": "/app/x.rb:3:in ...`)."""
    pos = body.find(":in ")
    if pos < 0:
        return None
    # The path starts after the last space, quote or tab before `:in`: one anchored match.
    start = max(body.rfind(c, 0, pos) for c in " \t\"'>") + 1
    return _RUBY_START.match(body, start)


def _php(text: str, lines: list[Line], i: int) -> Region | None:
    line = lines[i]
    body = line_head(line)
    match = PHP_START.search(body)
    if match is None:
        return None
    n = len(lines)
    followed = i + 1 < n and _PHP_LINE.match(line_prefix(lines[i + 1]))
    if not followed and ("Uncaught " not in body or "Fatal error" not in body):
        return None
    col = raw_col(text, line, match.group(), match.start())
    j = i + 1
    while j < n:
        if _PHP_LINE.match(line_prefix(lines[j])):
            j += 1
        elif is_blank(lines[j]) and j + 1 < n and line_prefix(lines[j + 1]).startswith("Next "):
            j += 2  # a previous exception: "#2 {main}", a blank line, "Next X: ..."
        else:
            break
    return Region(i, j - 1, col, "php", match.group(1).replace("\\\\", "\\"))


_FINDERS: Final[tuple[Callable[[str, list[Line], int], Region | None], ...]] = (
    _python,
    _at_frames,
    _go,
    _rust,
    _ruby,
    _php,
)


def find_regions(text: str) -> tuple[list[Line], list[Region]]:
    if not text or not has_marker(text):
        return [], []
    lines = split_lines(text)
    regions: list[Region] = []
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
