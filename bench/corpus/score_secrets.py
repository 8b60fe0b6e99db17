"""Score a scrubber CLI against the corpus written by bench/corpus/secrets.py.

Runs the scrubber as a user would (``errscope scrub --jsonl``, and ``--pii`` for the PII part),
one process over the whole corpus, and reports credential recall (overall, per format, per
embedding), PII recall per family, benign damage per family and throughput. Imports nothing from
errscope: the scrubber is a black box behind its command line.

    python bench/corpus/score_secrets.py bench/out/corpus/secrets.jsonl \
        [--cli .venv/bin/errscope] [--json out.json]

Leak rule (bench/corpus/README.md): a needle leaks when the output (for chunked values, the
output chunks joined) still holds it whole, or holds a contiguous fragment of it of at least 12
characters (60 % of the needle, rounded up, when the needle is shorter than 20) that is not
inside its public prefix and that the record's own surrounding text does not already contain
as often. A record is recalled when none of its needles leaks. A benign record is damaged when
its output differs from its input by a single byte.
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

_RECALL_BAR = 0.95


def fragment_len(needle: str) -> int:
    return 12 if len(needle) >= 20 else max(1, math.ceil(0.6 * len(needle)))


def leaks(needle: str, prefix: str, out: str, context: str) -> bool:
    """True when ``needle`` (or a long enough fragment of it) survives in ``out``."""
    if not needle or needle == prefix:
        return False
    if needle in out:
        return True
    t = fragment_len(needle)
    seen = set()
    for i in range(0, len(needle) - t + 1):
        if i + t <= len(prefix):
            continue  # wholly inside the public prefix
        frag = needle[i : i + t]
        if frag in seen:
            continue
        seen.add(frag)
        if frag in out and out.count(frag) > context.count(frag):
            return True
    return False


def join_chunks(text: str) -> str | None:
    try:
        parts = json.loads(text)
    except ValueError:
        return None
    if isinstance(parts, list) and all(isinstance(p, str) for p in parts):
        return "".join(parts)
    return None


def record_leaked(rec: dict, out: str) -> bool:
    value = rec["value"]
    views = [(value, out)]
    if rec.get("reassemble") == "json-array-concat":
        joined_in = join_chunks(value) or value
        joined_out = join_chunks(out)
        # a scrubber that broke the array still leaks whatever its raw text holds
        views = [(joined_in, joined_out if joined_out is not None else out), (value, out)]
    for original, scrubbed in views:
        context = original
        for n in rec["needles"]:
            context = context.replace(n, "\x00")
        for n, p in zip(rec["needles"], rec["prefixes"], strict=True):
            if leaks(n, p, scrubbed, context):
                return True
    return False


def run_cli(cli: list[str], lines: bytes) -> tuple[bytes, float]:
    t0 = time.perf_counter()
    proc = subprocess.run(cli, input=lines, capture_output=True, check=False)
    dt = time.perf_counter() - t0
    if proc.returncode != 0:
        sys.exit(f"scrubber exited {proc.returncode}: {proc.stderr.decode(errors='replace')[:400]}")
    return proc.stdout, dt


def scrub_all(
    cli: list[str], records: list[dict], warmups: int
) -> tuple[dict[str, str], dict[str, float]]:
    payload = "".join(
        json.dumps({"id": r["id"], "text": r["value"]}) + "\n" for r in records
    ).encode()
    tiny = (json.dumps({"id": "w", "text": "warm-up"}) + "\n").encode()
    startup = min(run_cli(cli, tiny)[1] for _ in range(warmups))
    out, total = run_cli(cli, payload)
    result: dict[str, str] = {}
    for line in out.decode("utf-8").splitlines():
        if line.strip():
            obj = json.loads(line)
            result[str(obj["id"])] = obj["text"]
    missing = [r["id"] for r in records if r["id"] not in result]
    if missing:
        sys.exit(f"scrubber returned no line for {len(missing)} records (first {missing[0]})")
    value_bytes = sum(len(r["value"].encode()) for r in records)
    work = max(total - startup, 1e-9)
    timing = {
        "records": len(records),
        "value_mb": value_bytes / 1e6,
        "wall_s": total,
        "startup_s": startup,
        "scrub_s": work,
        "mb_per_s": value_bytes / 1e6 / work,
        "records_per_s": len(records) / work,
    }
    return result, timing


def rate(ok: int, n: int) -> float:
    return ok / n if n else float("nan")


def tally(items: list[tuple[str, bool]]) -> dict[str, dict[str, float]]:
    acc: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for key, good in items:
        acc[key][0] += int(good)
        acc[key][1] += 1
    return {k: {"ok": v[0], "n": v[1], "rate": rate(v[0], v[1])} for k, v in sorted(acc.items())}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("corpus", type=Path)
    ap.add_argument(
        "--cli",
        default=".venv/bin/errscope",
        help="the scrubber command (its 'scrub --jsonl' is run)",
    )
    ap.add_argument("--json", type=Path, help="also write the figures here")
    ap.add_argument(
        "--warmups", type=int, default=3, help="start-up runs whose fastest is subtracted"
    )
    ap.add_argument(
        "--show-leaks", type=int, default=0, help="print N leaked record ids per weak format"
    )
    a = ap.parse_args(argv)

    records = [
        json.loads(x) for x in a.corpus.read_text(encoding="utf-8").splitlines() if x.strip()
    ]
    secret_side = [r for r in records if r["kind"] in ("credential", "benign")]
    pii_side = [r for r in records if r["kind"] in ("pii", "benign")]
    base = [*a.cli.split(), "scrub", "--jsonl"]
    out_s, t_s = scrub_all(base, secret_side, a.warmups)
    out_p, t_p = scrub_all([*base, "--pii"], pii_side, a.warmups)

    cred = [(r, not record_leaked(r, out_s[r["id"]])) for r in records if r["kind"] == "credential"]
    pii = [(r, not record_leaked(r, out_p[r["id"]])) for r in records if r["kind"] == "pii"]
    benign = [(r, out_s[r["id"]] == r["value"]) for r in records if r["kind"] == "benign"]
    benign_pii = [(r, out_p[r["id"]] == r["value"]) for r in records if r["kind"] == "benign"]

    fig = {
        "corpus": str(a.corpus),
        "cli": base,
        "credential_recall": rate(sum(g for _, g in cred), len(cred)),
        "credentials": len(cred),
        "per_format": tally([(r["family"], g) for r, g in cred]),
        "per_embedding": tally([(r["embedding"], g) for r, g in cred]),
        "pii_recall": rate(sum(g for _, g in pii), len(pii)),
        "pii": len(pii),
        "pii_per_family": tally([(r["family"], g) for r, g in pii]),
        "pii_per_embedding": tally([(r["embedding"], g) for r, g in pii]),
        "benign_damage": 1 - rate(sum(g for _, g in benign), len(benign)),
        "benign": len(benign),
        "benign_per_family": tally([(r["family"], g) for r, g in benign]),
        "benign_damage_with_pii": 1 - rate(sum(g for _, g in benign_pii), len(benign_pii)),
        "benign_per_family_with_pii": tally([(r["family"], g) for r, g in benign_pii]),
        "timing_secrets": t_s,
        "timing_pii": t_p,
    }
    weak = {k: v for k, v in fig["per_format"].items() if v["rate"] < _RECALL_BAR}
    fig["formats_below_95"] = sorted(weak, key=lambda k: weak[k]["rate"])
    fig["formats_total"] = len(fig["per_format"])

    p = print
    p(
        f"credential recall  {fig['credential_recall']:.2%}  "
        f"({len(cred)} records, {fig['formats_total']} formats)"
    )
    p(f"formats below 95%: {len(weak)}")
    for k in fig["formats_below_95"]:
        v = weak[k]
        extra = ""
        if a.show_leaks:
            ids = [r["id"] + ":" + r["embedding"] for r, g in cred if r["family"] == k and not g][
                : a.show_leaks
            ]
            extra = "  " + " ".join(ids)
        p(f"  {v['rate']:7.1%}  {v['ok']:3d}/{v['n']:<3d} {k}{extra}")
    p("per embedding:")
    for k, v in sorted(fig["per_embedding"].items(), key=lambda kv: kv[1]["rate"]):
        p(f"  {v['rate']:7.1%}  {v['ok']:4d}/{v['n']:<4d} {k}")
    p(f"PII recall (--pii)  {fig['pii_recall']:.2%}  ({len(pii)} records)")
    for k, v in fig["pii_per_family"].items():
        p(f"  {v['rate']:7.1%}  {v['ok']:3d}/{v['n']:<3d} {k}")
    p(
        f"benign damage  {fig['benign_damage']:.2%} without --pii, "
        f"{fig['benign_damage_with_pii']:.2%} with --pii  ({len(benign)} records)"
    )
    for k, v in fig["benign_per_family"].items():
        vp = fig["benign_per_family_with_pii"][k]
        if v["rate"] < 1 or vp["rate"] < 1:
            damaged = f"{1 - v['rate']:6.1%} (with --pii {1 - vp['rate']:6.1%})"
            p(f"  damaged {damaged}  {k}  n={v['n']}")
    for name, t in (("secrets", t_s), ("--pii", t_p)):
        p(
            f"throughput {name}: {t['mb_per_s']:.2f} MB/s  "
            f"({t['value_mb']:.2f} MB of values, {t['records']} records, "
            f"wall {t['wall_s']:.2f}s minus start-up {t['startup_s']:.2f}s)"
        )
    if a.json:
        a.json.parent.mkdir(parents=True, exist_ok=True)
        a.json.write_text(json.dumps(fig, indent=2), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
