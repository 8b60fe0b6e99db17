"""One rule set, one set of defaults: `errscope scrub`, a real `errscope serve` forwarding
spans, `instrument()`'s exporter and the toolkit's `got` give the same text for one input."""

from __future__ import annotations

import json
import subprocess
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from errscope.collector.catalog import load_catalog
from errscope.collector.export import instrument
from errscope.collector.scrub.samples import github_style_token
from errscope.collector.toolkit.observation import error_observation
from tests.sidecar.harness import ERRSCOPE, finished_spans, http_exporter, send, sidecar

ATTRIBUTE = "app.note"
RESOURCE = {"service.name": "entrances", "service.version": "1.0.0"}
EXTRA_RULES = """
[[rules]]
id = "acme-ticket-key"
description = "ACME's internal ticket key (a test rule)"
regex = '''\\b(ACME-[0-9]{6}-[A-Z]{4})\\b'''
keywords = ["acme-"]
"""
GH = github_style_token(__import__("random").Random(7), "ghp_")

VALUES = [
    pytest.param(
        f"deploy failed: OPENAI_API_KEY=sk-proj-{'Ab3dEf6hIj9kLm2nOp4qRs7t' * 2} for ops@example.com",
        id="env-key-and-email",
    ),
    pytest.param(
        json.dumps({"tool": "charge", "args": {"card": "4111 1111 1111 1111", "token": GH}}),
        id="json-args-card-and-github-token",
    ),
    pytest.param(
        json.dumps(["My password is ", "Xk9#mQ2", "vL7!pR4zT", " and my SSN is 123-45-6789"]),
        id="streamed-deltas-password-and-ssn",
    ),
    pytest.param("call +44 20 7946 0123 about ticket ACME-123456-QXZV", id="phone-and-user-rule"),
    pytest.param(
        "job 17 not found (trace 4bf92f3577b34da6a3ce929d0e0e4736, host 10.0.3.7)", id="benign"
    ),
]
FLAGS = [
    pytest.param((), id="defaults"),
    pytest.param(("--rules", "{rules}", "--no-pii-group", "email"), id="rules-and-no-email"),
]


class _Capture(BaseHTTPRequestHandler):
    """A real OTLP/HTTP receiver: keeps each body and signals that one arrived."""

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        self.server.bodies.append(body)  # type: ignore[attr-defined]
        self.server.arrived.set()  # type: ignore[attr-defined]
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
    """The receiver the sidecar forwards to."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Capture)
    server.bodies = []  # type: ignore[attr-defined]
    server.arrived = threading.Event()  # type: ignore[attr-defined]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def _flags(flags: tuple[str, ...], tmp_path: Path) -> list[str]:
    rules = tmp_path / "extra.toml"
    rules.write_text(EXTRA_RULES)
    return [f.format(rules=rules) for f in flags]


def _through_cli(values: list[str], flags: list[str]) -> list[str]:
    lines = "".join(json.dumps({"id": i, "text": v}) + "\n" for i, v in enumerate(values))
    proc = subprocess.run(
        [*ERRSCOPE, "scrub", "--jsonl", *flags],
        input=lines.encode(),
        capture_output=True,
        check=True,
        timeout=120,
    )
    rows = [json.loads(line) for line in proc.stdout.decode().splitlines()]
    return [row["text"] for row in sorted(rows, key=lambda row: row["id"])]


def _through_sidecar(
    values: list[str], flags: list[str], upstream: ThreadingHTTPServer, tmp_path: Path
) -> list[str]:
    forward = f"http://127.0.0.1:{upstream.server_address[1]}"
    specs = [(f"note {i}", {ATTRIBUTE: v, "app.index": i}) for i, v in enumerate(values)]
    spans = finished_spans(specs, RESOURCE)
    with sidecar(tmp_path / "s.duckdb", "--forward", forward, *flags) as served:
        assert send(http_exporter(served), spans)
        found: dict[int, str] = {}
        while len(found) < len(values):
            assert upstream.arrived.wait(30), "the sidecar forwarded nothing within 30 s"  # type: ignore[attr-defined]
            upstream.arrived.clear()  # type: ignore[attr-defined]
            for body in list(upstream.bodies):  # type: ignore[attr-defined]
                request = ExportTraceServiceRequest.FromString(body)
                for resource in request.resource_spans:
                    for scope in resource.scope_spans:
                        for span in scope.spans:
                            attrs = {a.key: a.value for a in span.attributes}
                            found[attrs["app.index"].int_value] = attrs[ATTRIBUTE].string_value
        assert served.terminate() == 0
    return [found[i] for i in range(len(values))]


def _through_instrument(values: list[str]) -> list[str]:
    memory = InMemorySpanExporter()
    provider = instrument("entrances", exporter=memory, set_global=False)
    tracer = provider.get_tracer("tests")
    for i, value in enumerate(values):
        tracer.start_span(f"note {i}", attributes={ATTRIBUTE: value, "app.index": i}).end()
    provider.shutdown()
    spans = {span.attributes["app.index"]: span for span in memory.get_finished_spans()}
    return [str(spans[i].attributes[ATTRIBUTE]) for i in range(len(values))]


def _through_got(values: list[str]) -> list[str]:
    catalog = load_catalog([])
    shown = []
    for value in values:
        observation = error_observation(
            "invalid_args", "", catalog=catalog, got=value, has_got=True, max_bytes=8192
        )
        shown.append(observation["got"])
    return shown


@pytest.mark.parametrize("flags", FLAGS)
def test_cli_and_real_sidecar_scrub_alike(
    flags: tuple[str, ...], upstream: ThreadingHTTPServer, tmp_path: Path
) -> None:
    """`errscope scrub` and a real `errscope serve` given the same switches (defaults, or
    --rules and --no-pii-group) turn each value into the same text."""
    values = [p.values[0] for p in VALUES]
    given = _flags(flags, tmp_path)
    expected = _through_cli(values, given)
    assert expected != values  # the table plants something to mask
    assert _through_sidecar(values, given, upstream, tmp_path) == expected


@pytest.mark.parametrize("value", VALUES)
def test_in_process_entrances_scrub_like_the_cli(value: str) -> None:
    """With the defaults, `instrument()`'s exporter and the toolkit's `got` give the text
    `errscope scrub` gives."""
    expected = _through_cli([value], [])
    assert _through_instrument([value]) == expected
    assert _through_got([value]) == expected


def test_defaults_mask_pii_and_the_switches_turn_a_group_off(tmp_path: Path) -> None:
    """The shared defaults mask e-mail; --no-pii-group email leaves it; --rules adds a rule."""
    value = "ops@example.com opened ACME-123456-QXZV"
    assert _through_cli([value], []) == ["[REDACTED:email-address] opened ACME-123456-QXZV"]
    assert _through_cli([value], _flags(FLAGS[1].values[0], tmp_path)) == [
        "ops@example.com opened [REDACTED:acme-ticket-key]"
    ]
