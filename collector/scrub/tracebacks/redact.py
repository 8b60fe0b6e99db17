"""The copy of a trace for people: types, functions, relative files and lines, no values.

`redact_traceback` renders every region `runtimes` finds as exception types, frame
function names, relative file names and line numbers, with messages scrubbed whole by the
given scrubber and then cut; no absolute paths, URL userinfo or queries, user names,
source lines, locals, argument or error-property values. The result is at most
`HUMAN_MAX_BYTES` of UTF-8, with a fingerprint of language, exception types and frame
functions that groups the same failure across line-number changes. Nothing here raises.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from errscope.collector.scrub.tracebacks.lines import LINE_PREFIX_CHARS, Line, is_indented
from errscope.collector.scrub.tracebacks.messages import (
    SecretScrubber,
    clean_message,
    hide_users,
    home_users,
    relpath,
)
from errscope.collector.scrub.tracebacks.runtimes import (
    AT_HEADERS,
    CAUSED,
    DOTNET_FRAME,
    GO_FILE,
    GO_FUNC,
    GO_GOROUTINE,
    GO_START,
    JAVA_FRAME,
    MONO_FRAME,
    NODE_FRAME,
    NODE_SPECIAL,
    PHP_FRAME,
    PHP_START,
    PY_CHAIN,
    PY_EXC,
    PY_FRAME,
    PY_GROUP_EXC,
    PY_GROUP_RULE,
    PY_START,
    RUBY_FROM,
    RUST_AT,
    RUST_FRAME,
    RUST_PANIC,
    Region,
    at_header,
    find_regions,
    ruby_start,
)

HUMAN_MAX_BYTES: Final = 8 * 1024


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


def _human_python(
    lines: list[Line], region: Region, scrub: Callable[[str], str], funcs: list[str]
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
        body = line[:LINE_PREFIX_CHARS]
        if index == region.first:
            start = PY_START.search(body)
            out.append(scrub(line[start.start() if start else 0 :].strip()))
            continue
        frame = PY_FRAME.match(body)
        if frame:
            lead, path, lineno, func = frame.groups()
            funcs.append(func or "?")
            out.append(f'{lead}File "{relpath(path)}", line {lineno}, in {func or "?"}')
            expect_exc = True
            continue
        stripped = body.strip()
        if PY_START.search(body) or PY_CHAIN.match(body) or PY_GROUP_RULE.match(stripped):
            # Scrubbed too: a wrapped error's own line can carry the header after a secret
            # ("cmd psql postgresql://app:pw@db failed: Traceback (most recent call last):").
            out.append(scrub(line.rstrip()))
            expect_exc = True
            continue
        if not expect_exc or not stripped:
            continue
        exc = None if is_indented(lines[index]) else PY_EXC.match(body)
        found = PY_GROUP_EXC.match(body) or exc
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
    lines: list[Line], region: Region, scrub: Callable[[str], str], funcs: list[str]
) -> list[str]:
    out: list[str] = []
    for index in range(region.first, region.last + 1):
        line = lines[index].text
        body = line[:LINE_PREFIX_CHARS]
        if index <= region.head:
            header = at_header(region.language, AT_HEADERS[region.language], body)
            if index < region.head or header is None:
                continue  # Node's source excerpt before the header: code, not kept
            rest = line[header.end() :].lstrip(":").strip()
            out.append(header.group(1) + (f": {scrub(rest)}" if rest else ""))
            continue
        java = JAVA_FRAME.match(body) if region.language == "java" else None
        if java:
            funcs.append(java.group(1))
            out.append(f"\tat {java.group(1)}({java.group(2)})")
            continue
        node = NODE_FRAME.match(body) if region.language == "node" else None
        if node:
            func, path, line_no, column = node.groups()
            funcs.append(func or "<anonymous>")
            where = f"{relpath(path)}:{line_no}:{column}"
            out.append(f"    at {func} ({where})" if func else f"    at {where}")
            continue
        special = NODE_SPECIAL.match(body) if region.language == "node" else None
        if special:
            funcs.append(special.group(1))
            out.append(f"    at {special.group(1)} ({special.group(2)})")
            continue
        dotnet = _human_dotnet_frame(body, scrub, funcs) if region.language == "dotnet" else None
        if dotnet is not None:
            out.append(dotnet)
            continue
        caused = CAUSED.match(body)
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
    dotnet = DOTNET_FRAME.match(body)
    if dotnet:
        method, params, path, line_no = dotnet.groups()
        funcs.append(method)
        where = f" in {relpath(path)}:line {line_no}" if path else ""
        # .NET prints parameter types and names, but a hand-made frame can hold values.
        return f"   at {method}({scrub(params) if params else ''}){where}"
    mono = MONO_FRAME.match(body)
    if mono:
        method, params, path, line_no = mono.groups()
        funcs.append(method)
        # `in <mvid>:0` names an assembly without symbols: no file to show.
        where = f" in {relpath(path)}:{line_no}" if path and not path.startswith("<") else ""
        return f"  at {method} ({scrub(params) if params else ''}){where}"
    return None


_ELISION = re.compile(
    r"\s*(?:\.\.\. \d+ (?:more|common frames omitted|lines matching cause stack trace \.\.\.)"
    r"|--- End of )"
)
_CUT_AT_FRAME = re.compile(r"\s+at\s+(?:async\s+)?(?:new\s+)?([\w$.<>\[\]`]{1,300})[\s(]")


def _human_go(
    lines: list[Line], region: Region, scrub: Callable[[str], str], funcs: list[str]
) -> list[str]:
    out: list[str] = []
    # A dump repeats a few wait reasons ("[chan receive]") thousands of times: scrub each once.
    reasons: dict[str, str] = {}
    for index in range(region.first, region.last + 1):
        line = lines[index].text
        if index == region.first:
            start = GO_START.search(line[:LINE_PREFIX_CHARS])
            line = line[start.start() :] if start else line
        body = line[:LINE_PREFIX_CHARS]
        goroutine = GO_GOROUTINE.match(body)
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
        file_line = GO_FILE.match(body)
        if file_line:
            out.append(f"\t{relpath(file_line.group(1))}:{file_line.group(2)}")
            continue
        if body.startswith("created by "):
            created = body.split(" in goroutine ", 1)[0].rstrip()
            funcs.append(created)
            out.append(created)
            continue
        func = GO_FUNC.match(body.strip())
        if func:
            funcs.append(func.group(1))
            # Argument words are raw values (pointers, lengths, sometimes data): drop them.
            out.append(f"{func.group(1)}(...)")
    while out and not out[-1].strip():
        out.pop()
    return out


def _human_rust(
    lines: list[Line], region: Region, scrub: Callable[[str], str], funcs: list[str]
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
        body = line[:LINE_PREFIX_CHARS]
        panic = RUST_PANIC.search(body)
        frame = None if panic else RUST_FRAME.match(body)
        at = None if panic or frame else RUST_AT.match(body)
        if not (panic or frame or at or body.startswith(("note: ", "stack backtrace:"))):
            if body.strip():
                message.append(line)
            continue
        flush_message()
        if panic:
            lead, old_message, path, line_no, column, colon = panic.groups()
            where = f"{relpath(path)}:{line_no}:{column}"
            if old_message is not None:
                out.append(f"{lead}'{scrub(old_message)}', {where}")
            else:
                out.append(f"{lead}{where}{colon}")
        elif frame:
            funcs.append(frame.group(1))
            out.append(body[: frame.start(1)] + frame.group(1))
        elif at:
            out.append(
                f"{at.group(1)}{relpath(at.group(2))}:{at.group(3)}"
                + (f":{at.group(4)}" if at.group(4) else "")
            )
        else:
            out.append(scrub(line.rstrip()))
    flush_message()
    return out


def _human_ruby(
    lines: list[Line], region: Region, scrub: Callable[[str], str], funcs: list[str]
) -> list[str]:
    out: list[str] = []
    for index in range(region.first, region.last + 1):
        body = lines[index].text[:LINE_PREFIX_CHARS]
        start = ruby_start(body)
        if start:
            path, line_no, method, message, exc = start.groups()
            funcs.append(method)
            out.append(f"{relpath(path)}:{line_no}:in '{method}': {scrub(message)} ({exc})")
            continue
        frame = RUBY_FROM.match(body)
        if frame:
            lead, path, line_no, method = frame.groups()
            funcs.append(method)
            out.append(f"{lead}{relpath(path)}:{line_no}:in '{method}'")
    return out


def _human_php(
    lines: list[Line], region: Region, scrub: Callable[[str], str], funcs: list[str]
) -> list[str]:
    out: list[str] = []
    for index in range(region.first, region.last + 1):
        line = lines[index].text
        body = line[:LINE_PREFIX_CHARS]
        if index == region.first:
            start = PHP_START.search(body)
            if start:
                exc, message, path, line_no = start.groups()
                if message is not None and len(line) > len(body):
                    # The message ran past the prefix: scrub all of it (" in path:N" included).
                    message, path = line[start.start(2) :], None
                where = f" in {relpath(path)}:{line_no}" if path else ""
                out.append(f"Uncaught {exc}: {scrub(message or '')}{where}")
            continue
        frame = PHP_FRAME.match(body)
        if frame:
            number, path, line_no, func, _args = frame.groups()
            funcs.append(func)
            where = f"{relpath(path)}({line_no}): " if path else ""
            # Arguments are call-time values; the function name is enough to group.
            suffix = "(...)" if _args else ""
            out.append(f"#{number} {where}{func}{suffix}")
            continue
        thrown = re.match(r"(\s+thrown in )(\S+) on line (\d+)", body)
        if thrown:
            out.append(f"{thrown.group(1)}{relpath(thrown.group(2))} on line {thrown.group(3)}")
            continue
        if body.startswith("Stack trace:"):
            out.append("Stack trace:")
        elif body.startswith("Next "):
            out.append(f"Next {scrub(line[5:].strip())}")  # the name with its message
    return out


_HUMAN: Final[
    dict[str, Callable[[list[Line], Region, Callable[[str], str], list[str]], list[str]]]
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
    lines, regions = find_regions(text)
    if not regions:
        return None
    users = home_users(text)

    def scrub(message: str) -> str:
        return clean_message(message, scrubber, users)

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
        text=hide_users(_cap(parts, HUMAN_MAX_BYTES), users),
        exception_type=first.exception_type,
        fingerprint=fingerprint,
        language=first.language,
    )
