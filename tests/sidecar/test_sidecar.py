"""A real `errscope serve` process driven by the OpenTelemetry SDK's own OTLP exporters."""

from __future__ import annotations

import gzip
import json
import socket
import subprocess
import sys
import threading
import urllib.request
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import duckdb
import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

from tests.pipeline.spans import DB_URL, GITHUB_TOKEN, OPENAI_KEY
from tests.sidecar.harness import (
    ERRSCOPE,
    Served,
    finished_spans,
    grpc_exporter,
    http_exporter,
    otlp_json,
    send,
    sidecar,
)

RESOURCE = {
    "service.name": "billing-agent",
    "service.version": "1.4.0",
    "deployment.environment.name": "prod",
}
TOKEN = "t0k-" + "x" * 28


def tool_specs(tag: str) -> list[tuple[str, dict[str, Any]]]:
    """Tool spans with known outcomes and secrets planted in arguments and results."""
    base = {"gen_ai.operation.name": "execute_tool"}
    return [
        (
            "execute_tool get_job",
            {
                **base,
                "gen_ai.tool.name": "get_job",
                "gen_ai.tool.call.id": f"call_ok_{tag}",
                "gen_ai.tool.call.arguments": json.dumps({"job_id": 17, "token": GITHUB_TOKEN}),
                "gen_ai.tool.call.result": json.dumps({"ok": True}),
            },
        ),
        (
            "execute_tool get_job",
            {
                **base,
                "gen_ai.tool.name": "get_job",
                "gen_ai.tool.call.id": f"call_bad_{tag}",
                "gen_ai.tool.call.result": json.dumps(
                    {"error": "invalid_args", "field": "job_id", "hint": "17"}
                ),
            },
        ),
        (
            "execute_tool get_job",
            {
                **base,
                "gen_ai.tool.name": "get_job",
                "gen_ai.tool.call.id": f"call_nf_{tag}",
                "http.response.status_code": 404,
                "gen_ai.tool.call.arguments": DB_URL,
            },
        ),
        (
            "execute_tool charge",
            {
                **base,
                "gen_ai.tool.name": "charge",
                "errscope.code": "denied",
                "errscope.correlation_id": f"corr-{tag}",
                "gen_ai.tool.call.arguments": OPENAI_KEY,
            },
        ),
        (
            "invoke_agent billing",
            {"gen_ai.operation.name": "invoke_agent", "prompt": f"use {OPENAI_KEY}"},
        ),
    ]


EXPECTED = {"call_ok": "ok", "call_bad": "invalid_args", "call_nf": "not_found"}


def all_strings(store: Path) -> str:
    """Every string value in every table of a store file (read after the sidecar stopped)."""
    con = duckdb.connect(str(store), read_only=True)
    texts: list[str] = []
    for (table,) in con.execute("SELECT table_name FROM information_schema.tables").fetchall():
        for row in con.execute(f'SELECT * FROM "{table}"').fetchall():
            texts.extend(str(v) for v in row if v is not None)
    con.close()
    return "\n".join(texts)


class Capture(BaseHTTPRequestHandler):
    """A real OTLP/HTTP receiver that keeps every request body it is sent."""

    bodies: list[bytes]

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        self.server.bodies.append(body)  # type: ignore[attr-defined]
        reply = ExportTraceServiceResponse().SerializeToString()
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", str(len(reply)))
        self.end_headers()
        self.wfile.write(reply)

    def log_message(self, *_: object) -> None:
        return


@pytest.fixture
def upstream() -> Iterator[ThreadingHTTPServer]:
    """A second OTLP receiver for forwarding tests."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), Capture)
    server.bodies = []  # type: ignore[attr-defined]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


@pytest.mark.parametrize("transport", ["grpc", "http-protobuf", "http-json"])
def test_ingest_stores_codes_and_ids_and_forwards_nothing_secret(
    tmp_path: Path, upstream: ThreadingHTTPServer, transport: str
) -> None:
    """Spans sent by the SDK's exporters are stored with the right codes and ids; no secret leaves."""
    store = tmp_path / "s.duckdb"
    forward = f"http://127.0.0.1:{upstream.server_address[1]}"
    spans = finished_spans(tool_specs(transport), RESOURCE)
    with sidecar(store, "--forward", forward) as served:
        if transport == "grpc":
            assert send(grpc_exporter(served), spans)
        elif transport == "http-protobuf":
            assert send(http_exporter(served), spans)
        else:
            request = urllib.request.Request(
                f"http://{served.http}/v1/traces",
                data=otlp_json(spans),
                headers={"Content-Type": "application/json"},
            )
            with urllib.request.urlopen(request, timeout=30) as response:
                assert response.status == 200
                assert json.loads(response.read()) == {}
        rows = served.query("calls_by_correlation", id=f"call_bad_{transport}", since="1h")
        assert [(r["code"], r["field"], r["tool"]) for r in rows] == [
            ("invalid_args", "job_id", "get_job")
        ]
        assert served.terminate() == 0
    con = duckdb.connect(str(store), read_only=True)
    stored = con.execute(
        "SELECT call_id, code, trace_id, span_id, service, version FROM tool_calls"
    ).fetchall()
    deploys = con.execute("SELECT service, version, source FROM deploys").fetchall()
    con.close()
    by_call = {r[0]: r for r in stored if r[0]}
    for prefix, code in EXPECTED.items():
        assert by_call[f"{prefix}_{transport}"][1] == code
    assert len(stored) == 4
    sent_ids = {(f"{s.context.trace_id:032x}", f"{s.context.span_id:016x}") for s in spans}
    assert {(r[2], r[3]) for r in stored} <= sent_ids
    assert {r[4:] for r in stored} == {("billing-agent", "1.4.0")}
    assert deploys == [("billing-agent", "1.4.0", "auto")]
    text = all_strings(store)
    for secret in (GITHUB_TOKEN, OPENAI_KEY, DB_URL.split(":")[2].split("@")[0]):
        assert secret not in text
    # forwarded: every span, parsed by a real receiver, none carrying a secret
    forwarded = b"".join(upstream.bodies)  # type: ignore[attr-defined]
    assert forwarded
    names = []
    for body in upstream.bodies:  # type: ignore[attr-defined]
        request = ExportTraceServiceRequest.FromString(body)
        names += [
            s.name for rs in request.resource_spans for ss in rs.scope_spans for s in ss.spans
        ]
    assert len(names) == 5
    for secret in (GITHUB_TOKEN, OPENAI_KEY, DB_URL):
        assert secret.encode() not in forwarded


def _post(
    served: Served, body: bytes, content_type: str = "application/x-protobuf", **headers: str
) -> tuple[int, bytes, dict[str, str]]:
    request = urllib.request.Request(
        f"http://{served.http}/v1/traces",
        data=body,
        headers={"Content-Type": content_type, **headers},
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, response.read(), dict(response.headers)
    except urllib.error.HTTPError as exc:
        with exc:
            return exc.code, exc.read(), dict(exc.headers)


def _redactions(store: Path) -> dict[tuple[str, str], int]:
    con = duckdb.connect(str(store), read_only=True)
    rows = con.execute("SELECT tool, rule, sum(count) FROM redactions GROUP BY ALL").fetchall()
    con.close()
    return {(tool, rule): int(n) for tool, rule, n in rows}


def test_a_replayed_export_is_counted_once(tmp_path: Path) -> None:
    """A client re-sending an acknowledged export (here by the other protocol) adds no row and
    no redaction count, of a tool call or of another span; the counts equal one delivery's."""
    spans = finished_spans(tool_specs("replay"), RESOURCE)
    once, twice = tmp_path / "once.duckdb", tmp_path / "twice.duckdb"
    # Forwarding on (to an upstream that is down): only then are other spans scrubbed and
    # their secrets counted.
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        forward = ("--forward", f"http://127.0.0.1:{probe.getsockname()[1]}")
    with sidecar(once, *forward) as served:
        assert send(http_exporter(served), spans)
    with sidecar(twice, *forward) as served:
        assert send(http_exporter(served), spans)
        assert send(grpc_exporter(served), spans)
    counts = []
    for store in (once, twice):
        con = duckdb.connect(str(store), read_only=True)
        counts.append(con.execute("SELECT count(*) FROM tool_calls").fetchone())
        con.close()
    assert counts == [(4,), (4,)]
    expected = _redactions(once)
    assert sum(expected.values()) >= 3  # the token, the database URL and the OpenAI key
    assert ("_non_tool", "openai-api-key") in expected  # the agent span's prompt
    assert _redactions(twice) == expected


def test_http_answers_per_otlp_spec(tmp_path: Path) -> None:
    """400 for undecodable, 415 for other types, 413 over the limit (also after gzip), partial success for bad ids."""
    with sidecar(tmp_path / "s.duckdb", "--max-body-bytes", "100000") as served:
        assert _post(served, b"\x00\xff not protobuf")[0] == 400
        assert _post(served, b"{not json", "application/json")[0] == 400
        for shape in (b'{"resourceSpans": "x"}', b'{"resourceSpans": [{"scopeSpans": [7]}]}'):
            assert _post(served, shape, "application/json")[0] == 400
        assert _post(served, b'{"resourceSpans": []}', "application/json")[0] == 200
        assert _post(served, b"x", "text/plain")[0] == 415
        assert _post(served, b"\x00" * 200_000)[0] == 413
        bomb = gzip.compress(b"\x00" * 5_000_000)
        assert len(bomb) < 100_000
        assert _post(served, bomb, **{"Content-Encoding": "gzip"})[0] == 413
        request = ExportTraceServiceRequest()
        span = request.resource_spans.add().scope_spans.add().spans.add()
        span.name = "execute_tool x"
        span.trace_id = b"\x01" * 16
        span.span_id = b"\x02" * 3  # wrong size: rejected
        status, body, _ = _post(served, request.SerializeToString())
        assert status == 200
        assert ExportTraceServiceResponse.FromString(body).partial_success.rejected_spans == 1
        assert json.loads(served.get("/healthz")[1])["status"] == "ok"


def test_auth_on_ingest_and_api(tmp_path: Path) -> None:
    """With a token, ingest (HTTP and gRPC) and the API refuse requests without it; /healthz stays open."""
    spans = finished_spans(tool_specs("auth"), RESOURCE)
    with sidecar(tmp_path / "s.duckdb", env={"ERRSCOPE_TOKEN": TOKEN}) as served:
        assert not send(http_exporter(served, timeout=3), spans)
        assert not send(grpc_exporter(served, timeout=3), spans)
        assert served.get("/v1/query/error_rates")[0] == 401
        assert served.get("/v1/query/error_rates", token="wrong-token-wrong-token")[0] == 401
        assert served.get("/healthz")[0] == 200
        assert send(http_exporter(served, token=TOKEN), spans)
        assert send(
            grpc_exporter(served, token=TOKEN), finished_spans(tool_specs("auth2"), RESOURCE)
        )
        assert len(served.query("error_rates", token=TOKEN, since="1h")) >= 1


def _refused_start(*args: str) -> str:
    """Run `errscope serve` with these flags; it must exit 2 without a traceback. Its stderr."""
    result = subprocess.run(
        [*ERRSCOPE, "serve", *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={"PATH": "/usr/bin:/bin"},
    )
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    return result.stderr.strip()


def test_non_loopback_bind_without_token_refuses_to_start(tmp_path: Path) -> None:
    """Binding 0.0.0.0 without a token exits 2 with one line, unless --insecure."""
    stderr = _refused_start(
        "--otlp-http",
        "0.0.0.0:0",
        "--otlp-grpc",
        "off",
        "--api",
        "off",
        "--store",
        str(tmp_path / "s.duckdb"),
    )
    assert stderr.startswith(
        "error[bad_value] otlp-http: binding a non-loopback address needs a token"
    )


def test_a_taken_port_refuses_to_start(tmp_path: Path) -> None:
    """A second sidecar on a port the first holds exits 2, over gRPC (which would otherwise
    share the port through SO_REUSEPORT and split the clients) as over HTTP."""
    with sidecar(tmp_path / "first.duckdb") as served:
        for flag, address in (("--otlp-grpc", served.grpc), ("--otlp-http", served.http)):
            others = [f for f in ("--otlp-grpc", "--otlp-http", "--api") if f != flag]
            stderr = _refused_start(
                flag,
                address,
                *(arg for other in others for arg in (other, "off")),
                "--store",
                str(tmp_path / "second.duckdb"),
            )
            assert stderr.startswith(f"error[bad_value] {flag[2:]}: cannot bind"), stderr
        assert send(grpc_exporter(served), finished_spans(tool_specs("taken"), RESOURCE))
        rows = served.query("calls_by_correlation", id="call_bad_taken", since="1h")
        assert [r["code"] for r in rows] == ["invalid_args"]


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        pytest.param(
            ("--otlp-grpc", "off", "--otlp-http", "off", "--api", "off"),
            "error[bad_value] otlp-grpc: every listener is off",
            id="nothing-to-serve",
        ),
        pytest.param(
            ("--max-body-bytes", "-5"),
            "error[bad_value] max-body-bytes: must be at least 1,024 bytes",
            id="negative-body-limit",
        ),
        pytest.param(
            ("--max-inflight-bytes", "0"),
            "error[bad_value] max-inflight-bytes: must be at least 1,024 bytes",
            id="zero-inflight-limit",
        ),
        pytest.param(
            ("--api", "127.0.0.1"),
            "error[bad_value] api: must be HOST:PORT — for example 127.0.0.1:4320",
            id="api-example-port",
        ),
    ],
)
def test_unusable_settings_refuse_to_start(
    tmp_path: Path, args: tuple[str, ...], expected: str
) -> None:
    """Settings that would serve nothing or refuse every export exit 2 naming the flag."""
    stderr = _refused_start(*args, "--store", str(tmp_path / "s.duckdb"))
    assert stderr.startswith(expected), stderr
    assert not (tmp_path / "s.duckdb").exists()


def test_ipv6_ready_line_reads_back(tmp_path: Path) -> None:
    """On IPv6 loopback the ready line gives bracketed addresses that clients can use."""
    with sidecar(tmp_path / "s.duckdb", grpc="[::1]:0", http="[::1]:0", api="[::1]:0") as served:
        for address in (served.grpc, served.http, served.api):
            assert address.startswith("[::1]:"), address
        assert send(http_exporter(served), finished_spans(tool_specs("v6"), RESOURCE))
        rows = served.query("calls_by_correlation", id="call_bad_v6", since="1h")
        assert [r["code"] for r in rows] == ["invalid_args"]


def test_bad_store_memory_refuses_to_start(tmp_path: Path) -> None:
    """A --store-memory DuckDB cannot read exits 2 with one line naming the flag."""
    stderr = _refused_start("--store-memory", "lots", "--store", str(tmp_path / "s.duckdb"))
    assert stderr.startswith("error[bad_value] store-memory: not a memory size")


def test_query_api_arrow_and_errors(tmp_path: Path) -> None:
    """The query API answers Arrow IPC on request, and structured errors for unknown queries and bad params."""
    import pyarrow.ipc

    with sidecar(tmp_path / "s.duckdb") as served:
        assert send(http_exporter(served), finished_spans(tool_specs("q"), RESOURCE))
        status, body = served.get(
            "/v1/query/error_rates?since=1h", accept="application/vnd.apache.arrow.stream"
        )
        assert status == 200
        table = pyarrow.ipc.open_stream(body).read_all()
        assert set(table.column("code").to_pylist()) >= {"invalid_args", "not_found"}
        status, body = served.get("/v1/query/drop_tables")
        assert status == 404
        assert json.loads(body)["error"] == "unknown_query"
        status, body = served.get("/v1/query/error_rates?bucket_s=soon")
        assert status == 400
        assert json.loads(body)["field"] == "bucket_s"
        status, body = served.get("/v1/query/error_rates?sql=select+1")
        assert status == 400
        assert json.loads(body)["error"] == "unknown_param"


def test_the_sidecar_never_loads_pandas(tmp_path: Path) -> None:
    """Ingest over both transports, queries as JSON and Arrow and a deploy mark leave pandas
    unloaded (~33 MiB of RSS), and every answer is still right without it."""
    import pyarrow.ipc

    with sidecar(tmp_path / "s.duckdb") as served:
        assert send(http_exporter(served), finished_spans(tool_specs("h"), RESOURCE))
        assert send(grpc_exporter(served), finished_spans(tool_specs("g"), RESOURCE))
        for tag in ("h", "g"):  # the one invoke_agent span of each export is not a tool call
            rows = served.query("calls_by_correlation", id=f"call_bad_{tag}", since="1h")
            assert [(r["code"], r["field"]) for r in rows] == [("invalid_args", "job_id")]
        status, body = served.get(
            "/v1/query/deploy_markers?since=1h", accept="application/vnd.apache.arrow.stream"
        )
        assert status == 200
        assert pyarrow.ipc.open_stream(body).read_all().num_rows >= 1
        maps = Path(f"/proc/{served.process.pid}/maps").read_text()
        assert "/site-packages/pyarrow/" in maps  # the check can see a loaded library
        assert "/site-packages/pandas/" not in maps


def test_keep_pandas_out_makes_pandas_unimportable() -> None:
    """In a fresh interpreter: pandas fails to import, DuckDB and pyarrow carry on."""
    script = (
        "from errscope.collector.sidecar.process import keep_pandas_out\n"
        "assert keep_pandas_out() is True\n"
        "import duckdb, pyarrow as pa\n"
        "con = duckdb.connect()\n"
        "assert con.execute('select $x + 1', {'x': 41}).fetchone() == (42,)\n"
        "numbers = pa.table({'a': pa.array([1, 2, 3])})\n"
        "assert con.execute('select sum(a) from numbers').fetchone() == (6,)\n"
        "try:\n"
        "    import pandas\n"
        "except ImportError:\n"
        "    print('refused')\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=False, timeout=60
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "refused"


def _post_deploy(served: Served, mark: object) -> tuple[int, dict[str, Any]]:
    request = urllib.request.Request(
        served.url("/v1/deploys"),
        data=json.dumps(mark).encode(),
        headers={"Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, json.loads(response.read() or b"{}")
    except urllib.error.HTTPError as exc:
        with exc:
            return exc.code, json.loads(exc.read())


@pytest.mark.parametrize(
    ("mark", "message"),
    [
        ({"service": 5, "version": "1"}, "service must be text"),
        (
            {"service": "s", "version": "1", "ts": 12345},
            "ts must be text: ISO 8601 or a duration ago",
        ),
        ({"service": "s", "version": "1", "ts": "99999999h"}, "ts: longer than 1,000 years"),
        ({"service": "s", "version": "1", "ts": "2099-01-01"}, "ts is in the future"),
    ],
)
def test_bad_deploy_marks_and_queries_get_400_naming_the_field(
    tmp_path: Path, mark: dict[str, Any], message: str
) -> None:
    """A deploy mark or query value the sidecar cannot use is a 400 that says why, and the
    sidecar stays up (an overflowing duration once killed the handler: no answer at all)."""
    with sidecar(tmp_path / "s.duckdb") as served:
        status, answer = _post_deploy(served, mark)
        assert (status, answer.get("message")) == (400, message)
        for query in ("error_rates?since=99999999h", "error_rates?bucket_s=0"):
            status, body = served.get(f"/v1/query/{query}")
            assert status == 400, body
            assert json.loads(body)["field"] in {"since", "bucket_s"}
        assert _post_deploy(served, {"service": "s", "version": "1"})[0] == 201
        assert served.query("deploy_markers", since="1h")[0]["version"] == "1"


def test_deploy_with_a_wrong_token_says_so(tmp_path: Path) -> None:
    """`errscope deploy --api` against a sidecar with another token names the token."""
    with sidecar(tmp_path / "s.duckdb", "--token", TOKEN) as served:
        result = subprocess.run(
            [*ERRSCOPE, "deploy", "--service", "s", "--version", "1", "--api", served.url("")],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
            env={"PATH": "/usr/bin:/bin", "ERRSCOPE_TOKEN": "x" * 20},
        )
    assert result.returncode == 2
    assert "refused the token (HTTP 401)" in result.stderr
    assert "x" * 20 not in result.stderr


def test_deploy_marks(tmp_path: Path) -> None:
    """Deploys are marked by POST /v1/deploys and by `errscope deploy --api`, once each."""
    import subprocess

    with sidecar(tmp_path / "s.duckdb") as served:
        body = json.dumps(
            {
                "service": "billing-agent",
                "version": "1.5.0",
                "environment": "prod",
                "ts": "2026-11-30T10:00:00Z",
            }
        ).encode()
        request = urllib.request.Request(
            served.url("/v1/deploys"), data=body, headers={"Content-Type": "application/json"}
        )
        with urllib.request.urlopen(request, timeout=30) as response:
            assert response.status == 201
        result = subprocess.run(
            [
                *ERRSCOPE,
                "deploy",
                "--service",
                "billing-agent",
                "--version",
                "1.6.0",
                "--api",
                served.url(""),
            ],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert result.returncode == 0, result.stderr
        bad = urllib.request.Request(
            served.url("/v1/deploys"),
            data=b'{"service": "x"}',
            headers={"Content-Type": "application/json"},
        )
        with pytest.raises(urllib.error.HTTPError) as caught:
            urllib.request.urlopen(bad, timeout=30)
        assert caught.value.code == 400
        caught.value.close()
        rows = served.query(
            "deploy_markers", since="2026-11-01T00:00:00Z", until="2027-01-01T00:00:00Z"
        )
    versions = {(r["version"], r["sources"]) for r in rows}
    assert {("1.5.0", "api"), ("1.6.0", "cli")} <= versions


def test_sigterm_drains_and_exits_zero(tmp_path: Path) -> None:
    """SIGTERM commits what was acknowledged and exits 0; metrics show the counts."""
    store = tmp_path / "s.duckdb"
    with sidecar(store) as served:
        assert send(http_exporter(served), finished_spans(tool_specs("term"), RESOURCE))
        status, body = served.get("/metrics")
        assert status == 200
        assert (
            b'errscope_tool_calls_total{service="billing-agent",tool="get_job",code="invalid_args"} 1'
            in body
        )
        assert served.terminate() == 0
    con = duckdb.connect(str(store), read_only=True)
    assert con.execute("SELECT count(*) FROM tool_calls").fetchone() == (4,)
    con.close()


def test_sigterm_with_an_idle_keep_alive_client(tmp_path: Path) -> None:
    """A client holding its keep-alive connection open does not keep the sidecar from stopping."""
    import time

    with sidecar(tmp_path / "s.duckdb") as served:
        exporter = http_exporter(served)
        assert send(exporter, finished_spans(tool_specs("keepalive"), RESOURCE))
        started = time.monotonic()
        assert served.terminate() == 0
        assert time.monotonic() - started < 20
        exporter.shutdown()


def test_no_forwarder_means_nothing_is_built_to_forward(tmp_path: Path) -> None:
    """Without --forward the sidecar still stores every tool call (the passed-on span is skipped)."""
    store = tmp_path / "s.duckdb"
    with sidecar(store) as served:
        assert send(grpc_exporter(served), finished_spans(tool_specs("nofwd"), RESOURCE))
        assert served.terminate() == 0
    con = duckdb.connect(str(store), read_only=True)
    assert con.execute("SELECT count(*) FROM tool_calls").fetchone() == (4,)
    con.close()


def test_api_source_leaves_unset_filters_out(tmp_path: Path) -> None:
    """ApiSource sends no value for a None parameter, so "all services" finds every service."""
    from errscope.queries.source import ApiSource

    with sidecar(tmp_path / "s.duckdb") as served:
        assert send(http_exporter(served), finished_spans(tool_specs("none"), RESOURCE))
        source = ApiSource(served.url(""))
        unfiltered = source.run("error_rates", {"since": "1h", "service": None, "tool": None})
        assert unfiltered.num_rows >= 3
        assert set(unfiltered.column("service").to_pylist()) == {"billing-agent"}
        assert source.run("error_rates", {"since": "1h", "service": "nobody"}).num_rows == 0


def test_malloc_arenas_are_capped_unless_the_user_chose(monkeypatch: pytest.MonkeyPatch) -> None:
    """`errscope serve` caps glibc's arenas (peak RSS), but a user's MALLOC_ARENA_MAX wins."""
    from errscope.collector.sidecar.process import limit_malloc_arenas

    monkeypatch.delenv("MALLOC_ARENA_MAX", raising=False)
    assert limit_malloc_arenas(8) is True  # this machine's libc is glibc
    monkeypatch.setenv("MALLOC_ARENA_MAX", "4")
    assert limit_malloc_arenas(8) is False


def test_json_logs_are_json_lines_libraries_included(tmp_path: Path) -> None:
    """With --log-format json every stderr line is a JSON object, the forwarding exporter's
    own warnings (an upstream that is down) included, and none carries a planted secret."""
    import socket
    import time

    with socket.socket() as probe:  # a port nothing listens on: the upstream is down
        probe.bind(("127.0.0.1", 0))
        dead = probe.getsockname()[1]
    store = tmp_path / "s.duckdb"
    with sidecar(store, "--log-format", "json", "--forward", f"http://127.0.0.1:{dead}") as served:
        assert send(http_exporter(served), finished_spans(tool_specs("logs"), RESOURCE))
        log = store.with_suffix(".log")
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and "opentelemetry" not in log.read_text():
            time.sleep(0.5)
        assert served.terminate() == 0
    lines = [line for line in log.read_text().splitlines() if line.strip()]
    loggers = {json.loads(line)["logger"] for line in lines}  # each line parses
    assert any(name.startswith("opentelemetry") for name in loggers), loggers
    assert "errscope.serve" in loggers or any(n.startswith("errscope") for n in loggers)
    text = "\n".join(lines)
    for secret in (GITHUB_TOKEN, OPENAI_KEY):
        assert secret not in text
