"""What is done to a scan's findings before they are masked.

`repeated_findings` adds every other place a found secret's text occurs, `outside_markers`
drops findings over an existing mask (so scrubbing twice changes nothing; `MARKER` is the
mask's shape) and `split_at` cuts a string array's framing out of findings, so a secret
streamed across deltas is masked delta by delta. Findings are `(start, stop, rule index)`
byte spans; each function is linear in the value and the findings, with one binary search
per finding.
"""

from __future__ import annotations

import re
from bisect import bisect_left, bisect_right
from typing import Final

# A finding whose secret is already a marker is the output of an earlier scrub: leave it, so
# scrubbing is idempotent. Bounded pattern on a bounded (secret-sized) string.
MARKER = re.compile(rb"\[REDACTED:[\w.-]+(?::hmac=[0-9a-f]{16})?\]")


# nine bytes: a nine-digit SSN found beside its label is masked where it is repeated too
_REPEAT_MIN_BYTES: Final = 9
_MAX_REPEATED: Final = 32


def repeated_findings(data: bytes, found: list[tuple[int, int, int]]) -> list[tuple[int, int, int]]:
    """Every other place the text of a finding occurs: a secret named once (`KEY=...`) is
    masked where it is repeated bare too (`--password ...`, a chat message quoting it).
    At most 32 distinct secrets, each found with one linear `bytes.find` pass."""
    secrets: dict[bytes, int] = {}
    for start, stop, index in found:
        if stop - start >= _REPEAT_MIN_BYTES and len(secrets) < _MAX_REPEATED:
            secrets.setdefault(data[start:stop], index)
    extra: list[tuple[int, int, int]] = []
    for secret, index in secrets.items():
        at = data.find(secret)
        while at >= 0:
            extra.append((at, at + len(secret), index))
            at = data.find(secret, at + len(secret))
    return extra


def split_at(
    spans: list[tuple[int, int, int]], keep: list[tuple[int, int]]
) -> list[tuple[int, int, int]]:
    """`spans` with the `keep` spans (a string array's framing) cut out of them, so a secret
    streamed across deltas is masked delta by delta and the array stays an array."""
    if not keep:
        return spans
    starts = [start for start, _ in keep]
    result: list[tuple[int, int, int]] = []
    for start, stop, index in spans:
        i = bisect_right(starts, start) - 1
        i = max(i, 0)
        cursor = start
        while i < len(keep) and keep[i][0] < stop:
            k_start, k_stop = keep[i]
            if k_stop > cursor:
                if k_start > cursor:
                    result.append((cursor, k_start, index))
                cursor = max(cursor, k_stop)
            i += 1
        if cursor < stop:
            result.append((cursor, stop, index))
    return result


def outside_markers(data: bytes, found: list[tuple[int, int, int]]) -> list[tuple[int, int, int]]:
    """Drop findings that overlap an existing mask, so scrubbing twice changes nothing.

    A marker such as `[REDACTED:sentry-dsn]` can look like URL userinfo or a key-value pair
    to a generic rule; what it covers was masked already.  A finding wholly inside a
    marker's id is kept: `[REDACTED:sk_live_...]` is marker-shaped text around a real key,
    not a mask (a rule id never looks like a secret).
    """
    markers = [match.span() for match in MARKER.finditer(data)]
    if not markers:
        return found
    starts = [start for start, _ in markers]
    kept = []
    for span in found:
        # The marker starting last before the finding's end is the only one it can overlap
        # without overlapping a later one too (markers do not overlap each other).
        i = bisect_left(starts, span[1]) - 1
        if i >= 0 and markers[i][1] > span[0]:
            id_start, id_stop = markers[i][0] + len(b"[REDACTED:"), markers[i][1] - 1
            if not (id_start <= span[0] and span[1] <= id_stop):
                continue
        kept.append(span)
    return kept


def clear_of_escapes(data: bytes, spans: list[tuple[int, int, int]]) -> list[tuple[int, int, int]]:
    """`spans` moved off backslash escapes at their edges, so a mask never eats half of one.

    A rule whose value class takes a backslash can end a finding on the `\\` of a JSON
    `\\"` (the masked value would then leave `…]"` and end its string early) or start one
    right after an escape's backslash (leaving `\\[REDACTED…`). A trailing odd run of
    backslashes loses its last one; a start after an odd run skips the escaped character
    (all of `\\uXXXX`). Linear in the spans; each looks at the backslashes beside it only.
    """
    if b"\\" not in data:
        return spans
    result: list[tuple[int, int, int]] = []
    for found_start, found_stop, index in spans:
        start, stop = found_start, found_stop
        k = start
        while k > 0 and data[k - 1] == _BACKSLASH:
            k -= 1
        if (start - k) % 2:
            start += 5 if data[start : start + 1] == b"u" else 1
        j = stop
        while j > start and data[j - 1] == _BACKSLASH:
            j -= 1
        if (stop - j) % 2:
            stop -= 1
        if stop > start:
            result.append((start, stop, index))
    return result


_BACKSLASH: Final = 0x5C
