"""Dashboard benchmark: the first render of every page through a real sidecar's query API.

The store is bench/queries.py's: 10,000,000 tool calls over 30 days, 50 services x 20
tools, a deploy per service every 8 hours (filled in DuckDB SQL when --db does not exist).
A real `errscope serve` holds the file; the dashboard reads it through `--api` exactly as
`errscope dashboard --api` does.  Each page is rendered by Streamlit's AppTest (the same
script run a browser session triggers, without the browser's drawing) with an empty data
cache, so every query of the page is paid: that is the first render an on-call engineer
waits for.  Filters are the defaults (all services, all environments, the last 6 hours).
One warm-up render first pays the process-wide imports, which a running dashboard has
already paid.

Run: `python bench/dashboard.py [--rows N] [--db PATH] [--repeat K]`.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Final

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import streamlit as st
from streamlit.testing.v1 import AppTest

from bench.queries import END, fill
from errscope.dashboards import source

ROOT: Final = Path(__file__).resolve().parent.parent
APP: Final = ROOT / "dashboards" / "app.py"
PAGES: Final = (
    "app_pages/overview.py",
    "app_pages/deploys.py",
    "app_pages/spikes.py",
    "app_pages/loop_health.py",
    "app_pages/tracebacks.py",
    "app_pages/secrets.py",
    "app_pages/connect.py",
)
TARGET_S: Final = 2.0
_TIMEOUT_S: Final = 300


def start_sidecar(store: Path) -> tuple[subprocess.Popen[str], str]:
    """`errscope serve` on ports chosen by the OS; the process and its API address."""
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "errscope.collector.cli",
            "serve",
            "--otlp-grpc",
            "127.0.0.1:0",
            "--otlp-http",
            "127.0.0.1:0",
            "--api",
            "127.0.0.1:0",
            "--store",
            str(store),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        cwd=ROOT,
    )
    assert process.stdout is not None
    line = process.stdout.readline()
    process.stdout.close()
    if not line:
        raise SystemExit("errscope serve did not start")
    return process, str(json.loads(line)["api"])


def render_s(page: str) -> float:
    """Seconds for one first render of `page` with an empty data cache."""
    st.cache_data.clear()
    at = AppTest.from_file(str(APP), default_timeout=_TIMEOUT_S)
    at.switch_page(page)
    started = time.perf_counter()
    at.run()
    elapsed = time.perf_counter() - started
    if at.exception:
        raise SystemExit(f"{page} raised: {at.exception[0].message}")
    if any("Cannot" in str(e.value) for e in at.error):
        raise SystemExit(f"{page} showed a banner: {at.error[0].value}")
    return elapsed


def main() -> None:
    """Fill (unless --db exists), start the sidecar, time each page's first render."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--db", type=Path, default=None, help="reuse or create this file")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    tmp = None
    if args.db is None:
        tmp = tempfile.TemporaryDirectory()
        args.db = Path(tmp.name) / "bench.duckdb"
    if not args.db.exists():
        print(f"filling {args.rows:,} rows into {args.db} ...", flush=True)
        print(f"fill: {fill(args.db, args.rows):.1f} s", flush=True)
    process, api = start_sidecar(args.db)
    try:
        os.environ[source.ENV_API] = f"http://{api}"
        os.environ[source.ENV_AS_OF] = END.isoformat()
        os.environ.pop(source.ENV_DB, None)
        os.environ.pop(source.ENV_TOKEN, None)
        warm = render_s(PAGES[0])
        print(f"warm-up render (imports included): {warm:.2f} s")
        print(f"{'page':<28} {'median s':>9} {'max s':>7}  target {TARGET_S:.0f} s")
        worst = 0.0
        for page in PAGES:
            samples = [render_s(page) for _ in range(args.repeat)]
            median = statistics.median(samples)
            worst = max(worst, median)
            flag = "ok" if median <= TARGET_S else "OVER"
            name = Path(page).stem
            print(f"{name:<28} {median:>9.2f} {max(samples):>7.2f}  {flag}", flush=True)
        print(f"slowest page {worst:.2f} s (target {TARGET_S:.0f} s)")
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(60)
        if tmp is not None:
            tmp.cleanup()


if __name__ == "__main__":
    main()
