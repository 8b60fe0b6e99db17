"""Print how errscope does on the conformance corpus, per case and path.

    .venv/bin/python tests/conformance/report.py [--json] [--only CASE ...] [--write-floor]

Columns: calls (truth), right codes (count and %), the same excluding the calls whose code
the payload cannot give (gaps.toml, cause = payload), ids found/expected, rows that are not
tool calls (extra), missing rows, canaries found in the store's tables and in the
forwarded spans (out of those planted).  Then every documented gap, by case, and every
failure that gaps.toml does not list (or a listed gap that no longer fails).  `--write-floor` adds floor.toml entries for cases
that have none (the worst figure over the case's paths); it never changes an existing one.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.conformance.harness import (
    HERE,
    HIGHER_IS_BETTER,
    Figures,
    Gap,
    discover,
    floors,
    gaps,
    measure_all,
    undocumented,
)


def _payload_code_gaps(f: Figures, known: list[Gap]) -> int:
    """Calls of this run whose right code the payload cannot give."""
    return sum(
        g.applies(f.case, f.path) and g.cause == "payload" and g.what in ("code", "row")
        for g in known
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--only", nargs="*")
    parser.add_argument("--write-floor", action="store_true")
    args = parser.parse_args()
    cases = [c for c in discover() if not args.only or c.name in args.only]
    figures = measure_all(cases)
    truth = {c.name: c.truth for c in cases}
    known = gaps()
    if args.json:
        rows = [
            {
                "case": f.case,
                "framework": truth[f.case].get("framework"),
                "version": truth[f.case].get("version"),
                "path": f.path,
                "calls": f.calls,
                "rows": f.rows,
                **f.summary(),
                "ids_expected": f.ids_expected,
                "canaries": f.canaries,
                "wrong": f.wrong,
                "failures": [vars(x) for x in f.failures],
                "payload_code_gaps": _payload_code_gaps(f, known),
                "canaries_in_tables_list": f.canaries_in_tables,
                "canaries_forwarded_list": f.canaries_forwarded,
            }
            for f in figures
        ]
        print(json.dumps(rows, indent=1))
    else:
        head = (
            f"{'case':34} {'path':13} {'calls':>5} {'right codes':>12} {'excl. gaps':>10} "
            f"{'ids':>7} {'extra':>5} {'miss':>4} {'canary tbl':>10} {'canary fwd':>10}"
        )
        print(head)
        print("-" * len(head))
        total_calls = total_right = total_gaps = 0
        for f in figures:
            pct = 100 * f.right_codes / f.calls if f.calls else 0.0
            payload_gaps = _payload_code_gaps(f, known)
            derivable = f.calls - payload_gaps
            excl = 100 * f.right_codes / derivable if derivable else 100.0
            total_calls += f.calls
            total_right += f.right_codes
            total_gaps += payload_gaps
            print(
                f"{f.case:34} {f.path:13} {f.calls:5} {f.right_codes:4} {pct:6.1f}% "
                f"{excl:9.1f}% {f.ids_found:3}/{f.ids_expected:<3} {f.extra_rows:5} "
                f"{f.calls - f.matched:4} {len(f.canaries_in_tables):4}/{f.canaries:<5} "
                f"{len(f.canaries_forwarded):4}/{f.canaries:<5}"
            )
        if total_calls:
            print(
                f"\nright codes overall: {total_right}/{total_calls} "
                f"({100 * total_right / total_calls:.1f}%); excluding the {total_gaps} whose "
                f"payload lacks the signal: {total_right}/{total_calls - total_gaps} "
                f"({100 * total_right / max(1, total_calls - total_gaps):.1f}%)"
            )
        print("\nknown gaps (gaps.toml):")
        for g in known:
            if g.case in truth:
                where = ", ".join(g.paths) if g.paths else "every path"
                want = f" want {g.want}" if g.want else ""
                print(
                    f"  {g.case} ({g.framework} {g.version}) [{g.key}] {g.what}{want}, "
                    f"{g.cause}, {where}: {g.missing}"
                )
        for f in figures:
            unlisted, passing = undocumented(f, known)
            for line in unlisted:
                print(f"  NOT LISTED: {f.case} via {f.path}: {line}")
            for line in passing:
                print(f"  NO LONGER FAILS: {f.case} via {f.path}: {line}")
    if args.write_floor:
        existing = floors()
        lines = []
        for case in cases:
            if case.name in existing:
                continue
            mine = [f.summary() for f in figures if f.case == case.name]
            if not mine:
                continue
            worst = {
                k: (min if k in HIGHER_IS_BETTER else max)(m[k] for m in mine) for k in mine[0]
            }
            lines.append(f'\n["{case.name}"]\n' + "".join(f"{k} = {v}\n" for k, v in worst.items()))
        if lines:
            with (HERE / "floor.toml").open("a") as out:
                out.write("".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
