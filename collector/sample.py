"""sample: decide which redacted tracebacks are kept for humans.

The first `first_k` tracebacks per (service, tool, fingerprint) per hour are kept, then each
later one with probability `p`.  Before that, `admit` bounds the redaction work itself: only
the first `4 * first_k` traces per (service, tool, exception type) per hour, and a share `p`
of the rest, are redacted and fingerprinted at all.  A seeded sampler is deterministic
(tests).  Counters for past hours are dropped as the clock moves, so memory stays bounded by
the number of distinct failures in the current hour.  Thread-safe.
"""

from __future__ import annotations

import random
import threading
from collections import Counter
from typing import Final

__all__ = ["DEFAULT_FIRST_K", "DEFAULT_P", "TracebackSampler"]

DEFAULT_FIRST_K: Final = 5
DEFAULT_P: Final = 0.01
_MAX_KEYS: Final = 100_000  # a flood of distinct fingerprints cannot grow memory past this


class TracebackSampler:
    """First K per (service, tool, fingerprint) per hour, then probability p."""

    def __init__(
        self, *, first_k: int = DEFAULT_FIRST_K, p: float = DEFAULT_P, seed: int | None = None
    ) -> None:
        if first_k < 0 or not 0.0 <= p <= 1.0:
            raise ValueError("first_k must be >= 0 and p within [0, 1]")
        self.first_k = first_k
        self.p = p
        self._random = random.Random(seed)  # noqa: S311 - sampling, not security
        self._lock = threading.Lock()
        self._hour = -1
        self._seen: Counter[tuple[str, str, str]] = Counter()
        self.admit_k = 4 * first_k
        self._admit_hour = -1
        self._admitted: Counter[tuple[str, str, str]] = Counter()
        self.kept = 0
        self.dropped = 0

    def admit(self, service: str, tool: str, exception_type: str, ts_s: float) -> bool:
        """Whether a trace is worth redacting at all: a budget per (service, tool, type) per hour.

        Redaction is the expensive step, and `keep` needs its fingerprint.  The first
        `admit_k` traces per exception type per hour are redacted (several fingerprints can
        share a type), then each later one with probability `p`; only admitted traces reach
        `keep`.
        """
        hour = int(ts_s // 3600)
        key = (service, tool, exception_type)
        with self._lock:
            if hour > self._admit_hour:
                self._admit_hour = hour
                self._admitted.clear()
            seen = self._admitted.get(key, 0)
            if seen < self.admit_k and len(self._admitted) < _MAX_KEYS:
                self._admitted[key] = seen + 1
                return True
            admitted = self._random.random() < self.p
            if not admitted:
                self.dropped += 1
            return admitted

    def keep(self, service: str, tool: str, fingerprint: str, ts_s: float) -> bool:
        """Whether to keep this traceback; counts it either way."""
        hour = int(ts_s // 3600)
        key = (service, tool, fingerprint)
        with self._lock:
            if hour > self._hour:
                self._hour = hour
                self._seen.clear()
            seen = self._seen.get(key, 0)
            if seen < self.first_k and len(self._seen) < _MAX_KEYS:
                self._seen[key] = seen + 1
                keep = True
            else:
                keep = self._random.random() < self.p
            if keep:
                self.kept += 1
            else:
                self.dropped += 1
            return keep
