"""errscope's scrubber: secrets masked and tracebacks removed from every string that leaves.

    load_rules()       built-in rules (rules.toml) + user gitleaks-shaped TOML files → RuleSet
    Scrubber           compiled rules: .scrub() (span values), .scrub_secrets(), .contains_secret()
    strip_traceback    a trace reduced to its exception lines (the value that is kept)
    redact_traceback   the redacted copy of a trace for humans, with a grouping fingerprint

All of it runs in time linear in the input (Hyperscan + RE2, no backtracking on span data) and
never raises on a value; only loading rules raises, as `errscope.collector.errors.RulesError`.
"""

from __future__ import annotations

from functools import lru_cache

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
    "default_scrubber",
    "load_rules",
    "redact_traceback",
    "strip_traceback",
]


@lru_cache(maxsize=1)
def default_scrubber() -> Scrubber:
    """The shared scrubber (compiled once, thread-safe): the built-in secret rules and every
    PII group, since what it scrubs is free text that leaves (forwarded spans, stored
    traceback samples, kept messages)."""
    return Scrubber(load_rules(pii_groups=PII_GROUPS))


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
