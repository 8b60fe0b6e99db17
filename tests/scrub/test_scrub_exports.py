"""The public surface of errscope.collector.scrub is pinned."""

from __future__ import annotations

import errscope.collector.scrub


def test_exported_members() -> None:
    """`__all__` lists exactly the API other modules build on."""
    assert sorted(errscope.collector.scrub.__all__) == [
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
    for name in errscope.collector.scrub.__all__:
        assert getattr(errscope.collector.scrub, name).__doc__


def test_default_scrubber_is_cached() -> None:
    """default_scrubber() compiles once and returns the same object."""
    assert (
        errscope.collector.scrub.default_scrubber() is errscope.collector.scrub.default_scrubber()
    )
