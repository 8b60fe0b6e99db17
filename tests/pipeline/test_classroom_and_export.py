"""The classroom table as spans, fail-closed behaviour, and the in-process exporter and instrument()."""

from __future__ import annotations

import gc
import http.server
import json
import threading
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

from errscope.collector.catalog import load_catalog
from errscope.collector.export import ScrubbingSpanExporter, instrument
from errscope.collector.pipeline import Pipeline
from errscope.collector.spanview import SpanView, from_readable
from errscope.collector.store.batch import StoreBatch, StoreSink
from errscope.collector.store.duckdb import DuckDBStore
from tests.factories import held_by_another_process
from tests.pipeline.spans import (
    DB_PASSWORD,
    DB_URL,
    GITHUB_TOKEN,
    OPENAI_KEY,
    PLANTED,
    make_span,
    strings_of,
)

HINT_IDS = "job ids look like 17 or 42"
JOBS = {17: {"id": 17, "state": "done"}, 42: {"id": 42, "state": "queued"}}


def classroom_result(raw: Any) -> dict[str, Any]:
    """What the classroom get_job tool returns for a raw job_id."""
    if isinstance(raw, bool) or not (
        isinstance(raw, int) or (isinstance(raw, str) and raw.strip().isdigit())
    ):
        return {
            "error": "invalid_args",
            "field": "job_id",
            "hint": "job_id: a positive integer such as 17",
        }
    job_id = int(raw)
    if job_id <= 0:
        return {
            "error": "invalid_args",
            "field": "job_id",
            "hint": "job_id: a positive integer such as 17",
        }
    if job_id not in JOBS:
        return {"error": "not_found", "hint": HINT_IDS}
    return {"ok": True, "result": JOBS[job_id]}


@pytest.mark.parametrize(
    ("raw", "code", "field"),
    [
        pytest.param("17", "ok", None, id="digit-string"),
        pytest.param(17, "ok", None, id="int"),
        pytest.param(-1, "invalid_args", "job_id", id="negative"),
        pytest.param("abc", "invalid_args", "job_id", id="letters"),
        pytest.param(True, "invalid_args", "job_id", id="bool-is-not-job-1"),
        pytest.param(99, "not_found", None, id="missing-job"),
    ],
)
def test_classroom_table(raw: Any, code: str, field: str | None) -> None:
    """execute_tool get_job spans carrying the classroom tool's results yield the right codes."""
    span = make_span(
        "execute_tool get_job",
        {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": "get_job",
            "gen_ai.tool.call.arguments": json.dumps({"job_id": raw}),
            "gen_ai.tool.call.result": json.dumps(classroom_result(raw)),
        },
    )
    record = Pipeline().process(from_readable(span)).record
    assert record is not None
    assert (record.code, record.field) == (code, field)
    assert record.source == ("status" if code == "ok" else "observation")


def test_fail_closed_reduces_span_to_ids(monkeypatch: pytest.MonkeyPatch) -> None:
    """If processing raises, the span passed on keeps only ids and internal_error; nothing escapes."""
    pipeline = Pipeline()

    def explode(*_: object, **__: object) -> None:
        raise RuntimeError(f"boom {GITHUB_TOKEN}")

    monkeypatch.setattr("errscope.collector.pipeline.normalise", explode)
    span = make_span(
        "execute_tool get_job",
        {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "get_job", "x": OPENAI_KEY},
    )
    out = pipeline.process(from_readable(span))
    assert out.failed
    assert pipeline.failures == 1
    assert out.forward is not None
    assert out.forward.name == "errscope.redacted"
    assert set(out.forward.attributes) == {"errscope.code", "error.type"}
    assert out.record is not None
    assert (out.record.code, out.record.source) == ("internal_error", "pipeline")
    assert not any(secret in "\n".join(strings_of(asdict(out.forward))) for secret in PLANTED)


def test_bad_ids_are_rejected() -> None:
    """A span without valid ids is rejected (it will count in partial_success)."""
    view = SpanView(name="execute_tool x", trace_id="", span_id="", start_ns=1, end_ns=2)
    assert Pipeline().process(view).rejected == "bad_ids"


class _Capture(SpanExporter):
    def __init__(self) -> None:
        self.spans: list[ReadableSpan] = []

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.spans.extend(spans)
        return SpanExportResult.SUCCESS


def test_scrubbing_exporter_passes_only_scrubbed_spans(tmp_path: Path) -> None:
    """The wrapper hands the inner exporter scrubbed spans and writes records to a store."""
    inner = _Capture()
    store = DuckDBStore(tmp_path / "s.duckdb")
    exporter = ScrubbingSpanExporter(inner, sink=StoreSink(store))
    spans = [
        make_span(
            "execute_tool get_job",
            {
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": "get_job",
                "gen_ai.tool.call.arguments": json.dumps({"token": GITHUB_TOKEN}),
                "http.response.status_code": 404,
            },
        ),
        make_span("invoke_agent", {"prompt": f"use {OPENAI_KEY}"}),
    ]
    assert exporter.export(spans) is SpanExportResult.SUCCESS
    assert len(inner.spans) == 2
    text = "\n".join(s.to_json() for s in inner.spans)
    for secret in PLANTED:
        assert secret not in text
    assert store.count("tool_calls") == 1
    assert store.count("deploys") == 1
    assert store.count("redactions") >= 1
    row = store.cursor().execute("SELECT code, tool FROM tool_calls").fetchone()
    assert row == ("not_found", "get_job")
    store.close()


class _GcWatcher(SpanExporter):
    """An inner exporter that records whether the cyclic collector ran during export."""

    def __init__(self) -> None:
        self.enabled_during_export: list[bool] = []

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.enabled_during_export.append(gc.isenabled())
        return SpanExportResult.SUCCESS


def _tool_spans(n: int) -> list[ReadableSpan]:
    return [
        make_span(
            "execute_tool get_job",
            {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "get_job"},
        )
        for _ in range(n)
    ]


def test_exporter_pauses_the_collector_only_while_scrubbing() -> None:
    """The collector is off while a batch is scrubbed, on again for the network export and after."""
    seen: list[bool] = []
    pipeline = Pipeline()
    original = pipeline.process

    def process(view: SpanView, **kwargs: Any) -> Any:
        seen.append(gc.isenabled())
        return original(view, **kwargs)

    pipeline.process = process  # type: ignore[method-assign]
    inner = _GcWatcher()
    exporter = ScrubbingSpanExporter(inner, pipeline=pipeline)
    assert gc.isenabled()
    assert exporter.export(_tool_spans(3)) is SpanExportResult.SUCCESS
    assert seen == [False, False, False]
    assert inner.enabled_during_export == [True]
    assert gc.isenabled()


def test_exporter_leaves_a_collector_the_application_disabled_alone() -> None:
    """An application that turned the collector off finds it off after an export."""
    inner = _GcWatcher()
    exporter = ScrubbingSpanExporter(inner)
    gc.disable()
    try:
        assert exporter.export(_tool_spans(2)) is SpanExportResult.SUCCESS
        assert not gc.isenabled()
        assert inner.enabled_during_export == [False]
    finally:
        gc.enable()


def test_exporter_reenables_the_collector_when_the_pipeline_fails(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A span that fails the pipeline is dropped and the collector still comes back on."""
    exporter = ScrubbingSpanExporter(_GcWatcher())

    def boom(*_: object, **__: object) -> None:
        raise RuntimeError

    monkeypatch.setattr(exporter.pipeline, "process", boom)
    assert exporter.export(_tool_spans(2)) is SpanExportResult.SUCCESS
    assert exporter.failed == 2
    assert gc.isenabled()


def test_instrument_writes_to_a_local_store(tmp_path: Path) -> None:
    """instrument(store=...) records tool calls from ordinary tracer use, scrubbed in the export thread, with DuckDB's memory bounded."""
    path = tmp_path / "local.duckdb"
    provider = instrument(
        "billing-agent", version="3.0.0", environment="staging", store=str(path), set_global=False
    )
    tracer = provider.get_tracer("app")
    with tracer.start_as_current_span(
        "execute_tool get_invoice",
        attributes={
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": "get_invoice",
            "gen_ai.tool.call.arguments": GITHUB_TOKEN,
        },
    ):
        pass
    exporter = provider._active_span_processor._span_processors[0].span_exporter  # type: ignore[attr-defined]
    limit = exporter.sink.store.cursor().execute("SELECT current_setting('memory_limit')")
    assert limit.fetchone() == ("61.0 MiB",)  # 64 MB: DuckDB does not grow the service's process
    provider.shutdown()
    with DuckDBStore(path, read_only=True) as store:
        row = (
            store.cursor()
            .execute("SELECT service, version, environment, tool, code FROM tool_calls")
            .fetchone()
        )
    assert row == ("billing-agent", "3.0.0", "staging", "get_invoice", "ok")


def test_instrument_stores_the_codes_of_a_user_catalog(tmp_path: Path) -> None:
    """instrument(catalog=...) stores a user code as itself; without it, as unknown."""
    catalog = load_catalog(
        user_texts=[
            (
                "user.toml",
                '[codes.quota_exceeded]\nmeaning = "The monthly quota is used up."\n'
                'retry_by = "nobody"\nmax_tries = 1\nscope = "trace"\non_cap = "stop"\n'
                'hint = "Say when it resets."\ncolor = "#123456"\n',
            )
        ]
    )
    stored = []
    for name, user_catalog in (("with", catalog), ("without", None)):
        path = tmp_path / f"{name}.duckdb"
        provider = instrument("svc", store=str(path), catalog=user_catalog, set_global=False)
        with provider.get_tracer("app").start_as_current_span(
            "execute_tool charge",
            attributes={
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": "charge",
                "errscope.code": "quota_exceeded",
            },
        ):
            pass
        provider.shutdown()
        with DuckDBStore(path, read_only=True) as store:
            stored.append(
                store.cursor().execute("SELECT code, raw_code FROM tool_calls").fetchone()
            )
    assert stored == [("quota_exceeded", None), ("unknown", "quota_exceeded")]


def test_instrument_sends_to_an_otlp_endpoint() -> None:
    """instrument(endpoint=...) wraps a real OTLP exporter; an in-memory inner proves the wiring."""
    provider = instrument("svc", endpoint="http://127.0.0.1:9/v1/traces", set_global=False)
    processors = provider._active_span_processor._span_processors
    exporter = processors[0].span_exporter  # type: ignore[attr-defined]
    assert isinstance(exporter, ScrubbingSpanExporter)
    assert type(exporter.inner).__name__ == "OTLPSpanExporter"
    provider.shutdown()


def test_store_batch_aggregates_redactions() -> None:
    """Redaction counts from many spans are summed per hour, service, tool and rule."""
    batch = StoreBatch()
    pipeline = Pipeline()
    for _ in range(3):
        span = make_span(
            "execute_tool t",
            {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "t", "a": GITHUB_TOKEN},
        )
        batch.add(pipeline.process(from_readable(span)))
    counts = {key[3]: n for key, n in batch.redactions.items()}
    assert counts["github-pat"] == 3


_SAFE_TEXT = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=40)


@settings(max_examples=60, deadline=None)
@given(
    where=st.sampled_from(
        ["arguments", "result", "status", "exception", "event", "resource", "name", "nested"]
    ),
    prefix=_SAFE_TEXT,
    suffix=_SAFE_TEXT,
    planted=st.sampled_from(
        [(GITHUB_TOKEN, GITHUB_TOKEN), (OPENAI_KEY, OPENAI_KEY), (DB_URL, DB_PASSWORD)]
    ),
)
def test_planted_secret_never_survives(
    where: str, prefix: str, suffix: str, planted: tuple[str, str]
) -> None:
    """Wherever a secret is planted in a tool span, neither the record nor the passed-on span keeps it."""
    text, secret = planted
    value = f"{prefix} {text} {suffix}"
    attrs: dict[str, Any] = {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "get_job",
        "gen_ai.tool.call.id": "call_1",
    }
    kwargs: dict[str, Any] = {}
    name = "execute_tool get_job"
    if where == "arguments":
        attrs["gen_ai.tool.call.arguments"] = value
    elif where == "result":
        attrs["gen_ai.tool.call.result"] = value
    elif where == "status":
        from opentelemetry.trace import StatusCode

        kwargs["status"] = (StatusCode.ERROR, value)
    elif where in ("exception", "event"):
        kwargs["events"] = [
            (
                "exception" if where == "exception" else "log",
                {"exception.type": "ValueError", "exception.message": value},
            )
        ]
    elif where == "resource":
        kwargs["resource"] = {"service.name": "svc", "host.name": value}
    elif where == "name":
        name = f"execute_tool {value}"
    else:
        attrs["gen_ai.conversation.id"] = value
        attrs["list"] = [value, "x"]
    out = Pipeline().process(from_readable(make_span(name, attrs, **kwargs)))
    assert out.record is not None
    assert secret not in str(asdict(out.record))
    assert out.forward is not None
    assert secret not in "\n".join(strings_of(asdict(out.forward)))
    assert out.record.trace_id == out.forward.trace_id


def _run_python(script: str, *args: str) -> Any:
    """Run `script` in a fresh interpreter from the repository root; it must exit 0."""
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-c", script, *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        cwd=Path(__file__).resolve().parents[2],
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done


_FORK_SCRIPT = """
import logging, os, sys
logging.basicConfig(level=logging.ERROR, stream=sys.stderr)
from errscope.collector.export import instrument

provider = instrument("svc", version="1", store=sys.argv[1], set_global=False)
tracer = provider.get_tracer("app")

def call(name):
    attrs = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": name}
    with tracer.start_as_current_span("execute_tool " + name, attributes=attrs):
        pass
    provider.force_flush()

call("before_fork")
pid = os.fork()
if pid == 0:
    call("in_child")
    exporter = provider._active_span_processor._span_processors[0].span_exporter
    os._exit(0 if exporter.forked and exporter.failed == 1 else 3)
_, status = os.waitpid(pid, 0)
call("after_fork")
provider.shutdown()
sys.exit(os.waitstatus_to_exitcode(status))
"""


def test_a_forked_worker_says_it_cannot_store(tmp_path: Path) -> None:
    """instrument(store=...) then fork (gunicorn --preload): the child stores nothing, says
    so once with a code, and leaves the parent's store whole; the parent keeps storing."""
    path = tmp_path / "s.duckdb"
    done = _run_python(_FORK_SCRIPT, str(path))
    assert done.stderr.count("store_after_fork") == 1
    with DuckDBStore(path, read_only=True) as store:
        tools = store.cursor().execute("SELECT tool FROM tool_calls ORDER BY ts").fetchall()
    assert tools == [("before_fork",), ("after_fork",)]


_FORK_EXIT_SCRIPT = """
import gc, logging, os, sys
logging.basicConfig(level=logging.ERROR, stream=sys.stderr)
from errscope.collector.export import instrument

provider = instrument("svc", version="1", store=sys.argv[1], set_global=False)
tracer = provider.get_tracer("app")

def call(name):
    attrs = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": name}
    with tracer.start_as_current_span("execute_tool " + name, attributes=attrs):
        pass
    provider.force_flush()

call("before_fork")
pid = os.fork()
if pid == 0:
    del provider, tracer
    gc.collect()
    sys.exit(0)  # a normal interpreter exit: every object the child still holds is freed
os.waitpid(pid, 0)
call("after_fork")
os._exit(0)  # the parent dies without closing its store, as under kill -9
"""


def test_a_forked_child_exiting_normally_leaves_the_parents_store_alone(
    tmp_path: Path,
) -> None:
    """The child's exit must not close the parent's connection: closing checkpointed the
    parent's file and deleted its WAL, so what the parent wrote next was lost on a crash."""
    path = tmp_path / "s.duckdb"
    done = _run_python(_FORK_EXIT_SCRIPT, str(path))
    assert "Fatal" not in done.stderr, done.stderr
    with DuckDBStore(path, read_only=True) as store:
        tools = store.cursor().execute("SELECT tool FROM tool_calls ORDER BY ts").fetchall()
    assert tools == [("before_fork",), ("after_fork",)]


_FORK_GC_SCRIPT = """
import gc, os, sys, threading
from errscope.collector.gcpause import gc_paused

inside, release = threading.Event(), threading.Event()

def hold():
    with gc_paused():
        inside.set()
        release.wait()

threading.Thread(target=hold, daemon=True).start()
inside.wait()
pid = os.fork()
if pid == 0:
    os._exit(0 if gc.isenabled() else 3)
release.set()
_, status = os.waitpid(pid, 0)
sys.exit(os.waitstatus_to_exitcode(status))
"""


def test_a_fork_during_a_gc_pause_leaves_the_child_collecting() -> None:
    """A child forked while another thread pauses the collector gets it back on: the
    thread that would end the pause does not exist in the child."""
    _run_python(_FORK_GC_SCRIPT)


def test_instrument_twice_warns_that_the_second_is_not_global() -> None:
    """OpenTelemetry keeps the first global provider: a second instrument() says so."""
    script = (
        "import logging, sys\n"
        "logging.basicConfig(level=logging.WARNING, stream=sys.stderr)\n"
        "from opentelemetry import trace\n"
        "from errscope.collector.export import instrument\n"
        "first = instrument('svc', version='1', endpoint='http://127.0.0.1:9/v1/traces')\n"
        "second = instrument('svc', version='2', endpoint='http://127.0.0.1:9/v1/traces')\n"
        "assert trace.get_tracer_provider() is first\n"
        "assert second is not first\n"
    )
    done = _run_python(script)
    assert done.stderr.count("global_provider_taken") == 1


class _Receiver:
    """A real HTTP server that records the path of every POST and answers 200."""

    def __init__(self) -> None:
        paths: list[str] = []

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length", "0")))
                paths.append(self.path)
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *_: object) -> None:
                pass

        self.paths = paths
        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def _send_one_tool_span(provider: TracerProvider) -> None:
    tracer = provider.get_tracer("t")
    with tracer.start_as_current_span("execute_tool get_job") as span:
        span.set_attribute("gen_ai.operation.name", "execute_tool")
        span.set_attribute("gen_ai.tool.name", "get_job")
    provider.force_flush()
    provider.shutdown()


@pytest.mark.parametrize("suffix", ["", "/"])
def test_instrument_appends_v1_traces_to_a_base_url(suffix: str) -> None:
    """endpoint="http://host:port" posts to /v1/traces (posting to / lost every span)."""
    receiver = _Receiver()
    try:
        _send_one_tool_span(instrument("svc", endpoint=receiver.url + suffix, set_global=False))
    finally:
        receiver.close()
    assert receiver.paths == ["/v1/traces"]


def test_instrument_reads_the_standard_otel_endpoint_variable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """With no endpoint, OTEL_EXPORTER_OTLP_ENDPOINT decides, as for any OTel service."""
    receiver = _Receiver()
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.url)
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")
    try:
        _send_one_tool_span(instrument("svc", set_global=False))
    finally:
        receiver.close()
    assert receiver.paths == ["/v1/traces"]


def test_endpoint_and_transport_choices() -> None:
    """A query string survives /v1/traces; a bare loopback gRPC address is plaintext (the
    local sidecar has no TLS), a bare remote one is not."""
    from errscope.collector.export import _endpoint, _grpc_insecure

    assert _endpoint("http://h:1?tenant=a", "http") == "http://h:1/v1/traces?tenant=a"
    assert _endpoint("http://h:1/custom", "http") == "http://h:1/custom"
    assert _grpc_insecure("127.0.0.1:4317") is True
    assert _grpc_insecure("[::1]:4317") is True
    assert _grpc_insecure("errscope.collector.example.com:4317") is False
    assert _grpc_insecure("https://127.0.0.1:4317") is False


class _FailingShutdown(SpanExporter):
    """A real exporter whose shutdown fails, as one whose connection broke would."""

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        raise OSError("connection reset")


def test_shutdown_never_raises_and_still_closes_the_store(tmp_path: Path) -> None:
    """An inner exporter failing at shutdown neither raises into the application's exit
    nor leaves the store open (its last checkpoint still runs)."""
    store = DuckDBStore(tmp_path / "s.duckdb")
    exporter = ScrubbingSpanExporter(_FailingShutdown(), sink=StoreSink(store))
    exporter.shutdown()
    with DuckDBStore(tmp_path / "s.duckdb") as reopened:  # the file was released
        assert reopened.count("tool_calls") == 0


def test_a_store_that_cannot_open_does_not_stop_the_service(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """instrument(store=a file another process holds) logs store_unavailable and returns
    a working provider instead of raising into the service's start-up."""
    path = tmp_path / "held.duckdb"
    DuckDBStore(path).close()
    with held_by_another_process(path):
        provider = instrument("svc", store=str(path), set_global=False)
    assert "store_unavailable" in caplog.text
    provider.shutdown()
