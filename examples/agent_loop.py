"""A tiny agent loop with a scripted fake model, using errscope's tool kit.

    python examples/agent_loop.py            # print each call, its code and the decision
    python examples/agent_loop.py --spans    # also print the execute_tool spans

The "model" is a script: per conversation, the tool calls a real model might make, bad
arguments and invented ids included.  The loop hands each call's raw arguments to the tool,
returns the observation to the model (here: records it), and lets `RetryBudget` decide
whether to go on, stop, or hand off to a human.  Nothing in the loop parses an error
message: it branches on `"error" in observation` and on the budget's decision.

`errscope demo` can reuse this module: `make_tools(tracer_provider=...)` builds the tools
on any provider, `run_conversation(...)` runs one script, and `SCRIPTS` holds the scripted
conversations (one per behaviour the dashboard shows).  Tracing: `setup_tracing()` builds
a plain SDK TracerProvider with an in-memory exporter, so `--spans` can print what the tools
recorded; a real service calls `errscope.collector.export.instrument(...)` instead (README).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from errscope import (
    Denied,
    NotFound,
    PositiveInt,
    RetryBudget,
    Tool,
    tool,
)

JOBS: Mapping[int, dict[str, Any]] = {
    17: {"id": 17, "title": "Nightly backup", "status": "open"},
    42: {"id": 42, "title": "Rotate certificates", "status": "closed"},
}


def make_tools(tracer_provider: TracerProvider | None = None) -> dict[str, Tool]:
    """The demo's tools, recording spans on `tracer_provider` (default: the global one)."""

    @tool(
        "get_job",
        not_found_hint="job ids look like 17 or 42; list_jobs lists them",
        tracer_provider=tracer_provider,
    )
    def get_job(job_id: PositiveInt) -> dict[str, Any]:
        """Look up one job by id."""
        if job_id not in JOBS:
            raise NotFound
        return dict(JOBS[job_id])

    @tool("list_jobs", tracer_provider=tracer_provider)
    def list_jobs(status: Literal["open", "closed"] | None = None) -> list[int]:
        """The ids of the jobs, optionally only those with one status."""
        return [i for i, job in JOBS.items() if status is None or job["status"] == status]

    @tool("cancel_job", tracer_provider=tracer_provider)
    def cancel_job(job_id: PositiveInt) -> dict[str, Any]:
        """Cancel a job: needs an approval this agent does not have."""
        raise Denied(hint="cancelling a job needs the owner's approval; ask the user")

    return {t.name: t for t in (get_job, list_jobs, cancel_job)}


@dataclass(frozen=True)
class Call:
    """One tool call the scripted model makes: the tool, its raw arguments, the call id."""

    tool: str
    arguments: object
    call_id: str


# One conversation per behaviour: a clean run, a schema problem the model cannot fix,
# invented ids, a policy refusal.  The raw arguments are what models really send.
SCRIPTS: Mapping[str, Sequence[Call]] = {
    "happy": [
        Call("list_jobs", {"status": "open"}, "call_1"),
        Call("get_job", {"job_id": "17"}, "call_2"),
    ],
    "recovers": [
        Call("get_job", {"job_id": "INV-17"}, "call_1"),
        Call("get_job", {"job_id": 17}, "call_2"),
    ],
    "schema_loop": [
        Call("get_job", {"job_id": "job seventeen"}, "call_1"),
        Call("get_job", {"job_id": True}, "call_2"),
        Call("get_job", {"job_id": 17}, "call_3"),  # never reached: handed off
    ],
    "invented_ids": [
        Call("get_job", {"job_id": 99}, "call_1"),
        Call("get_job", '{"job_id": 1234}', "call_2"),
        Call("list_jobs", {}, "call_3"),  # never reached: handed off
    ],
    "denied": [
        Call("cancel_job", {"job_id": 17}, "call_1"),
        Call("cancel_job", {"job_id": 17}, "call_2"),  # never reached: stopped
    ],
}


@dataclass
class ScriptedModel:
    """A fake model that plays a script and records every observation it is shown."""

    script: Sequence[Call]
    seen: list[dict[str, Any]] = field(default_factory=list)

    def next_call(self) -> Call | None:
        """The next tool call, or None when the model has finished."""
        turn = len(self.seen)
        return self.script[turn] if turn < len(self.script) else None

    def observe(self, observation: dict[str, Any]) -> None:
        """Receive a tool's observation (a real model would read it as the tool message)."""
        self.seen.append(observation)


@dataclass(frozen=True)
class Turn:
    """One step of a conversation: the call, what came back, and what the runtime decided."""

    call: Call
    observation: dict[str, Any]
    decision: str


def run_conversation(
    script: Sequence[Call],
    tools: Mapping[str, Tool],
    *,
    conversation_id: str = "conv-1",
    tracer_provider: TracerProvider | None = None,
) -> list[Turn]:
    """Run one scripted conversation until the model finishes or the budget says stop.

    The conversation is one `invoke_agent` span, so its tool spans share a trace (the
    scope the retry budget counts over).
    """
    tracer = (tracer_provider or trace).get_tracer("errscope.examples.agent_loop")
    model = ScriptedModel(script)
    budget = RetryBudget()
    turns: list[Turn] = []
    attributes = {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.conversation.id": conversation_id,
    }
    with tracer.start_as_current_span("invoke_agent demo", attributes=attributes):
        while (call := model.next_call()) is not None:
            observation = tools[call.tool](call.arguments, call_id=call.call_id, budget=budget)
            model.observe(observation)
            decision = str(budget.last_decision)
            turns.append(Turn(call, observation, decision))
            if decision != "continue":
                break  # stop, or hand off to a human: never loop in the prompt
    return turns


def setup_tracing() -> tuple[TracerProvider, InMemorySpanExporter]:
    """A tracer provider for the demo.

    In-memory, so the example can print its spans; a service would use
    `errscope.collector.export.instrument()`, which scrubs and sends them to the sidecar.
    """
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider, exporter


def main(argv: Sequence[str] | None = None) -> int:
    """Run every script, print each turn, and optionally the spans errscope would count."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spans", action="store_true", help="print the execute_tool spans")
    args = parser.parse_args(argv)
    provider, exporter = setup_tracing()
    tools = make_tools(tracer_provider=provider)
    out = sys.stdout
    for name, script in SCRIPTS.items():
        out.write(f"== {name}\n")
        turns = run_conversation(script, tools, conversation_id=name, tracer_provider=provider)
        for turn in turns:
            code = turn.observation.get("error", "ok")
            out.write(f"  {turn.call.tool}({json.dumps(turn.call.arguments)}) -> {code}")
            out.write(f" [{turn.decision}]\n    {json.dumps(turn.observation)}\n")
    if args.spans:
        for span in exporter.get_finished_spans():
            if span.name.startswith("execute_tool"):
                out.write(f"{span.name} {json.dumps(dict(span.attributes or {}))}\n")
    provider.shutdown()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
