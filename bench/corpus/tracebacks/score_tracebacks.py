"""Score errscope's traceback handling on the corpus, through the real CLI only.

    python bench/corpus/tracebacks/score_tracebacks.py [--errscope .venv/bin/errscope] [--json]
                                                       [--no-linear]

The kept value is what `errscope scrub --jsonl` writes for each case's value; the redacted copy
for people is what `errscope scrub --jsonl --traceback` writes. This script imports nothing from
errscope: it pipes cases.jsonl through the command and reads the answers.

Per runtime (definitions in README.md):
  frames kept    share of cases whose kept value still has a frame line (its distinctive content)
  secrets shown  share of cases (with a planted secret) where a secret survives in either output
  ids lost       share of cases (with ids) where the kept value lost an id/code outside the frames
  text lost      share of cases where the kept value lost a 'keep' substring (type, message...)
  types kept     share of exception type names the redacted copy keeps
  app fns kept   share of the app's own function names the redacted copy keeps
  home shown     share of cases where a home path or the user name shows in either output
Then a linear-time check: seconds per MiB at 1 MiB and at 10+ MiB of adversarial input.
"""

from __future__ import annotations

import argparse
import html
import json
import re
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
CASES_FILE = HERE / "cases.jsonl"
DEFAULT_CLI = HERE.parents[2] / ".venv" / "bin" / "errscope"

ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
JSON_ESCAPE = re.compile(r'\\(u[0-9a-fA-F]{4}|["\\/bfnrt])')
_SIMPLE = {"n": "\n", "r": "\r", "t": "\t", "b": "\b", "f": "\f", '"': '"', "\\": "\\", "/": "/"}


def _unescape_json(m: re.Match[str]) -> str:
    g = m.group(1)
    return chr(int(g[1:], 16)) if g.startswith("u") else _SIMPLE[g]


def readable(text: str) -> str:
    """The text as a person would read it: JSON string escapes decoded (up to three levels), HTML
    entities decoded, colour codes and carriage returns removed."""
    for _ in range(3):
        decoded = JSON_ESCAPE.sub(_unescape_json, text)
        if decoded == text:
            break
        text = decoded
    text = html.unescape(text)
    return ANSI.sub("", text).replace("\r", "")


# --- what makes a frame line recognisable -----------------------------------------------------

FILE_LINE = re.compile(
    r'([\w.\-]+\.(?:py|js|mjs|cjs|ts|java|kt|go|rs|rb|php|cs))(?:"?, line |:|\(| on line )(\d+)'
)
QUALIFIED_CALL = re.compile(
    r"\bat\s+(?:async\s+|new\s+)?([\w$<>`\[\],]+(?:\.[\w$<>`\[\],]+){2,})\s?\("
)
GO_FUNC = re.compile(
    r"^\s*(?:created by )?([\w./\-]+\.[\w.*()\[\]]+?)\((?:.*)\)$|^created by (\S+)"
)
RUST_SYMBOL = re.compile(r"^\s*\d+:\s+(?:0x[0-9a-f]+ - )?(\S*::\S+)")


def frame_keys(line: str) -> list[re.Pattern[str]]:
    """Patterns whose presence in an output means this frame line survived: the file name with
    its line number, a qualified `at pkg.Class.method(`, a Go or Rust function path, or for source,
    locals and property lines the line's own text."""
    keys = [
        re.compile(re.escape(b) + r"[^\n\d]{0,12}" + n + r"\b") for b, n in FILE_LINE.findall(line)
    ]
    keys += [re.compile(r"\b" + re.escape(n) + r"\s?\(") for n in QUALIFIED_CALL.findall(line)]
    m = GO_FUNC.match(line)
    if (
        m
        and "." in (m.group(1) or m.group(2) or "")
        and not line.lstrip().startswith(("at ", "File "))
    ):
        name = m.group(1) or m.group(2)
        keys.append(re.compile(re.escape(name) + r"\("))
    m = RUST_SYMBOL.match(line)
    if m:
        keys.append(re.compile(re.escape(m.group(1))))
    if not keys:
        text = line.strip()
        # Source, locals and error-property lines: their text, when it is long enough to be telling.
        if len(text) >= 12 and re.search(r"[A-Za-z]{3}", text):
            keys.append(re.compile(re.escape(text)))
    return keys


def frame_survives(frame_lines: list[str], text: str) -> bool:
    return any(key.search(text) for line in frame_lines for key in frame_keys(line))


def _simple_type(name: str) -> str:
    return re.split(r"[.$]|::", name)[-1]


def secret_shown(secrets: list[str], outputs: list[str]) -> bool:
    """A secret shows when it, or its last 16 characters (a partial mask), is in an output."""
    return any(s in out or s[-16:] in out for s in secrets for out in outputs)


# --- running the CLI ---------------------------------------------------------------------------


def run_cli(cli: str, rows: list[dict[str, Any]], traceback: bool) -> dict[str, dict[str, Any]]:
    payload = "".join(json.dumps({"id": r["id"], "text": r["value"]}) + "\n" for r in rows)
    cmd = [cli, "scrub", "--jsonl", *(["--traceback"] if traceback else [])]
    proc = subprocess.run(
        cmd, input=payload, capture_output=True, text=True, check=False, timeout=1800
    )
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} exited {proc.returncode}: {proc.stderr[-2000:]}")
    out: dict[str, dict[str, Any]] = {}
    for line in proc.stdout.splitlines():
        if line.strip():
            obj = json.loads(line)
            out[str(obj["id"])] = obj
    return out


def score(
    rows: list[dict[str, Any]], kept: dict[str, dict[str, Any]], human: dict[str, dict[str, Any]]
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    per_case: list[dict[str, Any]] = []
    for r in rows:
        k = kept.get(r["id"], {})
        h = human.get(r["id"], {})
        k_raw = str(k.get("text", ""))
        h_raw = json.dumps(h, ensure_ascii=False)  # every field of the human copy counts
        k_txt, h_txt = readable(k_raw), readable(str(h.get("text", "")))
        h_all = readable(h_raw)
        lost_keep = [s for s in r["keep"] if s not in k_txt]
        per_case.append(
            {
                "id": r["id"],
                "runtime": r["runtime"],
                "variant": r["variant"],
                "frames_kept": frame_survives(r["frame_lines"], k_txt),
                "has_frames": any(frame_keys(ln) for ln in r["frame_lines"]),
                "secret_shown": secret_shown(r["secrets"], [k_raw, k_txt, h_raw, h_all]),
                "has_secret": bool(r["secrets"]),
                "ids_lost": [i for i in r["ids"] if i not in k_txt],
                "has_ids": bool(r["ids"]),
                "keep_lost": lost_keep,
                "types_kept": [
                    t
                    for t in r["types"]
                    if _simple_type(t) in h_txt
                    or _simple_type(t) in str(h.get("exception_type", ""))
                ],
                "types": r["types"],
                "app_kept": [f for f in r["app_functions"] if f in h_txt],
                "app_functions": r["app_functions"],
                "home_shown": any(
                    x in out for x in r["home"] for out in [k_raw, k_txt, h_raw, h_all]
                ),
            }
        )
    return per_case, summarise(per_case)


def _share(num: int, den: int) -> float | None:
    return round(num / den, 4) if den else None


def summarise(per_case: list[dict[str, Any]]) -> dict[str, Any]:
    groups: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for c in per_case:
        groups[c["runtime"]].append(c)
        groups["ALL"].append(c)
    out: dict[str, Any] = {}
    for name, cs in groups.items():
        framed = [c for c in cs if c["has_frames"]]
        with_secret = [c for c in cs if c["has_secret"]]
        with_ids = [c for c in cs if c["has_ids"]]
        out[name] = {
            "cases": len(cs),
            "frames_kept": _share(sum(c["frames_kept"] for c in framed), len(framed)),
            "secrets_shown": _share(sum(c["secret_shown"] for c in with_secret), len(with_secret)),
            "ids_lost": _share(sum(bool(c["ids_lost"]) for c in with_ids), len(with_ids)),
            "text_lost": _share(sum(bool(c["keep_lost"]) for c in cs), len(cs)),
            "types_kept": _share(
                sum(len(c["types_kept"]) for c in cs), sum(len(c["types"]) for c in cs)
            ),
            "app_functions_kept": _share(
                sum(len(c["app_kept"]) for c in cs), sum(len(c["app_functions"]) for c in cs)
            ),
            "home_shown": _share(sum(c["home_shown"] for c in cs), len(cs)),
        }
    return out


def by_variant(per_case: list[dict[str, Any]]) -> dict[str, Any]:
    groups: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for c in per_case:
        groups[c["variant"]].append(c)
    return {v: summarise([{**c, "runtime": v} for c in cs])[v] for v, cs in sorted(groups.items())}


# --- linear time -------------------------------------------------------------------------------

MIB = 1024 * 1024
FRAME_MIX = ['  File "a", line 1\n', " at a(b:1)\n", "\tat a.b(C:1)\n", "\t/a.go:1 +0x1\n"]


def frame_lines_text(n_lines: int) -> str:
    head = "Traceback (most recent call last):\n"
    return head + "".join(FRAME_MIX[i % 4] for i in range(n_lines)) + "KeyError: 'x'\n"


def one_line_text(n_bytes: int) -> str:
    unit = 'File "a.py", line 1, in f at a.b(C.java:1) '
    return (unit * (n_bytes // len(unit) + 1))[:n_bytes]


def time_cli(cli: str, text: str, traceback: bool) -> float:
    payload = json.dumps({"id": "x", "text": text}) + "\n"
    cmd = [cli, "scrub", "--jsonl", *(["--traceback"] if traceback else [])]
    start = time.perf_counter()
    subprocess.run(cmd, input=payload, capture_output=True, text=True, check=True, timeout=900)
    return time.perf_counter() - start


def linear_check(cli: str) -> dict[str, Any]:
    avg_line = sum(map(len, FRAME_MIX)) / 4
    inputs = {
        "frame_lines_1MiB": frame_lines_text(int(MIB / avg_line)),
        "frame_lines_1M_lines": frame_lines_text(1_000_000),
        "one_line_1MiB": one_line_text(MIB),
        "one_line_10MiB": one_line_text(10 * MIB),
    }
    out: dict[str, Any] = {}
    for traceback in (False, True):
        mode = "redacted_copy" if traceback else "kept_value"
        startup = min(time_cli(cli, "ok", traceback) for _ in range(2))
        res: dict[str, Any] = {"startup_s": round(startup, 3)}
        for name, text in inputs.items():
            mib = len(text.encode()) / MIB
            took = time_cli(cli, text, traceback)
            res[name] = {
                "mib": round(mib, 2),
                "seconds": round(took, 3),
                "s_per_mib": round(max(took - startup, 0.0) / mib, 4),
            }
        for kind, small, big in (
            ("frame_lines", "frame_lines_1MiB", "frame_lines_1M_lines"),
            ("one_line", "one_line_1MiB", "one_line_10MiB"),
        ):
            a, b = res[small]["s_per_mib"], res[big]["s_per_mib"]
            res[f"{kind}_ratio_big_to_small"] = round(b / a, 2) if a else None
        out[mode] = res
    return out


def _pct(x: float | None) -> str:
    return "   -  " if x is None else f"{100 * x:5.1f}%"


def print_table(title: str, summary: dict[str, Any]) -> None:
    cols = [
        "frames_kept",
        "secrets_shown",
        "ids_lost",
        "text_lost",
        "types_kept",
        "app_functions_kept",
        "home_shown",
    ]
    heads = [
        "frames kept",
        "secrets shown",
        "ids lost",
        "text lost",
        "types kept",
        "app fns kept",
        "home shown",
    ]
    print(f"\n{title}")
    print(f"{'':16}{'cases':>6}  " + "  ".join(f"{h:>13}" for h in heads))
    for name in sorted(summary, key=lambda n: (n == "ALL", n)):
        s = summary[name]
        print(f"{name:16}{s['cases']:>6}  " + "  ".join(f"{_pct(s[c]):>13}" for c in cols))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--errscope", default=str(DEFAULT_CLI), help="the errscope command to score")
    ap.add_argument("--json", action="store_true", help="print one JSON document instead of tables")
    ap.add_argument("--no-linear", action="store_true", help="skip the linear-time check")
    ap.add_argument("--failures", action="store_true", help="list the failing case ids per measure")
    args = ap.parse_args()

    rows = [json.loads(line) for line in CASES_FILE.read_text().splitlines() if line.strip()]
    kept = run_cli(args.errscope, rows, traceback=False)
    human = run_cli(args.errscope, rows, traceback=True)
    per_case, summary = score(rows, kept, human)
    variants = by_variant(per_case)
    linear = None if args.no_linear else linear_check(args.errscope)

    if args.json:
        json.dump(
            {
                "runtimes": summary,
                "variants": variants,
                "linear_time": linear,
                "cases": per_case if args.failures else None,
            },
            sys.stdout,
            indent=2,
        )
        print()
        return 0
    print(f"errscope: {args.errscope}   cases: {len(rows)}")
    print_table("Per runtime", summary)
    print_table("Per variant", variants)
    if linear:
        print("\nLinear time (seconds per MiB, CLI start-up subtracted):")
        for mode, res in linear.items():
            print(f"  {mode}: start-up {res['startup_s']} s")
            for name, r in res.items():
                if isinstance(r, dict):
                    print(
                        f"    {name:22} {r['mib']:6.2f} MiB  {r['seconds']:8.3f} s"
                        f"  {r['s_per_mib']:.4f} s/MiB"
                    )
            print(
                "    ratio 10+ MiB / 1 MiB:"
                f" frame lines {res['frame_lines_ratio_big_to_small']},"
                f" one line {res['one_line_ratio_big_to_small']}"
            )
    if args.failures:
        print("\nFailures:")
        for c in per_case:
            bad = []
            if c["frames_kept"]:
                bad.append("frames-kept")
            if c["secret_shown"]:
                bad.append("secret-shown")
            if c["ids_lost"]:
                bad.append(f"ids-lost={c['ids_lost']}")
            if c["keep_lost"]:
                bad.append(f"text-lost={c['keep_lost']}")
            if len(c["types_kept"]) < len(c["types"]):
                bad.append("types-dropped")
            if len(c["app_kept"]) < len(c["app_functions"]):
                bad.append("app-fns-dropped")
            if c["home_shown"]:
                bad.append("home-shown")
            if bad:
                print(f"  {c['id']}: {', '.join(bad)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
