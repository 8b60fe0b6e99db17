"""errscope's scrubber: secrets masked and tracebacks removed from every string that leaves.

    load_rules()       built-in rules (rules.toml) + user gitleaks-shaped TOML files → RuleSet
    Scrubber           compiled rules: .scrub() (span values), .scrub_secrets(), .contains_secret()
    strip_traceback    a trace reduced to its exception lines (the value that is kept)
    redact_traceback   the redacted copy of a trace for humans, with a grouping fingerprint

All of it runs in time linear in the input (the Rust engine, engine/: no backtracking on span
data) and
never raises on a value; only loading rules raises, as `errscope.collector.errors.RulesError`.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from functools import lru_cache
from pathlib import Path

from errscope.collector.scrub import tracebacks as _tracebacks
from errscope.collector.scrub.engine import Scrubbed, Scrubber
from errscope.collector.scrub.rules import PII_GROUPS, Rule, RuleSet, load_rules
from errscope.collector.scrub.tracebacks import RedactedTraceback

__all__ = [
    "PII_GROUPS",
    "RedactedTraceback",
    "Rule",
    "RuleSet",
    "Scrubbed",
    "Scrubber",
    "build_scrubber",
    "default_scrubber",
    "load_rules",
    "redact_traceback",
    "strip_traceback",
]


def build_scrubber(
    rule_files: Sequence[str | Path] = (), *, pii_groups: Iterable[str] = PII_GROUPS
) -> Scrubber:
    """The one way every entrance builds its scrubber: the built-in rules, the user's
    gitleaks-shaped rule files after them, and the PII groups asked for (all by default).

    `errscope serve` and `errscope scrub` (`--rules`, `--no-pii`, `--no-pii-group`),
    `instrument()`, the sidecar's pipeline and the toolkit's `got` all come here, so the
    same input scrubs to the same output through each.  Raises RulesError for a bad file.
    """
    return Scrubber(load_rules([Path(f) for f in rule_files], pii_groups=tuple(pii_groups)))


@lru_cache(maxsize=1)
def default_scrubber() -> Scrubber:
    """The shared scrubber (compiled once, thread-safe): `build_scrubber()`'s defaults, the
    built-in secret rules and every PII group, since what it scrubs is free text that
    leaves (forwarded spans, stored traceback samples, kept messages)."""
    return build_scrubber()


def redact_traceback(text: str, scrubber: Scrubber | None = None) -> RedactedTraceback | None:
    """`tracebacks.redact_traceback` with `default_scrubber()` unless one is given."""
    return _tracebacks.redact_traceback(
        text, scrubber if scrubber is not None else default_scrubber()
    )


def strip_traceback(text: str, scrubber: Scrubber | None = None) -> tuple[str, str | None]:
    """`tracebacks.strip_traceback` with `default_scrubber()` unless one is given."""
    return _tracebacks.strip_traceback(
        text, scrubber if scrubber is not None else default_scrubber()
    )
