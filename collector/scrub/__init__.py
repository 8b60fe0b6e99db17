"""errscope's scrubber: secrets masked and tracebacks removed from every string that leaves.

    load_rules()       built-in rules (rules.toml) + user gitleaks-shaped TOML files → RuleSet
    Scrubber           compiled rules: .scrub() (span values), .scrub_secrets(), .contains_secret()
    strip_traceback    a trace reduced to its exception type (the value that is kept)
    redact_traceback   the redacted copy of a trace for humans, with a grouping fingerprint

All of it runs in time linear in the input (Hyperscan + RE2, no backtracking on span data) and
never raises on a value; only loading rules raises, as `errscope.collector.errors.RulesError`.
"""

from __future__ import annotations

from functools import lru_cache

from errscope.collector.scrub.engine import Scrubbed, Scrubber
from errscope.collector.scrub.rules import Rule, RuleSet, load_rules
from errscope.collector.scrub.tracebacks import RedactedTraceback, redact_traceback, strip_traceback

__all__ = [
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
    """The shared scrubber with the built-in rules only (compiled once, thread-safe)."""
    return Scrubber(load_rules())
