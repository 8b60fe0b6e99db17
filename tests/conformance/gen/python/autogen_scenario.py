"""AutoGen AgentChat (`AssistantAgent`) with autogen-ext's `ReplayChatCompletionClient` as the
scripted model, under autogen-core's own OpenTelemetry spans; runs inside the autogen venv.

    python autogen_scenario.py

One `agent.run` per tool call (one trace each: the agent's `invoke_agent` span is its root),
in this order.  The replayed model returns the run's function call, then a final text.
autogen-core wraps every `BaseTool.run_json` in an `execute_tool <name>` span (GenAI
conventions: `gen_ai.tool.name`, `gen_ai.tool.call.id`, `error.type` = the exception's class
on failure); the agent turns a raising tool into a `FunctionExecutionResult(is_error=True)`
and goes on.  The calls: a success, a structured not_found result, a mistyped argument
(pydantic rejects it inside `run_json`, before the function runs), a tool that is not there
(the agent answers "not found in any workbench" without any tool span), a PermissionError, a
real 429 and a real 404 from the loopback stub, a real client timeout and a bug.  AutoGen
has no tool timeout of its own.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from typing import Any

from _scenario import Stub, canary, compute, delete_file, http_get, job_lookup, tracing, weather
from autogen_agentchat.agents import AssistantAgent
from autogen_core import FunctionCall
from autogen_core.models import CreateResult, ModelFamily, ModelInfo, RequestUsage
from autogen_core.tools import FunctionTool
from autogen_ext.models.replay import ReplayChatCompletionClient

CASE = os.environ["CASE"]
C = {n: canary(CASE, n) for n in range(1, 20)}

RUNS: list[tuple[str, dict[str, Any], str]] = [
    ("get_weather", {"city": C[1]}, "call_ag_1"),
    ("get_job", {"job_id": C[2]}, "call_ag_2"),
    ("get_weather", {"city": 12345}, "call_ag_3"),
    ("get_invoice", {"invoice_id": C[4]}, "call_ag_4"),
    ("delete_file", {"path": f"/srv/{C[5]}/secrets.txt"}, "call_ag_5"),
    ("fetch_quota", {"account": C[6]}, "call_ag_6"),
    ("fetch_doc", {"doc_id": C[7]}, "call_ag_7"),
    ("slow_report", {"query": C[8]}, "call_ag_8"),
    ("compute", {"expression": C[10]}, "call_ag_10"),
]
USAGE = RequestUsage(prompt_tokens=20, completion_tokens=5)
MODEL_INFO = ModelInfo(
    vision=False,
    function_calling=True,
    json_output=False,
    family=ModelFamily.UNKNOWN,
    structured_output=False,
)


def tools(stub: Stub) -> list[FunctionTool]:
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

    named = {"delete_file": delete_file_tool, "compute": compute_tool}
    plain = [get_weather, get_job, fetch_quota, fetch_doc, slow_report]
    return [FunctionTool(f, description=f.__doc__ or "") for f in plain] + [
        FunctionTool(f, description=f.__doc__ or "", name=name) for name, f in named.items()
    ]


async def run_all() -> None:
    stub = Stub()
    for n, (name, args, call_id) in enumerate(RUNS):
        request = CreateResult(
            finish_reason="function_calls",
            content=[FunctionCall(id=call_id, arguments=json.dumps(args), name=name)],
            usage=USAGE,
            cached=False,
        )
        model = ReplayChatCompletionClient([request, f"done: {C[12]}"], model_info=MODEL_INFO)
        agent = AssistantAgent(
            "assistant",
            model_client=model,
            tools=tools(stub),
            system_message=f"be careful {C[13]}",
        )
        try:
            await agent.run(task=f"please help with {C[11]}")
        except Exception as exc:  # noqa: BLE001 - a failed run is part of the scenario
            print(f"run {n}: {type(exc).__name__}", file=sys.stderr)
    stub.close()


def main() -> None:
    provider = tracing(CASE)
    asyncio.run(run_all())
    provider.shutdown()


if __name__ == "__main__":
    main()
