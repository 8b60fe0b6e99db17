"""Recall within time against false alarms as the deploy gate's error budget changes.

Runs `bench/detection.py`'s simulator at one traffic tier (default 200 calls/min per
tool) on many healthy deploys and many deploys broken 2x and 3x, and reports, for each
setting of `q` (the per-deploy false-discovery level) and `theta0` (the increase still
counted as drift): false alarms per 100 healthy deploys within 60 minutes, 2x detected
within 15 minutes and 3x within 5, each split by overlap and cut-over deploys.  It
answers whether the 95% recall targets are a matter of the budget or of the test.

    .venv/bin/python bench/detection_budget.py [--healthy 2000] [--broken 1000] [--seed 7]
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import detection as sim  # the benchmark's simulator

from errscope.queries import detect

SETTINGS: tuple[tuple[str, dict[str, float]], ...] = (
    ("default", {}),
    ("q 0.02", {"q": 0.02}),
    ("q 0.03, theta0 1.15", {"q": 0.03, "theta0": 1.15}),
    ("q 0.05, theta0 1.25", {"q": 0.05, "theta0": 1.25}),
    ("q 0.05", {"q": 0.05}),
)


def first_alarm(case: sim.Case, config: detect.DetectConfig, horizon: int) -> int | None:
    """The first minute (1..horizon) the gate says regression, or None."""
    return sim.run_errscope(case, config, horizon)[0]


def _pct(hits: list[bool]) -> str:
    return f"{100 * np.mean(hits):.0f}%" if hits else "-"


def _recall(cases: list[sim.Case], config: detect.DetectConfig, within: int) -> str:
    hits = [(case.overlap, first_alarm(case, config, within) is not None) for case in cases]
    every = [hit for _, hit in hits]
    overlap = [hit for is_overlap, hit in hits if is_overlap]
    cutover = [hit for is_overlap, hit in hits if not is_overlap]
    return f"{_pct(every):>5} ({_pct(overlap)} / {_pct(cutover)})"


def main() -> None:
    """Simulate once, then evaluate every setting on the same deploys."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tier", type=int, default=200, help="calls per minute per tool")
    parser.add_argument("--healthy", type=int, default=2000)
    parser.add_argument("--broken", type=int, default=1000, help="broken deploys per size")
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    healthy = [sim.simulate(rng, args.tier, "healthy", 1.0, False) for _ in range(args.healthy)]
    broken = {
        size: [sim.simulate(rng, args.tier, "rate", size, False) for _ in range(args.broken)]
        for size in (2.0, 3.0)
    }
    print(
        f"detection_budget: tier {args.tier} calls/min, {args.healthy} healthy deploys,"
        f" {args.broken} broken per size, seed {args.seed}"
    )
    print(f"{'setting':<22}{'FA/100':>8}  {'2x<=15 (overlap / cut-over)':<30}{'3x<=5':<22}")
    started = time.monotonic()
    for name, overrides in SETTINGS:
        config = dataclasses.replace(detect.DEFAULT_CONFIG, **overrides)
        alarms = [first_alarm(case, config, sim.HORIZON) is not None for case in healthy]
        print(
            f"{name:<22}{100 * np.mean(alarms):>8.2f}  {_recall(broken[2.0], config, 15):<30}"
            f"{_recall(broken[3.0], config, 5):<22}[{time.monotonic() - started:.0f} s]",
            flush=True,
        )


if __name__ == "__main__":
    main()
