"""smolagents (ToolCallingAgent) with a scripted `Model`, under OpenInference; runs inside the
smolagents venv.

    python smolagents_scenario.py

One `agent.run` per tool call (one trace each, in this order), each inside OpenInference's
`using_session` (the way its users give a session id) with a canary in the id.  The scripted
model issues the run's tool call on its first turn and `final_answer` on the next.  The
calls: a success, a structured not_found result, mistyped arguments (smolagents'
`validate_tool_arguments` rejects them before the tool runs), a tool that is not there, a
PermissionError, a real 429 and a real 404 from the loopback stub, a real client timeout
and a bug.  smolagents has no tool timeout of its own.
"""

from __future__ import annotations

import os
import sys
from typing import Any

import smolagents
from _scenario import Stub, canary, compute, delete_file, http_get, job_lookup, tracing, weather
from openinference.instrumentation import using_session
from openinference.instrumentation.smolagents import SmolagentsInstrumentor
from smolagents import ToolCallingAgent, tool
from smolagents.models import (
    ChatMessage,
    ChatMessageToolCall,
    ChatMessageToolCallFunction,
    MessageRole,
    Model,
    TokenUsage,
)

CASE = os.environ["CASE"]
C = {n: canary(CASE, n) for n in range(1, 20)}

# (tool, arguments, call id): run n issues RUNS[n]
RUNS: list[tuple[str, dict[str, Any], str]] = [
    ("get_weather", {"city": C[1]}, "call_smol_1"),
    ("get_job", {"job_id": C[2]}, "call_smol_2"),
    ("get_weather", {"city": 12345}, "call_smol_3"),
    ("get_invoice", {"invoice_id": C[4]}, "call_smol_4"),
    ("delete_file", {"path": f"/srv/{C[5]}/secrets.txt"}, "call_smol_5"),
    ("fetch_quota", {"account": C[6]}, "call_smol_6"),
    ("fetch_doc", {"doc_id": C[7]}, "call_smol_7"),
    ("slow_report", {"query": C[8]}, "call_smol_8"),
    ("compute", {"expression": C[10]}, "call_smol_10"),
]
current = [0, 0]  # run index, model turns in this run


def _call(name: str, arguments: dict[str, Any], call_id: str) -> ChatMessage:
    function = ChatMessageToolCallFunction(name=name, arguments=arguments)
    return ChatMessage(
        role=MessageRole.ASSISTANT,
        content="",
        tool_calls=[ChatMessageToolCall(function=function, id=call_id, type="function")],
        token_usage=TokenUsage(input_tokens=20, output_tokens=5),  # as real models report
    )


class Scripted(Model):
    """First turn: the run's tool call; then `final_answer` with a canary."""

    def generate(self, messages: Any, *args: Any, **kwargs: Any) -> ChatMessage:
        run, turn = current
        current[1] += 1
        if turn == 0:
            return _call(*RUNS[run])
        return _call("final_answer", {"answer": f"done: {C[12]}"}, f"call_smol_final_{run}")


@tool
def get_weather(city: str) -> str:
    """Weather for a city.

    Args:
        city: the city's name.
    """
    return weather(city)


@tool
def get_job(job_id: str) -> str:
    """A job by id.

    Args:
        job_id: the job's id.
    """
    return job_lookup(job_id)


@tool
def delete_file_tool(path: str) -> str:
    """Delete a file.

    Args:
        path: the file's path.
    """
    return delete_file(path)


delete_file_tool.name = "delete_file"
STUB = Stub()


@tool
def fetch_quota(account: str) -> str:
    """The account's quota, from the quota service.

    Args:
        account: the account's id.
    """
    return http_get(f"{STUB.base}/rate?account={account}")


@tool
def fetch_doc(doc_id: str) -> str:
    """A document from the document service.

    Args:
        doc_id: the document's id.
    """
    return http_get(f"{STUB.base}/missing?doc={doc_id}")


@tool
def slow_report(query: str) -> str:
    """A report from the slow reporting service.

    Args:
        query: what to report on.
    """
    return http_get(f"{STUB.base}/slow?q={query}")


@tool
def compute_tool(expression: str) -> str:
    """Evaluate an expression.

    Args:
        expression: the expression.
    """
    return compute(expression)


compute_tool.name = "compute"


def main() -> None:
    provider = tracing(CASE)
    # The instrumentor wraps `generate` of the Model classes the smolagents package exports
    # (LiteLLMModel, OpenAIServerModel, ...); the scripted model is put among them so its
    # LLM spans are the instrumentor's own, as a real model's would be.
    smolagents.Scripted = Scripted  # type: ignore[attr-defined]
    SmolagentsInstrumentor().instrument(tracer_provider=provider)
    agent = ToolCallingAgent(
        tools=[
            get_weather,
            get_job,
            delete_file_tool,
            fetch_quota,
            fetch_doc,
            slow_report,
            compute_tool,
        ],
        model=Scripted(model_id="scripted"),
        max_steps=3,
        verbosity_level=0,
        instructions=f"be careful {C[13]}",
    )
    for n in range(len(RUNS)):
        current[0], current[1] = n, 0
        with using_session(f"sess-{C[14]}-{n}"):
            try:
                agent.run(f"please help with {C[11]}")
            except Exception as exc:  # noqa: BLE001 - a failed run is part of the scenario
                print(f"run {n}: {type(exc).__name__}", file=sys.stderr)
    STUB.close()
    provider.shutdown()


if __name__ == "__main__":
    main()
