"""The toolkit's door to the scrub engine: fail closed, never raise.

Every string the toolkit echoes from the model (`got`, an unknown argument name) or passes
on from the handler (`hint`) goes through here.  When the engine cannot be loaded or
raises, `scrub_text` returns None and `looks_secret` returns True, so the caller drops the
value instead of passing it on unscrubbed.
"""

from __future__ import annotations

import re
from functools import cache
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from collector.scrub import Scrubber

__all__ = ["looks_secret", "plain_text", "scrub_text"]

# A tag-shaped run: the model must never be handed HTML from an upstream error page.
_TAG_RE: Final = re.compile(r"<[^<>]{0,256}>")
_CONTROL_RE: Final = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]+")


@cache
def _scrubber() -> Scrubber | None:
    try:
        from collector.scrub import default_scrubber  # noqa: PLC0415 — loaded on first use

        return default_scrubber()
    except Exception:  # noqa: BLE001 — no engine means nothing is echoed, not a crash
        return None


def scrub_text(text: str) -> str | None:
    """`text` with secrets masked and tracebacks removed; None when that cannot be done."""
    scrubber = _scrubber()
    if scrubber is None:
        return None
    try:
        return scrubber.scrub(text).text
    except Exception:  # noqa: BLE001 — fail closed: the caller drops the value
        return None


def looks_secret(text: str) -> bool:
    """True when `text` holds a secret, or when the engine cannot tell (fail closed)."""
    scrubber = _scrubber()
    if scrubber is None:
        return True
    try:
        return scrubber.contains_secret(text)
    except Exception:  # noqa: BLE001 — fail closed
        return True


def plain_text(text: str) -> str:
    """`text` without tags, control characters and lone surrogates: safe to show a model."""
    text = text.encode("utf-8", "replace").decode("utf-8")
    text = _TAG_RE.sub("", text)
    return _CONTROL_RE.sub(" ", text)
