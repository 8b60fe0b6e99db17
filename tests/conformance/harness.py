"""Judge errscope on the conformance corpus: real framework payloads in, figures out.

A case is a folder `cases/<lang>-<framework>[-<variant>]/` with `payloads/NNNN.<transport>.<ext>`
(captured byte for byte by capture.py) and a hand-written `truth.toml` (see
/CONFORMANCE.md).  For one case and one transport, `run_sidecar` starts a REAL
`errscope serve` (store in a temp folder, free ports, a token, `--forward` to a real OTLP
receiver: capture.py as a process), sends every payload of that transport as the raw bytes
the framework's exporter sent (gRPC unary call on TraceService/Export with a bytes
serializer, or HTTP POST with the payload's content type), stops it with SIGTERM (it
drains), then starts it again on the same store and replays every payload (a client
resending after a lost acknowledgement), stops it again, and reads the DuckDB store.
`run_inprocess` sends the same spans, converted to SDK `ReadableSpan`s by this module
(not by errscope), through `ScrubbingSpanExporter` into a capturing exporter and a store.

`judge` computes the figures: rows against truth calls (matched by the span each truth key
designates in the payloads, never by errscope's own classification), right codes, expected
ids found in their columns, canaries in every text column of every table and in the
forwarded spans.  `key = {trace_seq = N, tool = ...}` designates the N-th trace (1-based) in
payload order; `key = {call_id = ...}` the spans carrying that call id in any attribute.
"""

from __future__ import annotations

import base64
import contextlib
import json
import re
import signal
import socket
import subprocess
import sys
import tempfile
import tomllib
import urllib.error
import urllib.request
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb
import grpc
from google.protobuf import json_format
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue

HERE = Path(__file__).resolve().parent
CASES = HERE / "cases"
CAPTURE = HERE / "capture.py"
EXPORT = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"
TOKEN = "conformance-harness-token-0123456789"
CONTENT_TYPE = {"http-protobuf": "application/x-protobuf", "http-json": "application/json"}
TRANSPORTS = ("grpc", "http-protobuf", "http-json")

# Which store column holds an id of each meaning; a meaning with no column yet (or not
# listed) counts as missing until errscope stores it.
ID_COLUMNS: dict[str, tuple[str, ...]] = {
    "call_id": ("call_id",),
    "session_id": ("session_id",),
    "conversation_id": ("conversation_id", "session_id"),
    "thread_id": ("thread_id",),
    "agent_run_id": ("agent_run_id",),
    "mcp_session_id": ("mcp_session_id",),
    "jsonrpc_request_id": ("jsonrpc_request_id",),
    "correlation_id": ("correlation_id",),
}
TABLES = ("tool_calls", "tracebacks", "redactions", "deploys")


# ---- the corpus ------------------------------------------------------------------------


@dataclass(frozen=True)
class Payload:
    """One captured export request."""

    seq: int
    transport: str
    body: bytes = field(repr=False)


@dataclass(frozen=True)
class Span:
    """What the judge needs of one payload span (decoded by this module, not errscope)."""

    trace_id: str
    span_id: str
    name: str
    strings: tuple[str, ...]  # every string value in its attributes, events and status
    parent_span_id: str = ""


@dataclass(frozen=True)
class Case:
    """One case folder: its truth and payloads."""

    name: str
    path: Path
    truth: dict[str, Any] = field(repr=False)
    payloads: tuple[Payload, ...] = field(repr=False)

    @property
    def language(self) -> str:
        return str(self.truth.get("language", self.name.split("-")[0]))

    @property
    def transports(self) -> tuple[str, ...]:
        return tuple(t for t in TRANSPORTS if any(p.transport == t for p in self.payloads))

    def bodies(self, transport: str) -> list[Payload]:
        return [p for p in self.payloads if p.transport == transport]

    @property
    def calls(self) -> list[dict[str, Any]]:
        return list(self.truth.get("calls", []))

    @property
    def canaries(self) -> list[str]:
        return list(self.truth.get("canaries", []))


def load_case(path: Path) -> Case:
    """A case folder as a Case."""
    truth_file = path / "truth.toml"
    truth = tomllib.loads(truth_file.read_text()) if truth_file.is_file() else {}
    payloads = []
    for file in sorted((path / "payloads").iterdir()):
        seq, transport, _ext = file.name.split(".", 2)
        payloads.append(Payload(int(seq), transport, file.read_bytes()))
    return Case(path.name, path, truth, tuple(payloads))


def discover() -> list[Case]:
    """Every case folder with a truth.toml and payloads, any language."""
    if not CASES.is_dir():
        return []
    return [
        load_case(p)
        for p in sorted(CASES.iterdir())
        if (p / "truth.toml").is_file() and (p / "payloads").is_dir()
    ]


# ---- decoding payloads (independent of errscope) ----------------------------------------


def _json_to_request(body: bytes) -> ExportTraceServiceRequest:
    """OTLP/JSON: ids are hex (not protobuf-JSON base64), enums may be integers."""

    def fix(node: Any) -> Any:
        if isinstance(node, dict):
            out = {}
            for key, value in node.items():
                if key in ("traceId", "spanId", "parentSpanId") and isinstance(value, str):
                    out[key] = base64.b64encode(bytes.fromhex(value)).decode()
                else:
                    out[key] = fix(value)
            return out
        if isinstance(node, list):
            return [fix(v) for v in node]
        return node

    request = ExportTraceServiceRequest()
    json_format.ParseDict(fix(json.loads(body)), request, ignore_unknown_fields=True)
    return request


def decode(payload: Payload) -> ExportTraceServiceRequest:
    """The export request of a payload, whatever its transport."""
    if payload.transport == "http-json":
        return _json_to_request(payload.body)
    request = ExportTraceServiceRequest()
    request.ParseFromString(payload.body)
    return request


def _any_strings(value: AnyValue) -> Iterator[str]:
    kind = value.WhichOneof("value")
    if kind == "string_value":
        yield value.string_value
    elif kind == "array_value":
        for v in value.array_value.values:
            yield from _any_strings(v)
    elif kind == "kvlist_value":
        for kv in value.kvlist_value.values:
            yield kv.key
            yield from _any_strings(kv.value)
    elif kind == "bytes_value":
        yield value.bytes_value.decode("utf-8", "replace")


def _kv_strings(pairs: Sequence[KeyValue]) -> Iterator[str]:
    for kv in pairs:
        yield from _any_strings(kv.value)


def request_strings(request: ExportTraceServiceRequest) -> Iterator[str]:
    """Every string a request carries: names, attribute keys and values, events, status."""
    for rs in request.resource_spans:
        yield from _kv_strings(rs.resource.attributes)
        for ss in rs.scope_spans:
            yield ss.scope.name
            for span in ss.spans:
                yield span.name
                yield span.status.message
                yield span.trace_state
                for kv in span.attributes:
                    yield kv.key
                yield from _kv_strings(span.attributes)
                for event in span.events:
                    yield event.name
                    yield from _kv_strings(event.attributes)
                for link in span.links:
                    yield from _kv_strings(link.attributes)


def spans_of(case: Case, transport: str) -> list[Span]:
    """The payload spans of one transport, in payload order."""
    out = []
    for payload in case.bodies(transport):
        for rs in decode(payload).resource_spans:
            for ss in rs.scope_spans:
                for span in ss.spans:
                    strings = [span.status.message, *_kv_strings(span.attributes)]
                    for event in span.events:
                        strings.extend(_kv_strings(event.attributes))
                    out.append(
                        Span(
                            span.trace_id.hex(),
                            span.span_id.hex(),
                            span.name,
                            tuple(strings),
                            span.parent_span_id.hex(),
                        )
                    )
    return out


# ---- running errscope ------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@contextlib.contextmanager
def receiver(out: Path) -> Iterator[str]:
    """A real OTLP receiver (capture.py as a process); yields its HTTP host:port."""
    process = subprocess.Popen(
        [sys.executable, str(CAPTURE), "--out", str(out)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        process.stdout.close()  # the ready line is all it prints
        ready = dict(part.split("=", 1) for part in line.split()[1:])
        yield ready["http"]
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(30)


@dataclass
class Sidecar:
    """A running `errscope serve` and its addresses."""

    process: subprocess.Popen[str]
    grpc: str
    http: str

    def stop(self) -> int:
        """SIGTERM (it drains) and its exit status."""
        self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(60)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(10)
            return -9


@contextlib.contextmanager
def sidecar(store: Path, forward: str) -> Iterator[Sidecar]:
    """`errscope serve` on free loopback ports with a token, forwarding to `forward`."""
    log = store.with_suffix(".log")
    with log.open("a") as log_file:
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "errscope.collector.cli",
                "serve",
                "--otlp-grpc",
                f"127.0.0.1:{_free_port()}",
                "--otlp-http",
                f"127.0.0.1:{_free_port()}",
                "--api",
                "off",
                "--store",
                str(store),
                "--token",
                TOKEN,
                "--forward",
                f"http://{forward}",
            ],
            stdout=subprocess.PIPE,
            stderr=log_file,
            text=True,
        )
    assert process.stdout is not None
    line = process.stdout.readline()
    process.stdout.close()
    if not line:
        process.wait(10)
        raise RuntimeError(f"errscope serve did not start: {log.read_text()}")
    ready = json.loads(line)
    served = Sidecar(process, ready["otlp_grpc"], ready["otlp_http"])
    try:
        yield served
    finally:
        if process.poll() is None:
            served.stop()


def send(served: Sidecar, payload: Payload) -> bool:
    """Send one payload's raw bytes with its own transport; True when acknowledged."""
    if payload.transport == "grpc":
        with grpc.insecure_channel(served.grpc) as channel:
            call = channel.unary_unary(
                EXPORT, request_serializer=lambda b: b, response_deserializer=lambda b: b
            )
            try:
                call(payload.body, timeout=30, metadata=(("authorization", f"Bearer {TOKEN}"),))
            except grpc.RpcError:
                return False
            return True
    request = urllib.request.Request(
        f"http://{served.http}/v1/traces",
        data=payload.body,
        headers={
            "Content-Type": CONTENT_TYPE[payload.transport],
            "Authorization": f"Bearer {TOKEN}",
        },
        method="POST",
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return bool(response.status == 200)
    except urllib.error.URLError:
        return False


@dataclass
class Stored:
    """What one path left behind for ALL cases: the store's tables, the forwarded requests,
    and per case how many payloads were sent and acknowledged."""

    tables: dict[str, list[dict[str, Any]]]
    forwarded: list[ExportTraceServiceRequest]
    sent: dict[str, int] = field(default_factory=dict)
    acknowledged: dict[str, int] = field(default_factory=dict)
    exit_codes: list[int] = field(default_factory=list)
    replay_tables: dict[str, list[dict[str, Any]]] | None = None


def read_store(path: Path) -> dict[str, list[dict[str, Any]]]:
    """Every row of every table of a DuckDB store, as dicts."""
    with duckdb.connect(str(path), read_only=True) as db:
        out: dict[str, list[dict[str, Any]]] = {}
        for table in TABLES:
            cursor = db.execute(f"SELECT * FROM {table}")
            names = [d[0] for d in cursor.description]
            out[table] = [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]
        return out


def read_forwarded(folder: Path) -> list[ExportTraceServiceRequest]:
    """The requests errscope forwarded, as the receiver recorded them."""
    if not folder.is_dir():
        return []
    return [
        decode(Payload(0, f.name.split(".")[1], f.read_bytes())) for f in sorted(folder.iterdir())
    ]


def run_sidecar(cases: Sequence[Case], transport: str, work: Path) -> Stored:
    """Every case's payloads of one transport through one real sidecar, then a replay.

    One sidecar per transport (its start costs seconds): the cases are told apart by their
    trace ids, and each case's canaries are unique to it.  After the first pass the sidecar
    is stopped (SIGTERM: it drains), the store read, and a second sidecar on the same store
    is sent every payload again, as a client resends after a lost acknowledgement.
    """
    store = work / f"errscope-{transport}.duckdb"
    forwarded = work / f"forwarded-{transport}"
    stored = Stored({}, [])
    with receiver(forwarded) as target:
        for replay in (False, True):
            with sidecar(store, target) as served:
                for case in cases:
                    bodies = case.bodies(transport)
                    acked = sum(send(served, p) for p in bodies)
                    stored.sent[case.name] = stored.sent.get(case.name, 0) + len(bodies)
                    stored.acknowledged[case.name] = stored.acknowledged.get(case.name, 0) + acked
                stored.exit_codes.append(served.stop())
            if replay:
                stored.replay_tables = read_store(store)
            else:
                stored.tables = read_store(store)
    stored.forwarded = read_forwarded(forwarded)
    return stored


def to_readable(case: Case, transport: str) -> list[Any]:
    """The payload's spans as SDK ReadableSpans (this module's conversion, not errscope's)."""
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import Event, ReadableSpan
    from opentelemetry.sdk.util.instrumentation import InstrumentationScope
    from opentelemetry.trace import Link, SpanContext, SpanKind, Status, StatusCode, TraceFlags

    def value(v: AnyValue) -> Any:
        kind = v.WhichOneof("value")
        if kind == "array_value":
            return tuple(value(x) for x in v.array_value.values)
        if kind == "kvlist_value":
            return json.dumps({kv.key: value(kv.value) for kv in v.kvlist_value.values})
        if kind is None:
            return ""
        return getattr(v, kind)

    def attrs(pairs: Sequence[KeyValue]) -> dict[str, Any]:
        return {kv.key: value(kv.value) for kv in pairs}

    kinds = {0: SpanKind.INTERNAL, 1: SpanKind.INTERNAL, 2: SpanKind.SERVER, 3: SpanKind.CLIENT}
    kinds |= {4: SpanKind.PRODUCER, 5: SpanKind.CONSUMER}
    codes = {0: StatusCode.UNSET, 1: StatusCode.OK, 2: StatusCode.ERROR}
    out = []
    for payload in case.bodies(transport):
        for rs in decode(payload).resource_spans:
            resource = Resource(attrs(rs.resource.attributes))
            for ss in rs.scope_spans:
                scope = InstrumentationScope(ss.scope.name, ss.scope.version or None)
                for s in ss.spans:
                    trace_id = int.from_bytes(s.trace_id, "big")

                    def ctx(span_id: bytes, tid: int = trace_id) -> SpanContext:
                        return SpanContext(tid, int.from_bytes(span_id, "big"), True, TraceFlags(1))

                    code = codes.get(s.status.code, StatusCode.UNSET)
                    out.append(
                        ReadableSpan(
                            name=s.name,
                            context=ctx(s.span_id),
                            parent=ctx(s.parent_span_id) if s.parent_span_id else None,
                            resource=resource,
                            attributes=attrs(s.attributes),
                            events=[
                                Event(e.name, attrs(e.attributes), e.time_unix_nano)
                                for e in s.events
                            ],
                            links=[
                                Link(
                                    SpanContext(
                                        int.from_bytes(lk.trace_id, "big"),
                                        int.from_bytes(lk.span_id, "big"),
                                        True,
                                    ),
                                    attrs(lk.attributes),
                                )
                                for lk in s.links
                            ],
                            kind=kinds.get(s.kind, SpanKind.INTERNAL),
                            status=Status(
                                code, s.status.message if code is StatusCode.ERROR else None
                            ),
                            start_time=s.start_time_unix_nano,
                            end_time=s.end_time_unix_nano,
                            instrumentation_scope=scope,
                        )
                    )
    return out


def run_inprocess(cases: Sequence[Case], work: Path) -> Stored:
    """Every case's spans through `ScrubbingSpanExporter` (in-process) into one store and a
    capturing inner exporter; each case's spans in one export call."""
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
    from opentelemetry.sdk.trace.export import SpanExportResult
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from errscope.collector.export import ScrubbingSpanExporter
    from errscope.collector.store import open_store
    from errscope.collector.store.batch import StoreSink

    store = work / "inprocess.duckdb"
    inner = InMemorySpanExporter()
    exporter = ScrubbingSpanExporter(inner, sink=StoreSink(open_store(str(store))))
    stored = Stored({}, [])
    for case in cases:
        ok = exporter.export(to_readable(case, case.transports[0])) is SpanExportResult.SUCCESS
        stored.sent[case.name], stored.acknowledged[case.name] = 1, int(ok)
    stored.forwarded = [encode_spans(list(inner.get_finished_spans()))]
    exporter.shutdown()
    stored.tables = read_store(store)
    stored.exit_codes.append(0)
    return stored


# ---- judging -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Failure:
    """One call errscope got wrong: which call, what (`code`, `row` or `id:<meaning>`),
    what truth wants and what the store holds."""

    key: str  # the truth key as text, e.g. "trace_seq=4,tool=get_job" or "call_id=c_1"
    what: str
    want: str
    got: str


@dataclass
class Figures:
    """One case through one path (transport or in-process)."""

    case: str
    path: str
    calls: int = 0
    rows: int = 0
    matched: int = 0
    right_codes: int = 0
    fields_expected: int = 0
    right_fields: int = 0
    ids_expected: int = 0
    ids_found: int = 0
    extra_rows: int = 0
    canaries: int = 0
    canaries_in_tables: list[str] = field(default_factory=list)
    canaries_forwarded: list[str] = field(default_factory=list)
    wrong: list[str] = field(default_factory=list)  # "tool call_key: want X got Y"
    failures: list[Failure] = field(default_factory=list)  # the same, as records
    # hard checks
    sent: int = 0
    acknowledged: int = 0
    exit_codes: list[int] = field(default_factory=list)
    foreign_rows: int = 0  # rows whose (trace_id, span_id) is in no payload
    replay_changed: list[str] = field(default_factory=list)  # rows added by a replay
    replay_redactions_added: int = 0  # redaction counts a replay added (should be 0)

    def summary(self) -> dict[str, Any]:
        """The ratchet figures."""
        return {
            "right_codes": self.right_codes,
            "ids_found": self.ids_found,
            "missing_rows": self.calls - self.matched,
            "extra_rows": self.extra_rows,
            "canaries_in_tables": len(self.canaries_in_tables),
            "canaries_forwarded": len(self.canaries_forwarded),
            "replay_redactions_added": self.replay_redactions_added,
        }


def _candidates(call: dict[str, Any], spans: list[Span]) -> set[tuple[str, str]]:
    key = call["key"]
    if "call_id" in key:
        # the id as a whole token: call_x_1 is not inside call_x_10
        want = re.compile(rf"(?<![A-Za-z0-9_]){re.escape(str(key['call_id']))}(?![A-Za-z0-9_])")
        return {(s.trace_id, s.span_id) for s in spans if any(want.search(x) for x in s.strings)}
    traces: list[str] = []
    for s in spans:
        if s.trace_id not in traces:
            traces.append(s.trace_id)
    seq = int(key["trace_seq"])
    if seq < 1 or seq > len(traces):
        return set()
    trace = traces[seq - 1]
    return {(s.trace_id, s.span_id) for s in spans if s.trace_id == trace}


def _hits(
    canaries: Sequence[str], strings: Iterator[str] | Sequence[str], exempt: set[str]
) -> list[str]:
    """Canaries found inside strings; a string that IS an expected id value is exempt."""
    found = set()
    for text in strings:
        if not text or text in exempt:
            continue
        for canary in canaries:
            if canary in text:
                found.add(canary)
    return sorted(found)


def key_text(key: dict[str, Any]) -> str:
    """A truth key as one text, whatever order its fields were written in."""
    return ",".join(f"{k}={key[k]}" for k in sorted(key))


def _key_text(call: dict[str, Any]) -> str:
    return key_text(call["key"])


def judge(case: Case, transport: str, stored: Stored, path: str) -> Figures:
    """The figures of one run of one case."""
    spans = spans_of(case, transport)
    known = {(s.trace_id, s.span_id) for s in spans}
    traces = {s.trace_id for s in spans}
    rows = [r for r in stored.tables["tool_calls"] if r["trace_id"] in traces]
    figures = Figures(case.name, path, calls=len(case.calls), rows=len(rows))
    figures.sent = stored.sent.get(case.name, 0)
    figures.acknowledged = stored.acknowledged.get(case.name, 0)
    figures.exit_codes = list(stored.exit_codes)
    figures.foreign_rows = sum((r["trace_id"], r["span_id"]) not in known for r in rows)
    by_span = {(r["trace_id"], r["span_id"]): r for r in rows}
    parent_of = {(s.trace_id, s.span_id): (s.trace_id, s.parent_span_id) for s in spans}
    taken: set[tuple[str, str]] = set()
    exempt: set[str] = set()
    for call in case.calls:
        ids = {k: str(v) for k, v in call.get("ids", {}).items()}
        exempt |= set(ids.values())
        candidates = [k for k in _candidates(call, spans) if k in by_span and k not in taken]

        def rank(k: tuple[str, str], call: dict[str, Any] = call) -> tuple[int, int, int, str]:
            row = by_span[k]
            want_id = call["key"].get("call_id")
            # a row whose parent span is a row too is the same call at a lower layer (the mcp
            # SDK's client span under fastmcp's): the outer one is the call
            return (
                int(want_id is not None and row["call_id"] == want_id),
                int(row["tool"] == call["tool"]),
                int(parent_of.get(k) not in by_span),
                k[1],
            )

        candidates.sort(key=rank, reverse=True)
        figures.ids_expected += len(ids)
        if call.get("field"):
            figures.fields_expected += 1
        if not candidates:
            figures.wrong.append(f"{call['tool']} [{_key_text(call)}]: no row")
            figures.failures.append(Failure(_key_text(call), "row", call["code"], "no row"))
            continue
        chosen = candidates[0]
        taken.add(chosen)
        row = by_span[chosen]
        figures.matched += 1
        if row["code"] == call["code"]:
            figures.right_codes += 1
        else:
            figures.wrong.append(
                f"{call['tool']} [{_key_text(call)}]: want {call['code']} got {row['code']}"
            )
            figures.failures.append(
                Failure(_key_text(call), "code", call["code"], str(row["code"]))
            )
        if call.get("field") and row["field"] == call["field"]:
            figures.right_fields += 1
        for meaning, value in ids.items():
            if any(row.get(col) == value for col in ID_COLUMNS.get(meaning, ())):
                figures.ids_found += 1
            else:
                figures.failures.append(Failure(_key_text(call), f"id:{meaning}", value, "absent"))
    figures.extra_rows = len(rows) - len(taken)
    figures.canaries = len(case.canaries)
    table_strings = [
        v
        for table in TABLES
        for r in stored.tables[table]
        for v in r.values()
        if isinstance(v, str)
    ]
    figures.canaries_in_tables = _hits(case.canaries, table_strings, exempt)
    forwarded = [s for request in stored.forwarded for s in request_strings(request)]
    figures.canaries_forwarded = _hits(case.canaries, forwarded, exempt)
    if stored.replay_tables is not None:
        replayed = stored.replay_tables
        for table in ("tool_calls", "tracebacks"):
            before = sum(r["trace_id"] in traces for r in stored.tables[table])
            after = sum(r["trace_id"] in traces for r in replayed[table])
            if before != after:
                figures.replay_changed.append(f"{table}: {before} -> {after}")
        services = service_names(case, transport)
        before = sum(r["count"] for r in stored.tables["redactions"] if r["service"] in services)
        after = sum(r["count"] for r in replayed["redactions"] if r["service"] in services)
        figures.replay_redactions_added = after - before
    return figures


def service_names(case: Case, transport: str) -> set[str]:
    """The service.name of every resource in a case's payloads."""
    out = set()
    for payload in case.bodies(transport):
        for rs in decode(payload).resource_spans:
            for kv in rs.resource.attributes:
                if kv.key == "service.name":
                    out.add(kv.value.string_value)
    return out


def paths_of(case: Case) -> list[str]:
    """The runs a case gets: each of its transports, plus in-process for Python cases."""
    out = list(case.transports)
    if case.language == "python" and case.transports:
        out.append("inprocess")
    return out


def run_path(cases: Sequence[Case], path: str, work: Path) -> Stored:
    """Run every case that takes `path` through it."""
    if path == "inprocess":
        return run_inprocess([c for c in cases if "inprocess" in paths_of(c)], work)
    return run_sidecar([c for c in cases if path in c.transports], path, work)


def measure_all(cases: Sequence[Case]) -> list[Figures]:
    """Every case through every path it takes, judged; for report.py."""
    out = []
    with tempfile.TemporaryDirectory(prefix="conformance-") as tmp:
        for path in ("grpc", "http-protobuf", "http-json", "inprocess"):
            takers = [c for c in cases if path in paths_of(c)]
            if not takers:
                continue
            stored = run_path(takers, path, Path(tmp))
            for case in takers:
                transport = case.transports[0] if path == "inprocess" else path
                out.append(judge(case, transport, stored, path))
    return out


def floors(file: Path = HERE / "floor.toml") -> dict[str, dict[str, int]]:
    """The ratchet: per case, the figures it must not get worse than."""
    if not file.is_file():
        return {}
    return {k: dict(v) for k, v in tomllib.loads(file.read_text()).items()}


@dataclass(frozen=True)
class Gap:
    """A documented failure (gaps.toml): a call whose code, row or id errscope does not store,
    with why.  `cause` is `payload` when what the framework exports lacks the signal,
    `no_tool_span` when the framework records no tool span for the call (it exists only in
    model spans' conversation content), and `errscope` when the signal is there and errscope
    does not read it yet."""

    case: str
    framework: str
    version: str
    key: str  # key_text of the truth call
    what: str  # code | row | id:<meaning>
    want: str | None  # the truth code, for code and row gaps
    cause: str
    missing: str
    paths: tuple[str, ...] | None  # None: every path the case takes

    def applies(self, case: str, path: str) -> bool:
        """True when this gap is about `case` through `path`."""
        return self.case == case and (self.paths is None or path in self.paths)


GAP_CAUSES = ("payload", "no_tool_span", "errscope")


def gaps(file: Path = HERE / "gaps.toml") -> list[Gap]:
    """Every documented gap, in file order."""
    if not file.is_file():
        return []
    out = []
    for entry in tomllib.loads(file.read_text()).get("gap", []):
        paths = entry.get("paths")
        out.append(
            Gap(
                case=entry["case"],
                framework=entry["framework"],
                version=entry["version"],
                key=key_text(entry["call"]),
                what=entry["what"],
                want=entry.get("want"),
                cause=entry["cause"],
                missing=entry["missing"],
                paths=tuple(paths) if paths is not None else None,
            )
        )
    return out


def undocumented(figures: Figures, known: Sequence[Gap]) -> tuple[list[str], list[str]]:
    """(failures no gap lists, gaps that no longer fail) for one case through one path."""
    listed = {(g.key, g.what) for g in known if g.applies(figures.case, figures.path)}
    failed = {(f.key, f.what) for f in figures.failures}
    return (
        [f"{k} {w}" for k, w in sorted(failed - listed)],
        [f"{k} {w}" for k, w in sorted(listed - failed)],
    )


# Figures where more is better; the rest (missing rows, extra rows, canaries) must not grow.
HIGHER_IS_BETTER = ("right_codes", "ids_found")


def worse_than_floor(figures: Figures, floor: dict[str, int]) -> list[str]:
    """What got worse than the case's floor, as readable lines."""
    out = []
    for name, now in figures.summary().items():
        if name not in floor:
            continue
        limit = floor[name]
        if (name in HIGHER_IS_BETTER and now < limit) or (
            name not in HIGHER_IS_BETTER and now > limit
        ):
            out.append(f"{name}: {now} (floor {limit})")
    return out
