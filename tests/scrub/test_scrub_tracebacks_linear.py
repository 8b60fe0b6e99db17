"""Tracebacks at adversarial sizes: a million frame-like lines and one 10 MiB line.

Each input is processed at full size and at a tenth of it in the same test, in both outputs
(the kept value through `Scrubber.scrub`, the redacted copy through `redact_traceback`), and
the CPU time per byte is compared: ten times the input may cost at most twenty times the
time. A ratio, not a wall-clock bound, so a busy machine slows both sizes alike; a
quadratic path would cost a hundred times.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import pytest

from errscope.collector.scrub import default_scrubber, redact_traceback
from errscope.collector.scrub.tracebacks import RedactedTraceback

MIB = 1 << 20
# Ten times the input may cost this many times the time (linear is 10; quadratic 100).
MAX_GROWTH = 20.0
_FRAME_MIX = (
    '  File "/srv/a.py", line 1, in f\n',
    "    at f (/srv/b.js:1:2)\n",
    "\tat a.B.f(B.java:1)\n",
)


def _frame_lines(n: int) -> str:
    body = "".join(_FRAME_MIX[i % 3] for i in range(n))
    return "Traceback (most recent call last):\n" + body + "KeyError: 'J-1'\n"


def _repeat(unit: str, n_bytes: int) -> str:
    return (unit * (n_bytes // len(unit) + 1))[:n_bytes]


def _json_escaped(n_bytes: int) -> str:
    # One raw line: a JSON string whose escaped `\n`s hold a Java trace.
    return (
        '{"error": "java.lang.IllegalStateException: J-1'
        + _repeat("\\n\\tat a.B.f(B.java:1)", n_bytes)
        + '"}'
    )


def _long_message(n_bytes: int) -> str:
    # Paths under a home directory and credential words all along: the message rules' work.
    head = 'Traceback (most recent call last):\n  File "/srv/a.py", line 1, in f\nKeyError: '
    return head + "token=x1y2z3w4 " + _repeat("job J-1 in /home/bob/app/x.py, sess ", n_bytes)


@dataclass(frozen=True)
class Case:
    make: Callable[[int], str]
    size: int  # lines or bytes at full size; the small input is a tenth
    kept: str  # in the kept value at both sizes
    absent: str  # never in the kept value (a frame's content)
    never: tuple[str, ...] = ()  # in neither output (a secret, a home directory's user)


CASES = [
    pytest.param(
        Case(_frame_lines, 1_000_000, kept="KeyError: 'J-1'", absent="a.py"),
        id="a-million-frame-lines",
    ),
    pytest.param(
        Case(
            lambda n: (
                "java.lang.IllegalStateException: J-1\n" + _repeat("\tat a.B.f(B.java:1) ", n)
            ),
            10 * MIB,
            kept="IllegalStateException: J-1",
            absent="B.java",
        ),
        id="one-10MiB-frame-line",
    ),
    pytest.param(
        Case(_json_escaped, 10 * MIB, kept="IllegalStateException: J-1", absent="B.java"),
        id="one-10MiB-json-escaped-trace",
    ),
    pytest.param(
        Case(
            _long_message,
            10 * MIB,
            kept="KeyError: token=[REDACTED:",
            absent="/home/",
            never=("x1y2z3w4", "bob"),
        ),
        id="one-10MiB-exception-message",
    ),
]


def _text(redacted: RedactedTraceback | None) -> str:
    return redacted.text if redacted else ""


def _timed(fn: Callable[[str], str], value: str) -> tuple[float, str]:
    """CPU seconds per byte of `fn(value)`, and its output."""
    start = time.process_time()
    out = fn(value)
    return (time.process_time() - start) / len(value), out


@pytest.mark.parametrize("case", CASES)
def test_both_outputs_grow_linearly(case: Case) -> None:
    """Ten times the input costs at most twenty times the CPU time in both outputs."""
    scrubber = default_scrubber()
    scrubber.scrub("warm up")
    outputs: dict[str, Callable[[str], str]] = {
        "kept": lambda v: scrubber.scrub(v).text,
        "redacted": lambda v: _text(redact_traceback(v, scrubber)),
    }
    per_byte: dict[str, list[float]] = {name: [] for name in outputs}
    for n in (case.size // 10, case.size):
        value = case.make(n)
        (kept_s, kept), (redacted_s, redacted) = (_timed(fn, value) for fn in outputs.values())
        per_byte["kept"].append(kept_s)
        per_byte["redacted"].append(redacted_s)
        assert case.kept in kept
        assert case.absent not in kept
        assert not [s for s in case.never for out in (kept, redacted) if s in out]
    for output, (small, big) in per_byte.items():
        # big / small is the cost per byte at ten times the size (1.0 when linear), so ten
        # times that is what ten times the input costs, in units of the small input's time.
        growth = big / max(small, 1e-9) * 10
        assert growth <= MAX_GROWTH, f"{output}: 10x the input took {growth:.1f}x the time"
