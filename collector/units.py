"""Parsing of human-written quantities: durations (`30d`, `15m`) and timestamps.

Both raise `ValueError` with a short message on bad input; callers map that to their
own typed error with the field name.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Final

__all__ = ["parse_duration", "parse_time"]

_DURATION_RE: Final = re.compile(r"(\d{1,9})(ms|s|m|h|d|w)")
_DURATIONS_RE: Final = re.compile(r"(?:\d{1,9}(?:ms|s|m|h|d|w))+")
_UNIT_S: Final = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
# Past this a duration is a typo (and `now` minus it would leave datetime's range).
_MAX_DURATION_S: Final = 1000 * 365 * 86400
# Times before the Unix epoch are typing mistakes here, and a year below 1 (a time in year
# 1 with a positive offset) cannot even be read back as a Python datetime.
MIN_YEAR: Final = 1970


def parse_duration(text: str) -> timedelta:
    """`90s`, `15m`, `12h`, `30d`, `2w` (or a sum such as `1h30m`) as a timedelta."""
    cleaned = text.strip().lower()
    if not cleaned:
        raise ValueError("empty duration")
    total = 0.0
    pos = 0
    for match in _DURATION_RE.finditer(cleaned):
        if match.start() != pos:
            break
        total += int(match.group(1)) * _UNIT_S[match.group(2)]
        pos = match.end()
    if pos != len(cleaned):
        raise ValueError("not a duration such as 30d, 12h, 15m or 90s")
    if total > _MAX_DURATION_S:
        raise ValueError("longer than 1,000 years")
    return timedelta(seconds=total)


def parse_time(text: str, *, now: datetime | None = None) -> datetime:
    """ISO 8601 (UTC when no offset is given), `now`, or a duration meaning that long ago."""
    cleaned = text.strip()
    current = now or datetime.now(UTC)
    if cleaned.lower() == "now":
        return current
    if _DURATIONS_RE.fullmatch(cleaned.lower()):
        return current - parse_duration(cleaned)
    try:
        parsed = datetime.fromisoformat(cleaned.replace("Z", "+00:00"))
    except ValueError:
        raise ValueError("not an ISO 8601 time, `now`, or a duration such as 24h") from None
    parsed = parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)
    try:
        in_utc = parsed.astimezone(UTC)
    except OverflowError:  # 0001-01-01T00:00+05:00 is in year 0
        in_utc = None
    if in_utc is None or in_utc.year < MIN_YEAR:
        raise ValueError(f"out of range: give a time from {MIN_YEAR} to 9999 (in UTC)")
    return parsed
