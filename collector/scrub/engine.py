"""The scrub engine: every rule over a value in one linear-time pass, then masking.

How a value is scrubbed (`Scrubber.scrub_secrets`):

1. The value is encoded to UTF-8 bytes (lone surrogates pass through) and capped at
   `max_value_bytes`; both engines below work on bytes, so they agree on every offset.
2. One Hyperscan scan runs every rule regex (in prefilter mode, so Hyperscan accepts any RE2
   pattern and may only over-report) and every rule keyword at once. A value with no hit is
   returned untouched: this fast path is what most span values take.
3. A rule is a candidate when its regex may match and one of its keywords (if it has any)
   occurs. Only candidates run in RE2, which confirms the match and yields the secret's capture
   group. Neither engine backtracks, so the cost is linear in the value's length for any
   input, including attacker-controlled tool arguments.
4. Each finding passes the rule's entropy floor, checksum/structure validator and allowlists,
   then its secret span is masked as `[REDACTED:<rule id>]`, or, with an HMAC key, as
   `[REDACTED:<rule id>:hmac=<16 hex>]` so the same leaked key is recognisable across spans.
5. JSON-escaped (`\\"`, `\\n`, `\\uXXXX`) and percent-encoded (`%2F`) views of the value are
   decoded and scanned too; their findings are mapped back to the original offsets, so a key
   inside `"{\\"api_key\\": \\"...\\"}"` or `?token=...%2F...` is still masked in place.
   A base64 run that decodes to text (a Kubernetes Secret's `data:`, an `.env` pasted as
   base64, Basic credentials) is decoded too; a secret inside masks the whole run.

`Scrubber.scrub` first reduces tracebacks to their exception type (tracebacks.py), then masks.

A `Scrubber` is immutable after construction and thread-safe: the compiled databases are
shared and each thread gets its own Hyperscan scratch space. Nothing here raises on bad input
(invalid UTF-8, NUL bytes, 10 MiB values); errors are only raised at construction.
"""

from __future__ import annotations

import base64
import binascii
import functools
import hashlib
import hmac
import html
import ipaddress
import json
import math
import re
import threading
from array import array
from bisect import bisect_left, bisect_right
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import accumulate
from types import MappingProxyType
from typing import Any, Final

import hyperscan
import orjson
import re2

from errscope.collector.errors import RulesError, RulesErrorKind
from errscope.collector.scrub.rules import AllowList, Rule, RuleSet, compile_regex, load_rules
from errscope.collector.scrub.tracebacks import strip_traceback_count

__all__ = ["DEFAULT_MAX_VALUE_BYTES", "Scrubbed", "Scrubber", "shannon_entropy"]

DEFAULT_MAX_VALUE_BYTES: Final = 16 << 20
TRUNCATED_MARKER: Final = "…[TRUNCATED]"
_MAX_VIEWS: Final = 6
_MAX_VERDICTS: Final = 16_384  # remembered check verdicts (hashes and bools only)
# Large values are scanned in windows this big, overlapping by more than any bounded
# built-in secret is long (longer, unbounded matches are re-matched past the window).
_WINDOW_BYTES: Final = 64 << 10
_WINDOW_OVERLAP_BYTES: Final = 8 << 10
_MAX_DECODE_DEPTH: Final = 3
# An allowlist with regexTarget = "line" sees at most this much context either side, so a
# 10 MiB single-line value cannot make each finding cost O(value).
_LINE_WINDOW_BYTES: Final = 4096
# A finding whose secret is already a marker is the output of an earlier scrub: leave it, so
# scrubbing is idempotent. Bounded pattern on a bounded (secret-sized) string.
_MARKER = re.compile(rb"\[REDACTED:[\w.-]+(?::hmac=[0-9a-f]{16})?\]")
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
_BASE64_MIN_CHARS: Final = 32
# Base64 of ASCII text starts every 4-character group with A-Z or a-f (a byte below 0x80
# shifted right by two), which most ids and keys of the same length do not.
_BASE64_TEXT_HS: Final = rb"(?:[A-Za-f][A-Za-z0-9+/_-]{3}){%d}" % (_BASE64_MIN_CHARS // 4)
# Python's re, not RE2: the RE2 binding's split costs a pass over the rest of the buffer
# per match (quadratic in a large value); a character-class run cannot backtrack.
_BASE64_RUN: Final = re.compile(rb"([A-Za-z0-9+/_-]{32,}={0,2})")
_BASE64_PROBE_CHARS: Final = 128
# Text a glued run's decoding must hold to be read (the 32 characters above, decoded).
_BASE64_TEXT_STRETCH: Final = re.compile(rb"[\t\n\r\x20-\x7e]{%d,}" % (_BASE64_MIN_CHARS // 4 * 3))
# Where a glued run's payload may start after the first text it decodes to: the next few
# group starts (noise from the glue runs on into the text for a byte or two, rarely more),
# and how far a secret starting there is looked for.
_GLUE_STARTS: Final = 3
_GLUE_REACH_BYTES: Final = 512
_MAX_BASE64_DEPTH: Final = 2  # base64 inside base64 is read; a third level is not
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
_CHUNK_SEP: Final = re.compile(rb'(^\s*\[\s*"|"\s*,\s*"|"\s*\]\s*$)')
_BASE62: Final = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"


_NO_COUNTS: Final[Mapping[str, int]] = MappingProxyType({})
_SEPARATOR: Final = b"\n\n"  # between the values `count_secrets_each` reads as one text


@dataclass(frozen=True, slots=True)
class Scrubbed:
    """A scrubbed value and how many findings each rule masked (counts only, never values).

    Traceback removal is counted under "traceback" and a truncated value under "truncated".
    """

    text: str
    counts: Mapping[str, int] = field(default_factory=lambda: _NO_COUNTS)

    @property
    def redactions(self) -> int:
        """Total number of masked findings and removed tracebacks."""
        return sum(self.counts.values())

    @property
    def changed(self) -> bool:
        """Whether anything was masked, removed or truncated."""
        return bool(self.counts)


def shannon_entropy(data: bytes) -> float:
    """Shannon entropy of `data` in bits per byte (gitleaks' `entropy` measure)."""
    if not data:
        return 0.0
    total = len(data)
    return -sum(n / total * math.log2(n / total) for n in Counter(data).values())


def _github_checksum(secret: bytes) -> bool:
    # GitHub (and npm) tokens: prefix_ + 30 random base62 + base62(CRC32(random)) in 6 chars.
    _, _, body = secret.partition(b"_")
    if len(body) != 36:
        return False
    value = binascii.crc32(body[:30])
    digits = []
    while value:
        value, rest = divmod(value, 62)
        digits.append(_BASE62[rest])
    return "".join(reversed(digits)).rjust(6, "0").encode() == body[30:]


def _luhn(secret: bytes) -> bool:
    digits = [c - 48 for c in secret if 48 <= c <= 57]
    if not 13 <= len(digits) <= 19:
        return False
    total = 0
    for index, digit in enumerate(reversed(digits)):
        doubled = digit * 2 if index % 2 else digit
        total += doubled - 9 if doubled > 9 else doubled
    return total % 10 == 0


def _iban(secret: bytes) -> bool:
    text = secret.replace(b" ", b"").decode("latin-1").upper()
    if not 15 <= len(text) <= 34:
        return False
    rearranged = text[4:] + text[:4]
    number = "".join(str(int(ch, 36)) for ch in rearranged)
    return int(number) % 97 == 1


def _b64decode(part: bytes) -> bytes | None:
    try:
        return base64.urlsafe_b64decode(part + b"=" * (-len(part) % 4))
    except (binascii.Error, ValueError):
        return None


def _json_object(part: bytes) -> dict[str, Any] | None:
    raw = _b64decode(part[:4096])
    if raw is None:
        return None
    try:
        decoded = json.loads(raw)
    except ValueError:
        return None
    return decoded if isinstance(decoded, dict) else None


def _jwt(secret: bytes) -> bool:
    """A JWS/JWE whose header names its algorithm (RFC 7515: `alg` is required), and that is
    not public by design: a token whose payload grants the `anon` role (Supabase's anon key,
    shipped in every browser bundle) only identifies a project."""
    parts = secret.split(b".", 2)
    header = _json_object(parts[0])
    if header is None or "alg" not in header:
        return False
    payload = _json_object(parts[1]) if len(parts) > 1 else None
    return not (payload is not None and payload.get("role") == "anon")


def _basic_auth(secret: bytes) -> bool:
    try:
        decoded = base64.b64decode(secret[:4096], validate=True).decode("utf-8")
    except (binascii.Error, ValueError):
        return False
    return ":" in decoded and decoded.isprintable()


def _public_jwt(secret: bytes) -> bool:
    """A JWT granting only the `anon` role: public by design, whichever rule found it."""
    parts = secret.split(b".", 2)
    payload = _json_object(parts[1]) if len(parts) == 3 else None
    return payload is not None and payload.get("role") == "anon"


_WORDISH: Final = re.compile(rb"[A-Za-z]{1,12}|[0-9]{1,12}")
_TOKEN_SPLIT: Final = re.compile(rb"[-_.:/]")


def _token(secret: bytes) -> bool:
    """A random-looking token: letters and digits mixed, and not words or numbers joined by
    separators (`user-profile-2024`, `prod.db.creds`), which read as names, not keys."""
    digits = sum(1 for c in secret if 48 <= c <= 57)
    letters = sum(1 for c in secret if 65 <= c <= 90 or 97 <= c <= 122)
    if digits < 2 or letters < 4:
        return False
    return not all(_WORDISH.fullmatch(part) for part in _TOKEN_SPLIT.split(secret) if part)


def _ssn(secret: bytes) -> bool:
    """A US SSN in an issued range: area 001-899 but not 666, group 01-99, serial 0001-9999."""
    digits = bytes(c for c in secret if 48 <= c <= 57)
    if len(digits) != 9:
        return False
    area, group, serial = int(digits[:3]), int(digits[3:5]), int(digits[5:])
    return 0 < area < 900 and area != 666 and group > 0 and serial > 0


def _public_ip(secret: bytes) -> bool:
    """An address that can name a subscriber: not private, loopback, link-local, reserved,
    multicast or documentation space (those identify a machine inside one network)."""
    try:
        address = ipaddress.ip_address(secret.decode("ascii"))
    except (ValueError, UnicodeDecodeError):
        return False
    return address.is_global and not address.is_multicast


_VALIDATORS: Final[Mapping[str, Callable[[bytes], bool]]] = {
    "token": _token,
    "ssn": _ssn,
    "public-ip": _public_ip,
    "github-checksum": _github_checksum,
    "luhn": _luhn,
    "iban": _iban,
    "jwt": _jwt,
    "basic-auth": _basic_auth,
}


@dataclass(slots=True)
class _View:
    """A decoded copy of the value plus the map from its offsets back to its parent's."""

    data: bytes
    parent: _View | None = None
    depth: int = 0
    d_pos: Sequence[int] = ()
    d_len: Sequence[int] = ()
    r_pos: Sequence[int] = ()
    r_len: Sequence[int] = ()

    def to_raw(self, pos: int, *, end: bool) -> int:
        view: _View | None = self
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


def _decode_base64(token: bytes) -> bytes:
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


def _glued_base64(token: bytes) -> list[tuple[int, bytes, int]]:
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


def _derive(view: _View, pattern: re.Pattern[bytes], decode: Callable[[bytes], bytes]) -> _View:
    """Decode every escape of `pattern` in `view`, keeping the offset map.

    Written with `split`, `map` and `accumulate` so the per-escape work runs in C, and with
    int64 arrays for the map: a value can hold millions of escapes.
    """
    parts = pattern.split(view.data)  # text, escape, text, escape, ..., text
    raw_lengths = array("q", map(len, parts))
    parts[1::2] = map(decode, parts[1::2])
    decoded_lengths = array("q", map(len, parts))
    raw_offsets = array("q", accumulate(raw_lengths, initial=0))
    decoded_offsets = array("q", accumulate(decoded_lengths, initial=0))
    return _View(
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


def _chunk_separators(data: bytes) -> list[tuple[int, int]]:
    """The byte spans of a string array's framing (`["`, `", "`, `"]`), or none."""
    if not _is_string_array(data):
        return []
    return [match.span() for match in _CHUNK_SEP.finditer(data)]


def _decode_nothing(_token: bytes) -> bytes:
    return b""


def _views(data: bytes) -> list[_View]:
    views = [_View(data)]
    if _is_string_array(data):
        views.append(_derive(views[0], _CHUNK_SEP, _decode_nothing))
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


@dataclass(frozen=True, slots=True)
class _Compiled:
    rule: Rule
    regex: Any
    keyword_ids: frozenset[int]
    allow: tuple[tuple[AllowList, tuple[Any, ...]], ...]
    validate: Callable[[bytes], bool] | None
    groups: int  # capturing groups (asking the RE2 object costs a call into C each time)


def _compile_rule(rule: Rule, keywords: Mapping[str, int]) -> _Compiled:
    # Rules from load_rules() compile already; a hand-built Rule is checked here the same way.
    try:
        regex = compile_regex(rule.regex)
        allow = tuple(
            (allow, tuple(compile_regex(p) for p in allow.regexes)) for allow in rule.allowlists
        )
    except re2.error as exc:
        raise RulesError(
            RulesErrorKind.BAD_REGEX,
            "RE2 cannot compile this rule",
            entry=rule.id,
            field="regex",
        ) from exc
    validate = _VALIDATORS.get(rule.validate) if rule.validate else None
    if rule.validate and validate is None:
        raise RulesError(
            RulesErrorKind.BAD_VALUE, "unknown validator", entry=rule.id, field="validate"
        )
    return _Compiled(
        rule=rule,
        regex=regex,
        keyword_ids=frozenset(keywords[k] for k in rule.keywords),
        allow=allow,
        validate=validate,
        groups=regex.groups,
    )


class Scrubber:
    """Compiled scrub rules: masks secrets (and strips tracebacks) in span values.

    `rules` defaults to the built-in rule set; `hmac_key` switches masks from
    `[REDACTED:<id>]` to keyed fingerprints. Construction compiles one Hyperscan database for
    all rules; a rule that cannot compile raises `RulesError` naming it. Afterwards the object
    is safe to share between threads: its rules are immutable and its only state is a
    cache of check verdicts.
    """

    def __init__(
        self,
        rules: RuleSet | None = None,
        *,
        hmac_key: bytes | None = None,
        max_value_bytes: int = DEFAULT_MAX_VALUE_BYTES,
    ) -> None:
        self.rules: Final = rules if rules is not None else load_rules()
        self._hmac_key = hmac_key
        self.max_value_bytes: Final = max_value_bytes
        keywords: dict[str, int] = {}
        n_rules = len(self.rules.rules)
        for rule in self.rules.rules:
            for keyword in rule.keywords:
                keywords.setdefault(keyword, n_rules + len(keywords))
        self._compiled: Final = tuple(_compile_rule(rule, keywords) for rule in self.rules.rules)
        # One more pattern rides in the same scan: a base64 run of text to decode.
        self._base64_id: Final = n_rules + len(keywords)
        self._always, self._db = self._build_database(keywords)
        self._always_rules = frozenset(i for i in self._always if i < len(self._compiled))
        self._local = threading.local()
        # Verdicts of the context-free checks (entropy, checksum) by a salted hash of
        # (rule, candidate): an agent pastes the same token into call after call, and
        # the checks cost more than the match.  Only hashes are kept, never the bytes.
        self._verdicts: dict[int, bool] = {}

    # ── construction ────────────────────────────────────────────────────────────────────

    def _build_database(self, keywords: Mapping[str, int]) -> tuple[frozenset[int], Any]:
        """One block-mode database: rule regexes (prefilter) and keywords (caseless literals).

        A regex that Hyperscan refuses even in prefilter mode (rare: huge bounded repeats, a
        pattern that matches the empty string) is not dropped: it becomes an "always"
        candidate that RE2 runs whenever its keywords occur.
        """
        base = hyperscan.HS_FLAG_SINGLEMATCH
        patterns: list[tuple[int, bytes, int]] = [
            (index, c.rule.regex.encode("utf-8"), base | hyperscan.HS_FLAG_PREFILTER)
            for index, c in enumerate(self._compiled)
        ]
        patterns += [
            (kid, re.escape(keyword.encode("utf-8")), base | hyperscan.HS_FLAG_CASELESS)
            for keyword, kid in keywords.items()
        ]
        patterns.append((self._base64_id, _BASE64_TEXT_HS, base))
        always: set[int] = set()
        try:
            return frozenset(), self._compile(patterns)
        except hyperscan.error:
            pass  # some pattern needs a fallback: compile rule by rule below to find it
        usable = []
        for pattern in patterns:
            try:
                self._compile([pattern])
            except hyperscan.error:
                always.add(pattern[0])
            else:
                usable.append(pattern)
        return frozenset(always), self._compile(usable) if usable else None

    @staticmethod
    def _compile(patterns: Sequence[tuple[int, bytes, int]]) -> Any:
        db = hyperscan.Database(mode=hyperscan.HS_MODE_BLOCK)
        db.compile(
            expressions=[p[1] for p in patterns],
            ids=[p[0] for p in patterns],
            elements=len(patterns),
            flags=[p[2] for p in patterns],
        )
        return db

    def _has_base64_run(self, data: bytes) -> bool:
        scratch = getattr(self._local, "base64_scratch", None)
        if scratch is None:
            scratch = hyperscan.Scratch(_base64_database())
            self._local.base64_scratch = scratch
        found = False

        def on_match(_id: int, _from: int, _to: int, _flags: int, _ctx: Any) -> None:
            nonlocal found
            found = True  # single-match: Hyperscan reports the pattern once

        _base64_database().scan(data, match_event_handler=on_match, scratch=scratch)
        return found

    def _scratch(self) -> Any:
        scratch = getattr(self._local, "scratch", None)
        if scratch is None:
            scratch = hyperscan.Scratch(self._db)
            self._local.scratch = scratch
        return scratch

    # ── public API ──────────────────────────────────────────────────────────────────────

    def scrub(self, value: str) -> Scrubbed:
        """Scrub `value` as a span attribute value: tracebacks reduced to their exception
        type, then every secret masked. Never raises on any string."""
        stripped, removed = strip_traceback_count(value, self)
        result = self.scrub_secrets(stripped)
        if not removed:
            return result
        counts = dict(result.counts)
        counts["traceback"] = counts.get("traceback", 0) + removed
        return Scrubbed(result.text, MappingProxyType(counts))

    def scrub_secrets(self, value: str) -> Scrubbed:
        """Mask every secret in `value`; tracebacks are left as they are."""
        data, truncated = self._encode(value)
        spans = self._find(data, first_only=False)
        if not spans and not truncated:
            return Scrubbed(value, _NO_COUNTS)
        pieces: list[bytes] = []
        last = 0
        for start, stop, index in _split_at(spans, _chunk_separators(data) if spans else []):
            pieces.append(data[last:start])
            pieces.append(self._marker(self._compiled[index].rule.id, data[start:stop]))
            last = stop
        pieces.append(data[last:])
        text = _decode(b"".join(pieces))
        if truncated:
            text += TRUNCATED_MARKER
        return Scrubbed(text, self._tally(spans, truncated))

    def count_secrets(self, value: str) -> Mapping[str, int]:
        """What `scrub_secrets(value).counts` would be, without building the masked text."""
        data, truncated = self._encode(value)
        spans = self._find(data, first_only=False)
        if not spans and not truncated:
            return _NO_COUNTS
        return self._tally(spans, truncated)

    def count_secrets_each(self, values: Sequence[str]) -> list[Mapping[str, int]]:
        """`count_secrets` of each value, read in one pass over all of them.

        Several short values (a span's ids, its discarded arguments) cost one scan instead
        of one each, which is most of the price of a short value.  The values are read as
        one text, each after a blank line, so a finding is counted for the value it starts
        in; when the text is cut at `max_value_bytes`, the value it is cut in, and every
        value after it, count `truncated`.
        """
        encoded = [value.encode("utf-8", "surrogatepass") for value in values]
        data, truncated = self._encode_bytes(_SEPARATOR.join(encoded))
        starts: list[int] = []
        offset = 0
        for value_bytes in encoded:
            starts.append(offset)
            offset += len(value_bytes) + len(_SEPARATOR)
        spans: list[list[tuple[int, int, int]]] = [[] for _ in values]
        for span in self._find(data, first_only=False):
            spans[bisect_right(starts, span[0]) - 1].append(span)
        result: list[Mapping[str, int]] = []
        for found, value_start, value_bytes in zip(spans, starts, encoded, strict=True):
            cut = truncated and value_start + len(value_bytes) > len(data)
            result.append(self._tally(found, cut) if found or cut else _NO_COUNTS)
        return result

    def contains_secret(self, value: str) -> bool:
        """Whether `value` holds any secret a rule would mask (used to refuse such ids)."""
        data, _ = self._encode(value)
        return bool(self._find(data, first_only=True))

    # ── internals ───────────────────────────────────────────────────────────────────────

    def _encode(self, value: str) -> tuple[bytes, bool]:
        return self._encode_bytes(value.encode("utf-8", "surrogatepass"))

    def _encode_bytes(self, data: bytes) -> tuple[bytes, bool]:
        if len(data) <= self.max_value_bytes:
            return data, False
        # Cut at a character boundary so the kept prefix decodes cleanly.
        cut = self.max_value_bytes
        while cut > 0 and (data[cut] & 0xC0) == 0x80:
            cut -= 1
        return data[:cut], True

    def _tally(self, spans: Sequence[tuple[int, int, int]], truncated: bool) -> Mapping[str, int]:
        """Findings per rule id, plus `truncated` when the value was cut."""
        counts: dict[str, int] = {}
        for _, _, index in spans:
            rule_id = self._compiled[index].rule.id
            counts[rule_id] = counts.get(rule_id, 0) + 1
        if truncated:
            counts["truncated"] = 1
        return MappingProxyType(counts)

    def _marker(self, rule_id: str, secret: bytes) -> bytes:
        if self._hmac_key is None:
            return f"[REDACTED:{rule_id}]".encode()
        digest = hmac.new(self._hmac_key, secret, hashlib.sha256).hexdigest()[:16]
        return f"[REDACTED:{rule_id}:hmac={digest}]".encode()

    def _candidates(self, data: bytes) -> tuple[list[int], bool]:
        """Rules that may match `data`, and whether it may hold a base64 run of text."""
        hits: set[int] = set()
        if self._db is not None and data:

            def on_match(pattern_id: int, _from: int, _to: int, _flags: int, _ctx: Any) -> None:
                hits.add(pattern_id)

            self._db.scan(data, match_event_handler=on_match, scratch=self._scratch())
        lowered: bytes | None = None
        result = []
        n_rules = len(self._compiled)
        for index in sorted({i for i in hits if i < n_rules} | self._always_rules):
            compiled = self._compiled[index]
            ids = compiled.keyword_ids
            if ids and not (ids & hits):
                if not (ids & self._always):
                    continue
                # A keyword Hyperscan could not take is checked by hand (rare path).
                lowered = data.lower() if lowered is None else lowered
                if not any(k.encode() in lowered for k in compiled.rule.keywords):
                    continue
            result.append(index)
        return result, self._base64_id in hits

    def _find(self, data: bytes, *, first_only: bool, depth: int = 0) -> list[tuple[int, int, int]]:
        """Merged, sorted (start, stop, rule index) spans in `data` to mask."""
        if not data:
            return []
        found, has_base64 = self._scan(data, first_only=first_only)
        if first_only and found:
            return found
        views = _views(data)
        for view in views[1:]:
            for start, stop, index in self._scan(view.data, first_only=first_only)[0]:
                raw_start = view.to_raw(start, end=False)
                found.append((raw_start, view.to_raw(stop, end=True), index))
                if first_only:
                    return found
        if depth < _MAX_BASE64_DEPTH:
            for view in views:
                if len(view.data) < _BASE64_MIN_CHARS:
                    continue
                if has_base64 if view.parent is None else self._has_base64_run(view.data):
                    found += self._in_base64(view, first_only=first_only, depth=depth)
                    if first_only and found:
                        return found
        if depth == 0 and found and not first_only:
            found += _repeats(data, found)
        if b"[REDACTED:" in data:
            found = _outside_markers(data, found)
        found.sort(key=lambda span: (span[0], span[2]))
        merged: list[tuple[int, int, int]] = []
        for start, stop, index in found:
            if merged and start < merged[-1][1]:
                prev_start, prev_stop, prev_index = merged[-1]
                merged[-1] = (prev_start, max(prev_stop, stop), prev_index)
            else:
                merged.append((start, stop, index))
        return merged

    def _in_base64(
        self, view: _View, *, first_only: bool, depth: int
    ) -> list[tuple[int, int, int]]:
        """Whole base64 runs of `view` whose decoded text holds a secret, in raw offsets.

        Each run's text is scrubbed on its own (its own views included), so a value is
        not scanned a second time whole for a run or two in it.
        """
        found: list[tuple[int, int, int]] = []
        for match in _BASE64_RUN.finditer(view.data):
            token = match.group()
            decoded = _decode_base64(token)
            if decoded is not token:
                inner = self._find(decoded, first_only=True, depth=depth + 1)
                spans = [(0, len(token), inner[0][2])] if inner else []
            else:  # not base64 of text as a whole: maybe text glued to something
                spans = self._in_glued_base64(token)
            for first, last, index in spans:
                start, stop = match.start() + first, match.start() + last
                if view.parent is not None:
                    start, stop = view.to_raw(start, end=False), view.to_raw(stop, end=True)
                found.append((start, stop, index))
                if first_only:
                    return found
        return found

    def _in_glued_base64(self, token: bytes) -> list[tuple[int, int, int]]:
        """The span to mask for the secrets in a glued run, if any: from the group the
        earliest one starts in, at any alignment, to the run's end, so the glue is kept
        (see `_glued_base64`).

        Every alignment's text, and its payload read from each of the next few group starts
        after the glue's noise (which can end in a letter, and a rule that wants a word
        boundary before its key, `ghp_...`, would see none), go into one scan, pieces
        joined by newlines: one scan per run, whatever its alignments.  Base64 inside a
        glued run is not decoded again.
        """
        if not self._has_base64_run(token):
            return []  # no 32 characters that read as text at any alignment: nothing to decode
        pieces: list[bytes] = []
        origins: list[tuple[int, int]] = []  # (alignment, offset of the piece in its text)
        for shift, text, first in _glued_base64(token):
            pieces.append(text)
            origins.append((shift, 0))
            group = -(-first // 3) * 3
            for at in range(group, group + 3 * _GLUE_STARTS, 3):
                if at > first and at < len(text):
                    pieces.append(text[at : at + _GLUE_REACH_BYTES])
                    origins.append((shift, at))
        if not pieces:
            return []
        found = self._find(b"\n".join(pieces), first_only=False, depth=_MAX_BASE64_DEPTH)
        if not found:
            return []
        offsets = list(accumulate((len(p) + 1 for p in pieces[:-1]), initial=0))

        def raw_start(begin: int) -> int:  # the run's character a finding's byte comes from
            piece = bisect_right(offsets, begin) - 1
            shift, base = origins[piece]
            return shift + 4 * ((base + begin - offsets[piece]) // 3)

        start, index = min((raw_start(begin), index) for begin, _, index in found)
        return [(start, len(token), index)]

    def _scan(self, data: bytes, *, first_only: bool) -> tuple[list[tuple[int, int, int]], bool]:
        """Findings in one view, in windows so the candidate set follows the local content,
        and whether the view may hold a base64 run of text.

        A large value is scanned in overlapping windows: each window gets its own Hyperscan
        candidates, so a 10 MiB value costs per byte what a 64 KiB one does instead of every
        rule running over all of it. RE2 runs on the full buffer between window bounds, so
        `^`, `\\b` and allowlist lines see the real context. A match cut by a window's end is
        re-matched, anchored at its start, without the bound; per rule, a stretch is re-matched
        once, which keeps the total linear.
        """
        size = len(data)
        if size <= _WINDOW_BYTES + _WINDOW_OVERLAP_BYTES:
            windows = [(0, size)]
        else:
            windows = [
                (lo, min(size, lo + _WINDOW_BYTES + _WINDOW_OVERLAP_BYTES))
                for lo in range(0, size, _WINDOW_BYTES)
            ]
        extended: dict[int, int] = {}
        found: list[tuple[int, int, int]] = []
        has_base64 = False
        for lo, hi in windows:
            window = data if hi - lo == size else data[lo:hi]
            candidates, window_base64 = self._candidates(window)
            has_base64 = has_base64 or window_base64
            for index in candidates:
                compiled = self._compiled[index]
                for match in compiled.regex.finditer(data, lo, hi):
                    whole = match
                    if hi < size and match.end() == hi:
                        if match.start() < extended.get(index, -1):
                            continue  # inside a stretch already re-matched for this rule
                        longer = compiled.regex.match(data, match.start())
                        if longer is not None:
                            whole = longer
                            extended[index] = longer.end()
                    span = self._confirm(compiled, data, whole)
                    if span is not None:
                        found.append((span[0], span[1], index))
                        if first_only:
                            return found, has_base64
        return found, has_base64

    def _confirm(self, compiled: _Compiled, data: bytes, match: Any) -> tuple[int, int] | None:
        """The secret span of one regex match, if it passes the rule's checks."""
        wanted = compiled.rule.secret_group
        groups = compiled.groups
        if wanted:
            start, stop = match.span(wanted)
        elif groups:
            start = stop = -1
            for group in range(1, groups + 1):
                start, stop = match.span(group)
                if stop > start >= 0:
                    break
            else:
                start, stop = match.span()
        else:
            start, stop = match.span()
        if start < 0 or stop <= start:
            return None
        secret = data[start:stop]
        if _MARKER.fullmatch(secret):
            return None
        if not self._passes_checks(compiled, secret):
            return None
        if secret.startswith(b"eyJ") and _public_jwt(secret):
            return None  # public by design under any name (an anon key), see `_jwt`
        if compiled.allow and self._allowed(compiled, data, match.span(), (start, stop)):
            return None
        return start, stop

    def _passes_checks(self, compiled: _Compiled, secret: bytes) -> bool:
        """The rule's entropy floor and checksum, remembered per (rule, candidate)."""
        rule = compiled.rule
        if rule.entropy is None and compiled.validate is None:
            return True
        key = hash((rule.id, secret))
        verdict = self._verdicts.get(key)
        if verdict is None:
            verdict = (rule.entropy is None or shannon_entropy(secret) >= rule.entropy) and (
                compiled.validate is None or compiled.validate(secret)
            )
            if len(self._verdicts) >= _MAX_VERDICTS:
                self._verdicts.clear()  # a crude bound; refilling costs one check per token
            self._verdicts[key] = verdict
        return verdict

    @staticmethod
    def _allowed(
        compiled: _Compiled, data: bytes, whole: tuple[int, int], secret_span: tuple[int, int]
    ) -> bool:
        secret = data[secret_span[0] : secret_span[1]]
        for allow, regexes in compiled.allow:
            if allow.target == "secret":
                target = secret
            elif allow.target == "match":
                target = data[whole[0] : whole[1]]
            else:
                lo = max(0, whole[0] - _LINE_WINDOW_BYTES)
                hi = min(len(data), whole[1] + _LINE_WINDOW_BYTES)
                line_start = data.rfind(b"\n", lo, whole[0]) + 1 or lo
                line_stop = data.find(b"\n", whole[1], hi)
                target = data[line_start : hi if line_stop < 0 else line_stop]
            checks = []
            if regexes:
                checks.append(any(r.search(target) for r in regexes))
            if allow.stopwords:
                lowered = secret.lower()
                checks.append(any(w.encode() in lowered for w in allow.stopwords))
            if checks and (all(checks) if allow.condition == "AND" else any(checks)):
                return True
        return False


@functools.cache
def _base64_database() -> Any:
    db = hyperscan.Database(mode=hyperscan.HS_MODE_BLOCK)
    db.compile(
        expressions=[_BASE64_TEXT_HS], ids=[0], elements=1, flags=[hyperscan.HS_FLAG_SINGLEMATCH]
    )
    return db


_REPEAT_MIN_BYTES: Final = 12
_MAX_REPEATED: Final = 32


def _repeats(data: bytes, found: list[tuple[int, int, int]]) -> list[tuple[int, int, int]]:
    """Every other place the text of a finding occurs: a secret named once (`KEY=...`) is
    masked where it is repeated bare too (`--password ...`, a chat message quoting it).
    At most 32 distinct secrets, each found with one linear `bytes.find` pass."""
    secrets: dict[bytes, int] = {}
    for start, stop, index in found:
        if stop - start >= _REPEAT_MIN_BYTES and len(secrets) < _MAX_REPEATED:
            secrets.setdefault(data[start:stop], index)
    extra: list[tuple[int, int, int]] = []
    for secret, index in secrets.items():
        at = data.find(secret)
        while at >= 0:
            extra.append((at, at + len(secret), index))
            at = data.find(secret, at + len(secret))
    return extra


def _split_at(
    spans: list[tuple[int, int, int]], keep: list[tuple[int, int]]
) -> list[tuple[int, int, int]]:
    """`spans` with the `keep` spans (a string array's framing) cut out of them, so a secret
    streamed across deltas is masked delta by delta and the array stays an array."""
    if not keep:
        return spans
    starts = [start for start, _ in keep]
    result: list[tuple[int, int, int]] = []
    for start, stop, index in spans:
        i = bisect_right(starts, start) - 1
        i = max(i, 0)
        cursor = start
        while i < len(keep) and keep[i][0] < stop:
            k_start, k_stop = keep[i]
            if k_stop > cursor:
                if k_start > cursor:
                    result.append((cursor, k_start, index))
                cursor = max(cursor, k_stop)
            i += 1
        if cursor < stop:
            result.append((cursor, stop, index))
    return result


def _outside_markers(data: bytes, found: list[tuple[int, int, int]]) -> list[tuple[int, int, int]]:
    """Drop findings that overlap an existing mask, so scrubbing twice changes nothing.

    A marker such as `[REDACTED:sentry-dsn]` can look like URL userinfo or a key-value pair
    to a generic rule; what it covers was masked already.  A finding wholly inside a
    marker's id is kept: `[REDACTED:sk_live_...]` is marker-shaped text around a real key,
    not a mask (a rule id never looks like a secret).
    """
    markers = [match.span() for match in _MARKER.finditer(data)]
    if not markers:
        return found
    starts = [start for start, _ in markers]
    kept = []
    for span in found:
        # The marker starting last before the finding's end is the only one it can overlap
        # without overlapping a later one too (markers do not overlap each other).
        i = bisect_left(starts, span[1]) - 1
        if i >= 0 and markers[i][1] > span[0]:
            id_start, id_stop = markers[i][0] + len(b"[REDACTED:"), markers[i][1] - 1
            if not (id_start <= span[0] and span[1] <= id_stop):
                continue
        kept.append(span)
    return kept


def _decode(data: bytes) -> str:
    try:
        return data.decode("utf-8", "surrogatepass")
    except UnicodeDecodeError:
        # A mask can end inside a multi-byte character only when a rule's byte class cut it.
        return data.decode("utf-8", "replace")
