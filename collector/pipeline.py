"""The span pipeline: one function from any span to what errscope keeps and passes on.

Over 600 lines on purpose: `Pipeline.process` is one ordered pass over a span (classify,
normalise, scrub, sample, build the passed-on span) whose steps share one span's counts and
fail closed together; content policy lives in `content.py`, request context in `context.py`.


    classify → normalise → scrub → sample traceback → (record, passed-on span)

`Pipeline.process(view)` is the only implementation; the sidecar and the in-process
exporter both call it.  For a tool-call span it returns a `ToolCall` record (schema fields
only), the span to pass on (an allowlist of GenAI and `errscope.*` attributes, every other
string scrubbed, the code in `error.type` with status ERROR on failure and no `error.type`
on success), a redacted traceback sample when one is due, and redaction counts per rule.
Non-tool spans are dropped, scrubbed (default) or passed with secrets masked, by policy:
no mode forwards a secret.  Conversation content (messages, prompts, completions, tool
arguments and results, input/output values of every convention, message events, exception
messages) is dropped from every passed-on span under the default `content="drop"`, each
drop counted as `content:<family>`; `content="keep"` keeps it, scrubbed.

`Pipeline.process_request(views)` runs one export request: a tool span there inherits the
ids its ancestors carry (the agent span's conversation id), reads the HTTP status of its
client child span, and takes the call id a model span requested for it; a call the
framework rejected before any tool ran (no tool span: a model span requested it and a later
one's input answers it with an error) becomes a row of its own on the requesting span's ids.

Fail closed: if processing a span raises, the span is reduced to its ids and an
internal_error code (`failed=True`), never passed on whole; the exception is swallowed
here and never reaches the application thread.  Thread-safe: the pipeline holds only
immutable state plus the sampler, which locks.
"""

from __future__ import annotations

import logging
import re
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any, Final

from errscope.collector import semconv as sc
from errscope.collector.catalog import Catalog, Code, default_catalog
from errscope.collector.classify import Convention, Matcher, ToolSpan, classify
from errscope.collector.codes import Outcome, Source, code_from_text, normalise
from errscope.collector.content import (
    CONTENT_RULE,
    EXCEPTION_WORDS,
    ContentPolicy,
    argument_values,
    arguments_unrecorded,
    content_family,
    mask_traceback_content,
)
from errscope.collector.context import (
    NO_RELATED,
    OWN_CALL_ID_KEYS,
    Related,
    first_text,
    metadata_ids,
    request_context,
    unrun_calls,
)
from errscope.collector.record import ToolCall, TracebackSample, is_safe_id
from errscope.collector.sample import TracebackSampler
from errscope.collector.scrub import Scrubber, default_scrubber, redact_traceback
from errscope.collector.spanview import (
    STATUS_ERROR,
    STATUS_UNSET,
    AttrValue,
    EventView,
    LinkView,
    SpanView,
    StatusView,
)

__all__ = ["ContentPolicy", "NonToolPolicy", "Pipeline", "Processed", "Related"]

log = logging.getLogger("errscope.pipeline")

UNKNOWN_SERVICE: Final = "unknown_service"
NON_TOOL: Final = "_non_tool"  # the `tool` of redaction counts from non-tool spans
_TOOL_BAD_CHARS: Final = re.compile(r"[^A-Za-z0-9_.:/-]")
# An attribute whose name says it holds a credential: its text is masked whole, whatever
# it looks like (a password has no format a rule could recognise).  A name segment must
# be the word itself: "gen_ai.usage.output_tokens" and "tokenizer" are not tokens.
_SECRET_NAME_RE: Final = re.compile(
    r"(?i)(?:^|[._\-\s])(?:password|passwd|passphrase|pass|pwd|secrets?|token"
    r"|api[_\-]?keys?|apikey|access[_\-]?keys?|private[_\-]?keys?|client[_\-]?secret"
    r"|auth|authorization|credentials?|cookies?|subscription[_\-]?key|functions?[_\-]?key"
    r"|license[_\-]?key)(?:$|[._\-\s])"
)
SECRET_NAME_RULE: Final = "secret-named-attribute"  # noqa: S105 - a rule id, not a secret
_LABEL_OK: Final = re.compile(r"[^\x00-\x1f\x7f]{1,128}")
_EXC_TYPE_OK: Final = re.compile(r"[A-Za-z][A-Za-z0-9_.-]{0,47}")
_REDACTED_SPAN_NAME: Final = "errscope.redacted"
# Ids kept as attributes on a passed-on tool span: checked like the record's ids.
_ID_KEYS: Final = frozenset(
    {
        sc.GEN_AI_TOOL_CALL_ID,
        sc.GEN_AI_CONVERSATION_ID,
        sc.GEN_AI_AGENT_ID,
        sc.MCP_SESSION_ID,
        sc.JSONRPC_REQUEST_ID,
        sc.OI_SESSION_ID,
        sc.ERRSCOPE_CORRELATION_ID,
        sc.GEN_AI_AGENT_CALL_ID,
        sc.AI_TOOL_CALL_ID,
        sc.AI_SESSION_ID,
        sc.AI_SESSION_ID_SNAKE,
        sc.TRACELOOP_SESSION_ID,
        sc.TRACELOOP_THREAD_ID,
    }
)


_CALL_ID_KEYS: Final = frozenset(
    {
        sc.OI_TOOL_CALL_ID,
        sc.OI_TOOL_ID,
        sc.TRACELOOP_SESSION_ID,
        sc.TRACELOOP_THREAD_ID,
        sc.TRACELOOP_RUN_ID,
        sc.AI_SESSION_ID,
        sc.AI_SESSION_ID_SNAKE,
        sc.AI_TOOL_CALL_ID,
    }
)
_LABEL_KEYS: Final = frozenset(
    {sc.SERVICE_NAME, sc.SERVICE_VERSION, sc.DEPLOYMENT_ENVIRONMENT, sc.DEPLOYMENT_ENVIRONMENT_OLD}
)
_NAME_KEY: Final = "\x00name"  # the span name rides along in the allowlist's one scan
# Resource attributes never passed on: a command line splits a flag from its value
# ("--password", "hunter2") into array elements, or puts both in one string no rule can
# read as a pair, so neither form can be scrubbed reliably and neither is needed upstream.
_ARGV_KEYS: Final = frozenset({"process.command_args", "process.command_line"})
_MAX_ORIGINS: Final = 4096
_EXPOSURE_SCAN_CHARS: Final = 4096
# A secret the service masked itself (the toolkit scrubs exception messages at the source).
_MARKER_RE: Final = re.compile(r"\[REDACTED:([a-z0-9][a-z0-9_.-]{0,63})(?::hmac=[0-9a-f]{16})?\]")


class NonToolPolicy(StrEnum):
    """What happens to spans that are not tool calls."""

    DROP = "drop"  # not passed on at all
    SCRUB = "scrub"  # every string scrubbed: secrets masked, tracebacks reduced (default)
    PASS = "pass"  # noqa: S105 - a policy name, not a password: secrets masked, rest kept


@dataclass(frozen=True, slots=True)
class Processed:
    """What one span became: a record, a span to pass on, a traceback sample, counts."""

    record: ToolCall | None = None
    forward: SpanView | None = None
    traceback: TracebackSample | None = None
    redactions: Mapping[str, int] = field(default_factory=dict)
    failed: bool = False
    rejected: str | None = None  # why the span was refused (bad ids): partial success
    # Where a span with no record counted its redactions: its service and start time, and
    # its (trace_id, span_id), so a client's retry of the span is not counted again.
    service: str | None = None
    ts: datetime | None = None
    span_key: tuple[str, str] | None = None
    # Content a non-tool span lost, per `content:<family>`: not stored with the redaction
    # counts, since a non-tool span has no row that recognises its replay after a restart
    # (the sink remembers counted spans in memory only), so a resend would count it twice.
    content_dropped: Mapping[str, int] = field(default_factory=dict)


class _Counts:
    """Redaction counts for one span, per rule."""

    def __init__(self) -> None:
        self.by_rule: Counter[str] = Counter()

    def add(self, counts: Mapping[str, int]) -> None:
        self.by_rule.update(counts)


def _masked_by_name(
    value: AttrValue, counts: _Counts, scrub_key: Callable[[str, _Counts], str]
) -> AttrValue:
    """The value of a credential-named attribute: every text masked whole, counted.

    A map under such a name keeps its (scrubbed) keys, and every value in it is masked.
    """
    if isinstance(value, str) and value:
        counts.add({SECRET_NAME_RULE: 1})
        return f"[REDACTED:{SECRET_NAME_RULE}]"
    if isinstance(value, tuple):
        return tuple(_masked_by_name(v, counts, scrub_key) for v in value)
    if isinstance(value, dict):
        return {
            scrub_key(k, counts): _masked_by_name(v, counts, scrub_key) for k, v in value.items()
        }
    if isinstance(value, bytes):
        counts.add({"bytes": 1})
        return ""
    return value  # numbers and booleans say nothing secret


def _ns_to_dt(ns: int) -> datetime:
    return datetime.fromtimestamp(ns / 1e9, tz=UTC)


_ZERO_SPAN_ID: Final = "0" * 16


def _parent_span_id(view: SpanView) -> str | None:
    """The span's parent id as stored: 16 hex digits, None for a root (an all-zero id is
    how some SDKs write "no parent")."""
    parent = view.parent_span_id
    return parent if parent and parent != _ZERO_SPAN_ID else None


_NAME_MATCH_MIN_CHARS: Final = 12  # a shorter shared start is a word, not a repeated value
_NAME_SCAN_CHARS: Final = 1024


def _shared_start(a: str, b: str) -> int:
    """How many leading characters `a` and `b` share."""
    for n, (x, y) in enumerate(zip(a, b, strict=False)):
        if x != y:
            return n
    return min(len(a), len(b))


def _name_without(name: str, values: Sequence[str]) -> tuple[str, int]:
    """`name` with every run that repeats the start of one of `values` (at least 12
    characters of it, as a truncated copy does) masked; and how many runs were masked."""
    head = name[:_NAME_SCAN_CHARS]
    masked = 0
    for value in values:
        text = value.strip()
        start = text[:_NAME_MATCH_MIN_CHARS]
        if len(start) < _NAME_MATCH_MIN_CHARS:
            continue
        at = head.find(start)
        while at >= 0:
            length = _shared_start(head[at:], text)
            head = f"{head[:at]}[content]{head[at + length :]}"
            masked += 1
            at = head.find(start, at + len("[content]"))
    return (head if masked else name), masked


def _strings_of_keys(attrs: Mapping[str, AttrValue], keys: frozenset[str]) -> list[str]:
    return [str(v) for k, v in attrs.items() if k in keys and isinstance(v, str | int)]


def _strings(value: AttrValue) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, tuple):
        return [s for v in value for s in _strings(v)]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    return []


def _nested_texts(value: AttrValue, out: list[str]) -> bool:
    """Append every string inside an array or map, nested keys included, to `out`.

    True when the value holds what the one scan cannot judge: bytes (never scannable) or a
    map key that names a credential (its value is masked whatever it looks like).
    """
    if isinstance(value, str):
        out.append(value)
        return False
    if isinstance(value, bytes):
        return True
    unsure = False
    if isinstance(value, tuple):
        for item in value:
            unsure = _nested_texts(item, out) or unsure
    elif isinstance(value, dict):
        for key, item in value.items():
            out.append(key)
            unsure = _nested_texts(item, out) or unsure or bool(_SECRET_NAME_RE.search(key))
    return unsure


class Pipeline:
    """classify → normalise → scrub → sample, for one span at a time."""

    def __init__(
        self,
        *,
        catalog: Catalog | None = None,
        scrubber: Scrubber | None = None,
        matchers: Sequence[Matcher] = (),
        non_tool: NonToolPolicy = NonToolPolicy.SCRUB,
        sampler: TracebackSampler | None = None,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        forward: bool = True,
        content: ContentPolicy = ContentPolicy.DROP,
    ) -> None:
        self.catalog = catalog or default_catalog()
        self.content = ContentPolicy(content)
        self.scrubber = scrubber or default_scrubber()
        self.matchers = tuple(matchers)
        self.non_tool = non_tool
        self.sampler = sampler or TracebackSampler()
        self.clock = clock
        self.forward = forward  # False: nothing is passed on, so no span is built or scrubbed
        self.failures = 0
        self._origins: dict[tuple[object, ...], tuple[dict[str, Any], dict[str, int]]] = {}
        self._rule_ids = frozenset(rule.id for rule in self.scrubber.rules.rules)

    # ---------------------------------------------------------------- entry point

    def context(self, views: Sequence[SpanView]) -> Mapping[int, Related]:
        """What the spans of one export request say about each tool span among them, keyed
        by `id()` of its view.  Never raises: without a context each span stands alone."""
        try:
            return request_context(views, self.matchers)
        except Exception as exc:  # noqa: BLE001 - the context is a refinement, never a need
            log.warning("request context failed", extra={"error_class": type(exc).__name__})
            return {}

    def process_request(
        self, views: Sequence[SpanView], *, received_at: datetime | None = None
    ) -> list[Processed]:
        """Process one export request's spans, each with what the others say about it."""
        related = self.context(views)
        out = [self.process(v, received_at=received_at, related=related.get(id(v))) for v in views]
        return [*out, *self.unrun(views, received_at=received_at)]

    def unrun(
        self, views: Sequence[SpanView], *, received_at: datetime | None = None
    ) -> list[Processed]:
        """Rows for the calls of one request that the framework rejected before any tool
        ran, so no tool span exists (`context.unrun_calls`): the code from the rejection's
        words (`denied` for a denied approval), on the requesting model span's ids.  Nothing
        is passed on for them (the model span itself is).  Never raises."""
        try:
            calls = unrun_calls(views, self.matchers)
        except Exception as exc:  # noqa: BLE001 - a refinement, never a need
            log.warning("unrun calls failed", extra={"error_class": type(exc).__name__})
            return []
        out = []
        for call in calls:
            found = code_from_text(call.text, self.catalog) if call.text else None
            code = Code.DENIED.value if call.denied else found or Code.INTERNAL_ERROR.value
            attrs = call.request.attributes
            convention = (
                Convention.VERCEL_AI
                if sc.AI_OPERATION_ID in attrs
                else Convention.OPENINFERENCE
                if sc.OPENINFERENCE_SPAN_KIND in attrs
                else Convention.HAYSTACK
                if sc.HAYSTACK_LLM_OUTPUT in attrs
                else Convention.GENAI
            )
            processed = self.process(call.as_view(code, convention.value), received_at=received_at)
            if processed.record is None:
                continue
            source = Source.MARKER if call.denied or found is None else Source.TEXT
            out.append(
                replace(
                    processed,
                    record=replace(processed.record, source=source.value),
                    forward=None,
                    traceback=None,
                )
            )
        return out

    def process(
        self,
        view: SpanView,
        *,
        received_at: datetime | None = None,
        related: Related | None = None,
    ) -> Processed:
        """Turn one span into what errscope keeps and passes on; never raises."""
        if len(view.trace_id) != 32 or len(view.span_id) != 16 or view.trace_id == "0" * 32:
            return Processed(rejected="bad_ids")
        tool_span: ToolSpan | None = None
        try:
            tool_span = classify(view, self.matchers)
            if tool_span is None:
                return self._non_tool(view) if self.forward else Processed()
            return self._tool(view, tool_span, received_at or self.clock(), related or NO_RELATED)
        except Exception as exc:  # noqa: BLE001 - fail closed: nothing may escape to the app
            self.failures += 1
            log.warning(
                "pipeline failure; span reduced to ids",
                extra={
                    "code": "internal_error",
                    "error_class": type(exc).__name__,
                    "trace_id": view.trace_id,
                    "span_id": view.span_id,
                },
            )
            return self._fail_closed(view, tool_span, received_at or self.clock())

    # ---------------------------------------------------------------- tool spans

    def _tool(
        self, view: SpanView, tool_span: ToolSpan, received_at: datetime, related: Related
    ) -> Processed:
        counts = _Counts()
        outcome = normalise(
            view, self.catalog, is_secret=self.scrubber.contains_secret, children=related.children
        )
        resource = view.resource
        # The span's own ids first, then its ancestors' in the same request.
        ids: dict[str, AttrValue] = {**related.inherited, **view.attributes}
        thread_id, run_id = metadata_ids(view.attributes)
        # One scan reads every id and label this record may keep and everything the span
        # loses: a kept value is checked on its own only when the scan finds a secret among
        # them (a per-value scan costs ~15 us each); what is lost is only counted.
        kept = [
            *_strings_of_keys(ids, _ID_KEYS | _CALL_ID_KEYS),
            related.requested_call_id or "",
            thread_id or "",
            run_id or "",
            *_strings_of_keys(resource, _LABEL_KEYS),
            tool_span.tool,
            outcome.call_id or "",
            outcome.field or "",
        ]
        kept_found, lost_found = self.scrubber.count_secrets_each(
            ["\n\n".join(t for t in kept if t), self._discarded_text(view)]
        )
        clean = not kept_found
        counts.add(lost_found)
        counts.add(self._masked_at_source(view))
        service = self._label(first_text(resource, sc.SERVICE_NAME), clean) or UNKNOWN_SERVICE
        tool = self._tool_name(tool_span.tool, clean)
        attrs = view.attributes
        fields: dict[str, Any] = {
            "ts": _ns_to_dt(view.start_ns),
            "received_at": received_at,
            "service": service,
            "version": self._label(first_text(resource, sc.SERVICE_VERSION), clean),
            "environment": self._label(
                first_text(resource, sc.DEPLOYMENT_ENVIRONMENT, sc.DEPLOYMENT_ENVIRONMENT_OLD),
                clean,
            ),
            "tool": tool,
            "code": outcome.code,
            "raw_code": outcome.raw_code,
            # A field name the model invented can be anything it was sent, a key included.
            "field": None if self._is_secret(outcome.field or "", clean) else outcome.field,
            "trace_id": view.trace_id,
            "span_id": view.span_id,
            "call_id": self._id(
                first_text(attrs, *OWN_CALL_ID_KEYS)
                or outcome.call_id
                or related.requested_call_id
                or first_text(attrs, sc.JSONRPC_REQUEST_ID),
                clean,
            ),
            "session_id": self._id(
                first_text(
                    ids,
                    sc.OI_SESSION_ID,
                    sc.TRACELOOP_SESSION_ID,
                    sc.AI_SESSION_ID,
                    sc.AI_SESSION_ID_SNAKE,
                    sc.GEN_AI_CONVERSATION_ID,
                    sc.LOGFIRE_GROUP_ID,
                    sc.MCP_SESSION_ID,
                ),
                clean,
            ),
            "correlation_id": self._id(first_text(ids, sc.ERRSCOPE_CORRELATION_ID), clean),
            "conversation_id": self._id(
                first_text(ids, sc.GEN_AI_CONVERSATION_ID, sc.LOGFIRE_GROUP_ID), clean
            ),
            "thread_id": self._id(first_text(ids, sc.TRACELOOP_THREAD_ID) or thread_id, clean),
            "agent_run_id": self._id(
                first_text(ids, sc.GEN_AI_AGENT_CALL_ID, sc.TRACELOOP_RUN_ID, sc.AGNO_RUN_ID)
                or run_id,
                clean,
            ),
            "mcp_session_id": self._id(first_text(ids, sc.MCP_SESSION_ID), clean),
            "jsonrpc_request_id": self._id(first_text(attrs, sc.JSONRPC_REQUEST_ID), clean),
            "parent_span_id": _parent_span_id(view),
            "duration_ms": max(view.end_ns - view.start_ns, 0) / 1e6,
            "attempt": outcome.attempt,
            "retry_after_s": outcome.retry_after_s,
            "http_status": outcome.http_status,
            "convention": tool_span.convention.value,
            "source": outcome.source.value,
        }
        record = ToolCall(**fields)
        traceback = self._traceback(view, record, outcome, counts)
        forward = self._forward_tool(view, record, outcome, counts, clean) if self.forward else None
        redactions = sum(counts.by_rule.values())
        if redactions:
            record = ToolCall(**fields, redactions=redactions)  # cheaper than replace()
        record.validate()
        return Processed(
            record=record, forward=forward, traceback=traceback, redactions=dict(counts.by_rule)
        )

    @staticmethod
    def _discarded_text(view: SpanView) -> str:
        """What a tool span loses (arguments, results, messages), to count its secrets.

        Nothing of it is kept, but the counts per rule are what the exposure page shows: which
        tool leaks which kind of secret into its spans.  The count is a statistic, so its cost
        is bounded: each value is read up to `_EXPOSURE_SCAN_CHARS`, and stack traces are left
        out (they repeat the exception message, which is read).
        """
        texts: list[str] = [view.status.message[:_EXPOSURE_SCAN_CHARS]]
        for key, value in view.attributes.items():
            if key not in sc.FORWARD_ALLOWLIST:
                texts.extend(t[:_EXPOSURE_SCAN_CHARS] for t in _strings(value))
        for event in view.events:
            for key, value in event.attributes.items():
                if key not in (sc.EXCEPTION_TYPE, sc.EXCEPTION_STACKTRACE):
                    texts.extend(t[:_EXPOSURE_SCAN_CHARS] for t in _strings(value))
        # A text repeated on one span (the status message is usually the exception's
        # message) is one exposure, read once.
        return "\n\n".join(dict.fromkeys(t for t in texts if t))

    def _masked_at_source(self, view: SpanView) -> Counter[str]:
        """Secrets the service masked before export, per rule: still exposures to count.

        The toolkit scrubs an exception message at the source, so the span carries
        `[REDACTED:<rule>]` where the key was.  Only the scrubber's own rule ids count: a
        marker is text the span's sender wrote, and an unknown "rule" could be anything.
        """
        found: Counter[str] = Counter()
        texts = [view.status.message]
        texts += [
            t
            for e in view.events
            for k, v in e.attributes.items()
            if k == sc.EXCEPTION_MESSAGE
            for t in _strings(v)
        ]
        for text in dict.fromkeys(t for t in texts if "[REDACTED:" in t):
            for rule in _MARKER_RE.findall(text[:_EXPOSURE_SCAN_CHARS]):
                if rule in self._rule_ids:
                    found[rule] += 1
        return found

    def _is_secret(self, value: str, clean: bool) -> bool:
        return not clean and self.scrubber.contains_secret(value)

    def _label(self, value: str | None, clean: bool = False) -> str | None:
        if value is None or not _LABEL_OK.fullmatch(value) or self._is_secret(value, clean):
            return None
        return value

    def _id(self, value: str | None, clean: bool = False) -> str | None:
        if value is None or not is_safe_id(value) or self._is_secret(value, clean):
            return None
        return value

    def _tool_name(self, tool: str, clean: bool = False) -> str:
        # The name as sent is checked before it is cut and its odd characters replaced:
        # either can leave a key's prefix that no rule recognises.
        if self._is_secret(tool, clean):
            return "redacted_tool"
        cleaned = _TOOL_BAD_CHARS.sub("_", tool)[:128].lstrip(".:/-") or "unknown_tool"
        return "redacted_tool" if self._is_secret(cleaned, clean) else cleaned

    def _traceback(
        self, view: SpanView, record: ToolCall, outcome: Outcome, counts: _Counts
    ) -> TracebackSample | None:
        if outcome.code == Code.OK:
            return None
        text = None
        for event in reversed(view.events):
            stack = event.attributes.get(sc.EXCEPTION_STACKTRACE)
            if event.name == sc.EXCEPTION_EVENT and isinstance(stack, str) and stack:
                text = stack
                break
        if text is None:
            text = view.status.message  # LangChain puts repr(exc) + the traceback here
        if not text:
            return None
        # Redacting a trace costs far more than the rest of the span: do it only for the
        # traces the sampler may keep (a budget per service, tool and exception type).
        cheap_type = self._exception_type_hint(view)
        if not self.sampler.admit(record.service, record.tool, cheap_type, view.start_ns / 1e9):
            return None
        redacted = redact_traceback(text, self.scrubber)
        if redacted is None:
            return None
        # The traceback's messages quote the call's arguments (a URL's path and query, a
        # parser's "For input string"): conversation content, never stored.
        # A convention that records no arguments leaves them unknown, not absent: then only
        # the exception types and codes of the messages are kept (`arguments_unrecorded`).
        masked_text, masked = mask_traceback_content(
            redacted.text,
            argument_values(view.attributes),
            arguments_known=not arguments_unrecorded(record.convention or "", view.attributes),
        )
        if masked:
            counts.add({f"{CONTENT_RULE}:traceback": masked})
        if not self.sampler.keep(
            record.service, record.tool, redacted.fingerprint, view.start_ns / 1e9
        ):
            return None
        exc_type = redacted.exception_type or "Exception"
        if not _EXC_TYPE_OK.fullmatch(exc_type):
            last = exc_type.rsplit(".", 1)[-1]
            exc_type = last if _EXC_TYPE_OK.fullmatch(last) else "Exception"
        return TracebackSample(
            ts=record.ts,
            service=record.service,
            version=record.version,
            tool=record.tool,
            trace_id=record.trace_id,
            span_id=record.span_id,
            correlation_id=record.correlation_id,
            exception_type=exc_type,
            fingerprint=redacted.fingerprint[:64],
            text=masked_text,
        )

    @staticmethod
    def _exception_type_hint(view: SpanView) -> str:
        for event in reversed(view.events):
            value = event.attributes.get(sc.EXCEPTION_TYPE)
            if event.name == sc.EXCEPTION_EVENT and isinstance(value, str):
                return value[:256]
        return ""

    def _forward_tool(
        self, view: SpanView, record: ToolCall, outcome: Outcome, counts: _Counts, clean: bool
    ) -> SpanView:
        kept: dict[str, AttrValue] = {}
        keep_content = self.content is ContentPolicy.KEEP
        for key, value in view.attributes.items():
            family = content_family(key)
            if family is not None:
                if keep_content:
                    kept[key] = value  # scrubbed below with the rest
                else:
                    counts.add({f"{CONTENT_RULE}:{family}": 1})
                continue
            # errscope.field is set below from the record only: an incoming one may be a
            # value the record refused, or any text on a call that succeeded.
            if key not in sc.FORWARD_ALLOWLIST or key in (sc.ERROR_TYPE, sc.ERRSCOPE_FIELD):
                continue
            if key in _ID_KEYS:
                text = value if isinstance(value, str) else str(value)
                if self._id(text, clean) is not None:
                    kept[key] = value
                continue
            kept[key] = value
        kept = self._scrub_mapping({_NAME_KEY: view.name, **kept}, counts, NonToolPolicy.SCRUB)
        name = kept.pop(_NAME_KEY)
        failing = record.code != Code.OK
        kept[sc.ERRSCOPE_CODE] = record.code
        kept[sc.ERRSCOPE_CONVENTION] = record.convention or "errscope"
        kept[sc.ERRSCOPE_SOURCE] = outcome.source.value
        kept[sc.ERRSCOPE_TOOL] = record.tool
        kept.setdefault(sc.GEN_AI_TOOL_NAME, record.tool)
        kept.setdefault(sc.GEN_AI_OPERATION_NAME, sc.EXECUTE_TOOL)
        if record.field:
            kept[sc.ERRSCOPE_FIELD] = record.field
        if failing:
            kept[sc.ERROR_TYPE] = record.code
        if record.correlation_id:
            kept[sc.ERRSCOPE_CORRELATION_ID] = record.correlation_id
        if record.call_id and sc.GEN_AI_TOOL_CALL_ID not in kept:
            kept[sc.GEN_AI_TOOL_CALL_ID] = record.call_id
        events = tuple(
            self._exception_event(e, counts) for e in view.events if e.name == sc.EXCEPTION_EVENT
        )
        status = (
            StatusView(STATUS_ERROR, record.code)
            if failing
            else StatusView(STATUS_UNSET if view.status.code == STATUS_ERROR else view.status.code)
        )
        # Built field by field rather than with dataclasses.replace(), which costs as much
        # again as the constructor on every tool span.
        return SpanView(
            name=name if isinstance(name, str) else "",
            trace_id=view.trace_id,
            span_id=view.span_id,
            start_ns=view.start_ns,
            end_ns=view.end_ns,
            kind=view.kind,
            parent_span_id=view.parent_span_id,
            status=status,
            attributes=kept,
            events=tuple(e for e in events if e is not None),
            links=self._links(view.links, counts, NonToolPolicy.SCRUB),
            trace_flags=view.trace_flags,
            trace_state=self._trace_state(view.trace_state, counts),
            **self._scrub_origin(view, counts, NonToolPolicy.SCRUB),
        )

    def _exception_event(self, event: EventView, counts: _Counts) -> EventView | None:
        exc_type = event.attributes.get(sc.EXCEPTION_TYPE)
        if not isinstance(exc_type, str) or not exc_type:
            return None
        if self.scrubber.contains_secret(exc_type) or len(exc_type) > 256:
            counts.add({"exception_type": 1})
            return None
        dropped = sum(
            1 for k in event.attributes if k in (sc.EXCEPTION_MESSAGE, sc.EXCEPTION_STACKTRACE)
        )
        if dropped:
            counts.add({"exception_detail": dropped})
        return EventView(sc.EXCEPTION_EVENT, event.time_ns, {sc.EXCEPTION_TYPE: exc_type})

    # ---------------------------------------------------------------- non-tool spans

    def _non_tool(self, view: SpanView) -> Processed:
        if self.non_tool is NonToolPolicy.DROP:
            return Processed()
        counts = _Counts()
        dropped = _Counts()
        policy = self.non_tool
        scrub = self._scrub_text(policy)
        attributes, events, message, name = self._without_content(view, counts, dropped)
        forward = replace(
            view,
            name=scrub(name, counts),
            status=StatusView(view.status.code, scrub(message, counts)),
            attributes=self._scrub_mapping(attributes, counts, policy),
            events=tuple(
                EventView(
                    scrub(e.name, counts),
                    e.time_ns,
                    self._scrub_mapping(e.attributes, counts, policy),
                )
                for e in events
            ),
            links=self._links(view.links, counts, policy),
            trace_state=self._trace_state(view.trace_state, counts),
            **self._scrub_origin(view, counts, policy),
        )
        if not counts.by_rule:
            return Processed(forward=forward, content_dropped=dict(dropped.by_rule))
        service = self._label(first_text(view.resource, sc.SERVICE_NAME)) or UNKNOWN_SERVICE
        return Processed(
            forward=forward,
            content_dropped=dict(dropped.by_rule),
            redactions=dict(counts.by_rule),
            service=service,
            ts=_ns_to_dt(view.start_ns),
            span_key=(view.trace_id, view.span_id),
        )

    def _without_content(
        self, view: SpanView, counts: _Counts, dropped: _Counts
    ) -> tuple[Mapping[str, AttrValue], tuple[EventView, ...], str, str]:
        """A non-tool span's attributes, events, status text and name under the content policy.

        `drop`: every content attribute (messages, prompts, completions, input/output
        values), every message event and the words of every exception (message, stack,
        status description: an agent span repeats its tool's failure there) are removed,
        each counted in `dropped` as `content:<family>`; an exception event keeps its type.
        A span name that repeats the start of a dropped value (CrewAI names its agent span
        after the task's description) loses that part (`content:span_name`).  A secret
        inside what is dropped still counts in `counts` (an exposure).
        """
        if self.content is ContentPolicy.KEEP:
            return view.attributes, view.events, view.status.message, view.name
        attributes: dict[str, AttrValue] = {}
        lost: list[str] = []
        for key, value in view.attributes.items():
            family = content_family(key)
            if family is None:
                attributes[key] = value
            else:
                dropped.add({f"{CONTENT_RULE}:{family}": 1})
                lost.extend(t[:_EXPOSURE_SCAN_CHARS] for t in _strings(value))
        if lost:
            # Dropped, but a secret in it is still an exposure the redactions page shows.
            counts.add(self.scrubber.count_secrets("\n\n".join(dict.fromkeys(lost))))
        events: list[EventView] = []
        for event in view.events:
            if event.name == sc.EXCEPTION_EVENT:
                words = [k for k in event.attributes if k in EXCEPTION_WORDS]
                if words:
                    dropped.add({f"{CONTENT_RULE}:exception": len(words)})
                events.append(
                    EventView(
                        event.name,
                        event.time_ns,
                        {k: v for k, v in event.attributes.items() if k not in EXCEPTION_WORDS},
                    )
                )
            elif event.name.startswith(sc.CONTENT_EVENT_PREFIXES) or any(
                content_family(k) for k in event.attributes
            ):
                dropped.add({f"{CONTENT_RULE}:events": 1})
            else:
                events.append(event)
        message = view.status.message
        if message:
            dropped.add({f"{CONTENT_RULE}:status": 1})
        name, masked = _name_without(view.name, lost)
        if masked:
            dropped.add({f"{CONTENT_RULE}:span_name": masked})
        return attributes, tuple(events), "", name

    # ---------------------------------------------------------------- scrubbing helpers

    def _scrub_text(self, policy: NonToolPolicy) -> Callable[[str, _Counts], str]:
        method = (
            self.scrubber.scrub_secrets if policy is NonToolPolicy.PASS else self.scrubber.scrub
        )

        def scrub(text: str, counts: _Counts) -> str:
            if not text:
                return text
            result = method(text)
            counts.add(result.counts)
            return result.text

        return scrub

    def _scrub_value(self, value: AttrValue, counts: _Counts, policy: NonToolPolicy) -> AttrValue:
        if isinstance(value, str):
            return self._scrub_text(policy)(value, counts)
        if isinstance(value, tuple):
            return tuple(self._scrub_value(v, counts, policy) for v in value)
        if isinstance(value, dict):
            return self._scrub_mapping(value, counts, policy)
        if isinstance(value, bytes):
            counts.add({"bytes": 1})  # opaque bytes cannot be scanned: never passed on
            return ""
        return value

    def _scrub_mapping(
        self, attrs: Mapping[str, AttrValue], counts: _Counts, policy: NonToolPolicy
    ) -> dict[str, AttrValue]:
        """Scrub every key and value: one scan of all strings first, per item only on a finding.

        Keys too, at every depth: a span can be given any string as an attribute's name, a
        token included, and a map value (OTLP kvlist) nests keys and values of its own.
        """
        named = {k for k in attrs if _SECRET_NAME_RE.search(k)}
        texts = list(attrs)
        unsure = bool(named)
        for value in attrs.values():
            if isinstance(value, str):
                texts.append(value)
            elif isinstance(value, tuple | dict | bytes):
                unsure = _nested_texts(value, texts) or unsure
        if not unsure:
            joined = "\n\n".join(t for t in texts if t)
            method = (
                self.scrubber.scrub_secrets if policy is NonToolPolicy.PASS else self.scrubber.scrub
            )
            if not joined or not method(joined).counts:
                return dict(attrs)
        scrub_key = self._scrub_text(policy)
        return {
            scrub_key(k, counts): (
                _masked_by_name(v, counts, scrub_key)
                if k in named
                else self._scrub_value(v, counts, policy)
            )
            for k, v in attrs.items()
        }

    def _scrub_origin(
        self, view: SpanView, counts: _Counts, policy: NonToolPolicy
    ) -> dict[str, Any]:
        """Resource and scope, scrubbed once per distinct origin (a service repeats them)."""
        key = (policy, view.scope_name, view.scope_version, repr(sorted(view.resource.items())))
        cached = self._origins.get(key)
        if cached is None:
            local = _Counts()
            scrub = self._scrub_text(policy)
            resource = {k: v for k, v in view.resource.items() if k not in _ARGV_KEYS}
            fields: dict[str, Any] = {
                "resource": self._scrub_mapping(resource, local, policy),
                "scope_name": scrub(view.scope_name, local),
                "scope_version": scrub(view.scope_version, local),
            }
            if len(self._origins) >= _MAX_ORIGINS:
                self._origins.clear()
            cached = (fields, dict(local.by_rule))
            self._origins[key] = cached
        fields, found = cached
        counts.add(found)
        return dict(fields)

    def _trace_state(self, header: str, counts: _Counts) -> str:
        """The W3C tracestate without any entry that holds a secret.

        Its values are vendors' opaque strings, passed on as they are; a masked value
        would not be valid tracestate, so an entry with a secret is dropped whole.
        """
        if not header or not self.scrubber.contains_secret(header):
            return header
        kept = []
        for entry in header.split(","):
            found = self.scrubber.count_secrets(entry)
            if found:
                counts.add(found)
            else:
                kept.append(entry)
        return ",".join(kept)

    def _links(
        self, links: tuple[LinkView, ...], counts: _Counts, policy: NonToolPolicy
    ) -> tuple[LinkView, ...]:
        return tuple(
            LinkView(
                link.trace_id, link.span_id, self._scrub_mapping(link.attributes, counts, policy)
            )
            for link in links
            if len(link.trace_id) == 32 and len(link.span_id) == 16
        )

    # ---------------------------------------------------------------- fail closed

    def _fail_closed(
        self, view: SpanView, tool_span: ToolSpan | None, received_at: datetime
    ) -> Processed:
        code = Code.INTERNAL_ERROR.value
        forward = SpanView(
            name=_REDACTED_SPAN_NAME,
            trace_id=view.trace_id,
            span_id=view.span_id,
            parent_span_id=view.parent_span_id,
            start_ns=view.start_ns,
            end_ns=view.end_ns,
            kind=view.kind,
            status=StatusView(STATUS_ERROR, code),
            attributes={sc.ERRSCOPE_CODE: code, sc.ERROR_TYPE: code},
        )
        record = None
        if tool_span is not None:
            try:
                record = ToolCall(
                    ts=_ns_to_dt(view.start_ns),
                    received_at=received_at,
                    service=UNKNOWN_SERVICE,
                    tool=self._tool_name(tool_span.tool),
                    code=code,
                    trace_id=view.trace_id,
                    span_id=view.span_id,
                    convention=tool_span.convention.value,
                    source=Source.PIPELINE.value,
                )
                record.validate()
            except Exception:  # noqa: BLE001 - even the reduced record failed: keep no row
                record = None
        return Processed(record=record, forward=forward, failed=True)
