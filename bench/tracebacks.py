"""Benchmark traceback handling on the independent corpus: accuracy per runtime, speed vs re.

    .venv/bin/python bench/tracebacks.py [--runs 3] [--no-linear]

The corpus is `bench/corpus/tracebacks/cases.jsonl` (42 real crashes from nine runtimes, nine
variants each: raw, JSON, JSON in JSON, after a log line, HTML, ANSI colour, CRLF, cut at
4095 characters, several in one value). Each case goes through the same calls as
`errscope scrub --jsonl` (the kept value: `Scrubber.scrub`, traces and secrets) and
`errscope scrub --jsonl --traceback` (the redacted copy: `redact_traceback`), in process, and
is scored by the corpus's own scorer (`score_tracebacks.score`, which imports nothing from
errscope). Printed per runtime, with the targets of issue 22:

* frames kept: cases whose kept value still shows a frame line (target 0);
* secrets shown: cases with a planted secret where it shows in either output (target 0);
* ids lost: cases whose kept value lost an id or code that stood outside the frames
  (target: every id kept in >= 99% of cases, so <= 1%);
* types kept, app fns kept: exception types and the app's function names in the redacted
  copy (target >= 95%);
* home shown: cases where a home path or user name shows in either output (target 0).

Speed is a ratio against an anchor measured in the same run over the same values: one
plain `re.sub` that deletes every indented line (what a hand-written frame stripper does,
and all it does). The accuracy figures are absolute. Then linear growth: time per byte of
adversarial inputs (a million frame-like lines, one 10 MiB line) against a tenth of each.
docs/benchmarks.md records a run.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent / "corpus" / "tracebacks"))

from score_tracebacks import by_variant, score  # the corpus's own scorer (no errscope import)

from errscope.collector.scrub import Scrubber, load_rules, redact_traceback

CORPUS = Path(__file__).resolve().parent / "corpus" / "tracebacks"

# The anchor: every indented line goes (Python, Java, Node, .NET, Go, Ruby frames all are).
ANCHOR = re.compile(r"^[ \t]+\S[^\n]*\n?", re.MULTILINE)
TARGETS = {  # measure: (worst allowed, higher is better)
    "frames_kept": (0.0, False),
    "secrets_shown": (0.0, False),
    "ids_lost": (0.01, False),
    "types_kept": (0.95, True),
    "app_functions_kept": (0.95, True),
    "home_shown": (0.0, False),
}
COLUMNS = [
    ("frames_kept", "frames kept"),
    ("secrets_shown", "secrets shown"),
    ("ids_lost", "ids lost"),
    ("types_kept", "types kept"),
    ("app_functions_kept", "app fns kept"),
    ("home_shown", "home shown"),
]


def outputs(
    scrubber: Scrubber, rows: list[dict[str, Any]]
) -> tuple[dict[str, dict[str, Any]], dict[str, dict[str, Any]]]:
    """The kept value and the redacted copy of each case, shaped as `errscope scrub --jsonl`
    writes them."""
    kept: dict[str, dict[str, Any]] = {}
    human: dict[str, dict[str, Any]] = {}
    for row in rows:
        kept[row["id"]] = {"id": row["id"], "text": scrubber.scrub(row["value"]).text}
        redacted = redact_traceback(row["value"], scrubber)
        human[row["id"]] = {
            "id": row["id"],
            "text": redacted.text if redacted else "",
            "exception_type": redacted.exception_type if redacted else None,
            "fingerprint": redacted.fingerprint if redacted else None,
            "language": redacted.language if redacted else None,
        }
    return kept, human


def _met(summary: dict[str, Any]) -> list[str]:
    """The measures of one runtime that miss their target."""
    missed = []
    for key, (bound, higher) in TARGETS.items():
        value = summary[key]
        if value is not None and (value < bound if higher else value > bound):
            missed.append(key)
    return missed


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f}%"


def print_table(title: str, summary: dict[str, Any], *, verdict: bool) -> None:
    print(f"\n{title}")
    heads = "".join(f"{head:>14}" for _, head in COLUMNS)
    print(f"{'':14}{'cases':>6}{heads}" + ("  target" if verdict else ""))
    for name in sorted(summary, key=lambda n: (n == "ALL", n)):
        s = summary[name]
        cells = "".join(f"{_pct(s[key]):>14}" for key, _ in COLUMNS)
        missed = _met(s)
        tail = ("  MET" if not missed else "  MISSED " + ",".join(missed)) if verdict else ""
        print(f"{name:14}{s['cases']:>6}{cells}{tail}")


def best_seconds(fn: Callable[[str], object], values: list[str], runs: int) -> float:
    """CPU seconds of the fastest of `runs` passes of `fn` over every value."""
    best = float("inf")
    for _ in range(runs):
        start = time.process_time()
        for value in values:
            fn(value)
        best = min(best, time.process_time() - start)
    return best


# Adversarial inputs: the shapes of tests/scrub/test_scrub_tracebacks_linear.py.
MIB = 1 << 20
_FRAME_MIX = (
    '  File "/srv/a.py", line 1, in f\n',
    "    at f (/srv/b.js:1:2)\n",
    "\tat a.B.f(B.java:1)\n",
)


def frame_lines(n: int) -> str:
    body = "".join(_FRAME_MIX[i % 3] for i in range(n))
    return "Traceback (most recent call last):\n" + body + "KeyError: 'J-1'\n"


def _repeat(unit: str, n_bytes: int) -> str:
    return (unit * (n_bytes // len(unit) + 1))[:n_bytes]


ADVERSARIAL: list[tuple[str, Callable[[int], str], int]] = [
    ("frame-like lines", frame_lines, 1_000_000),
    (
        "one frame line",
        lambda n: "java.lang.IllegalStateException: J-1\n" + _repeat("\tat a.B.f(B.java:1) ", n),
        10 * MIB,
    ),
    (
        "one JSON-escaped trace",
        lambda n: (
            '{"error": "java.lang.IllegalStateException: J-1'
            + _repeat("\\n\\tat a.B.f(B.java:1)", n)
            + '"}'
        ),
        10 * MIB,
    ),
    (
        "one message line",
        lambda n: (
            'Traceback (most recent call last):\n  File "/srv/a.py", line 1, in f\nKeyError: '
            + "token=x1y2z3w4 "
            + _repeat("job J-1 in /home/bob/app/x.py, sess ", n)
        ),
        10 * MIB,
    ),
]


def linear_growth(scrubber: Scrubber) -> None:
    """Time per byte of each adversarial input at full size against a tenth of it."""
    print(
        "\nLinear growth (CPU s; growth = time per byte at full size / at a tenth; 1.0 is linear)"
    )
    print(f"{'input':<24}{'size':>16}{'kept s':>16}{'growth':>8}{'redacted s':>16}{'growth':>8}")
    for name, make, big_n in ADVERSARIAL:
        sizes, kept_s, human_s = [], [], []
        for n in (big_n // 10, big_n):
            value = make(n)
            sizes.append(len(value))
            kept_s.append(best_seconds(scrubber.scrub, [value], 1))
            human_s.append(best_seconds(lambda v: redact_traceback(v, scrubber), [value], 1))
        ratio = sizes[1] / sizes[0]
        size = f"{big_n:,} lines" if big_n < MIB else f"{sizes[1] / MIB:.0f} MiB"
        print(
            f"{name:<24}{size:>16}{kept_s[0]:>7.2f} -> {kept_s[1]:>5.2f}"
            f"{kept_s[1] / kept_s[0] / ratio:>8.2f}{human_s[0]:>7.2f} -> {human_s[1]:>5.2f}"
            f"{human_s[1] / human_s[0] / ratio:>8.2f}"
        )


def main() -> int:
    """Score both outputs per runtime and variant, time them against the anchor."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3, help="timing passes (the best counts)")
    parser.add_argument("--no-linear", action="store_true", help="skip the linear-growth inputs")
    args = parser.parse_args()

    rows = [json.loads(line) for line in (CORPUS / "cases.jsonl").read_text().splitlines() if line]
    scrubber = Scrubber(load_rules())
    scrubber.scrub("warm up")  # compile the rule set outside the timing
    kept, human = outputs(scrubber, rows)
    per_case, summary = score(rows, kept, human)

    values = [row["value"] for row in rows]
    size_mb = sum(len(v.encode()) for v in values) / 1e6
    anchor_s = best_seconds(lambda v: ANCHOR.sub("", v), values, args.runs)
    kept_s = best_seconds(scrubber.scrub, values, args.runs)
    human_s = best_seconds(lambda v: redact_traceback(v, scrubber), values, args.runs)

    runtimes = len({row["runtime"] for row in rows})
    print(
        f"tracebacks: {len(rows)} cases from {runtimes} runtimes, {size_mb:.2f} MB; "
        f"anchor: re.sub of indented lines; best of {args.runs} passes, CPU time"
    )
    print_table("Per runtime (targets: issue 22)", summary, verdict=True)
    print_table("Per variant", by_variant(per_case), verdict=False)
    print(f"\n{'output':<46}{'MB/s':>8}{'us/case':>10}{'vs anchor':>11}")
    for name, seconds in (
        ("anchor: re.sub(indented lines)", anchor_s),
        ("errscope kept value (scrub: traces+secrets)", kept_s),
        ("errscope redacted copy (redact_traceback)", human_s),
    ):
        print(
            f"{name:<46}{size_mb / seconds:>8.2f}{seconds / len(rows) * 1e6:>10.0f}"
            f"{seconds / anchor_s:>10.1f}x"
        )
    missed = {name: _met(s) for name, s in summary.items() if name != "ALL" and _met(s)}
    verdict = "MET" if not missed else f"MISSED ({', '.join(sorted(missed))})"
    print(f"targets per runtime: {verdict}")
    if not args.no_linear:
        linear_growth(scrubber)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
