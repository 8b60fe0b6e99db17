"""Haystack (`haystack.components.agents.Agent`) with a scripted chat generator component,
under Haystack's own OpenTelemetry tracer (opentelemetry-haystack's `OpenTelemetryTracer`,
content tracing on); runs inside the haystack venv.

    python haystack_scenario.py

One `agent.run` per tool call (one trace each, in this order).  The scripted generator
replies with the run's tool call first and a text after the tool's answer.  Haystack's
`Tool.invoke` wraps whatever the function raises in `ToolInvocationError("Failed to invoke
Tool `x` with parameters {...}. Error: <str(exc)>")`; the agent gives the model that text
as an error tool result and goes on.  Each call is a `haystack.agent.step.tool` span
(`haystack.tool.name`; with content tracing its arguments and result, and
`haystack.tool.error` on failure).  The calls: a success, a structured not_found result, an
argument the tool does not take (Haystack does not check arguments before the call:
Python's own call rejects it with TypeError), a tool that is not there, a PermissionError,
a real 429 and a real 404 from the loopback stub, a real client timeout and a bug.
Haystack has no tool timeout of its own.

Content tracing is what Haystack's tracing docs ask for to see tool inputs and outputs
(`HAYSTACK_CONTENT_TRACING_ENABLED=true`); without it the span has only the tool's name and
`haystack.tool.error`.
"""

from __future__ import annotations

import os
import sys
from typing import Any

# read when haystack.tracing is imported: set before the imports below
os.environ["HAYSTACK_CONTENT_TRACING_ENABLED"] = "true"

from _scenario import (
    Stub,
    canary,
    compute,
    delete_file,
    http_get,
    job_lookup,
    tracing,
    weather,
)
from haystack import component
from haystack import tracing as hs_tracing
from haystack.components.agents import Agent
from haystack.dataclasses import ChatMessage, ToolCall
from haystack.tools import Tool, create_tool_from_function
from haystack_integrations.tracing.opentelemetry import OpenTelemetryTracer

CASE = os.environ["CASE"]
C = {n: canary(CASE, n) for n in range(1, 20)}

RUNS: list[tuple[str, dict[str, Any], str]] = [
    ("get_weather", {"city": C[1]}, "call_hs_1"),
    ("get_job", {"job_id": C[2]}, "call_hs_2"),
    ("get_weather", {"city": C[1], "bogus": C[3]}, "call_hs_3"),
    ("get_invoice", {"invoice_id": C[4]}, "call_hs_4"),
    ("delete_file", {"path": f"/srv/{C[5]}/secrets.txt"}, "call_hs_5"),
    ("fetch_quota", {"account": C[6]}, "call_hs_6"),
    ("fetch_doc", {"doc_id": C[7]}, "call_hs_7"),
    ("slow_report", {"query": C[8]}, "call_hs_8"),
    ("compute", {"expression": C[10]}, "call_hs_10"),
]
current = [0, 0]  # run index, model turns in this run


@component
class Scripted:
    """First turn: the run's tool call; then a final text."""

    @component.output_types(replies=list[ChatMessage])
    def run(self, messages: list[ChatMessage], tools: Any = None, **kwargs: Any) -> dict[str, Any]:
        run, turn = current
        current[1] += 1
        if turn == 0:
            name, args, call_id = RUNS[run]
            reply = ChatMessage.from_assistant(
                tool_calls=[ToolCall(tool_name=name, arguments=args, id=call_id)],
                meta={"model": "scripted", "usage": {"prompt_tokens": 20, "completion_tokens": 5}},
            )
        else:
            reply = ChatMessage.from_assistant(f"done: {C[12]}", meta={"model": "scripted"})
        return {"replies": [reply]}


def tools(stub: Stub) -> list[Tool]:
    def get_weather(city: str) -> str:
        """Weather for a city."""
        return weather(city)

    def get_job(job_id: str) -> str:
        """A job by id."""
        return job_lookup(job_id)

    def delete_file_tool(path: str) -> str:
        """Delete a file."""
        return delete_file(path)

    def fetch_quota(account: str) -> str:
        """The account's quota, from the quota service."""
        return http_get(f"{stub.base}/rate?account={account}")

    def fetch_doc(doc_id: str) -> str:
        """A document from the document service."""
        return http_get(f"{stub.base}/missing?doc={doc_id}")

    def slow_report(query: str) -> str:
        """A report from the slow reporting service."""
        return http_get(f"{stub.base}/slow?q={query}")

    def compute_tool(expression: str) -> str:
        """Evaluate an expression."""
        return compute(expression)

    plain = [get_weather, get_job, fetch_quota, fetch_doc, slow_report]
    return [create_tool_from_function(f) for f in plain] + [
        create_tool_from_function(delete_file_tool, name="delete_file"),
        create_tool_from_function(compute_tool, name="compute"),
    ]


def main() -> None:
    provider = tracing(CASE)
    hs_tracing.enable_tracing(OpenTelemetryTracer(provider.get_tracer("haystack")))
    stub = Stub()
    agent = Agent(
        chat_generator=Scripted(),
        tools=tools(stub),
        system_prompt=f"be careful {C[13]}",
        max_agent_steps=3,
    )
    agent.warm_up()
    for n in range(len(RUNS)):
        current[0], current[1] = n, 0
        try:
            agent.run(messages=[ChatMessage.from_user(f"please help with {C[11]}")])
        except Exception as exc:  # noqa: BLE001 - a failed run is part of the scenario
            print(f"run {n}: {type(exc).__name__}: {exc}", file=sys.stderr)
    stub.close()
    provider.shutdown()


if __name__ == "__main__":
    main()
