"""Build real SDK spans the way each instrumentation library emits them (research §C).

Secrets planted here are generated from the providers' formats at import time (never real
keys) and put where real frameworks were seen to leak them: arguments, results, exception
messages, stack traces and status descriptions.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator, Mapping
from typing import Any

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Status, StatusCode

from errscope.collector.scrub.samples import SAMPLES, github_style_token, rand

_rng = random.Random(20261130)
GITHUB_TOKEN = github_style_token(_rng, "ghp_")
DB_PASSWORD = rand(_rng, "abcdefghijkmnopqrstuvwxyzABCDEFGHJKLMNPQRSTUVWXYZ23456789", 20)
DB_URL = f"postgres://app_user:{DB_PASSWORD}@db.internal:5432/app"
OPENAI_KEY = SAMPLES["openai-api-key"].make(_rng).text
PLANTED = (GITHUB_TOKEN, DB_PASSWORD, OPENAI_KEY)

RESOURCE = {
    "service.name": "weather-agent",
    "service.version": "2.1.0",
    "deployment.environment.name": "prod",
}


def _leaky_handler(path: str) -> None:
    """A tool body whose exception message and local variables carry secrets."""
    token = GITHUB_TOKEN  # a local variable value that must not survive
    raise PermissionError(13, f"Permission denied: {path} (token={token})")


def _failing_handler(exc_type: type[BaseException]) -> None:
    """A tool body that fails with secrets in the message."""
    if exc_type is PermissionError:
        _leaky_handler("/etc/passwd")
    raise exc_type(f"failed for {DB_URL} with key {OPENAI_KEY}")


def real_exception(exc_type: type[BaseException] = PermissionError) -> BaseException:
    """A really raised exception, with a real traceback, whose message carries secrets."""
    try:
        _failing_handler(exc_type)
    except BaseException as exc:  # noqa: BLE001 - we want the object with its traceback
        return exc
    raise AssertionError("unreachable")


def make_span(
    name: str,
    attributes: Mapping[str, Any],
    *,
    status: tuple[StatusCode, str | None] | None = None,
    exception: BaseException | None = None,
    events: list[tuple[str, Mapping[str, Any]]] | None = None,
    resource: Mapping[str, str] | None = None,
) -> ReadableSpan:
    """One finished span from a real SDK tracer."""
    provider = TracerProvider(resource=Resource.create(dict(resource or RESOURCE)))
    exporter = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("test-instrumentation", "0.1")
    with tracer.start_as_current_span(
        name, attributes=dict(attributes), record_exception=False, set_status_on_exception=False
    ) as span:
        if exception is not None:
            span.record_exception(exception)
        for event_name, event_attrs in events or []:
            span.add_event(event_name, dict(event_attrs))
        if status is not None:
            span.set_status(Status(status[0], status[1]))
    provider.shutdown()
    (finished,) = exporter.get_finished_spans()
    return finished


def strings_of(value: Any) -> Iterator[str]:
    """Every string inside a nested value (attributes, events, resource...)."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, Mapping):
        for k, v in value.items():
            yield str(k)
            yield from strings_of(v)
    elif isinstance(value, list | tuple):
        for v in value:
            yield from strings_of(v)


def args_json(**kwargs: Any) -> str:
    """Tool arguments as the frameworks serialise them."""
    return json.dumps(kwargs)
