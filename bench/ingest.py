"""Sidecar ingest throughput: a real `errscope serve` against a decode-and-discard floor.

    .venv/bin/python bench/ingest.py [--seconds 20] [--quick]

Separate client processes send realistic agent tool spans (about 10 attributes each; half of
them fail with an `exception` event holding a ~2.8 KB traceback; secrets planted in the
arguments and messages) over OTLP/HTTP protobuf and over OTLP/gRPC.  Request bodies are
encoded once; each request only patches fresh trace ids into a copy, so the clients' own
cost is small and every span is new to the store.

Printed for each transport, all in the same run:

* sustained: batches of 512 spans from 16 concurrent senders as fast as they are answered;
  spans/s acknowledged (an acknowledgement comes only after the commit), sidecar CPU
  seconds per 10,000 spans (utime + stime from /proc/PID/stat) and peak RSS (VmHWM) —
  beside the floor: a bench-local receiver on the same HTTP server class and gRPC server,
  running the same decode functions from collector/receive/otlp_decode.py, that then throws
  the spans away;
* fixed load: 10,000 spans/s offered as 100-span requests (the OTel Collector testbed's
  TestTrace10kSPS), sidecar CPU as a share of one core and peak RSS, beside the testbed's
  published bound for the Collector at that load (at most 20% of a core and 100 MiB);
* a check: after SIGTERM, every acknowledged span is in the store.

Targets: at least 20,000 spans/s acknowledged after commit; peak RSS at most 300 MB.
docs/benchmarks-ingest.md records a run.

    .venv/bin/python bench/ingest.py --collector [--seconds 20] [--quick]

runs instead the same spans, clients and phases (sustained, and 10,000 spans/s offered)
through errscope's minimal OpenTelemetry Collector (scripts/build-otelcol.sh) with the
redaction processor of deploy/otelcol/gateway.yaml and an exporter that discards (debug,
basic), beside `errscope serve` as the anchor, measured in the same run: spans/s and CPU
seconds per 10,000 spans of each process.  The Collector answers once redaction is done;
errscope once it has classified, scrubbed and committed.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import http.client
import json
import os
import random
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import duckdb
import grpc
import yaml
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Status, StatusCode

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from errscope.collector.receive.otlp_decode import decode_protobuf, encode_response, read_body
from errscope.collector.receive.otlp_grpc import GRPC_WORKERS
from errscope.collector.scrub.samples import SAMPLES, github_style_token

_EXPORT_METHOD = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"
_MARK = b"\xe5\x5c\x09\xb3"  # first bytes of every template trace id, replaced per request
_TICK = os.sysconf("SC_CLK_TCK")
_SUSTAINED_BATCH = 512
_FIXED_BATCH = 100
_FIXED_RATE = 10_000
_LIGHT_RATE = 1_000  # a load the sidecar sustains: its CPU per span without saturation
_SENDERS = 2  # client processes
_THREADS = 8  # concurrent requests per client process
_COLLECTOR_CPU_SHARE = 0.20
_COLLECTOR_RSS_MIB = 100
_TARGET_SPANS_S = 20_000
_TARGET_RSS_MB = 300

# ------------------------------------------------------------------ realistic spans

_FRAMES = [
    ("/srv/agent/app/main.py", 214, "run_agent", "result = await runner.run(agent, prompt)"),
    (
        "/srv/agent/.venv/lib/python3.12/site-packages/agents/run.py",
        1187,
        "run",
        "return await self._run_single_turn(ctx)",
    ),
    (
        "/srv/agent/.venv/lib/python3.12/site-packages/agents/run.py",
        1502,
        "_run_single_turn",
        "outputs = await asyncio.gather(*tasks)",
    ),
    (
        "/srv/agent/.venv/lib/python3.12/site-packages/agents/_run_impl.py",
        903,
        "execute_function_tool_calls",
        "result = await tool.on_invoke_tool(ctx, call.arguments)",
    ),
    (
        "/srv/agent/.venv/lib/python3.12/site-packages/agents/tool.py",
        412,
        "_on_invoke_tool_impl",
        "return await the_func(**kwargs)",
    ),
    (
        "/srv/agent/app/tools/billing.py",
        88,
        "lookup_invoice",
        "resp = await client.get(f'/v1/invoices/{invoice_id}', headers=headers)",
    ),
    (
        "/srv/agent/.venv/lib/python3.12/site-packages/httpx/_client.py",
        1801,
        "get",
        "return await self.request('GET', url, params=params, headers=headers)",
    ),
    (
        "/srv/agent/.venv/lib/python3.12/site-packages/httpx/_client.py",
        1540,
        "request",
        "return await self.send(request, auth=auth, follow_redirects=follow_redirects)",
    ),
    (
        "/srv/agent/.venv/lib/python3.12/site-packages/httpx/_client.py",
        1629,
        "send",
        "response = await self._send_handling_auth(request, auth=auth)",
    ),
    (
        "/srv/agent/.venv/lib/python3.12/site-packages/httpx/_client.py",
        1657,
        "_send_handling_auth",
        "response = await self._send_handling_redirects(request)",
    ),
    (
        "/srv/agent/.venv/lib/python3.12/site-packages/httpx/_client.py",
        1694,
        "_send_handling_redirects",
        "response = await self._send_single_request(request)",
    ),
    (
        "/srv/agent/.venv/lib/python3.12/site-packages/httpx/_client.py",
        1730,
        "_send_single_request",
        "response = await transport.handle_async_request(request)",
    ),
    (
        "/srv/agent/.venv/lib/python3.12/site-packages/httpx/_transports/default.py",
        393,
        "handle_async_request",
        "with map_httpcore_exceptions():",
    ),
    (
        "/srv/agent/app/tools/errors.py",
        31,
        "raise_for_status",
        "raise ToolError(code, f'{resp.status_code} from {resp.url} (key={api_key})')",
    ),
]
_EXC = [
    ("httpx.ReadTimeout", "timed out reading https://billing.internal/v1/invoices/{id}"),
    ("app.tools.errors.ToolError", "404 Not Found for invoice {id} (api_key={key})"),
    ("ValueError", "invalid literal for int() with base 10: '{id}' (token {key})"),
    ("PermissionError", "[Errno 13] Permission denied: '/var/run/secrets/{id}' with {key}"),
]


def _traceback(rng: random.Random, exc_type: str, message: str) -> str:
    """A Python traceback of about 2.8 KB: an agent runner down to an HTTP tool call."""
    lines = ["Traceback (most recent call last):"]
    frames = iter(_FRAMES * 3)
    while sum(map(len, lines)) < 2700 - len(message):
        path, line, func, code = next(frames)
        lines.append(f'  File "{path}", line {line + rng.randrange(3)}, in {func}')
        lines.append(f"    {code}")
    lines.append(f"{exc_type}: {message}")
    return "\n".join(lines)


def build_request(n_spans: int, seed: int) -> bytes:
    """One ExportTraceServiceRequest of `n_spans` realistic tool spans, encoded by the SDK."""
    rng = random.Random(seed)
    provider = TracerProvider(
        resource=Resource.create(
            {
                "service.name": "billing-agent",
                "service.version": "3.2.1",
                "deployment.environment.name": "prod",
                "host.name": "agent-7f9c",
                "process.pid": 4242,
            }
        )
    )
    memory = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("openinference.instrumentation.openai_agents", "0.1.12")
    tools = ["lookup_invoice", "get_job", "refund_charge", "search_orders", "send_email"]
    for i in range(n_spans):
        key = github_style_token(rng, "ghp_") if i % 2 else SAMPLES["openai-api-key"].make(rng).text
        job = f"job_{rng.randrange(10**8):08d}"
        tool = tools[i % len(tools)]
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.system": "openai",
            "gen_ai.tool.name": tool,
            "gen_ai.tool.call.id": f"call_{rng.getrandbits(96):024x}",
            "gen_ai.conversation.id": f"conv_{rng.getrandbits(64):016x}",
            "gen_ai.tool.type": "function",
            "gen_ai.tool.call.arguments": json.dumps(
                {"invoice_id": job, "limit": 20, "api_key": key, "dry_run": False}
            ),
            "server.address": "billing.internal",
            "errscope.correlation_id": f"corr-{rng.getrandbits(48):012x}",
        }
        failing = i % 2 == 1
        if not failing:
            attributes["gen_ai.tool.call.result"] = json.dumps({"ok": True, "items": 3})
        else:
            attributes["http.response.status_code"] = (404, 504, 422, 500)[i // 2 % 4]
        span = tracer.start_span(f"execute_tool {tool}", attributes=attributes)
        if failing:
            exc_type, template = _EXC[i // 2 % len(_EXC)]
            message = template.format(id=job, key=key)
            span.add_event(
                "exception",
                {
                    "exception.type": exc_type,
                    "exception.message": message,
                    "exception.stacktrace": _traceback(rng, exc_type, message),
                    "exception.escaped": "False",
                },
            )
            span.set_status(Status(StatusCode.ERROR, message))
        span.end()
    provider.shutdown()
    request = encode_spans(memory.get_finished_spans())
    for resource_spans in request.resource_spans:
        for scope_spans in resource_spans.scope_spans:
            for n, span_pb in enumerate(scope_spans.spans):
                span_pb.trace_id = _MARK + n.to_bytes(4, "big") + rng.randbytes(8)
    return request.SerializeToString()


@dataclass
class Template:
    """An encoded request and where each span's trace id starts in it."""

    body: bytes
    offsets: list[int]
    spans: int

    @classmethod
    def make(cls, n_spans: int, seed: int) -> Template:
        """Encode once; find every trace id by its marked prefix."""
        body = build_request(n_spans, seed)
        offsets = [body.index(_MARK + n.to_bytes(4, "big")) for n in range(n_spans)]
        return cls(body, offsets, n_spans)

    def render(self, seq: int) -> bytes:
        """The body with the first 8 bytes of every trace id set to `seq` (fresh ids)."""
        out = bytearray(self.body)
        prefix = seq.to_bytes(8, "big")
        for offset in self.offsets:
            out[offset : offset + 8] = prefix
        return bytes(out)

    def save(self, path: Path) -> None:
        """Write for a client process."""
        path.write_bytes(self.body)
        path.with_suffix(".json").write_text(
            json.dumps({"offsets": self.offsets, "spans": self.spans})
        )

    @classmethod
    def load(cls, path: Path) -> Template:
        """Read what `save` wrote."""
        meta = json.loads(path.with_suffix(".json").read_text())
        return cls(path.read_bytes(), meta["offsets"], meta["spans"])


# ------------------------------------------------------------------ client process


def _client(args: argparse.Namespace) -> None:
    """Send for `seconds`: as fast as answered, or paced to `rate` spans/s; print a JSON tally."""
    template = Template.load(Path(args.template))
    lock = threading.Lock()
    tally = {"acked_spans": 0, "requests": 0, "refused": 0, "errors": 0}
    latencies: list[float] = []
    start = time.monotonic()
    deadline = start + args.seconds
    interval = args.threads * template.spans / args.rate if args.rate else 0.0

    def sender(thread: int) -> None:
        seq_base = (args.sender << 40) | (thread << 32)
        bodies = (template.render(seq_base | n) for n in range(1 << 31))
        send = _http_sender(args.target) if args.transport == "http" else _grpc_sender(args.target)
        due = start + interval * thread / args.threads
        body = next(bodies)
        while True:
            if interval:
                now = time.monotonic()
                if due > now:
                    time.sleep(due - now)
                due += interval
            if time.monotonic() >= deadline:
                return
            sent = time.monotonic()
            outcome = send(body)
            took = time.monotonic() - sent
            with lock:
                tally["requests"] += 1
                if outcome == "ok":
                    tally["acked_spans"] += template.spans
                    latencies.append(took)
                else:
                    tally[outcome] += 1
            if outcome == "ok":
                body = next(bodies)
            else:
                time.sleep(0.05)  # refused: resend the same body shortly

    with concurrent.futures.ThreadPoolExecutor(args.threads) as pool:
        for future in [pool.submit(sender, t) for t in range(args.threads)]:
            future.result()
    latencies.sort()

    def pick(q: float) -> float:
        return latencies[min(len(latencies) - 1, int(q * len(latencies)))] if latencies else 0.0

    print(
        json.dumps(
            {
                **tally,
                "seconds": time.monotonic() - start,
                "p50_s": pick(0.5),
                "p99_s": pick(0.99),
            }
        ),
        flush=True,
    )


def _http_sender(target: str) -> Any:
    host, port = target.rsplit(":", 1)
    connection = http.client.HTTPConnection(host, int(port), timeout=60)
    headers = {"Content-Type": "application/x-protobuf"}

    def send(body: bytes) -> str:
        try:
            connection.request("POST", "/v1/traces", body=body, headers=headers)
            response = connection.getresponse()
            response.read()
        except OSError:
            connection.close()
            return "errors"
        if response.status == 200:
            return "ok"
        return "refused" if response.status == 503 else "errors"

    return send


def _grpc_sender(target: str) -> Any:
    channel = grpc.insecure_channel(
        target, options=[("grpc.max_send_message_length", 64 * 1024 * 1024)]
    )
    export = channel.unary_unary(_EXPORT_METHOD)  # bytes in, bytes out: nothing re-encoded

    def send(body: bytes) -> str:
        try:
            export(body, timeout=60)
        except grpc.RpcError as exc:
            return "refused" if exc.code() is grpc.StatusCode.UNAVAILABLE else "errors"
        return "ok"

    return send


# ------------------------------------------------------------------ the floor


def _floor() -> None:
    """Decode with collector/receive/otlp_decode.py on the sidecar's server classes; discard."""

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:
            raw = self.rfile.read(int(self.headers["Content-Length"]))
            decoded = decode_protobuf(read_body(raw, self.headers.get("Content-Encoding") or ""))
            del decoded
            reply = encode_response(0, "", as_json=False)
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", str(len(reply)))
            self.end_headers()
            self.wfile.write(reply)

        def log_message(self, *_: object) -> None:
            return

    def export(body: bytes, context: Any) -> bytes:
        decoded = decode_protobuf(body)
        del decoded
        return encode_response(0, "", as_json=False)

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    server = grpc.server(
        concurrent.futures.ThreadPoolExecutor(max_workers=GRPC_WORKERS),
        options=[("grpc.max_receive_message_length", 16 * 1024 * 1024)],
    )
    handler = grpc.unary_unary_rpc_method_handler(export)  # bytes in and out, as the sidecar
    server.add_generic_rpc_handlers(
        (grpc.method_handlers_generic_handler(_EXPORT_METHOD.split("/")[1], {"Export": handler}),)
    )
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    print(
        json.dumps(
            {"otlp_http": f"127.0.0.1:{httpd.server_address[1]}", "otlp_grpc": f"127.0.0.1:{port}"}
        ),
        flush=True,
    )
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    stop.wait()
    server.stop(1).wait(2)
    httpd.shutdown()


# ------------------------------------------------------------------ the driver


@dataclass
class Receiver:
    """A receiver process (sidecar or floor) and its addresses."""

    process: subprocess.Popen[str]
    addresses: dict[str, str]

    def cpu_s(self) -> float:
        """utime + stime of every thread so far."""
        fields = Path(f"/proc/{self.process.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / _TICK

    def status_kib(self, key: str) -> int:
        """A VmRSS / VmHWM line of /proc/PID/status, KiB."""
        for line in Path(f"/proc/{self.process.pid}/status").read_text().splitlines():
            if line.startswith(key + ":"):
                return int(line.split()[1])
        return 0

    def stop(self) -> None:
        """SIGTERM (the sidecar drains and commits) and wait."""
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(60)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(10)


def _start(command: list[str], log: Path) -> Receiver:
    with log.open("a") as log_file:
        process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=log_file, text=True)
    assert process.stdout is not None
    line = process.stdout.readline()
    process.stdout.close()
    if not line:
        process.wait(10)
        raise SystemExit(f"receiver did not start; see {log}")
    ready = json.loads(line)
    return Receiver(process, {k: v for k, v in ready.items() if k != "event"})


def start_sidecar(store: Path) -> Receiver:
    """A real `errscope serve` on free loopback ports."""
    return _start(
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
            "--log-format",
            "json",
        ],
        store.with_suffix(".log"),
    )


def start_floor(work: Path) -> Receiver:
    """The bench-local decode-and-discard receiver."""
    return _start([sys.executable, __file__, "--floor"], work / "floor.log")


@dataclass
class Run:
    """What one load phase measured."""

    acked_spans: int
    seconds: float
    cpu_s: float
    peak_rss_kib: int
    refused: int
    errors: int
    p50_s: float
    p99_s: float

    @property
    def spans_s(self) -> float:
        """Acknowledged spans per second of wall time."""
        return self.acked_spans / self.seconds if self.seconds else 0.0

    @property
    def cpu_per_10k(self) -> float:
        """Receiver CPU seconds per 10,000 acknowledged spans."""
        return self.cpu_s / self.acked_spans * 10_000 if self.acked_spans else float("inf")

    @property
    def core_share(self) -> float:
        """Receiver CPU as a share of one core over the phase."""
        return self.cpu_s / self.seconds if self.seconds else 0.0


def load(receiver: Receiver, transport: str, template: Path, seconds: float, rate: int = 0) -> Run:
    """Run the client processes against a receiver; sample its RSS while they run."""
    target = receiver.addresses["otlp_http" if transport == "http" else "otlp_grpc"]
    cpu_before = receiver.cpu_s()
    peak = receiver.status_kib("VmRSS")
    clients = [
        subprocess.Popen(
            [
                sys.executable,
                __file__,
                "--client",
                transport,
                "--target",
                target,
                "--template",
                str(template),
                "--seconds",
                str(seconds),
                "--sender",
                str(n),
                "--threads",
                str(_THREADS),
                "--rate",
                str(rate // _SENDERS),
            ],
            stdout=subprocess.PIPE,
            text=True,
        )
        for n in range(_SENDERS)
    ]
    while any(c.poll() is None for c in clients):
        peak = max(peak, receiver.status_kib("VmRSS"))
        time.sleep(0.1)
    cpu = receiver.cpu_s() - cpu_before
    tallies = []
    for client in clients:
        assert client.stdout is not None
        tallies.append(json.loads(client.stdout.read()))
        client.stdout.close()
        if client.wait() != 0:
            raise SystemExit("a client failed")
    return Run(
        acked_spans=sum(t["acked_spans"] for t in tallies),
        seconds=max(t["seconds"] for t in tallies),  # from the first send; startup excluded
        cpu_s=cpu,
        peak_rss_kib=max(peak, receiver.status_kib("VmHWM")),
        refused=sum(t["refused"] for t in tallies),
        errors=sum(t["errors"] for t in tallies),
        p50_s=max(t["p50_s"] for t in tallies),
        p99_s=max(t["p99_s"] for t in tallies),
    )


def stored_rows(store: Path) -> int:
    """Rows in tool_calls (the sidecar has exited)."""
    con = duckdb.connect(str(store), read_only=True)
    try:
        row = con.execute("SELECT count(*) FROM tool_calls").fetchone()
    finally:
        con.close()
    return int(row[0]) if row else 0


def _mib(kib: int) -> float:
    return kib / 1024


# (phase, template, offered spans/s; 0 = as fast as answered)
_PHASES = (
    ("sustained", "batch512.bin", 0),
    ("fixed", "batch100.bin", _FIXED_RATE),
    ("light", "batch100.bin", _LIGHT_RATE),
)


@dataclass
class Phases:
    """One transport's floor, and each sidecar phase with the rows its store ended up with."""

    floor: Run
    runs: dict[str, tuple[Run, int]]


def run_transport(transport: str, work: Path, seconds: float) -> Phases:
    """The floor, then every phase against a fresh sidecar and store."""
    floor = start_floor(work)
    try:
        floor_run = load(floor, transport, work / "batch512.bin", seconds)
    finally:
        floor.stop()
    runs: dict[str, tuple[Run, int]] = {}
    for name, template, rate in _PHASES:
        store = work / f"{transport}-{name}.duckdb"
        sidecar = start_sidecar(store)
        try:
            run = load(sidecar, transport, work / template, seconds, rate=rate)
        finally:
            sidecar.stop()
        runs[name] = (run, stored_rows(store))
    return Phases(floor_run, runs)


def report(transport: str, phases: Phases) -> None:
    """Print one transport's figures."""
    floor = phases.floor
    sustained, _ = phases.runs["sustained"]
    print("\n" + ("OTLP/HTTP protobuf" if transport == "http" else "OTLP/gRPC"))
    print(
        f"  {'':34} {'spans/s':>9} {'CPU s/10k':>9} {'peak RSS':>9}"
        f" {'p50':>7} {'p99':>7} {'refused':>7}"
    )
    for label, run in (
        ("floor (decode + discard)", floor),
        ("errscope serve (ack after commit)", sustained),
    ):
        print(
            f"  {label:34} {run.spans_s:9,.0f} {run.cpu_per_10k:9.3f}"
            f" {_mib(run.peak_rss_kib):5.0f} MiB {run.p50_s * 1000:5.0f}ms"
            f" {run.p99_s * 1000:5.0f}ms {run.refused:7}"
        )
    print(
        f"  sidecar / floor: {sustained.spans_s / floor.spans_s:.1%} of the rate, "
        f"{sustained.cpu_per_10k / floor.cpu_per_10k:.1f}x the CPU per span"
    )
    for name, offered in (("fixed", _FIXED_RATE), ("light", _LIGHT_RATE)):
        run, _ = phases.runs[name]
        print(
            f"  {offered:,} spans/s offered ({_FIXED_BATCH}/request): "
            f"{run.spans_s:,.0f} acked/s; CPU {run.core_share:.0%} of a core "
            f"(Collector testbed at 10k/s: <= {_COLLECTOR_CPU_SHARE:.0%}); "
            f"peak RSS {_mib(run.peak_rss_kib):.0f} MiB (<= {_COLLECTOR_RSS_MIB} MiB); "
            f"p99 {run.p99_s * 1000:,.0f} ms"
        )
    for name, (run, rows) in phases.runs.items():
        if rows < run.acked_spans:
            print(f"  ACKED SPANS MISSING in {name}: {rows:,} rows for {run.acked_spans:,} acked")
    acked = sum(run.acked_spans for run, _ in phases.runs.values())
    rows = sum(rows for _, rows in phases.runs.values())
    print(f"  stored {rows:,} rows for {acked:,} acknowledged spans over the three phases")


# ------------------------------------------------------------------ the Collector


_ROOT = Path(__file__).resolve().parents[1]
_OTELCOL_READY = "Everything is ready"
_OTELCOL_START_S = 120.0


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def start_otelcol(work: Path) -> Receiver:
    """errscope's ocb-built Collector: OTLP in, the gateway's redaction, a discarding exporter.

    The redaction processor is deploy/otelcol/gateway.yaml's, so the figures are those of
    the configuration docs/collector.md proposes; the debug exporter at `basic` logs one
    line per thousand batches and keeps nothing.
    """
    built = subprocess.run(
        ["bash", str(_ROOT / "scripts" / "build-otelcol.sh")],
        capture_output=True,
        text=True,
        check=False,
    )
    if built.returncode != 0:
        raise SystemExit(f"scripts/build-otelcol.sh failed:\n{built.stderr}")
    binary = built.stdout.strip().splitlines()[-1]
    gateway = yaml.safe_load((_ROOT / "deploy" / "otelcol" / "gateway.yaml").read_text())
    grpc_address, http_address = f"127.0.0.1:{_free_port()}", f"127.0.0.1:{_free_port()}"
    config = {
        "receivers": {
            "otlp": {
                "protocols": {
                    "grpc": {"endpoint": grpc_address, "max_recv_msg_size_mib": 16},
                    "http": {"endpoint": http_address},
                }
            }
        },
        "processors": {"redaction": gateway["processors"]["redaction"]},
        "exporters": {
            "debug": {"verbosity": "basic", "sampling_initial": 1, "sampling_thereafter": 1000}
        },
        "service": {
            "telemetry": {"metrics": {"level": "none"}},
            "pipelines": {
                "traces": {
                    "receivers": ["otlp"],
                    "processors": ["redaction"],
                    "exporters": ["debug"],
                }
            },
        },
    }
    path = work / "otelcol.yaml"
    path.write_text(yaml.safe_dump(config))
    log = work / "otelcol.log"
    with log.open("a") as log_file:
        process = subprocess.Popen(
            [binary, "--config", str(path)],
            stdout=log_file,
            stderr=log_file,
            text=True,
        )
    deadline = time.monotonic() + _OTELCOL_START_S
    while _OTELCOL_READY not in log.read_text(errors="replace"):
        if process.poll() is not None or time.monotonic() > deadline:
            process.kill()
            raise SystemExit(f"the Collector did not start; see {log}")
        time.sleep(0.1)
    return Receiver(process, {"otlp_http": http_address, "otlp_grpc": grpc_address})


def run_collector_comparison(transport: str, work: Path, seconds: float) -> dict[str, Run]:
    """errscope (the anchor) then the Collector, sustained and at the fixed load."""
    runs: dict[str, Run] = {}
    for name, template, rate in _PHASES[:2]:
        store = work / f"{transport}-{name}-anchor.duckdb"
        sidecar = start_sidecar(store)
        try:
            runs[f"errscope-{name}"] = load(sidecar, transport, work / template, seconds, rate)
        finally:
            sidecar.stop()
        otelcol = start_otelcol(work)
        try:
            runs[f"otelcol-{name}"] = load(otelcol, transport, work / template, seconds, rate)
        finally:
            otelcol.stop()
    return runs


def report_collector(transport: str, runs: dict[str, Run]) -> None:
    """Print the Collector beside errscope for one transport."""
    print("\n" + ("OTLP/HTTP protobuf" if transport == "http" else "OTLP/gRPC"))
    print(f"  {'':44} {'spans/s':>9} {'CPU s/10k':>9} {'peak RSS':>9} {'p99':>7} {'refused':>7}")
    for label, key in (
        ("errscope serve (ack after commit)", "errscope-sustained"),
        ("otelcol + redaction (ack after redaction)", "otelcol-sustained"),
    ):
        run = runs[key]
        print(
            f"  {label:44} {run.spans_s:9,.0f} {run.cpu_per_10k:9.3f}"
            f" {_mib(run.peak_rss_kib):5.0f} MiB {run.p99_s * 1000:5.0f}ms {run.refused:7}"
        )
    anchor, otelcol = runs["errscope-sustained"], runs["otelcol-sustained"]
    print(
        f"  errscope / Collector: {anchor.spans_s / otelcol.spans_s:.1%} of the rate, "
        f"{anchor.cpu_per_10k / otelcol.cpu_per_10k:.1f}x the CPU per span"
    )
    for who in ("errscope", "otelcol"):
        run = runs[f"{who}-fixed"]
        print(
            f"  {_FIXED_RATE:,} spans/s offered ({_FIXED_BATCH}/request) to {who}: "
            f"{run.spans_s:,.0f} acked/s; CPU {run.core_share:.0%} of a core; "
            f"peak RSS {_mib(run.peak_rss_kib):.0f} MiB; p99 {run.p99_s * 1000:,.0f} ms"
        )


def main() -> None:
    """Parse flags; run a client or the floor when told to, else the whole benchmark."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=20.0, help="length of each load phase")
    parser.add_argument("--quick", action="store_true", help="5-second phases")
    parser.add_argument(
        "--collector",
        action="store_true",
        help="the same spans through the OpenTelemetry Collector with redaction, beside errscope",
    )
    parser.add_argument("--client", choices=["http", "grpc"], help=argparse.SUPPRESS)
    parser.add_argument("--floor", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--target", help=argparse.SUPPRESS)
    parser.add_argument("--template", help=argparse.SUPPRESS)
    parser.add_argument("--sender", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--threads", type=int, default=_THREADS, help=argparse.SUPPRESS)
    parser.add_argument("--rate", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.client:
        args.transport = args.client
        _client(args)
        return
    if args.floor:
        _floor()
        return
    seconds = 5.0 if args.quick else args.seconds
    with tempfile.TemporaryDirectory(prefix="errscope-bench-ingest-") as tmp:
        work = Path(tmp)
        big = Template.make(_SUSTAINED_BATCH, seed=1)
        big.save(work / "batch512.bin")
        Template.make(_FIXED_BATCH, seed=2).save(work / "batch100.bin")
        traceback_bytes = len(_traceback(random.Random(0), "httpx.ReadTimeout", "y" * 90))
        print(
            f"spans: {_SUSTAINED_BATCH}/request, {len(big.body) / _SUSTAINED_BATCH:,.0f} B/span"
            f" as protobuf, half failing with a ~{traceback_bytes:,} B traceback;"
            f" {_SENDERS} client processes x {_THREADS} threads; {seconds:.0f} s per phase;"
            f" {os.cpu_count()} cores shared by clients and receiver"
        )
        if args.collector:
            for transport in ("http", "grpc"):
                report_collector(transport, run_collector_comparison(transport, work, seconds))
            return
        results = {}
        for transport in ("http", "grpc"):
            results[transport] = run_transport(transport, work, seconds)
            report(transport, results[transport])
    best = max(p.runs["sustained"][0].spans_s for p in results.values())
    peak_mb = max(r.peak_rss_kib for p in results.values() for r, _ in p.runs.values()) * 1024 / 1e6
    print(
        f"\ntargets: >= {_TARGET_SPANS_S:,} spans/s acked after commit: "
        f"{'met' if best >= _TARGET_SPANS_S else 'MISSED'} (best {best:,.0f}); "
        f"peak RSS <= {_TARGET_RSS_MB} MB: "
        f"{'met' if peak_mb <= _TARGET_RSS_MB else 'MISSED'} ({peak_mb:,.0f} MB)"
    )


if __name__ == "__main__":
    main()
