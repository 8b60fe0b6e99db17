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
   base64, Basic credentials) is decoded too; a secret inside masks the whole run. The
   views live in views.py, the checksum and structure validators in validators.py, and
   what is done to findings before masking (repeats, old masks, delta framing) in
   findings.py.

`Scrubber.scrub` first reduces tracebacks to their exception type (the tracebacks package),
then masks.

A `Scrubber` is immutable after construction and thread-safe: the compiled databases are
shared and each thread gets its own Hyperscan scratch space. Nothing here raises on bad input
(invalid UTF-8, NUL bytes, 10 MiB values); errors are only raised at construction.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import threading
from bisect import bisect_right
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import accumulate
from types import MappingProxyType
from typing import Any, Final

import hyperscan
import re2

from errscope.collector.errors import RulesError, RulesErrorKind
from errscope.collector.scrub import _engine
from errscope.collector.scrub.findings import (
    MARKER,
    clear_of_escapes,
    outside_markers,
    repeated_findings,
    split_at,
)
from errscope.collector.scrub.rules import AllowList, Rule, RuleSet, compile_regex, load_rules
from errscope.collector.scrub.tracebacks import strip_traceback_count
from errscope.collector.scrub.validators import VALIDATORS, public_jwt, shannon_entropy
from errscope.collector.scrub.views import (
    BASE64_MIN_CHARS,
    BASE64_RUN,
    BASE64_TEXT_HS,
    GLUE_REACH_BYTES,
    GLUE_STARTS,
    MAX_BASE64_DEPTH,
    View,
    base64_database,
    chunk_separators,
    decode_base64,
    decoded_views,
    glued_base64,
)

__all__ = ["DEFAULT_MAX_VALUE_BYTES", "Scrubbed", "Scrubber", "compile_engine"]

DEFAULT_MAX_VALUE_BYTES: Final = 16 << 20
TRUNCATED_MARKER: Final = "…[TRUNCATED]"
_MAX_VERDICTS: Final = 16_384  # remembered check verdicts (hashes and bools only)
# Large values are scanned in windows this big, overlapping by more than any bounded
# built-in secret is long (longer, unbounded matches are re-matched past the window).
_WINDOW_BYTES: Final = 64 << 10
_WINDOW_OVERLAP_BYTES: Final = 8 << 10
# An allowlist with regexTarget = "line" sees at most this much context either side, so a
# 10 MiB single-line value cannot make each finding cost O(value).
_LINE_WINDOW_BYTES: Final = 4096


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


@dataclass(frozen=True, slots=True)
class _Compiled:
    rule: Rule
    regex: Any
    keyword_ids: frozenset[int]
    allow: tuple[tuple[AllowList, tuple[Any, ...]], ...]
    validate: Callable[[bytes], bool] | None
    groups: int  # capturing groups (asking the RE2 object costs a call into C each time)


def compile_engine(rules: RuleSet, hmac_key: bytes | None = None) -> _engine.Engine:
    """The rules compiled into the Rust engine (engine/, `errscope.collector.scrub._engine`).

    A rule the engine cannot compile raises `RulesError` naming the rule and field.
    """
    specs = [
        (
            rule.id,
            rule.regex,
            list(rule.keywords),
            rule.entropy,
            rule.secret_group,
            rule.validate,
            [
                (list(a.regexes), list(a.stopwords), str(a.target), str(a.condition))
                for a in rule.allowlists
            ],
        )
        for rule in rules.rules
    ]
    try:
        return _engine.Engine(specs, hmac_key)
    except ValueError as exc:
        index, field_name, reason = str(exc).split("\t", 2)
        raise RulesError(
            RulesErrorKind.BAD_REGEX,
            f"the scrub engine cannot compile this rule ({reason})",
            entry=rules.rules[int(index)].id,
            field=field_name,
        ) from None


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
    validate = VALIDATORS.get(rule.validate) if rule.validate else None
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
        patterns.append((self._base64_id, BASE64_TEXT_HS, base))
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
            scratch = hyperscan.Scratch(base64_database())
            self._local.base64_scratch = scratch
        found = False

        def on_match(_id: int, _from: int, _to: int, _flags: int, _ctx: Any) -> None:
            nonlocal found
            found = True  # single-match: Hyperscan reports the pattern once

        base64_database().scan(data, match_event_handler=on_match, scratch=scratch)
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
        spans = clear_of_escapes(data, spans)
        for start, stop, index in split_at(spans, chunk_separators(data) if spans else []):
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
        # A value scrubbed before holds markers; what a rule finds over one (a generic rule
        # reading `KEY=[REDACTED:x]` as a value) is no secret, for contains_secret too, so a
        # marked value is read whole and its findings over markers dropped before answering.
        marked = b"[REDACTED:" in data
        if marked and first_only:
            return outside_markers(data, self._find(data, first_only=False, depth=depth))[:1]
        found, has_base64 = self._scan(data, first_only=first_only)
        if first_only and found:
            return found
        views = decoded_views(data)
        # Streamed deltas are read joined: the raw array (and views decoded from it) cut
        # names, numbers and addresses at every delta's edge (`"16", "9.254.169.254"` is
        # the link-local 169.254.169.254; `"next_pag", "e_token is …"` a page token), and
        # whatever is in one delta is in the joined text too, with all its context.
        streamed = len(views) > 1 and views[1].joined
        if streamed:
            found = []
        for view in views[1:]:
            if streamed and not _from_joined(view):
                continue
            for start, stop, index in self._scan(view.data, first_only=first_only)[0]:
                raw_start = view.to_raw(start, end=False)
                found.append((raw_start, view.to_raw(stop, end=True), index))
                if first_only:
                    return found
        if depth < MAX_BASE64_DEPTH:
            for view in views:
                if len(view.data) < BASE64_MIN_CHARS:
                    continue
                if has_base64 if view.parent is None else self._has_base64_run(view.data):
                    found += self._in_base64(view, first_only=first_only, depth=depth)
                    if first_only and found:
                        return found
        if depth == 0 and found and not first_only:
            found += repeated_findings(data, found)
        if marked:
            found = outside_markers(data, found)
        found.sort(key=lambda span: (span[0], span[2]))
        merged: list[tuple[int, int, int]] = []
        for start, stop, index in found:
            if merged and start < merged[-1][1]:
                prev_start, prev_stop, prev_index = merged[-1]
                merged[-1] = (prev_start, max(prev_stop, stop), prev_index)
            else:
                merged.append((start, stop, index))
        return merged

    def _in_base64(self, view: View, *, first_only: bool, depth: int) -> list[tuple[int, int, int]]:
        """Whole base64 runs of `view` whose decoded text holds a secret, in raw offsets.

        Each run's text is scrubbed on its own (its own views included), so a value is
        not scanned a second time whole for a run or two in it.
        """
        found: list[tuple[int, int, int]] = []
        for match in BASE64_RUN.finditer(view.data):
            token = match.group()
            decoded = decode_base64(token)
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
        (see `glued_base64`).

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
        for shift, text, first in glued_base64(token):
            pieces.append(text)
            origins.append((shift, 0))
            group = -(-first // 3) * 3
            for at in range(group, group + 3 * GLUE_STARTS, 3):
                if at > first and at < len(text):
                    pieces.append(text[at : at + GLUE_REACH_BYTES])
                    origins.append((shift, at))
        if not pieces:
            return []
        found = self._find(b"\n".join(pieces), first_only=False, depth=MAX_BASE64_DEPTH)
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
        if MARKER.fullmatch(secret):
            return None
        if not self._passes_checks(compiled, secret):
            return None
        if secret.startswith(b"eyJ") and public_jwt(secret):
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
            verdict = (
                rule.entropy is None or shannon_entropy(secret) >= _entropy_floor(rule, secret)
            ) and (compiled.validate is None or compiled.validate(secret))
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


_HEX_DIGITS: Final = b"0123456789abcdefABCDEF"
# A random hex string carries at most 4 bits a character against base64's 6, so at token
# lengths it reads about half a bit lower: 20 random hex characters score 3.35 at the median
# and 2.9 at the first percentile (Pusher secrets, 32-hex API keys), below a floor meant for
# base62. Hex values are measured against the rule's floor less this much.
_HEX_ENTROPY_ALLOWANCE: Final = 0.6


def _entropy_floor(rule: Rule, secret: bytes) -> float:
    """The rule's entropy floor for this secret: lower by `_HEX_ENTROPY_ALLOWANCE` for hex."""
    floor = rule.entropy if rule.entropy is not None else 0.0
    if not secret.translate(None, _HEX_DIGITS):
        return floor - _HEX_ENTROPY_ALLOWANCE
    return floor


def _from_joined(view: View) -> bool:
    """Whether `view` is a string array's joined deltas or decoded from them."""
    node: View | None = view
    while node is not None:
        if node.joined:
            return True
        node = node.parent
    return False


def _decode(data: bytes) -> str:
    try:
        return data.decode("utf-8", "surrogatepass")
    except UnicodeDecodeError:
        # A mask can end inside a multi-byte character only when a rule's byte class cut it.
        return data.decode("utf-8", "replace")
