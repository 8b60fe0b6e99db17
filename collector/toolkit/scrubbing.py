"""The toolkit's door to the scrub engine: fail closed, never raise.

Every string the toolkit echoes from the model (`got`, an unknown argument name) or passes
on from the handler (`hint`, an exception message on the span) goes through here.  When the
engine cannot be loaded or raises, `scrub_text` and `model_text` return None and
`looks_secret` returns True, so the caller drops the value instead of passing it on
unscrubbed.

The engine compiles its rules once per process (about a third of a second).  `warm_up()`,
called when a tool is declared, does that on a daemon thread so the first error observation
does not pay for it on the caller's thread (an event loop, for async tools).  A call that
arrives while the warm-up runs waits for it rather than compiling a second copy; a process
forked mid-warm-up starts over in the child instead of inheriting a held lock.
"""

from __future__ import annotations

import os
import re
import threading
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from errscope.collector.scrub import Scrubber

__all__ = ["looks_secret", "model_text", "plain_text", "scrub_text", "warm_up"]

# A tag-shaped run: the model must never be handed HTML from an upstream error page.
_TAG_RE: Final = re.compile(r"<[^<>]{0,256}>")
_CONTROL_RE: Final = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]+")


class _Engine:
    """The process's scrubber, loaded once under a lock; None when it cannot be loaded."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.loaded = False
        self.warming = False
        self.scrubber: Scrubber | None = None

    def get(self) -> Scrubber | None:
        if self.loaded:
            return self.scrubber
        with self.lock:
            if not self.loaded:
                try:
                    from errscope.collector.scrub import default_scrubber  # noqa: PLC0415 — on first use

                    self.scrubber = default_scrubber()
                except Exception:  # noqa: BLE001 — no engine means nothing is echoed, not a crash
                    self.scrubber = None
                self.loaded = True
        return self.scrubber

    def after_fork_in_child(self) -> None:
        # The warm-up thread does not exist in the child; its lock may be held forever.
        if not self.loaded:
            self.lock = threading.Lock()
            self.warming = False


_engine: Final = _Engine()
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_engine.after_fork_in_child)


def _scrubber() -> Scrubber | None:
    return _engine.get()


def warm_up() -> threading.Thread | None:
    """Load the engine on a daemon thread; the thread, or None when loaded or loading."""
    if _engine.loaded or _engine.warming:
        return None
    _engine.warming = True
    thread = threading.Thread(target=_engine.get, name="errscope-scrubber-warm-up", daemon=True)
    thread.start()
    return thread


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


def model_text(text: str) -> str | None:
    """`text` as plain text with secrets masked, or None when that cannot be done safely.

    Tags go before scrubbing: a key split by a tag (`sk_live_<wbr>...`) is whole again once
    the tag is gone, and must be whole when the scrubber looks.  Control characters become
    spaces, except when removing them instead reveals a secret (`sk_live_51H8\x00uTq...`):
    then the scrubber sees the joined text, so the key is masked rather than shown with a
    space in it.  Scrubbing can, in principle, leave a new tag-shaped run (a removed
    traceback between `<` and `>`); if stripping that rejoins a secret, the text is dropped.
    """
    untagged = _TAG_RE.sub("", text.encode("utf-8", "replace").decode("utf-8"))
    joined = _CONTROL_RE.sub("", untagged)
    spaced = _CONTROL_RE.sub(" ", untagged)
    scrubbed = scrub_text(joined if joined != untagged and looks_secret(joined) else spaced)
    if scrubbed is None:
        return None
    final = plain_text(scrubbed)
    if final != scrubbed and looks_secret(final):
        return None
    return final
