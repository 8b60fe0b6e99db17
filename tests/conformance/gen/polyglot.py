"""Generate the Node, Java and Go conformance cases: real SDKs, scripted models, real exporters.

    python tests/conformance/gen/polyglot.py [--only CASE]

For each case it installs the client's pinned dependencies under `tests/conformance/.work/`
(`npm ci` from gen/node/package-lock.json, `mvn` from gen/java/pom.xml, `go build` from
gen/go/go.sum), starts `tests/conformance/capture.py` and a loopback stub server that real
tools call (it answers 200, 403, 404, 429 with Retry-After, a body that is not JSON, and a
reply slow enough to time a client out), runs the client once per OTLP transport, and
replaces `tests/conformance/cases/<case>/payloads/` with what the exporters sent.  The
truth.toml beside the payloads is hand-written and never touched here.

tests/conformance/regenerate.py reaches these through gen/{node,java,go}/cases.py
(`cases_for(lang)`); `generate(case)` regenerates one case.
Everything binds 127.0.0.1; no LLM API is called (the clients script their models).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, unquote, urlsplit

HERE = Path(__file__).resolve().parent
CONFORMANCE = HERE.parent
WORK = CONFORMANCE / ".work"
CASES_DIR = CONFORMANCE / "cases"
_STARTUP_TIMEOUT_S = 60.0
_CLIENT_TIMEOUT_S = 300.0
# The stub holds a /slow reply this long; clients give up after a few hundred milliseconds.
_SLOW_REPLY_S = 3.0
_RETRY_AFTER_S = "7"


@dataclass(frozen=True)
class Case:
    """One case: which client runs, and over which OTLP transports (one process each)."""

    lang: str
    command: Callable[[Path, str], list[str]]
    transports: tuple[str, ...]


def _node(script: str) -> Callable[[Path, str], list[str]]:
    return lambda work, transport: ["node", str(work / script), transport]


def _java(main_class: str) -> Callable[[Path, str], list[str]]:
    def command(work: Path, transport: str) -> list[str]:
        classpath = f"{work / 'target' / 'classes'}{os.pathsep}{(work / 'cp.txt').read_text()}"
        return ["java", "-cp", classpath, main_class, transport]

    return command


def _go(work: Path, transport: str) -> list[str]:
    return [str(work / "agent"), transport]


CASES: dict[str, Case] = {
    "node-otel-genai": Case(
        "node", _node("otel_genai.mjs"), ("grpc", "http-protobuf", "http-json")
    ),
    "node-vercel-ai": Case("node", _node("vercel_ai.mjs"), ("http-protobuf",)),
    "node-langchainjs": Case("node", _node("langchainjs.mjs"), ("grpc",)),
    "java-otel-genai": Case("java", _java("errscope.conformance.Agent"), ("grpc", "http-protobuf")),
    "go-otel-genai": Case("go", _go, ("grpc", "http-protobuf")),
}


class _Stub(BaseHTTPRequestHandler):
    """The loopback service the clients' tools call; each path fails one real way."""

    released = threading.Event()  # set at shutdown so held /slow replies end at once

    def do_GET(self) -> None:
        url = urlsplit(self.path)
        parts = [unquote(p) for p in url.path.split("/") if p]
        head = parts[0] if parts else ""
        if head == "weather":
            city = parse_qs(url.query).get("city", [""])[0]
            self._reply(200, {"city": city, "temp_c": 12, "sky": "clear"})
        elif head == "customers":
            self._reply(404, {"error": "not_found", "detail": "no such customer"})
        elif head == "search":
            self._reply(429, {"error": "rate_limited"}, {"Retry-After": _RETRY_AFTER_S})
        elif head == "slow":
            self.released.wait(_SLOW_REPLY_S)
            self._reply(200, {"report": "late"})
        elif head == "ledger":
            # A 200 whose body is not JSON: the tool's parser throws, an unexpected failure.
            body = f"{parts[-1]} ledger offline\n".encode()
            self._send(200, body, "text/plain", {})
        else:
            self._reply(404, {"error": "not_found"})

    def do_DELETE(self) -> None:
        self._reply(403, {"error": "forbidden", "detail": "deleting files is not allowed"})

    def _reply(self, status: int, doc: object, headers: dict[str, str] | None = None) -> None:
        self._send(status, json.dumps(doc).encode(), "application/json", headers or {})

    def _send(self, status: int, body: bytes, kind: str, headers: dict[str, str]) -> None:
        try:
            self.send_response(status)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            for name, value in headers.items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(body)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client timed out and hung up: that is the /slow path's point

    def log_message(self, format: str, *args: object) -> None:
        return


def _run(argv: Sequence[str], cwd: Path, env: dict[str, str] | None = None) -> None:
    print("+", " ".join(argv), flush=True)
    subprocess.run(argv, cwd=cwd, env=env, check=True, timeout=_CLIENT_TIMEOUT_S * 4)


def _digest(paths: Sequence[Path]) -> str:
    h = hashlib.sha256()
    for path in sorted(paths):
        h.update(path.name.encode())
        h.update(path.read_bytes())
    return h.hexdigest()


def _sync(src: Path, dst: Path, patterns: Sequence[str]) -> list[Path]:
    """Copy the committed sources matching patterns from src into dst; return the copies."""
    copied = []
    for pattern in patterns:
        for path in src.glob(pattern):
            target = dst / path.relative_to(src)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, target)
            copied.append(target)
    return copied


def _prepare(lang: str) -> Path:
    """Install a language's pinned dependencies and build its client; return its folder."""
    work = WORK / lang
    work.mkdir(parents=True, exist_ok=True)
    src = HERE / lang
    stamp = work / ".installed"
    if lang == "node":
        _sync(src, work, ["package.json", "package-lock.json", "*.mjs"])
        locks = [work / "package.json", work / "package-lock.json"]
        if not stamp.exists() or stamp.read_text() != _digest(locks):
            _run(["npm", "ci", "--no-audit", "--no-fund", "--ignore-scripts"], work)
            stamp.write_text(_digest(locks))
    elif lang == "java":
        shutil.rmtree(work / "src", ignore_errors=True)
        _sync(src, work, ["pom.xml", "src/**/*.java"])
        _run(
            [
                "mvn",
                "-q",
                "-B",
                "package",
                "dependency:build-classpath",
                "-Dmdep.outputFile=cp.txt",
            ],
            work,
        )
    elif lang == "go":
        _sync(src, work, ["go.mod", "go.sum", "*.go"])
        env = {**os.environ, "GOFLAGS": "-mod=readonly"}
        _run(["go", "mod", "download"], work, env)
        _run(["go", "build", "-o", "agent", "."], work, env)
    else:
        raise ValueError(f"unknown language {lang!r}")
    return work


def _client_env(stub_url: str, grpc_at: str, http_at: str) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("OTEL_") and k.lower() not in {"http_proxy", "https_proxy", "all_proxy"}
    }
    env.update(
        STUB_URL=stub_url,
        OTLP_GRPC_ENDPOINT=grpc_at,
        OTLP_HTTP_ENDPOINT=f"http://{http_at}/v1/traces",
        NO_PROXY="127.0.0.1,localhost",
        no_proxy="127.0.0.1,localhost",
    )
    return env


def generate(name: str) -> Path:
    """Regenerate one case's payloads; return the case folder."""
    case = CASES[name]
    work = _prepare(case.lang)
    out = WORK / "capture" / name
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    capture = subprocess.Popen(
        [sys.executable, str(CONFORMANCE / "capture.py"), "--out", str(out)],
        stdout=subprocess.PIPE,
        text=True,
    )
    _Stub.released.clear()
    stub = ThreadingHTTPServer(("127.0.0.1", 0), _Stub)
    stub.daemon_threads = True
    threading.Thread(target=stub.serve_forever, daemon=True).start()
    try:
        assert capture.stdout is not None
        ready = capture.stdout.readline().split()  # "capture grpc=H:P http=H:P"
        if len(ready) != 3 or ready[0] != "capture":
            raise RuntimeError(f"capture.py did not start: {ready!r}")
        grpc_at, http_at = ready[1].split("=", 1)[1], ready[2].split("=", 1)[1]
        env = _client_env(f"http://127.0.0.1:{stub.server_port}", grpc_at, http_at)
        for transport in case.transports:
            argv = case.command(work, transport)
            print("+", name, transport, flush=True)
            subprocess.run(argv, cwd=work, env=env, check=True, timeout=_CLIENT_TIMEOUT_S)
    finally:
        _Stub.released.set()
        stub.shutdown()
        stub.server_close()
        capture.send_signal(signal.SIGTERM)
        capture.wait(timeout=_STARTUP_TIMEOUT_S)
    payloads = CASES_DIR / name / "payloads"
    shutil.rmtree(payloads, ignore_errors=True)
    payloads.mkdir(parents=True)
    files = sorted(out.iterdir())
    if not files:
        raise RuntimeError(f"{name}: the exporters sent nothing")
    for path in files:
        shutil.copy2(path, payloads / path.name)
    print(f"{name}: {len(files)} payloads -> {payloads}", flush=True)
    return CASES_DIR / name


def cases_for(lang: str) -> dict[str, Callable[[str], int]]:
    """regenerate.py's view of one language: case name -> capture it, return the payload count."""

    def run(name: str) -> int:
        return sum(1 for _ in (generate(name) / "payloads").iterdir())

    return {name: run for name, case in CASES.items() if case.lang == lang}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", choices=sorted(CASES), action="append")
    args = parser.parse_args(argv)
    for name in args.only or list(CASES):
        generate(name)
    return 0


if __name__ == "__main__":
    sys.exit(main())
