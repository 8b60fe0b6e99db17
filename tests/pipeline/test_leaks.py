"""Secrets in the places of a span that are easy to forget: a field name, attribute keys,
the W3C tracestate. None may reach a stored row or a passed-on span."""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Link, SpanContext, TraceFlags, TraceState

from errscope.collector.pipeline import NonToolPolicy, Pipeline
from errscope.collector.spanview import from_readable
from tests.pipeline.spans import GITHUB_TOKEN, OPENAI_KEY, RESOURCE, strings_of

TOOL = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "get_job"}
# Shaped like an identifier (letters, digits, underscores), so it passes as a field name.
STRIPE_KEY = "sk_live_" + "4eC39HqLyjWDarjtT1zdp7dc"


def _span(
    name: str,
    attributes: dict[str, Any],
    *,
    trace_state: TraceState | None = None,
    links: list[Link] | None = None,
    events: list[tuple[str, dict[str, Any]]] | None = None,
) -> ReadableSpan:
    """One finished span from a real SDK tracer, under a remote parent with `trace_state`."""
    provider = TracerProvider(resource=Resource.create(dict(RESOURCE)))
    exporter = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    parent = SpanContext(
        0x1234567890ABCDEF1234567890ABCDEF,
        0x1234567890ABCDEF,
        is_remote=True,
        trace_flags=TraceFlags(1),
        trace_state=trace_state or TraceState(),
    )
    context = trace.set_span_in_context(trace.NonRecordingSpan(parent))
    tracer = provider.get_tracer("test")
    with tracer.start_as_current_span(
        name, context=context, attributes=attributes, links=links or []
    ) as span:
        for event_name, event_attrs in events or []:
            span.add_event(event_name, event_attrs)
    provider.shutdown()
    (finished,) = exporter.get_finished_spans()
    return finished


def _text(value: Any) -> str:
    return "\n".join(strings_of(asdict(value)))


@pytest.mark.parametrize(
    "attributes",
    [
        pytest.param({"error.type": "invalid_args", "errscope.field": STRIPE_KEY}, id="attribute"),
        pytest.param(
            {
                "gen_ai.tool.call.result": json.dumps(
                    {"error": "invalid_args", "field": STRIPE_KEY, "hint": "use owner"}
                )
            },
            id="tool-result",
        ),
    ],
)
def test_a_secret_as_the_field_name_is_dropped(attributes: dict[str, Any]) -> None:
    """A model that sends a key as an argument name gets invalid_args on that "field": the
    code is kept, the field is not, in the row and in the passed-on span."""
    out = Pipeline().process(from_readable(_span("execute_tool get_job", {**TOOL, **attributes})))
    assert out.record is not None
    assert (out.record.code, out.record.field) == ("invalid_args", None)
    assert out.forward is not None
    assert STRIPE_KEY not in _text(out.record) + _text(out.forward)


@pytest.mark.parametrize("policy", [NonToolPolicy.SCRUB, NonToolPolicy.PASS])
def test_secrets_in_attribute_keys_are_masked(policy: NonToolPolicy) -> None:
    """Attribute keys are scrubbed like values: on the span, its events and its links."""
    link = Link(SpanContext(0xABC, 0xDEF, is_remote=False), {OPENAI_KEY: "x"})
    spans = [
        _span("execute_tool get_job", TOOL, links=[link]),
        _span(
            "db.query",
            {GITHUB_TOKEN: 1, "db.system": "postgresql"},
            events=[("retry", {OPENAI_KEY: "v"})],
            links=[link],
        ),
    ]
    for span in spans:
        out = Pipeline(non_tool=policy).process(from_readable(span))
        assert out.forward is not None
        text = _text(out.forward)
        assert OPENAI_KEY not in text
        assert GITHUB_TOKEN not in text
        assert out.redactions
    non_tool = Pipeline(non_tool=policy).process(from_readable(spans[1])).forward
    assert non_tool is not None
    assert non_tool.attributes["db.system"] == "postgresql"  # clean keys stay as they were


def test_a_tracestate_entry_holding_a_secret_is_dropped() -> None:
    """Vendor entries of the W3C tracestate pass on; one holding a secret does not."""
    state = TraceState([("vendor", GITHUB_TOKEN), ("dd", "s:1;o:rum")])
    for name, attributes in (("execute_tool get_job", TOOL), ("invoke_agent a", {})):
        out = Pipeline().process(from_readable(_span(name, attributes, trace_state=state)))
        assert out.forward is not None
        assert out.forward.trace_state == "dd=s:1;o:rum"
        assert out.redactions
    clean = TraceState([("dd", "s:1;o:rum")])
    out = Pipeline().process(from_readable(_span("invoke_agent a", {}, trace_state=clean)))
    assert out.forward is not None
    assert out.forward.trace_state == "dd=s:1;o:rum"


def test_a_key_past_the_tool_name_cut_is_not_kept_in_part() -> None:
    """A tool name is checked whole before it is cut to 128 characters: a key that straddles
    the cut must not leave its first characters in the row, the counts or the span."""
    aws_key = "AKIA" + "UJZDEGXDNCF3QW7T"
    name = "fetch " + "p" * 105 + " " + aws_key
    span = _span(f"execute_tool {name}", {**TOOL, "gen_ai.tool.name": name})
    out = Pipeline().process(from_readable(span))
    assert out.record is not None
    assert out.record.tool == "redacted_tool"
    assert out.forward is not None
    assert aws_key[:8] not in _text(out.record) + _text(out.forward)


@pytest.mark.parametrize("policy", [NonToolPolicy.SCRUB, NonToolPolicy.PASS])
def test_credential_named_attributes_are_masked_whatever_their_value(
    policy: NonToolPolicy,
) -> None:
    """A password has no format a rule could spot: an attribute named for a credential is
    masked whole; counts and ordinary names stay as they were."""
    password = "correct-horse-battery"
    attributes = {
        "db.password": password,
        "http.request.header.x-api-key": (password, password),
        "aws.secret_access_key": password,
        "http.request.header.ocp-apim-subscription-key": password,
        "http.request.header.x-functions-key": password,
        "gen_ai.usage.output_tokens": 42,
        "db.system": "postgresql",
    }
    out = Pipeline(non_tool=policy).process(from_readable(_span("db.query", attributes)))
    assert out.forward is not None
    assert password not in _text(out.forward)
    kept = out.forward.attributes
    assert kept["db.password"] == "[REDACTED:secret-named-attribute]"
    assert kept["http.request.header.x-api-key"] == ("[REDACTED:secret-named-attribute]",) * 2
    assert (kept["gen_ai.usage.output_tokens"], kept["db.system"]) == (42, "postgresql")
    assert kept["http.request.header.x-functions-key"] == "[REDACTED:secret-named-attribute]"
    assert out.redactions["secret-named-attribute"] == 6


def test_a_secret_masked_at_the_source_is_still_counted() -> None:
    """The toolkit masks an exception message before export: the tool still leaked a key,
    so the count keeps it; a marker naming no scrub rule is neither counted nor stored."""
    message = f"GET /v2/customers?api_key=[REDACTED:stripe-secret-key] and [REDACTED:{STRIPE_KEY}]"
    span = _span(
        "execute_tool lookup_customer",
        {**TOOL, "error.type": "internal_error"},
        events=[("exception", {"exception.type": "RuntimeError", "exception.message": message})],
    )
    out = Pipeline().process(from_readable(span))
    assert out.record is not None
    # One masked at the source, one whole inside a marker-shaped text: both exposures.
    assert out.redactions.get("stripe-secret-key") == 2
    assert STRIPE_KEY not in out.redactions
    assert out.record.redactions == sum(out.redactions.values())
