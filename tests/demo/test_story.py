"""The demo without a sidecar: the time line, span times, and the fleet's habits."""

from __future__ import annotations

import json
import random
from collections import Counter
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import pytest
from click.testing import CliRunner
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from errscope.collector.cli.demo import demo
from errscope.collector.demo.clock import ClockedTracerProvider, SimClock
from errscope.collector.demo.fleet import (
    BILLING_NEW,
    BILLING_OLD,
    BROKEN_FIELD,
    BROKEN_TOOL,
    BillingAgent,
    OpsAgent,
    SupportAgent,
    World,
)
from errscope.collector.demo.secrets import PLANTED_RULES, plant_secrets
from errscope.collector.demo.send import Target
from errscope.collector.demo.story import MIN_HOURS, Timeline

END = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
NS = 1_000_000_000


@pytest.mark.parametrize(
    ("before_end", "share"),
    [
        pytest.param(timedelta(hours=20), 0.05, id="overnight-quiet"),
        pytest.param(timedelta(hours=4, minutes=30), 0.525, id="half-way-up-the-ramp"),
        pytest.param(timedelta(hours=1), 1.0, id="busy"),
    ],
)
def test_traffic_follows_the_day(before_end: timedelta, share: float) -> None:
    """Quiet overnight, a ramp, then the peak rate for the last three hours."""
    timeline = Timeline.ending(END, 24)
    assert timeline.traffic(END - before_end) == pytest.approx(share)


@pytest.mark.parametrize(
    ("minutes_before_end", "share", "outage"),
    [
        pytest.param(51, 0.0, False, id="before-the-deploy"),
        pytest.param(45, 0.5, False, id="half-rolled-out"),
        pytest.param(30, 1.0, False, id="rolled-out"),
        pytest.param(20, 1.0, True, id="orders-replica-behind"),
        pytest.param(4, 1.0, False, id="replica-caught-up"),
    ],
)
def test_deploy_and_outage_moments(minutes_before_end: int, share: float, outage: bool) -> None:
    """The rollout takes 10 minutes from now-50min; the outage runs from now-25 to now-5."""
    timeline = Timeline.ending(END, 24)
    at = END - timedelta(minutes=minutes_before_end)
    assert timeline.new_version_share(at) == pytest.approx(share)
    assert timeline.orders_outage(at) is outage
    # The spike starts well over the detector's 30 minutes after the only deploy nearby,
    # and that deploy is of another service.
    assert timeline.spike_start - timeline.deploy_at == timedelta(minutes=25)


def test_too_short_a_history_is_refused() -> None:
    """Below MIN_HOURS the deploy has no baseline hour: refuse rather than mislead."""
    with pytest.raises(ValueError, match="at least"):
        Timeline.ending(END, MIN_HOURS - 1)


def _fleet(seed: int = 3) -> tuple[World, InMemorySpanExporter, TracerProvider]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    world = World(
        clock=SimClock(int(END.timestamp() * NS)),
        rng=random.Random(seed),
        planted=plant_secrets(seed),
    )
    return world, exporter, provider


def _clocked(world: World, provider: TracerProvider) -> Callable[[str], ClockedTracerProvider]:
    clocked = ClockedTracerProvider(provider, world.clock)
    return lambda _version: clocked


def _tool_spans(exporter: InMemorySpanExporter) -> list[ReadableSpan]:
    return [
        s
        for s in exporter.get_finished_spans()
        if (s.attributes or {}).get("gen_ai.operation.name") == "execute_tool"
    ]


def test_spans_carry_the_clock_s_time_not_the_process_s() -> None:
    """A conversation played at a past time has spans there, with the tools' latencies."""
    world, exporter, provider = _fleet()
    agent = BillingAgent(world, _clocked(world, provider))
    at = END - timedelta(hours=20)
    world.clock.set(int(at.timestamp() * NS))
    agent.converse(BILLING_OLD, "conv_1")
    spans = exporter.get_finished_spans()
    assert spans
    for span in spans:
        assert span.start_time is not None
        assert span.end_time is not None
        assert at.timestamp() * NS <= span.start_time <= span.end_time
        assert span.end_time < (at + timedelta(minutes=5)).timestamp() * NS
    tool = _tool_spans(exporter)
    assert all(s.end_time > s.start_time for s in tool if s.end_time and s.start_time)
    parent = next(s for s in spans if s.name.startswith("invoke_agent"))
    assert all(s.context.trace_id == parent.context.trace_id for s in tool)


def test_the_new_version_breaks_since_and_only_since() -> None:
    """2.4.0 rejects the model's loose dates on `since`; 2.3.0 never does."""
    fields: dict[str, Counter[str | None]] = {}
    for version in (BILLING_OLD, BILLING_NEW):
        world, exporter, provider = _fleet()
        agent = BillingAgent(world, _clocked(world, provider))
        for n in range(300):
            agent.converse(version, f"conv_{n}")
        fields[version] = Counter(
            str((s.attributes or {}).get("errscope.field"))
            for s in _tool_spans(exporter)
            if s.name == f"execute_tool {BROKEN_TOOL}"
            and (s.attributes or {}).get("errscope.code") == "invalid_args"
        )
    assert fields[BILLING_OLD][BROKEN_FIELD] == 0
    assert fields[BILLING_NEW][BROKEN_FIELD] > 5 * max(1, fields[BILLING_OLD]["status"]) / 2
    assert fields[BILLING_OLD]["status"] > 0  # the baseline has its own, steady slip


def test_ops_spans_leak_planted_secrets_for_the_sidecar_to_scrub() -> None:
    """ops-agent's OpenInference spans carry planted secrets in arguments and messages."""
    world, exporter, provider = _fleet()
    agent = OpsAgent(world, _clocked(world, provider))
    for n in range(400):
        agent.converse("0.9.1", f"conv_{n}")
    texts = []
    for span in exporter.get_finished_spans():
        texts.extend(str(v) for v in (span.attributes or {}).values())
        texts.append(span.status.description or "")
        texts.extend(str(v) for e in span.events for v in (e.attributes or {}).values())
    blob = "\n".join(texts)
    leaked = {s.rule for values in world.planted.values() for s in values if s.core in blob}
    assert leaked >= {"postgres-uri-password", "bearer-token", "github-pat", "slack-bot-token"}
    outputs = [
        json.loads(str(v))
        for s in exporter.get_finished_spans()
        for k, v in (s.attributes or {}).items()
        if k == "output.value"
    ]
    assert any(o.get("error") == "quota_exhausted" for o in outputs)


def test_support_loop_guesses_ids_and_retries_after_denied() -> None:
    """The naive loop has no cap: >2 not_found in a trace, and a call after denied."""
    world, exporter, provider = _fleet()
    agent = SupportAgent(world, _clocked(world, provider))
    for n in range(300):
        agent.converse("1.8.2", f"conv_{n}")
    per_trace: dict[int, list[str]] = {}
    for span in sorted(_tool_spans(exporter), key=lambda s: s.start_time or 0):
        per_trace.setdefault(span.context.trace_id, []).append(
            f"{span.name.removeprefix('execute_tool ')}:{(span.attributes or {}).get('errscope.code')}"
        )
    assert any(calls.count("get_order:not_found") > 2 for calls in per_trace.values())
    assert any(
        "cancel_order:denied" in calls and calls.index("cancel_order:denied") < len(calls) - 1
        for calls in per_trace.values()
    )


def test_planted_secrets_are_seeded_and_cover_every_rule() -> None:
    """The same seed plants the same fake secrets; every listed rule is planted."""
    first, again = plant_secrets(11), plant_secrets(11)
    assert first == again
    assert set(first) == set(PLANTED_RULES)
    assert plant_secrets(12) != first


def test_demo_without_a_sidecar_stops_with_one_line() -> None:
    """No sidecar at --api: exit 2 and one error line naming the address."""
    result = CliRunner().invoke(
        demo, ["--api", "http://127.0.0.1:9", "--endpoint", "http://127.0.0.1:9"]
    )
    assert result.exit_code == 2
    assert "error[no_sidecar] http://127.0.0.1:9" in result.output


def test_target_urls() -> None:
    """/v1/traces is appended once; the token becomes a bearer header."""
    assert Target("http://h:4318/").traces_url == "http://h:4318/v1/traces"
    assert Target("http://h:4318/v1/traces").traces_url == "http://h:4318/v1/traces"
    assert Target(token="t" * 16).headers == {"authorization": f"Bearer {'t' * 16}"}
