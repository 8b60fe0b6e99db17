"""The scrub engine: every rule over a value in one linear-time pass, then masking.

The scanning is Rust (engine/, the extension module `errscope.collector.scrub._engine`,
built by `make setup`); this module is its Python face. How a value is scrubbed
(`Scrubber.scrub_secrets`):

1. The value is encoded to UTF-8 bytes (lone surrogates pass through) and capped at
   `max_value_bytes`; the engine works on bytes, so every offset is a byte offset.
2. An Aho-Corasick pass over the rules' keywords picks the candidate rules; only those run,
   each a `regex-automata` regex with RE2's byte meaning (the rule file's syntax). Nothing
   backtracks, so the cost is linear in the value's length for any input, including
   attacker-controlled tool arguments. Large values are scanned in 64 KiB windows.
3. Each finding passes the rule's entropy floor, checksum/structure validator and
   allowlists, then its secret span is masked as `[REDACTED:<rule id>]`, or, with an HMAC
   key, as `[REDACTED:<rule id>:hmac=<16 hex>]` so the same leaked key is recognisable
   across spans.
4. JSON-escaped, percent-encoded, HTML-escaped, ANSI-coloured and invisible-character views
   of the value, a streamed response's deltas joined, and base64 runs that decode to text
   are scanned too; their findings are mapped back to the original offsets and masked in
   place (a secret in a base64 run masks the whole run). A secret found once is masked
   where it is repeated; findings over an old mask are dropped, so scrubbing twice changes
   nothing.

`Scrubber.scrub` first reduces tracebacks to their exception type (the tracebacks package),
then masks.

A `Scrubber` is immutable after construction and thread-safe (the engine releases the GIL
for each call). Nothing here raises on bad input (invalid UTF-8, NUL bytes, 10 MiB values);
errors are only raised at construction. A value the engine fails on (a bug: it is not
meant to) fails closed: it is masked whole as `[REDACTED:engine-error]`, never passed on.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Final

from errscope.collector.errors import RulesError, RulesErrorKind
from errscope.collector.scrub import _engine
from errscope.collector.scrub.rules import RuleSet, load_rules
from errscope.collector.scrub.tracebacks import strip_traceback_count

__all__ = ["DEFAULT_MAX_VALUE_BYTES", "ENGINE_ERROR", "Scrubbed", "Scrubber", "compile_engine"]

DEFAULT_MAX_VALUE_BYTES: Final = 16 << 20
TRUNCATED_MARKER: Final = "…[TRUNCATED]"
ENGINE_ERROR: Final = "engine-error"
_ENGINE_ERROR_MASK: Final = f"[REDACTED:{ENGINE_ERROR}]"

_NO_COUNTS: Final[Mapping[str, int]] = MappingProxyType({})
_FAILED: Final[Mapping[str, int]] = MappingProxyType({ENGINE_ERROR: 1})
_SEPARATOR: Final = b"\n\n"  # between the values `count_secrets_each` reads as one text


@dataclass(frozen=True, slots=True)
class Scrubbed:
    """A scrubbed value and how many findings each rule masked (counts only, never values).

    Traceback removal is counted under "traceback", a truncated value under "truncated"
    and a value masked whole because the engine failed on it under "engine-error".
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
        if field_name in ("regex", "allowlist.regexes"):
            kind, message = (
                RulesErrorKind.BAD_REGEX,
                f"the scrub engine cannot compile it ({reason})",
            )
        else:
            kind, message = RulesErrorKind.BAD_VALUE, f"unusable value ({reason})"
        raise RulesError(
            kind, message, entry=rules.rules[int(index)].id, field=field_name
        ) from None


class Scrubber:
    """Compiled scrub rules: masks secrets (and strips tracebacks) in span values.

    `rules` defaults to the built-in rule set; `hmac_key` switches masks from
    `[REDACTED:<id>]` to keyed fingerprints. Construction compiles the rules into the Rust
    engine; a rule that cannot compile raises `RulesError` naming it. Afterwards the object
    is immutable and safe to share between threads.
    """

    def __init__(
        self,
        rules: RuleSet | None = None,
        *,
        hmac_key: bytes | None = None,
        max_value_bytes: int = DEFAULT_MAX_VALUE_BYTES,
    ) -> None:
        self.rules: Final = rules if rules is not None else load_rules()
        self.max_value_bytes: Final = max_value_bytes
        self._ids: Final = self.rules.ids
        self._engine: Final = compile_engine(self.rules, hmac_key)

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
        try:
            masked = self._engine.mask(data)
        except _engine.EngineError:
            return Scrubbed(_ENGINE_ERROR_MASK, _FAILED)
        if masked is None and not truncated:
            return Scrubbed(value, _NO_COUNTS)
        text = _decode(data) if masked is None else _decode(masked[0])
        if truncated:
            text += TRUNCATED_MARKER
        return Scrubbed(text, self._tally(masked[1] if masked else [], truncated))

    def count_secrets(self, value: str) -> Mapping[str, int]:
        """What `scrub_secrets(value).counts` would be, without building the masked text."""
        data, truncated = self._encode(value)
        try:
            spans = self._engine.find(data)
        except _engine.EngineError:
            return _FAILED
        if not spans and not truncated:
            return _NO_COUNTS
        return self._tally([index for _, _, index in spans], truncated)

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
        try:
            found = self._engine.find(data)
        except _engine.EngineError:
            return [_FAILED for _ in values]
        starts: list[int] = []
        offset = 0
        for value_bytes in encoded:
            starts.append(offset)
            offset += len(value_bytes) + len(_SEPARATOR)
        indices: list[list[int]] = [[] for _ in values]
        for start, _, index in found:
            indices[bisect_right(starts, start) - 1].append(index)
        result: list[Mapping[str, int]] = []
        for each, value_start, value_bytes in zip(indices, starts, encoded, strict=True):
            cut = truncated and value_start + len(value_bytes) > len(data)
            result.append(self._tally(each, cut) if each or cut else _NO_COUNTS)
        return result

    def contains_secret(self, value: str) -> bool:
        """Whether `value` holds any secret a rule would mask (used to refuse such ids);
        a value the engine fails on counts as holding one."""
        data, _ = self._encode(value)
        try:
            return bool(self._engine.find(data, True))
        except _engine.EngineError:
            return True

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

    def _tally(self, indices: Sequence[int], truncated: bool) -> Mapping[str, int]:
        """Findings per rule id, plus `truncated` when the value was cut."""
        counts: dict[str, int] = {}
        for index in indices:
            rule_id = self._ids[index]
            counts[rule_id] = counts.get(rule_id, 0) + 1
        if truncated:
            counts["truncated"] = 1
        return MappingProxyType(counts)


def _decode(data: bytes) -> str:
    try:
        return data.decode("utf-8", "surrogatepass")
    except UnicodeDecodeError:
        # A mask can end inside a multi-byte character only when a rule's byte class cut it.
        return data.decode("utf-8", "replace")
