"""The value corpora the engine's differential test reads, each deterministic (seeded).

`corpora()` maps a corpus name to its values: the independent evaluation corpus
(bench/corpus/secrets.py, seed 1), every built-in rule's planted samples and near misses in
every wrapper the engine tests use, the traceback corpus (bench/corpus/tracebacks), and
seeded fuzz strings built from the bytes the engine branches on (escapes, markers, base64,
string-array framing, separators). The same call gives the same values on every machine.
"""

from __future__ import annotations

import html
import json
import random
import subprocess
import sys
from functools import cache
from pathlib import Path
from urllib.parse import quote

from errscope.collector.scrub.samples import SAMPLES

ROOT = Path(__file__).resolve().parents[2]

WRAPPERS = {
    "plain": lambda t: f"tool lookup_job failed: {t}",
    "json": lambda t: json.dumps({"args": t, "call_id": "call_17"}),
    "json-in-json": lambda t: json.dumps({"output": json.dumps({"args": t})}),
    "percent": lambda t: "https://api.example.com/cb?state=" + quote(t, safe=""),
    "crlf": lambda t: "ERROR failed\r\n" + t.replace("\n", "\r\n") + "\r\n",
    "python-repr": lambda t: repr({"kwargs": t}),
    "html-escaped": lambda t: f"<pre>{html.escape(t)}</pre>",
    "deltas": lambda t: json.dumps(
        [t[: len(t) // 3], t[len(t) // 3 : len(t) // 2], t[len(t) // 2 :]]
    ),
}

_FUZZ_PIECES = [
    "[REDACTED:",
    "]",
    "[REDACTED:generic-api-key]",
    ":hmac=0123456789abcdef",
    "\\",
    '\\"',
    "\\u00",
    "\\u0041",
    "%",
    "%2F",
    "%3D",
    "+",
    "&amp;",
    "&#x41;",
    "&#65;",
    "\x1b[31m",
    "\u200b",
    "\xad",
    "\ufeff",
    '["',
    '", "',
    '"]',
    "=",
    ":",
    "::",
    ".",
    "-",
    "_",
    "/",
    " ",
    "\n",
    "\t",
    "'",
    '"',
    "password=",
    "token: ",
    "api_key=",
    "Bearer ",
    "Basic ",
    "ghp_",
    "sk-",
    "AKIA",
    "eyJ",
    "xoxb-",
    "https://",
    "@",
    "D::>",
    '[%"D::>',
    "10.0.0.1",
    "8.8.8.8",
    "2001:db8::1",
    "4111 1111 1111 1111",
    "123-45-6789",
    "GB82WEST12345698765432",
    "é",
    "\udcff",
    "\x00",
]
_ALPHABET = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789+/="


def fuzz_values(seed: int, count: int) -> list[str]:
    """Seeded strings glued from the engine's trigger pieces and random base62/base64 runs."""
    rng = random.Random(seed)
    values = []
    for _ in range(count):
        parts = []
        for _ in range(rng.randrange(1, 14)):
            roll = rng.random()
            if roll < 0.55:
                parts.append(rng.choice(_FUZZ_PIECES))
            elif roll < 0.9:
                parts.append("".join(rng.choice(_ALPHABET) for _ in range(rng.randrange(1, 60))))
            else:
                parts.append(
                    "".join(chr(rng.randrange(1, 0x3000)) for _ in range(rng.randrange(1, 8)))
                )
        values.append("".join(parts))
    return values


def _independent() -> list[str]:
    out = ROOT / "bench" / "out" / "corpus" / "s1.jsonl"
    if not out.exists():
        out.parent.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            [
                sys.executable,
                str(ROOT / "bench" / "corpus" / "secrets.py"),
                "--seed",
                "1",
                "--out",
                str(out),
            ],
            check=True,
            capture_output=True,
            timeout=600,
        )
    return [json.loads(line)["value"] for line in out.read_text("utf-8").splitlines() if line]


def _samples() -> list[str]:
    rng = random.Random(21)
    values = []
    for rule_id in sorted(SAMPLES):
        texts = [SAMPLES[rule_id].make(rng).text for _ in range(2)]
        texts += SAMPLES[rule_id].near_misses(rng)
        for text in texts:
            values += [wrap(text) for wrap in WRAPPERS.values()]
    return values


def _tracebacks() -> list[str]:
    path = ROOT / "bench" / "corpus" / "tracebacks" / "cases.jsonl"
    return [json.loads(line)["value"] for line in path.read_text("utf-8").splitlines() if line]


@cache
def corpora() -> dict[str, list[str]]:
    """Corpus name → values (computed once per process)."""
    return {
        "independent": _independent(),
        "samples": _samples(),
        "tracebacks": _tracebacks(),
        "fuzz": fuzz_values(25, 4000),
    }
