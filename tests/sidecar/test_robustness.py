"""A real `errscope serve` under kill -9, overload, fuzzed input and a full disk."""

from __future__ import annotations

import gzip
import json
import random
import re
import shutil
import signal
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.request
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import grpc
import pytest
from google.rpc import error_details_pb2, status_pb2
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace import ReadableSpan

from tests.pipeline.spans import GITHUB_TOKEN
from tests.sidecar.harness import (
    Served,
    finished_spans,
    grpc_exporter,
    http_exporter,
    otlp_json,
    send,
    sidecar,
    start_sidecar,
)

RESOURCE = {
    "service.name": "crash-agent",
    "service.version": "2.0.0",
    "deployment.environment.name": "prod",
}
EXPORT = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"
PROTOBUF = "application/x-protobuf"
STACK = (
    "Traceback (most recent call last):\n"
    + "".join(
        f'  File "/srv/agent/tools/step_{i}.py", line {10 + i}, in step_{i}\n    return step_{i + 1}(job_id)\n'
        for i in range(24)
    )
    + f"TimeoutError: upstream timed out (token={GITHUB_TOKEN})"
)


def tool_spans(tag: str, n: int, *, failing: bool = False) -> list[ReadableSpan]:
    """`n` finished tool spans with unique call ids; failing ones carry a ~2 KB traceback."""
    specs: list[tuple[str, dict[str, Any]]] = []
    for i in range(n):
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": "get_job",
            "gen_ai.tool.call.id": f"call_{tag}_{i}",
            "gen_ai.tool.call.arguments": json.dumps({"job_id": i, "token": GITHUB_TOKEN}),
        }
        if failing and i % 2:
            attributes["http.response.status_code"] = 504
            attributes["exception.stacktrace"] = STACK
        specs.append(("execute_tool get_job", attributes))
    return finished_spans(specs, RESOURCE)


def ids_of(spans: list[ReadableSpan]) -> set[tuple[str, str]]:
    """(trace_id, span_id) as the store writes them."""
    return {(f"{s.context.trace_id:032x}", f"{s.context.span_id:016x}") for s in spans}


def stored_counts(store: Path) -> dict[tuple[str, str], int]:
    """How many rows each (trace_id, span_id) has (read once no sidecar holds the file)."""
    con = duckdb.connect(str(store), read_only=True)
    try:
        rows = con.execute(
            "SELECT trace_id, span_id, count(*) FROM tool_calls GROUP BY ALL"
        ).fetchall()
    finally:
        con.close()
    return {(t, s): n for t, s, n in rows}


def post(
    served: Served, body: bytes, content_type: str = PROTOBUF, **headers: str
) -> tuple[int, dict[str, str]]:
    """A raw OTLP/HTTP POST: (status, headers) whatever the status."""
    request = urllib.request.Request(
        f"http://{served.http}/v1/traces",
        data=body,
        headers={"Content-Type": content_type, **headers},
    )
    try:
        with urllib.request.urlopen(request, timeout=RETRY_FOR_S) as response:
            response.read()
            return response.status, dict(response.headers)
    except urllib.error.HTTPError as exc:
        with exc:
            exc.read()
            return exc.code, dict(exc.headers)


def retry_delay_s(error: grpc.RpcError) -> int | None:
    """The RetryInfo delay carried in a gRPC error's status details, if any."""
    trailers = dict(error.trailing_metadata() or ())  # type: ignore[attr-defined]
    raw = trailers.get("grpc-status-details-bin")
    if not isinstance(raw, bytes):
        return None
    for detail in status_pb2.Status.FromString(raw).details:
        info = error_details_pb2.RetryInfo()
        if detail.Unpack(info):
            return info.retry_delay.seconds
    return None


def healthy(served: Served) -> bool:
    """/healthz answers 200 with status ok."""
    status, body = served.get("/healthz")
    return status == 200 and json.loads(body)["status"] == "ok"


# ------------------------------------------------------------------ kill -9


class Pump:
    """Exports tool-span batches through one SDK exporter until its sidecar dies.

    A batch that was not acknowledged goes back to a shared list that every pump takes from
    first, so it is resent, as a client would, maybe to the next sidecar after a restart.
    """

    def __init__(
        self,
        name: str,
        served: Served,
        exporter: Any,
        unacked: list[list[ReadableSpan]],
        acked: set[tuple[str, str]],
    ) -> None:
        self.name, self.served, self.exporter = name, served, exporter
        self.unacked, self.acked = unacked, acked
        self.acked_batches = 0
        self.thread = threading.Thread(target=self.run)

    def run(self) -> None:
        """Send until the sidecar process is gone."""
        n = 0
        while self.served.process.poll() is None:
            try:
                batch = self.unacked.pop()  # list.pop and append are atomic: no lock needed
            except IndexError:
                batch = tool_spans(f"{self.name}b{n}", 40, failing=True)
                n += 1
            if send(self.exporter, batch):
                self.acked.update(ids_of(batch))
                self.acked_batches += 1
            else:
                self.unacked.append(batch)


@pytest.mark.slow
def test_kill9_keeps_every_acknowledged_span_exactly_once(tmp_path: Path) -> None:
    """Four kill -9s while HTTP and gRPC exporters send: every acknowledged span is stored exactly once."""
    store = tmp_path / "crash.duckdb"
    rng = random.Random(20261130)
    acked: set[tuple[str, str]] = set()
    unacked: list[list[ReadableSpan]] = []
    for round_ in range(4):
        served = start_sidecar(store)
        pumps = [
            Pump(f"r{round_}http", served, http_exporter(served, timeout=3), unacked, acked),
            Pump(f"r{round_}grpc", served, grpc_exporter(served, timeout=3), unacked, acked),
        ]
        for pump in pumps:
            pump.thread.start()
        try:
            deadline = time.monotonic() + RETRY_FOR_S
            while min(p.acked_batches for p in pumps) < 2 and time.monotonic() < deadline:
                time.sleep(0.05)
            time.sleep(rng.uniform(0.0, 0.6))  # kill at a random point of a commit cycle
        finally:
            served.kill9()
            for pump in pumps:
                pump.thread.join(60)
                pump.exporter.shutdown()
        assert min(p.acked_batches for p in pumps) >= 2, f"round {round_} acknowledged too little"
    with sidecar(store) as served:
        final = http_exporter(served)
        for batch in unacked:  # what was cut off by the last kill
            assert send(final, batch)
            acked.update(ids_of(batch))
        final.shutdown()
        assert served.terminate() == 0
    counts = stored_counts(store)
    assert acked - counts.keys() == set()
    assert set(counts.values()) == {1}
    assert len(acked) >= 4 * 2 * 2 * 40


# ------------------------------------------------------------------ overload

# How long a client keeps retrying one refused body.  Generous, since a busy machine may keep
# the sidecar over its limit for long; the test's claims are about what is answered and kept,
# not about how fast.
RETRY_FOR_S = 300


def test_overload_answers_retryable_and_loses_nothing_acknowledged(tmp_path: Path) -> None:
    """Over --max-inflight-bytes, raw clients get 503 + Retry-After and UNAVAILABLE + RetryInfo; RSS stays bounded; acked spans are stored."""
    bodies = {}
    for n in range(28):
        spans = tool_spans(f"ov{n}", 30, failing=True)
        bodies[n] = (encode_spans(spans).SerializeToString(), ids_of(spans))
    assert all(len(body) > 40_000 for body, _ in bodies.values())
    store = tmp_path / "overload.duckdb"
    lock = threading.Lock()
    acked: set[tuple[str, str]] = set()
    refusals: list[tuple[str, Any]] = []
    with sidecar(store, "--max-inflight-bytes", "100000", "--max-body-bytes", "100000") as served:
        baseline_kib = served.rss_kib()
        peak_kib = [baseline_kib]
        sampling = threading.Event()

        def sample_rss() -> None:
            while not sampling.wait(0.05):
                peak_kib[0] = max(peak_kib[0], served.rss_kib())

        def http_client(numbers: list[int]) -> None:
            for n in numbers:
                body, ids = bodies[n]
                deadline = time.monotonic() + RETRY_FOR_S
                while time.monotonic() < deadline:
                    status, headers = post(served, body)
                    if status == 200:
                        with lock:
                            acked.update(ids)
                        break
                    with lock:
                        refusals.append(("http", (status, headers.get("Retry-After"))))
                    time.sleep(0.05)

        def grpc_client(numbers: list[int]) -> None:
            with grpc.insecure_channel(served.grpc) as channel:
                export = channel.unary_unary(EXPORT)  # raw bytes: the answer is seen as sent
                for n in numbers:
                    body, ids = bodies[n]
                    deadline = time.monotonic() + RETRY_FOR_S
                    while time.monotonic() < deadline:
                        try:
                            export(body, timeout=RETRY_FOR_S)
                        except grpc.RpcError as exc:
                            with lock:
                                refusals.append(("grpc", (exc.code(), retry_delay_s(exc))))  # type: ignore[attr-defined]
                            time.sleep(0.05)
                            continue
                        with lock:
                            acked.update(ids)
                        break

        sampler = threading.Thread(target=sample_rss)
        sampler.start()
        clients = [
            threading.Thread(target=http_client, args=([n for n in range(16) if n % 4 == k],))
            for k in range(4)
        ]
        clients += [
            threading.Thread(target=grpc_client, args=([n for n in range(16, 28) if n % 3 == k],))
            for k in range(3)
        ]
        exporter_spans = tool_spans("sdk", 30, failing=True)
        exporter_ok: list[bool] = []

        def sdk_client() -> None:
            # The SDK's exporter gives up after its own few retries (about a minute of
            # backoff); a busy machine can stay over the limit longer, so the batch is
            # offered again, as a BatchSpanProcessor's next export would.
            exporter = http_exporter(served, timeout=RETRY_FOR_S)
            deadline = time.monotonic() + RETRY_FOR_S
            ok = send(exporter, exporter_spans)
            while not ok and time.monotonic() < deadline:
                ok = send(exporter, exporter_spans)
            exporter_ok.append(ok)

        clients.append(threading.Thread(target=sdk_client))
        for client in clients:
            client.start()
        for client in clients:
            client.join(3 * RETRY_FOR_S)
        sampling.set()
        sampler.join()
        assert healthy(served)
        assert served.terminate() == 0
    http_refusals = [r for kind, r in refusals if kind == "http"]
    grpc_refusals = [r for kind, r in refusals if kind == "grpc"]
    assert http_refusals
    assert set(http_refusals) == {(503, "1")}
    assert grpc_refusals
    assert set(grpc_refusals) == {(grpc.StatusCode.UNAVAILABLE, 1)}
    assert exporter_ok == [True]  # the SDK's exporter retried through the refusals
    acked |= ids_of(exporter_spans)
    assert len(acked) == 29 * 30
    counts = stored_counts(store)
    assert acked - counts.keys() == set()
    assert (peak_kib[0] - baseline_kib) / 1024 < 150, (
        f"RSS grew {(peak_kib[0] - baseline_kib) / 1024:.0f} MiB"
    )


# ------------------------------------------------------------------ fuzzing

MAX_BODY = 65_536
_VALID_SPANS = tool_spans("fuzz", 3, failing=True)
VALID_PB = encode_spans(_VALID_SPANS).SerializeToString()
VALID_JSON = otlp_json(_VALID_SPANS)


@pytest.fixture(scope="module")
def fuzzed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """One sidecar for every fuzz example, with a small body limit."""
    with sidecar(
        tmp_path_factory.mktemp("fuzz") / "fuzz.duckdb", "--max-body-bytes", str(MAX_BODY)
    ) as served:
        yield served


def mutated(valid: bytes) -> st.SearchStrategy[bytes]:
    """`valid` with a few bytes overwritten, a slice cut out, and maybe truncated."""

    def apply(edits: list[tuple[int, int]], cut: tuple[int, int], keep: int) -> bytes:
        data = bytearray(valid)
        for at, value in edits:
            data[at % len(data)] = value
        lo, hi = sorted(c % len(data) for c in cut)
        del data[lo : lo + min(hi - lo, 16)]
        return bytes(data[: max(keep, 1)])

    return st.builds(
        apply,
        st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 255)), max_size=6),
        st.tuples(st.integers(0, 10**6), st.integers(0, 10**6)),
        st.integers(1, len(valid)) | st.just(len(valid)),
    )


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(
            st.sampled_from(
                [
                    "resourceSpans",
                    "scopeSpans",
                    "spans",
                    "traceId",
                    "spanId",
                    "attributes",
                    "key",
                    "value",
                    "stringValue",
                    "name",
                ]
            )
            | st.text(max_size=8),
            inner,
            max_size=4,
        )
    ),
    max_leaves=20,
)
BOMB = gzip.compress(b"\x00" * (MAX_BODY * 40))
# (body, content type, content encoding)
REQUESTS = st.one_of(
    st.tuples(
        st.binary(max_size=2048), st.sampled_from([PROTOBUF, "application/json"]), st.just("")
    ),
    st.tuples(mutated(VALID_PB), st.just(PROTOBUF), st.just("")),
    st.tuples(mutated(VALID_JSON), st.just("application/json"), st.just("")),
    st.tuples(
        JSON_VALUES.map(lambda v: json.dumps(v).encode()), st.just("application/json"), st.just("")
    ),
    st.tuples(
        st.binary(max_size=256),
        st.sampled_from(
            ["text/plain", "", "application/xml", "multipart/form-data", "application/grpc"]
        ),
        st.just(""),
    ),
    st.tuples(
        st.integers(MAX_BODY + 1, MAX_BODY + 4096).map(lambda n: b"\n" * n),
        st.just(PROTOBUF),
        st.just(""),
    ),
    st.tuples(
        st.sampled_from(
            [BOMB, gzip.compress(VALID_PB), gzip.compress(VALID_PB)[:-9], zlib.compress(VALID_JSON)]
        ),
        st.sampled_from([PROTOBUF, "application/json"]),
        st.sampled_from(["gzip", "deflate", "br", "GZIP"]),
    ),
)


@settings(
    max_examples=200,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(request=REQUESTS)
def test_http_fuzz_answers_4xx_or_ok_and_never_crashes(
    fuzzed: Served, request: tuple[bytes, str, str]
) -> None:
    """Random, mutated, oversized, compressed and mistyped bodies get 200/400/413/415, never a crash."""
    body, content_type, encoding = request
    headers = {"Content-Encoding": encoding} if encoding else {}
    status, _ = post(fuzzed, body, content_type, **headers)
    assert status in (200, 400, 413, 415), (status, content_type, encoding, body[:80])
    if content_type not in (PROTOBUF, "application/json"):
        assert status == 415
    if len(body) > MAX_BODY or (body is BOMB and encoding.lower() == "gzip"):
        assert status == 413
    if encoding == "br":
        assert status == 415  # an encoding errscope does not read: refused, never guessed
    assert fuzzed.process.poll() is None


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(body=st.binary(max_size=4096) | mutated(VALID_PB))
def test_grpc_fuzz_answers_a_status_and_never_crashes(fuzzed: Served, body: bytes) -> None:
    """Random and mutated bytes to the gRPC Export method get OK or INVALID_ARGUMENT, never a crash."""
    with grpc.insecure_channel(fuzzed.grpc) as channel:
        export = channel.unary_unary(EXPORT)
        code = grpc.StatusCode.OK
        try:
            export(body, timeout=RETRY_FOR_S)
        except grpc.RpcError as exc:
            code = exc.code()  # type: ignore[attr-defined]
    assert code in (grpc.StatusCode.OK, grpc.StatusCode.INVALID_ARGUMENT)
    assert fuzzed.process.poll() is None


def raw_exchange(address: str, request: bytes) -> bytes:
    """Send raw bytes to host:port and return what comes back until close or 5 s of quiet."""
    host, port = address.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=5) as conn:
        conn.sendall(request)
        received = b""
        try:
            while chunk := conn.recv(65536):
                received += chunk
        except TimeoutError:
            pass
    return received


@pytest.mark.parametrize(
    ("listener", "request_head", "expected"),
    [
        pytest.param(
            "http",
            b"POST /v1/traces HTTP/1.1\r\nContent-Type: text/plain\r\nContent-Length: abc\r\n\r\n",
            rb"^HTTP/1\.1 415 ",
            id="unreadable-length-wrong-type",
        ),
        pytest.param(
            "http",
            b"POST /v1/traces HTTP/1.1\r\nContent-Type: application/x-protobuf\r\nContent-Length: -5\r\n\r\n",
            rb"^HTTP/1\.1 400 ",
            id="negative-length",
        ),
        pytest.param(
            "http",
            # Node's exporter sends chunked bodies; an empty one is a readable, empty request.
            b"POST /v1/traces HTTP/1.1\r\nContent-Type: application/x-protobuf\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
            rb"^HTTP/1\.1 200 ",
            id="chunked-without-length",
        ),
        pytest.param(
            "http",
            b"POST /v2/other HTTP/1.1\r\nContent-Type: text/plain\r\nContent-Length: 99999999\r\n\r\n",
            rb"^HTTP/1\.1 404 ",
            id="unknown-path-huge-length",
        ),
        pytest.param(
            "api",
            b"POST /v1/deploys HTTP/1.1\r\nContent-Type: application/json\r\nContent-Length: -1\r\n\r\n",
            rb"^HTTP/1\.1 400 ",
            id="deploy-negative-length",
        ),
        pytest.param(
            "api",
            b"POST /v1/deploys HTTP/1.1\r\nContent-Type: application/json\r\nContent-Length: 1e3\r\n\r\n",
            rb"^HTTP/1\.1 400 ",
            id="deploy-unreadable-length",
        ),
        # One word is an HTTP/0.9 request to the standard library: the answer has no status line.
        pytest.param("http", b"GARBAGE\r\n\r\n", rb"Error code: 400", id="not-http"),
    ],
)
# An invalid Content-Length is a framing error: 400 and a close (RFC 9112 §6.3), not 411.
def test_malformed_http_framing_gets_an_answer_not_a_hang(
    fuzzed: Served, listener: str, request_head: bytes, expected: bytes
) -> None:
    """Bad Content-Length values, chunked bodies and garbage get a 4xx answer, never a hang or a handler traceback."""
    address = fuzzed.http if listener == "http" else fuzzed.api
    answer = raw_exchange(address, request_head)
    assert re.search(expected, answer), answer[:200]
    assert "Traceback" not in fuzzed.log.read_text()


def test_unknown_path_body_is_drained_and_the_connection_reused(fuzzed: Served) -> None:
    """A POST to an unknown path is answered 404 and its body drained, so the next request on the same connection is read correctly."""
    body = b"x" * 60_000  # under the fixture's body limit: drained, not refused
    head = f"POST /v1/nothing HTTP/1.1\r\nContent-Type: text/plain\r\nContent-Length: {len(body)}\r\n\r\n".encode()
    second = b"POST /v1/traces HTTP/1.1\r\nContent-Type: text/plain\r\nContent-Length: 1\r\nConnection: close\r\n\r\nx"
    answer = raw_exchange(fuzzed.http, head + body + second)
    assert re.findall(rb"HTTP/1\.1 (\d{3}) ", answer) == [b"404", b"415"]


def test_after_fuzzing_the_sidecar_is_alive_healthy_and_storing(fuzzed: Served) -> None:
    """After the fuzz runs the same process is up, /healthz is ok, and a real export is stored."""
    spans = tool_spans("after-fuzz", 3)
    assert send(http_exporter(fuzzed), spans)
    assert send(grpc_exporter(fuzzed), tool_spans("after-fuzz-grpc", 3))
    assert fuzzed.process.poll() is None
    assert healthy(fuzzed)
    rows = fuzzed.query("calls_by_correlation", id="call_after-fuzz_1", since="1h")
    assert [r["code"] for r in rows] == ["ok"]


# ------------------------------------------------------------------ full disk


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 1 MiB tmpfs: room for a fresh store (780 KiB) and about 240 KiB of WAL."""
    mount = tmp_path / "disk"
    mount.mkdir()
    result = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=1024k", "tmpfs", str(mount)],
        capture_output=True,
        text=True,
        check=False,
    )
    if result.returncode != 0:
        pytest.fail(
            f"cannot mount a tmpfs (the full-disk test needs root): {result.stderr.strip()}"
        )
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def test_full_disk_refuses_with_503_reports_unhealthy_and_never_acks_unwritten(
    tmp_path: Path, small_disk: Path
) -> None:
    """When the store's disk fills, exports get 503 + Retry-After, /healthz says unhealthy, and every acked span was written."""
    store = small_disk / "full.duckdb"
    acked: set[tuple[str, str]] = set()
    answers: list[tuple[int, str | None]] = []
    with sidecar(store) as served:
        for n in range(100):
            spans = tool_spans(f"disk{n}", 200, failing=True)  # about 36 KB of WAL each
            status, headers = post(served, encode_spans(spans).SerializeToString())
            answers.append((status, headers.get("Retry-After")))
            if status == 200:
                acked |= ids_of(spans)
            elif len([a for a in answers if a[0] != 200]) >= 3:
                break
        assert acked, "nothing was stored before the disk filled"
        assert answers[-3:] == [(503, "1")] * 3
        status, body = served.get("/healthz")
        assert (status, json.loads(body)["status"]) == (503, "unhealthy")
        assert served.process.poll() is None
        served.kill9()
    # Read a copy on a roomy disk: DuckDB replays the WAL, which needs space.
    copy = tmp_path / "copy"
    copy.mkdir()
    for path in small_disk.iterdir():
        shutil.copy(path, copy / path.name)
    counts = stored_counts(copy / store.name)
    assert acked - counts.keys() == set()


# ------------------------------------------------------------------ drain under load


def test_sigterm_drains_while_a_client_keeps_sending(tmp_path: Path) -> None:
    """A client posting on one kept-alive connection does not hold the drain open: the
    sidecar exits 0 within seconds, and every span it acknowledged is stored exactly once."""
    import http.client

    store = tmp_path / "busy.duckdb"
    acked: set[tuple[str, str]] = set()
    statuses: list[int] = []
    stop_sending = threading.Event()
    served = start_sidecar(store)

    def client() -> None:
        host, port = served.http.rsplit(":", 1)
        conn = http.client.HTTPConnection(host, int(port), timeout=10)
        n = 0
        while not stop_sending.is_set():
            spans = tool_spans(f"busy{n}", 20)
            n += 1
            try:
                conn.request(
                    "POST",
                    "/v1/traces",
                    body=encode_spans(spans).SerializeToString(),
                    headers={"Content-Type": PROTOBUF},
                )
                response = conn.getresponse()
                response.read()
            except OSError:
                conn.close()  # the sidecar closed it; reconnecting finds nobody listening
                conn = http.client.HTTPConnection(host, int(port), timeout=10)
                time.sleep(0.1)
                continue
            statuses.append(response.status)
            if response.status == 200:
                acked.update(ids_of(spans))
            time.sleep(0.2)
        conn.close()

    sender = threading.Thread(target=client, daemon=True)
    sender.start()
    try:
        time.sleep(2)
        sent_before = len(statuses)
        started = time.monotonic()
        served.process.send_signal(signal.SIGTERM)
        code = served.process.wait(30)
        drained_in = time.monotonic() - started
    finally:
        stop_sending.set()
        sender.join(15)
        if served.process.poll() is None:
            served.kill9()
    assert code == 0
    assert drained_in < 10, f"drain took {drained_in:.1f}s"
    assert sent_before >= 3
    assert acked
    counts = stored_counts(store)
    assert acked <= counts.keys()
    assert set(counts.values()) == {1}
