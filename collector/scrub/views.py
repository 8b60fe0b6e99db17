"""The decoded views of a value that the engine scans besides its bytes as they are.

JSON string escapes, percent and form encoding, terminal colour codes, HTML character
references, invisible characters and a streamed response's deltas (a JSON array of strings)
each give a `View`: the decoded bytes plus the map from their offsets back to the parent's,
so a finding in a view is masked in place in the raw value. `decoded_views` builds at most
`_MAX_VIEWS` of them, `_MAX_DECODE_DEPTH` levels deep; base64 runs that decode to text are
read by `decode_base64` and `glued_base64`, found by `base64_database`'s one-pattern scan.
Every pattern is fixed-width or a character-class run, so building views is linear in the
value; nothing here raises on any bytes.
"""

from __future__ import annotations

import binascii
import functools
import html
import json
import re
from array import array
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from itertools import accumulate
from typing import Any, Final

import hyperscan
import orjson

_MAX_VIEWS: Final = 6
_MAX_DECODE_DEPTH: Final = 3
# Fixed-width escape tokens; no quantifier can backtrack more than six bytes.
_JSON_ESCAPE = re.compile(rb'(\\(?:u[0-9a-fA-F]{4}|["\\/bfnrt]))')
# Percent escapes, and "+" for a space as HTML forms encode it (urlencode's default):
# "Authorization=Bearer+<token>" must read as "Bearer <token>".
_PERCENT_ESCAPE = re.compile(rb"(%[0-9A-Fa-f]{2}|\+)")
# Characters that render as nothing (zero-width space, joiners, word joiner, BOM, soft
# hyphen): pasted into a token they hide it from every rule while the token still works
# once a reader copies it. The view drops them.
_INVISIBLE = re.compile(rb"((?:\xe2\x80[\x8b-\x8d]|\xe2\x81\xa0|\xef\xbb\xbf|\xc2\xad)+)")
# Terminal colour and cursor codes (grep --color, pytest, git diff output echoed in a span):
# the code ends in a letter, so a token right after it would read as glued to a word.
_ANSI = re.compile(rb"(\x1b\[[0-9;?]*[ -/]*[@-~])")
# A "+" between letters is a space in form-encoded text (q=Bearer+<token>) even with no
# "%" escape in the value; "+00:00" and "C++" do not build the view.
_FORM_SPACE = re.compile(rb"[A-Za-z]\+[A-Za-z-]")
# A byte that any of the views below starts from ("\\", "%", "+", ESC, "&", and the lead
# bytes of the invisible characters); a value without one has no other view.
_VIEW_TRIGGER = re.compile(rb"[\\%+\x1b&\xe2\xc2\xef]")
# HTML character references, as an HTML error page or a templated message escapes text.
_HTML_ENTITY = re.compile(rb"(&(?:#[0-9]{1,7}|#[xX][0-9a-fA-F]{1,6}|amp|lt|gt|quot|apos);)")
# A base64 (or base64url) run long enough to carry a credential line (24 decoded bytes).
# The rules' Hyperscan scan says whether a value may have one (a one-pattern database does
# for a decoded view); only then are the runs split out for decoding.
BASE64_MIN_CHARS: Final = 32
# Base64 of ASCII text starts every 4-character group with A-Z or a-f (a byte below 0x80
# shifted right by two), which most ids and keys of the same length do not.
BASE64_TEXT_HS: Final = rb"(?:[A-Za-f][A-Za-z0-9+/_-]{3}){%d}" % (BASE64_MIN_CHARS // 4)
# Python's re, not RE2: the RE2 binding's split costs a pass over the rest of the buffer
# per match (quadratic in a large value); a character-class run cannot backtrack.
BASE64_RUN: Final = re.compile(rb"([A-Za-z0-9+/_-]{32,}={0,2})")
_BASE64_PROBE_CHARS: Final = 128
# Text a glued run's decoding must hold to be read (the 32 characters above, decoded).
_BASE64_TEXT_STRETCH: Final = re.compile(rb"[\t\n\r\x20-\x7e]{%d,}" % (BASE64_MIN_CHARS // 4 * 3))
# Where a glued run's payload may start after the first text it decodes to: the next few
# group starts (noise from the glue runs on into the text for a byte or two, rarely more),
# and how far a secret starting there is looked for.
GLUE_STARTS: Final = 3
GLUE_REACH_BYTES: Final = 512
MAX_BASE64_DEPTH: Final = 2  # base64 inside base64 is read; a third level is not
_URLSAFE_TO_STD: Final = bytes.maketrans(b"-_", b"+/")
# Printable ASCII and whitespace: 24 random bytes pass with odds below 1e-10, so hex ids
# and binary blobs are left as they are, and config text is read.
_NOT_TEXT: Final = bytes(b for b in range(256) if not (32 <= b < 127 or b in b"\t\n\r"))
_JSON_SIMPLE: Final = {
    b'\\"': b'"',
    b"\\\\": b"\\",
    b"\\/": b"/",
    b"\\b": b"\b",
    b"\\f": b"\f",
    b"\\n": b"\n",
    b"\\r": b"\r",
    b"\\t": b"\t",
}
_PERCENT_TABLE: Final = {
    b"+": b" ",
    **{
        f"%{hi}{lo}".encode(): bytes((int(hi + lo, 16),))
        for hi in "0123456789abcdefABCDEF"
        for lo in "0123456789abcdefABCDEF"
    },
}
# A streamed response kept as its deltas: a JSON array of strings ("Sure, I sa", "ved your
# key sk-...", ...).  A secret cut across deltas is read in the deltas joined; masking then
# keeps the array's separators, so every delta keeps its place and only its part of the
# secret becomes a mask.
# One JSON string literal (escapes included), in the unrolled form that loops in C.
_JSON_STRING: Final = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)


@dataclass(slots=True)
class View:
    """A decoded copy of the value plus the map from its offsets back to its parent's."""

    data: bytes
    parent: View | None = None
    depth: int = 0
    d_pos: Sequence[int] = ()
    d_len: Sequence[int] = ()
    r_pos: Sequence[int] = ()
    r_len: Sequence[int] = ()
    joined: bool = False  # a string array's deltas joined (see `_joined_deltas`)

    def to_raw(self, pos: int, *, end: bool) -> int:
        view: View | None = self
        while view is not None and view.parent is not None:
            pos = view.to_parent(pos, end=end)
            view = view.parent
        return pos

    def to_parent(self, pos: int, *, end: bool) -> int:
        # Start offsets belong to the escape at or before them; end offsets to the one before.
        i = (bisect_left(self.d_pos, pos) if end else bisect_right(self.d_pos, pos)) - 1
        if i < 0:
            return pos
        into = pos - self.d_pos[i]
        if into < self.d_len[i]:
            return self.r_pos[i] + (self.r_len[i] if end else 0)
        return self.r_pos[i] + self.r_len[i] + into - self.d_len[i]


def _decode_json(token: bytes) -> bytes:
    simple = _JSON_SIMPLE.get(token)
    if simple is not None:
        return simple
    return chr(int(token[2:], 16)).encode("utf-8", "surrogatepass")


def _decode_percent(token: bytes) -> bytes:
    return _PERCENT_TABLE[token]


def _decode_invisible(_token: bytes) -> bytes:
    return b""


def _decode_html(token: bytes) -> bytes:
    return html.unescape(token.decode("ascii")).encode("utf-8", "surrogatepass")


def _is_text(data: bytes) -> bool:
    return len(data.translate(None, _NOT_TEXT)) == len(data)


def decode_base64(token: bytes) -> bytes:
    """The text a base64 run encodes, or the run unchanged when it is not base64 of text."""
    body = token.rstrip(b"=")
    if b"-" in body or b"_" in body:
        if b"+" in body or b"/" in body:
            return token
        body = body.translate(_URLSAFE_TO_STD)
    # A probe of the first 96 bytes rejects binary (an image, a hex id) before the rest.
    for part in (body[:_BASE64_PROBE_CHARS], body):
        try:
            decoded = binascii.a2b_base64(part + b"=" * (-len(part) % 4), strict_mode=True)
        except binascii.Error:
            return token
        if not _is_text(decoded):
            return token
        if len(part) == len(body):
            return decoded
    return token


def glued_base64(token: bytes) -> list[tuple[int, bytes, int]]:
    """(shift, text, first) for each alignment at which a run that is not base64 of text as
    a whole decodes to some: `text` has a byte for each decoded one, newlines where no
    stretch of text is, so its byte i comes from the run's characters from
    `shift + 4 * (i // 3)`; `first` is where its first stretch starts.

    A run of base64 characters also takes in what is glued before it: a URL path
    (`/v1/callback/<base64>`: "/" is a base64 character), `key_` or `state-` (base64url
    ones). Decoded from the run's start the groups are misaligned and nothing reads as
    text; from the right one of the four alignments, the payload does, after the glue's
    noise.  Base64 of text with a few non-ASCII characters reads here too, stretch by
    stretch.  "-" and "_" are read as "+" and "/": a payload uses one alphabet or the
    other, never both, so whatever the glue holds this reads the payload.
    """
    body = token.rstrip(b"=").translate(_URLSAFE_TO_STD)
    found: list[tuple[int, bytes, int]] = []
    for shift in range(4):
        part = body[shift:]
        # The last group may be short: two or three characters are one or two bytes.
        part = part[:-1] if len(part) % 4 == 1 else part + b"=" * (-len(part) % 4)
        decoded = binascii.a2b_base64(part)
        stretches = [m.span() for m in _BASE64_TEXT_STRETCH.finditer(decoded)]
        if not stretches:
            continue
        text = bytearray(b"\n" * len(decoded))
        for a, b in stretches:
            text[a:b] = decoded[a:b]
        found.append((shift, bytes(text), stretches[0][0]))
    return found


def _join(parts: list[bytes]) -> bytes:
    # bytes.join allocates a buffer descriptor per item up front; millions of items make
    # that allocation, not the copying, dominate. Joining in slices keeps it linear.
    step = 1 << 16
    if len(parts) <= step:
        return b"".join(parts)
    return b"".join([b"".join(parts[i : i + step]) for i in range(0, len(parts), step)])


def _derive(view: View, pattern: re.Pattern[bytes], decode: Callable[[bytes], bytes]) -> View:
    """Decode every escape of `pattern` in `view`, keeping the offset map.

    Written with `split`, `map` and `accumulate` so the per-escape work runs in C, and with
    int64 arrays for the map: a value can hold millions of escapes.
    """
    return _view_of(view, pattern.split(view.data), decode)


def _view_of(view: View, parts: list[bytes], decode: Callable[[bytes], bytes]) -> View:
    """The view whose escapes are `parts[1::2]` (text, escape, text, ..., text), decoded."""
    raw_lengths = array("q", map(len, parts))
    parts[1::2] = map(decode, parts[1::2])
    decoded_lengths = array("q", map(len, parts))
    raw_offsets = array("q", accumulate(raw_lengths, initial=0))
    decoded_offsets = array("q", accumulate(decoded_lengths, initial=0))
    return View(
        _join(parts),
        parent=view,
        depth=view.depth + 1,
        d_pos=decoded_offsets[1:-1:2],
        d_len=decoded_lengths[1::2],
        r_pos=raw_offsets[1:-1:2],
        r_len=raw_lengths[1::2],
    )


def _is_string_array(data: bytes) -> bool:
    """Whether `data` is a JSON array of two or more strings (streamed deltas)."""
    head = data[:64].lstrip()
    if not head.startswith(b'["') or not data.rstrip().endswith(b'"]'):
        return False
    try:
        parsed = orjson.loads(data)
    except orjson.JSONDecodeError:
        try:
            parsed = json.loads(data)
        except (ValueError, RecursionError):
            return False
    return isinstance(parsed, list) and len(parsed) > 1 and all(isinstance(p, str) for p in parsed)


def _framing(data: bytes) -> list[tuple[int, int]]:
    """The framing of a JSON array of strings (`["`, `", "`, `"]`): what lies between its
    string literals, quotes included. Found from the literals, so an escaped quote inside a
    delta (`\\",` in a JSON document streamed as deltas) is never taken for framing."""
    spans: list[tuple[int, int]] = []
    last = 0
    for match in _JSON_STRING.finditer(data):
        spans.append((last, match.start() + 1))
        last = match.end() - 1
    spans.append((last, len(data)))
    return spans


def chunk_separators(data: bytes) -> list[tuple[int, int]]:
    """The byte spans of a string array's framing (`["`, `", "`, `"]`), or none."""
    if not _is_string_array(data):
        return []
    return _framing(data)


def _joined_deltas(view: View) -> View:
    """A string array's deltas joined: its framing removed, the offset map kept."""
    parts: list[bytes] = []
    last = 0
    for start, stop in _framing(view.data):
        parts += (view.data[last:start], view.data[start:stop])
        last = stop
    parts.append(view.data[last:])
    joined = _view_of(view, parts, _decode_nothing)
    joined.joined = True
    return joined


def _decode_nothing(_token: bytes) -> bytes:
    return b""


def decoded_views(data: bytes) -> list[View]:
    views = [View(data)]
    if _is_string_array(data):
        views.append(_joined_deltas(views[0]))
    if not _VIEW_TRIGGER.search(data):
        return views  # most values: no byte that starts an escape (one C scan, not six)
    index = 0
    while index < len(views) and len(views) < _MAX_VIEWS:
        view = views[index]
        index += 1
        if view.depth >= _MAX_DECODE_DEPTH:
            continue
        if b"\\" in view.data and _JSON_ESCAPE.search(view.data):
            views.append(_derive(view, _JSON_ESCAPE, _decode_json))
        if (b"%" in view.data and _PERCENT_ESCAPE.search(view.data)) or (
            b"+" in view.data and _FORM_SPACE.search(view.data)
        ):
            views.append(_derive(view, _PERCENT_ESCAPE, _decode_percent))
        if b"\x1b" in view.data and _ANSI.search(view.data):
            views.append(_derive(view, _ANSI, _decode_invisible))
        if b"&" in view.data and _HTML_ENTITY.search(view.data):
            views.append(_derive(view, _HTML_ENTITY, _decode_html))
        if (b"\xe2" in view.data or b"\xc2\xad" in view.data or b"\xef\xbb\xbf" in view.data) and (
            _INVISIBLE.search(view.data)
        ):
            views.append(_derive(view, _INVISIBLE, _decode_invisible))
    return views[:_MAX_VIEWS]


@functools.cache
def base64_database() -> Any:
    db = hyperscan.Database(mode=hyperscan.HS_MODE_BLOCK)
    db.compile(
        expressions=[BASE64_TEXT_HS], ids=[0], elements=1, flags=[hyperscan.HS_FLAG_SINGLEMATCH]
    )
    return db
