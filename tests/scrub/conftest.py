"""Fixtures for the scrub tests: compiled scrubbers are shared, since compiling costs ~0.2 s."""

from __future__ import annotations

import pytest

from errscope.collector.scrub import RuleSet, Scrubber, default_scrubber, load_rules


@pytest.fixture(scope="session")
def rules() -> RuleSet:
    """The built-in secret rules (no PII)."""
    return load_rules()


@pytest.fixture(scope="session")
def pii_rules() -> RuleSet:
    """The built-in rules including the PII group."""
    return load_rules(pii=True)


@pytest.fixture(scope="session")
def scrubber() -> Scrubber:
    """The default scrubber, as the span path uses it."""
    return default_scrubber()


@pytest.fixture(scope="session")
def pii_scrubber(pii_rules: RuleSet) -> Scrubber:
    """A scrubber with the PII rules on, as for free text that leaves errscope."""
    return Scrubber(pii_rules)
