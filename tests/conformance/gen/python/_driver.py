"""The driver side of the Python generators (runs in errscope's venv, from regenerate.py).

`generate(case, venv_name, requirements, script, *args)`:
1. makes (or reuses) `tests/conformance/.work/venvs/<venv_name>` with exactly the pinned
   `requirements` (a stamp file holds what was installed; a change rebuilds the venv),
2. starts tests/conformance/capture.py as a process on free loopback ports,
3. runs `script` (a scenario under gen/python/) with the venv's python, `CAPTURE_GRPC` and
   `CAPTURE_HTTP` in its environment and this folder on PYTHONPATH,
4. stops the capture (SIGTERM: it flushes) and replaces `cases/<case>/payloads/` with what
   it recorded.  truth.toml is hand-written and never touched.
"""

from __future__ import annotations

import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
CONFORMANCE = HERE.parent.parent
WORK = CONFORMANCE / ".work"
CASES = CONFORMANCE / "cases"
PYTHON = "python3.11"


def venv(name: str, requirements: list[str]) -> Path:
    """The venv's python, with exactly `requirements` installed (pinned ==)."""
    root = WORK / "venvs" / name
    stamp = root / "errscope-requirements.txt"
    wanted = "\n".join(requirements) + "\n"
    python = root / "bin" / "python"
    if python.exists() and stamp.exists() and stamp.read_text() == wanted:
        return python
    if root.exists():
        shutil.rmtree(root)
    subprocess.run([PYTHON, "-m", "venv", str(root)], check=True)
    subprocess.run(
        [
            str(python),
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
            *requirements,
        ],
        check=True,
    )
    stamp.write_text(wanted)
    return python


def generate(case: str, venv_name: str, requirements: list[str], script: str, *args: str) -> int:
    """Capture one case's payloads by running `script` in its framework venv; payload count."""
    python = venv(venv_name, requirements)
    with tempfile.TemporaryDirectory(prefix=f"capture-{case}-", dir=WORK) as tmp:
        out = Path(tmp) / "payloads"
        capture = subprocess.Popen(
            [sys.executable, str(CONFORMANCE / "capture.py"), "--out", str(out)],
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            assert capture.stdout is not None
            ready = capture.stdout.readline().split()
            ports = dict(part.split("=", 1) for part in ready[1:])
            env = {
                "PATH": "/usr/bin:/bin",
                "HOME": str(WORK),
                "CAPTURE_GRPC": ports["grpc"],
                "CAPTURE_HTTP": ports["http"],
                "PYTHONPATH": str(HERE),
                "CASE": case,
                "OTEL_SDK_DISABLED": "false",
            }
            subprocess.run(
                [str(python), str(HERE / script), *args], check=True, env=env, timeout=600
            )
        finally:
            capture.send_signal(signal.SIGTERM)
            capture.wait(30)
        target = CASES / case / "payloads"
        if target.exists():
            shutil.rmtree(target)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copytree(out, target)
        return len(list(target.iterdir()))
