"""A real OpenTelemetry Collector for tests: built once by scripts/build-otelcol.sh, run on loopback.

    collector_binary()        the ocb-built binary (built on first use, then reused)
    start_collector(...)      a Collector running a deploy/otelcol file as committed
    Collector.wait_line(...)  wait for a line of its log, with a deadline
    debug_spans(path)         the spans the debug exporter wrote to a file, as dicts

Every wait here is on a condition with a deadline (a log line, a file's content, a counter),
never a fixed sleep: the suite runs on a busy machine.
"""

from __future__ import annotations

import contextlib
import functools
import os
import queue
import re
import signal
import subprocess
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, TypeVar

import yaml

from tests.demo.procs import free_port

ROOT = Path(__file__).resolve().parents[2]
BUILD_SCRIPT = ROOT / "scripts" / "build-otelcol.sh"
READY_LINE = "Everything is ready"
_START_ATTEMPTS = 3
T = TypeVar("T")


@functools.cache
def collector_binary() -> Path:
    """The Collector binary; the build script returns at once when its stamp is current."""
    done = subprocess.run(
        ["bash", str(BUILD_SCRIPT)],
        capture_output=True,
        text=True,
        timeout=1500,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"scripts/build-otelcol.sh failed:\n{done.stderr[-4000:]}")
    return Path(done.stdout.strip().splitlines()[-1])


def wait_until(check: Callable[[], T | None], timeout_s: float, what: str) -> T:
    """Poll `check` until it returns something other than None/False; fail after `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while True:
        found = check()
        if found is not None and found is not False:
            return found
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {timeout_s:.0f} s")
        time.sleep(0.05)  # the polling interval, not a synchronisation


@dataclass
class Collector:
    """A running Collector; its stderr (the Collector's own log) queued and copied to `log`."""

    process: subprocess.Popen[str]
    log: Path
    grpc: str
    http: str
    lines: queue.Queue[str] = field(default_factory=queue.Queue)

    def wait_line(self, needle: str, timeout_s: float) -> str:
        """The next log line containing `needle`; fails if the Collector exits or time runs out."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            try:
                line = self.lines.get(timeout=0.25)
            except queue.Empty:
                if self.process.poll() is not None:
                    raise AssertionError(
                        f"the Collector exited {self.process.returncode}:\n{self.tail()}"
                    ) from None
                continue
            if needle in line:
                return line
        raise AssertionError(
            f"no Collector log line with {needle!r} in {timeout_s}s:\n{self.tail()}"
        )

    def tail(self, n: int = 40) -> str:
        """The last lines of the Collector's log."""
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-n:])

    def stop(self) -> int:
        """SIGTERM (the Collector drains its pipelines) and wait; the exit status."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)
        return self.process.returncode


def _pump(stream: IO[str], log: IO[str], lines: queue.Queue[str]) -> None:
    with stream, log:
        for line in stream:
            log.write(line)
            log.flush()
            lines.put(line)


DEPLOY = ROOT / "deploy" / "otelcol"
# What every test run changes in a deploy/otelcol file: the Collector's own metrics are off
# (their default port, 8888, would collide between parallel tests).
_TEST_OVERRIDE: dict[str, Any] = {"service": {"telemetry": {"metrics": {"level": "none"}}}}


def start_collector(
    work: Path,
    config: str,
    *,
    exporters: list[str] | None = None,
    env: dict[str, str] | None = None,
    name: str = "otelcol",
) -> Collector:
    """Run the Collector on deploy/otelcol/`config` as committed, on two free loopback ports.

    The receiver's endpoints come from the file's environment variables; `exporters`, when
    given, replaces the traces pipeline's exporters (a second config file, which the
    Collector merges over the first).  Waits for the Collector's ready line.
    """
    override: dict[str, Any] = {"service": {**_TEST_OVERRIDE["service"]}}
    if exporters is not None:
        override["service"]["pipelines"] = {"traces": {"exporters": exporters}}
    override_path = work / f"{name}.override.yaml"
    override_path.write_text(yaml.safe_dump(override, sort_keys=False))
    command = [str(collector_binary()), "--config", str(DEPLOY / config)]
    command += ["--config", str(override_path)]
    log = work / f"{name}.log"
    for attempt in range(_START_ATTEMPTS):
        # A port found free can be taken by another process before the Collector binds it.
        grpc, http = f"127.0.0.1:{free_port()}", f"127.0.0.1:{free_port()}"
        ports = {"OTELCOL_OTLP_GRPC": grpc, "OTELCOL_OTLP_HTTP": http}
        process = subprocess.Popen(
            command,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            text=True,
            env={**os.environ, **ports, **(env or {})},
        )
        assert process.stderr is not None
        running = Collector(process, log, grpc, http)
        handle = log.open("a", encoding="utf-8")
        threading.Thread(
            target=_pump, args=(process.stderr, handle, running.lines), daemon=True
        ).start()
        try:
            running.wait_line(READY_LINE, timeout_s=60)
        except AssertionError:
            running.stop()
            if "address already in use" in running.tail() and attempt + 1 < _START_ATTEMPTS:
                continue
            raise
        return running
    raise AssertionError("unreachable: the last attempt raises")


@contextlib.contextmanager
def collector(work: Path, config: str, **kwargs: Any) -> Iterator[Collector]:
    """A Collector (`start_collector`) for the duration of a `with` block; always stopped."""
    running = start_collector(work, config, **kwargs)
    try:
        yield running
    finally:
        running.stop()


def metric(api: str, name: str, labels: str = "") -> float:
    """One sample of errscope's Prometheus text (`GET /metrics`); 0 when absent."""
    with urllib.request.urlopen(f"http://{api}/metrics", timeout=10) as response:
        text = response.read().decode()
    series = f"{name}{{{labels}}}" if labels else name
    for line in text.splitlines():
        key, _, value = line.rpartition(" ")
        if key == series:
            return float(value)
    return 0.0


# The debug exporter's detailed text (pdata's marshaller): one block per span.
_SPAN_START = re.compile(r"^Span #\d+$")
_BLOCK_START = re.compile(r"^(ResourceSpans|ScopeSpans) #\d+$")  # attributes here are not a span's
_FIELD = re.compile(r"^\s+(Trace ID|Parent ID|ID|Name)\s+: ?(.*)$")
_ATTR = re.compile(r"^\s+-> (\S+): (\w+)\((.*)\)$")


def debug_spans(path: Path) -> list[dict[str, Any]]:
    """The spans in the debug exporter's detailed output: ids, name and attributes (as text)."""
    spans: list[dict[str, Any]] = []
    current: dict[str, Any] | None = None
    if not path.exists():
        return spans
    for line in path.read_text(errors="replace").splitlines():
        if _SPAN_START.match(line.strip()):
            current = {"attributes": {}}
            spans.append(current)
            continue
        if _BLOCK_START.match(line.strip()):
            current = None
        if current is None:
            continue
        if found := _FIELD.match(line):
            current[found[1]] = found[2].strip()
        elif found := _ATTR.match(line):
            current["attributes"][found[1]] = found[3]
    return spans
