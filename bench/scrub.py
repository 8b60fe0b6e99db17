"""Benchmark the scrub engine against detect-secrets on the same agent-span values.

    .venv/bin/python bench/scrub.py [--quick]

One run, one seeded corpus, both scanners:

* throughput (MB/s) of errscope's `Scrubber.scrub_secrets` and of detect-secrets 1.5.0's
  `scan_line` with its default plugins (each value scanned line by line, findings replaced);
* recall: the share of planted secrets (every built-in secret rule's format, in plain,
  JSON, JSON-in-JSON, percent-encoded and repr wrappers) whose random core is gone;
* damage: the share of benign values (tool arguments, error messages, URLs carrying trace
  ids, UUIDs, ULIDs, SHAs, object and job ids) that came out changed, and the share of the
  ids planted in all values that did not survive;
* linear growth: single values of 100 KiB, 1 MiB and 10 MiB (realistic content, and
  adversarial content), with the time per byte relative to 100 KiB.

It prints the ratios errscope / detect-secrets. docs/benchmarks-scrub.md records a run.
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from urllib.parse import quote

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from errscope.collector.scrub import Scrubber, default_scrubber, load_rules
from errscope.collector.scrub.samples import ALNUM, HEX, SAMPLES, benign_ids, rand

SEED = 20261130
WRAPPERS: dict[str, Callable[[str, str], str]] = {
    "log": lambda t, ids: f"2026-11-30T09:00:00Z ERROR tool deploy failed ({ids}): {t}",
    "json-args": lambda t, ids: json.dumps(
        {"tool": "deploy_service", "args": {"config": t, "ref": ids}, "attempt": 2}
    ),
    "json-in-json": lambda t, ids: json.dumps({"output": json.dumps({"raw": t, "ids": ids})}),
    "percent": lambda t, ids: f"GET /v1/callback?state={quote(t, safe='')}&ref={quote(ids)}",
    "repr": lambda t, ids: repr({"kwargs": {"value": t, "ids": ids}}),
}


def _ids(rng: random.Random) -> list[str]:
    return rng.sample(benign_ids(rng), 3)


def _benign(rng: random.Random) -> tuple[str, list[str]]:
    """A realistic benign span value and the ids in it."""
    ids = _ids(rng)
    kind = rng.randrange(8)
    a, b, c = ids
    if kind == 0:
        value = json.dumps(
            {"job_id": a, "customer": b, "limit": rng.randrange(1, 100), "dry_run": False}
        )
    elif kind == 1:
        value = f"not_found: no job {a} for customer {b} (trace {c})"
    elif kind == 2:
        value = f"https://api.example.com/v2/orders/{a}/items?cursor={b}&page_size=50"
    elif kind == 3:
        value = (
            f"1 validation error for LookupArgs\njob_id\n  Input should be a valid integer "
            f"[type=int_parsing, input_value='{a}', input_type=str]"
        )
    elif kind == 4:
        value = json.dumps(
            {
                "status": "error",
                "error": {"code": "rate_limited", "retry_after": 17},
                "request_id": a,
                "model": "gpt-4o-mini",
                "usage": {"prompt_tokens": 812, "completion_tokens": 64, "max_tokens": 4096},
                "next_page_token": rand(rng, ALNUM, 32),
            }
        )
    elif kind == 5:
        value = f"SELECT * FROM jobs WHERE id = '{a}' AND tenant = '{b}' LIMIT 17"  # noqa: S608 - sample span text, never run
    elif kind == 6:
        value = json.dumps(
            {"token_type": "Bearer", "expires_in": 3600, "scope": "read:jobs", "sub": a}
        )
    else:
        value = (
            f"deploy {a} of commit {rand(rng, HEX, 40)} finished; image "
            f"sha256:{rand(rng, HEX, 64)}; see ticket INV-{rng.randrange(1, 999)}"
        )
    return value, ids


def build_corpus(per_rule: int, benign: int) -> tuple[list[tuple[str, str, list[str]]], list]:
    """(planted values: text, core, ids) and (benign values: text, ids)."""
    rng = random.Random(SEED)
    secret_rules = [r.id for r in load_rules().rules]
    planted = []
    wrappers = sorted(WRAPPERS)
    for index, rule_id in enumerate(secret_rules):
        for k in range(per_rule):
            sample = SAMPLES[rule_id].make(rng)
            ids = _ids(rng)
            wrapper = WRAPPERS[wrappers[(index + k) % len(wrappers)]]
            text = wrapper(sample.text, " ".join(ids))
            planted.append((text, sample.core, [i for i in ids if i in text]))
    benign_values = []
    for _ in range(benign):
        text, ids = _benign(rng)
        benign_values.append((text, [i for i in ids if i in text]))
    return planted, benign_values


def _gone(core: str, text: str) -> bool:
    return core not in text and quote(core, safe="") not in text


def detect_secrets_masker() -> Callable[[str], str]:
    """detect-secrets' default plugins as a masker: each finding's value replaced.

    Call it inside `detect_secrets.settings.default_settings()`.
    """
    from detect_secrets.core.scan import scan_line  # noqa: PLC0415 - test dependency

    def mask(value: str) -> str:
        found = set()
        for line in value.splitlines() or [value]:
            for secret in scan_line(line):
                if secret.secret_value:
                    found.add(secret.secret_value)
        for secret in sorted(found, key=len, reverse=True):
            value = value.replace(secret, "[REDACTED]")
        return value

    return mask


def measure(
    name: str, mask: Callable[[str], str], planted: list, benign: list, *, runs: int = 1
) -> dict:
    """Throughput (best of `runs`, after a warm-up), recall and damage of one masker."""
    values = [text for text, _, _ in planted] + [text for text, _ in benign]
    total_bytes = sum(len(v.encode()) for v in values)
    for value in values[:: max(1, len(values) // 50)]:
        mask(value)  # warm-up: lazy regex compilation (RE2 builds its DFAs on first use)
    seconds = float("inf")
    for _ in range(runs):
        start = time.perf_counter()
        outputs = [mask(v) for v in values]
        seconds = min(seconds, time.perf_counter() - start)
    planted_out = outputs[: len(planted)]
    benign_out = outputs[len(planted) :]
    recalled = sum(_gone(core, out) for (_, core, _), out in zip(planted, planted_out, strict=True))
    damaged = sum(out != text for (text, _), out in zip(benign, benign_out, strict=True))
    ids_total = ids_lost = 0
    for (_, _, ids), out in zip(planted, planted_out, strict=True):
        ids_total += len(ids)
        ids_lost += sum(i not in out for i in ids)
    for (_, ids), out in zip(benign, benign_out, strict=True):
        ids_total += len(ids)
        ids_lost += sum(i not in out for i in ids)
    return {
        "name": name,
        "mb_s": total_bytes / seconds / 1e6,
        "bytes": total_bytes,
        "seconds": seconds,
        "recall": recalled / len(planted),
        "damage": damaged / len(benign),
        "id_damage": ids_lost / ids_total,
    }


def _growth_value(size: int, adversarial: str | None) -> str:
    rng = random.Random(size)
    if adversarial == "one-char":
        return "a" * size
    if adversarial == "keyword-storm":
        return ("token=" + rand(rng, ALNUM, 10) + " ") * (size // 17 + 1)
    if adversarial == "escapes":
        return ('\\"api_key\\": \\"' + "\\n" * 20) * (size // 58 + 1)
    if adversarial == "glued-base64":
        # Runs that read as base64 of text at every alignment but not as a whole (a
        # review's worst case for the glued-base64 reader: 21.6 s per 10 MiB before one
        # scan per run).
        return ("V" * 52 + "//// ") * (size // 57 + 1)
    pieces, used = [], 0
    while used < size:
        if rng.random() < 0.1:
            rule_id = rng.choice(list(SAMPLES))
            text = SAMPLES[rule_id].make(rng).text
        else:
            text = _benign(rng)[0]
        pieces.append(text)
        used += len(text) + 1
    return "\n".join(pieces)[:size]


def growth(scrubber: Scrubber, kind: str | None) -> list[tuple[int, float]]:
    """(size, CPU seconds) for 100 KiB, 1 MiB and 10 MiB single values (CPU time, as the
    throughput figures: on a shared machine wall time grows with the neighbours' load)."""
    rows = []
    for size in (100 << 10, 1 << 20, 10 << 20):
        value = _growth_value(size, kind)[:size]
        repeats = 5 if size < (1 << 20) else (3 if size == (1 << 20) else 1)
        times = []
        for _ in range(repeats):
            start = time.process_time()
            scrubber.scrub(value)
            times.append(time.process_time() - start)
        rows.append((size, min(times)))
    return rows


CORPUS_DIR = Path(__file__).resolve().parent / "corpus"
CORPUS_OUT = Path(__file__).resolve().parent / "out" / "corpus"
RECALL_BAR = 0.95


def _corpus_records(seed: int) -> list[dict]:
    """The independent corpus for one seed (bench/corpus/secrets.py, run as its own program)."""
    out = CORPUS_OUT / f"s{seed}.jsonl"
    if not out.exists():
        subprocess.run(
            [
                sys.executable,
                str(CORPUS_DIR / "secrets.py"),
                "--seed",
                str(seed),
                "--out",
                str(out),
            ],
            check=True,
            capture_output=True,
        )
    return [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines() if line]


def _rate(good: int, total: int) -> str:
    return f"{good / total:7.2%} {good:>5}/{total:<5}" if total else "      -"


def corpus_figures(seeds: list[int], ds_every: int) -> None:
    """Recall, damage and throughput per family on the independent corpus (bench/corpus):
    errscope with the sidecar's defaults (`default_scrubber().scrub`, PII on) on every value,
    detect-secrets' default plugins on every `ds_every`-th value of each embedding.  Both are
    timed in CPU seconds of this thread (`time.thread_time`), so other sessions sharing the
    machine's cores do not move the ratio; MB/s is value bytes over those seconds."""
    sys.path.insert(0, str(CORPUS_DIR))
    from score_secrets import record_leaked  # noqa: PLC0415 - the corpus's own scorer

    scrubber = default_scrubber()
    scrubber.scrub("warm up")
    records = [r for seed in seeds for r in _corpus_records(seed)]
    ok: dict[tuple[str, str], list[int]] = defaultdict(lambda: [0, 0])
    embedding_ok: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    ours: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0, 0.0])  # s, bytes, values
    for record in records:
        value = record["value"]
        start = time.thread_time()
        out = scrubber.scrub(value).text
        elapsed = time.thread_time() - start
        row = ours[record["embedding"]]
        row[0] += elapsed
        row[1] += len(value.encode())
        row[2] += 1
        good = out == value if record["kind"] == "benign" else not record_leaked(record, out)
        tally = ok[(record["kind"], record["family"])]
        tally[0] += good
        tally[1] += 1
        if record["kind"] == "credential":
            embedding_ok[record["embedding"]][0] += good
            embedding_ok[record["embedding"]][1] += 1
    theirs: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0])
    from detect_secrets.settings import default_settings  # noqa: PLC0415 - test dependency

    with default_settings():
        mask = detect_secrets_masker()
        mask("warm up")
        seen: dict[str, int] = defaultdict(int)
        for record in records:
            seen[record["embedding"]] += 1
            if seen[record["embedding"]] % ds_every:
                continue
            start = time.thread_time()
            mask(record["value"])
            row = theirs[record["embedding"]]
            row[0] += time.thread_time() - start
            row[1] += len(record["value"].encode())

    _print_corpus(
        seeds, len(records), ds_every, ok=ok, embedding_ok=embedding_ok, ours=ours, theirs=theirs
    )


def _print_corpus(
    seeds: list[int],
    n_records: int,
    ds_every: int,
    *,
    ok: dict[tuple[str, str], list[int]],
    embedding_ok: dict[str, list[int]],
    ours: dict[str, list[float]],
    theirs: dict[str, list[float]],
) -> None:
    def kind_total(kind: str) -> tuple[int, int]:
        rows = [v for (k, _), v in ok.items() if k == kind]
        return sum(r[0] for r in rows), sum(r[1] for r in rows)

    total_bytes = sum(r[1] for r in ours.values())
    print(
        f"independent corpus (bench/corpus/secrets.py, seeds {','.join(map(str, seeds))}): "
        f"{n_records} values, {total_bytes / 1e6:.2f} MB; errscope with the sidecar's "
        f"defaults (secrets and every PII group)"
    )
    cred, pii, benign = kind_total("credential"), kind_total("pii"), kind_total("benign")
    formats = sorted((v[0] / v[1], f) for (k, f), v in ok.items() if k == "credential")
    weak = [(r, f) for r, f in formats if r < RECALL_BAR]
    print(
        f"credential recall {_rate(*cred)} ({len(formats)} formats; "
        f"{len(weak)} below {RECALL_BAR:.0%}; target >= 99.5%, none below 95%)"
    )
    for rate, family in weak:
        print(f"    {rate:7.2%}  {family}")
    print(f"PII recall        {_rate(*pii)} (target >= 99%)")
    print(
        f"benign damage     {1 - benign[0] / benign[1]:7.2%} {benign[1] - benign[0]:>5}/"
        f"{benign[1]:<5} (target <= 0.5%)"
    )
    print("worst credential formats: " + ", ".join(f"{f} {r:.1%}" for r, f in formats[:5]))
    print("PII per family:")
    for (kind, family), (good, total) in sorted(ok.items()):
        if kind == "pii":
            print(f"    {family:<22} {_rate(good, total)}")
    print("benign per family (kept byte-identical):")
    for (kind, family), (good, total) in sorted(ok.items()):
        if kind == "benign":
            print(f"    {family:<22} {_rate(good, total)}")
    print(
        f"per embedding: credential recall; errscope MB/s and us/value; detect-secrets MB/s "
        f"(every {ds_every}th value); ratio"
    )
    print(
        f"    {'embedding':<18} {'recall':>20} {'MB/s':>7} {'us/value':>9} "
        f"{'d-s MB/s':>9} {'ratio':>6}"
    )
    for embedding in sorted(ours):
        seconds, size, count = ours[embedding]
        ds_seconds, ds_size = theirs.get(embedding, [0.0, 0.0])
        ours_mb = size / seconds / 1e6
        ds_mb = ds_size / ds_seconds / 1e6 if ds_seconds else float("nan")
        recall = _rate(*embedding_ok[embedding]) if embedding in embedding_ok else "-"
        print(
            f"    {embedding:<18} {recall:>20} {ours_mb:>7.2f} {seconds / count * 1e6:>9.0f} "
            f"{ds_mb:>9.3f} {ours_mb / ds_mb:>5.0f}x"
        )
    seconds = sum(r[0] for r in ours.values())
    ds_seconds = sum(r[0] for r in theirs.values())
    ds_bytes = sum(r[1] for r in theirs.values())
    ours_mb, ds_mb = total_bytes / seconds / 1e6, ds_bytes / ds_seconds / 1e6
    print(
        f"throughput: errscope {ours_mb:.2f} MB/s ({seconds / n_records * 1e6:.0f} us/value), "
        f"detect-secrets {ds_mb:.3f} MB/s; ratio {ours_mb / ds_mb:.0f}x (target >= 100x)"
    )


def main() -> int:
    """Run the benchmark and print the figures and ratios."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller corpus, for a smoke run")
    parser.add_argument(
        "--seeds", default="1,2,3", help="independent-corpus seeds (comma-separated; '' for none)"
    )
    parser.add_argument(
        "--corpus-only", action="store_true", help="only the independent-corpus figures"
    )
    args = parser.parse_args()
    seeds = [int(s) for s in args.seeds.split(",") if s.strip()]
    if seeds:
        corpus_figures(seeds[:1] if args.quick else seeds, ds_every=16 if args.quick else 4)
        if args.corpus_only:
            return 0
        print()
    per_rule, benign = (2, 300) if args.quick else (6, 2400)
    planted, benign_values = build_corpus(per_rule, benign)
    scrubber = Scrubber(load_rules())
    scrubber.scrub_secrets("warm up")  # compile and allocate scratch outside the timing
    ours = measure(
        "errscope", lambda v: scrubber.scrub_secrets(v).text, planted, benign_values, runs=3
    )
    ours_full = measure(
        "errscope scrub()", lambda v: scrubber.scrub(v).text, planted, benign_values, runs=3
    )
    from detect_secrets.settings import default_settings  # noqa: PLC0415 - test dependency

    with default_settings():
        anchor = measure("detect-secrets", detect_secrets_masker(), planted, benign_values)
    print(
        f"corpus: {len(planted)} values with a planted secret "
        f"({len(load_rules())} rules), {len(benign_values)} benign values, "
        f"{ours['bytes'] / 1e6:.2f} MB"
    )
    print(f"{'scanner':<20} {'MB/s':>8} {'recall':>8} {'damage':>8} {'id damage':>10}")
    for row in (ours, ours_full, anchor):
        print(
            f"{row['name']:<20} {row['mb_s']:>8.2f} {row['recall']:>8.1%} "
            f"{row['damage']:>8.1%} {row['id_damage']:>10.2%}"
        )
    print(
        f"ratio throughput errscope/detect-secrets: {ours['mb_s'] / anchor['mb_s']:.0f}x "
        f"(target >= 50x)"
    )
    print(
        f"ratio recall: {ours['recall'] / anchor['recall']:.2f}x "
        f"(errscope {ours['recall']:.1%}, target >= 98%)"
    )
    print(
        f"damage: errscope {ours['damage']:.2%} vs detect-secrets {anchor['damage']:.1%} "
        f"(target <= 1%)"
    )
    print("linear growth (scrub(), one value):")
    print(f"{'content':<16} {'size':>8} {'seconds':>9} {'MB/s':>8} {'s/byte vs 100KiB':>17}")
    for kind in (None, "one-char", "keyword-storm", "escapes", "glued-base64"):
        rows = growth(scrubber, kind)
        base = rows[0][1] / rows[0][0]
        for size, seconds in rows:
            label = f"{size >> 10} KiB" if size < (1 << 20) else f"{size >> 20} MiB"
            print(
                f"{kind or 'realistic':<16} {label:>8} {seconds:>9.3f} "
                f"{size / seconds / 1e6:>8.1f} {seconds / size / base:>17.2f}"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
