"""Agno (`agno.agent.Agent`) with a scripted `Model`, under OpenInference; runs inside the agno
venv.

    python agno_scenario.py

One `agent.run` per tool call (one trace each, in this order), each with Agno's own
`session_id` and `run_id` (a canary in each).  The scripted model returns the run's tool call (OpenAI-shaped,
as Agno's OpenAI model parses it) first and a text after the tool's answer.  Agno's
`FunctionCall.execute` catches what a tool raises and gives the model the error text; it
validates the arguments against the function's signature (pydantic) before the tool runs.
The calls: a success, a structured not_found result, a mistyped argument, a tool that is not
there, a PermissionError, a real 429 and a real 404 from the loopback stub, a real client
timeout and a bug.  Agno has no tool timeout of its own.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from typing import Any

from _scenario import Stub, canary, compute, delete_file, http_get, job_lookup, tracing, weather
from agno.agent import Agent
from agno.models.base import Model
from agno.models.response import ModelResponse
from agno.tools import tool
from openinference.instrumentation.agno import AgnoInstrumentor

CASE = os.environ["CASE"]
C = {n: canary(CASE, n) for n in range(1, 20)}

RUNS: list[tuple[str, dict[str, Any], str]] = [
    ("get_weather", {"city": C[1]}, "call_agno_1"),
    ("get_job", {"job_id": C[2]}, "call_agno_2"),
    ("get_forecast", {"days": C[3]}, "call_agno_3"),
    ("get_invoice", {"invoice_id": C[4]}, "call_agno_4"),
    ("delete_file", {"path": f"/srv/{C[5]}/secrets.txt"}, "call_agno_5"),
    ("fetch_quota", {"account": C[6]}, "call_agno_6"),
    ("fetch_doc", {"doc_id": C[7]}, "call_agno_7"),
    ("slow_report", {"query": C[8]}, "call_agno_8"),
    ("compute", {"expression": C[10]}, "call_agno_10"),
]
current = [0, 0]  # run index, model turns in this run


@dataclass
class Scripted(Model):
    """First turn: the run's tool call; then a final text."""

    id: str = "scripted"
    name: str = "Scripted"
    provider: str = "scripted"

    def _reply(self) -> ModelResponse:
        run, turn = current
        current[1] += 1
        if turn == 0:
            name, args, call_id = RUNS[run]
            call = {
                "id": call_id,
                "type": "function",
                "function": {"name": name, "arguments": json.dumps(args)},
            }
            return ModelResponse(role="assistant", content="", tool_calls=[call])
        return ModelResponse(role="assistant", content=f"done: {C[12]}")

    def invoke(self, *args: Any, **kwargs: Any) -> ModelResponse:
        return self._reply()

    async def ainvoke(self, *args: Any, **kwargs: Any) -> ModelResponse:
        return self._reply()

    def invoke_stream(self, *args: Any, **kwargs: Any) -> Iterator[ModelResponse]:
        yield self._reply()

    async def ainvoke_stream(self, *args: Any, **kwargs: Any) -> AsyncIterator[ModelResponse]:
        yield self._reply()

    def _parse_provider_response(self, response: Any, **kwargs: Any) -> ModelResponse:
        return response  # type: ignore[no-any-return] - invoke already returns one

    def _parse_provider_response_delta(self, response: Any) -> ModelResponse:
        return response  # type: ignore[no-any-return]


def tools(stub: Stub) -> list[Any]:
    @tool
    def get_weather(city: str) -> str:
        """Weather for a city."""
        return weather(city)

    @tool
    def get_forecast(days: int) -> str:
        """The forecast for a number of days."""
        return json.dumps({"days": days, "rain": False})

    @tool
    def get_job(job_id: str) -> str:
        """A job by id."""
        return job_lookup(job_id)

    @tool(name="delete_file")
    def delete_file_tool(path: str) -> str:
        """Delete a file."""
        return delete_file(path)

    @tool
    def fetch_quota(account: str) -> str:
        """The account's quota, from the quota service."""
        return http_get(f"{stub.base}/rate?account={account}")

    @tool
    def fetch_doc(doc_id: str) -> str:
        """A document from the document service."""
        return http_get(f"{stub.base}/missing?doc={doc_id}")

    @tool
    def slow_report(query: str) -> str:
        """A report from the slow reporting service."""
        return http_get(f"{stub.base}/slow?q={query}")

    @tool(name="compute")
    def compute_tool(expression: str) -> str:
        """Evaluate an expression."""
        return compute(expression)

    return [
        get_weather,
        get_forecast,
        get_job,
        delete_file_tool,
        fetch_quota,
        fetch_doc,
        slow_report,
        compute_tool,
    ]


def main() -> None:
    provider = tracing(CASE)
    AgnoInstrumentor().instrument(tracer_provider=provider)
    stub = Stub()
    agent = Agent(
        name="assistant",
        model=Scripted(),
        tools=tools(stub),
        instructions=f"be careful {C[13]}",
        telemetry=False,  # Agno's own usage telemetry would call home
    )
    for n in range(len(RUNS)):
        current[0], current[1] = n, 0
        try:
            agent.run(
                f"please help with {C[11]}",
                session_id=f"sess-{C[14]}-{n}",
                run_id=f"run-{C[15]}-{n}",
            )
        except Exception as exc:  # noqa: BLE001 - a failed run is part of the scenario
            print(f"run {n}: {type(exc).__name__}: {exc}", file=sys.stderr)
    stub.close()
    provider.shutdown()


if __name__ == "__main__":
    main()
