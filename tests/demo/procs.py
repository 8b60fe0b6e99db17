"""Child processes for the demo and compose tests: start in a new session, stop by group.

Every process started here runs in its own session, so stopping it by process group takes
whatever it started too (Streamlit's workers).  Tests call `stop` in `finally`.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

ERRSCOPE = [sys.executable, "-m", "errscope.collector.cli"]


@dataclass
class Proc:
    """A child in its own session; its stdout lines queued, stdout and stderr logged."""

    process: subprocess.Popen[str]
    log: Path
    pump: threading.Thread
    lines: queue.Queue[str] = field(default_factory=queue.Queue)

    def wait_json(self, event: str, timeout_s: float) -> dict[str, Any]:
        """The first stdout JSON line whose "event" is `event`; fails on exit or timeout."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            try:
                line = self.lines.get(timeout=0.25)
            except queue.Empty:
                if self.process.poll() is not None:
                    raise AssertionError(
                        f"exited {self.process.returncode}:\n{self.tail()}"
                    ) from None
                continue
            with contextlib.suppress(ValueError):
                loaded = json.loads(line)
                if isinstance(loaded, dict) and loaded.get("event") == event:
                    return loaded
        raise AssertionError(f"no {event!r} line within {timeout_s}s:\n{self.tail()}")

    def wait_line(self, needle: str, timeout_s: float) -> str:
        """The first stdout line containing `needle`; fails on exit or timeout."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            try:
                line = self.lines.get(timeout=0.25)
            except queue.Empty:
                if self.process.poll() is not None:
                    raise AssertionError(
                        f"exited {self.process.returncode}:\n{self.tail()}"
                    ) from None
                continue
            if needle in line:
                return line
        raise AssertionError(f"no line with {needle!r} within {timeout_s}s:\n{self.tail()}")

    def tail(self, n: int = 30) -> str:
        """The last lines of the log."""
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-n:])


def _pump(stream: IO[str], log: IO[str], lines: queue.Queue[str]) -> None:
    with stream, log:
        for line in stream:
            log.write(line)
            log.flush()
            lines.put(line)


def start(argv: Sequence[str], log: Path, env: Mapping[str, str] | None = None) -> Proc:
    """Start `argv` in a new session with stdout piped (and logged) and stderr logged."""
    handle = log.open("a", encoding="utf-8")
    process = subprocess.Popen(
        list(argv),
        stdout=subprocess.PIPE,
        stderr=handle,
        stdin=subprocess.DEVNULL,
        text=True,
        env=dict(env) if env is not None else None,
        start_new_session=True,
    )
    assert process.stdout is not None
    lines: queue.Queue[str] = queue.Queue()
    pump = threading.Thread(target=_pump, args=(process.stdout, handle, lines), daemon=True)
    pump.start()
    return Proc(process, log, pump, lines)


def stop(proc: Proc, sig: int = signal.SIGTERM, timeout_s: float = 30) -> int | None:
    """Signal the process group, wait, then SIGKILL the group; the exit status."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.process.pid, sig)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.process.wait(timeout=timeout_s)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.process.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.process.wait(timeout=10)
    proc.pump.join(timeout=10)  # closes the pipe and the log once the output ends
    return proc.process.returncode


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def http_ok(url: str, timeout_s: float, headers: Mapping[str, str] | None = None) -> bool:
    """Poll `url` until it answers 200 or time runs out."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        request = urllib.request.Request(url, headers=dict(headers or {}))
        try:
            with urllib.request.urlopen(request, timeout=3) as response:
                if response.status == 200:
                    return True
        except (urllib.error.URLError, OSError):
            pass
        time.sleep(0.5)
    return False


def processes_with_env(marker: str) -> list[int]:
    """Pids of live processes whose environment holds `marker` (to prove nothing is left)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            environ = (entry / "environ").read_bytes()
            state = (entry / "stat").read_text().split()[2]
        except OSError:
            continue
        if marker.encode() in environ and state != "Z":
            found.append(int(entry.name))
    return found
