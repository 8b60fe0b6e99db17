"""Semantic Kernel (`ChatCompletionAgent`, auto function calling) with a scripted chat
completion service, under Semantic Kernel's own OpenTelemetry diagnostics (sensitive events
on); runs inside the semantic-kernel venv.

    python semantic_kernel_scenario.py

One `agent.get_response` per tool call (one trace each, in this order).  The scripted
service's `_inner_get_chat_message_contents` carries SK's own `trace_chat_completion`
decorator, as SK's connectors do, so its `chat` spans are SK's; it asks for the run's
function call first and answers with a text after the result.  SK wraps every kernel
function call in an `execute_tool <plugin>-<function>` span (GenAI conventions; with
sensitive events, `gen_ai.tool.call.arguments` and `.result`) and gives the model "An error
occurred while invoking the function ...: <exc>" when one raises.  The calls: a success, a
structured not_found result, a mistyped argument (SK converts the arguments to the
function's types before any span: a value it cannot convert is answered without running),
a function that is not there, a PermissionError, a real 429 and a real 404 from the loopback
stub, a real client timeout and a bug.  Semantic Kernel has no tool timeout of its own.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from typing import Any

# read when semantic_kernel is imported: set before the imports below
os.environ["SEMANTICKERNEL_EXPERIMENTAL_GENAI_ENABLE_OTEL_DIAGNOSTICS_SENSITIVE"] = "true"

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
from semantic_kernel import Kernel
from semantic_kernel.agents import ChatCompletionAgent
from semantic_kernel.connectors.ai.chat_completion_client_base import (
    ChatCompletionClientBase,
)
from semantic_kernel.connectors.ai.function_choice_behavior import (
    FunctionChoiceBehavior,
)
from semantic_kernel.contents import (
    AuthorRole,
    ChatMessageContent,
    FunctionCallContent,
)
from semantic_kernel.functions import kernel_function
from semantic_kernel.utils.telemetry.model_diagnostics.decorators import (
    trace_chat_completion,
)

CASE = os.environ["CASE"]
C = {n: canary(CASE, n) for n in range(1, 20)}

RUNS: list[tuple[str, dict[str, Any], str]] = [
    ("get_weather", {"city": C[1]}, "call_sk_1"),
    ("get_job", {"job_id": C[2]}, "call_sk_2"),
    ("get_forecast", {"days": C[3]}, "call_sk_3"),
    ("get_invoice", {"invoice_id": C[4]}, "call_sk_4"),
    ("delete_file", {"path": f"/srv/{C[5]}/secrets.txt"}, "call_sk_5"),
    ("fetch_quota", {"account": C[6]}, "call_sk_6"),
    ("fetch_doc", {"doc_id": C[7]}, "call_sk_7"),
    ("slow_report", {"query": C[8]}, "call_sk_8"),
    ("compute", {"expression": C[10]}, "call_sk_10"),
]
current = [0, 0]  # run index, model turns in this run


class Scripted(ChatCompletionClientBase):
    """First turn: the run's function call; then a final text."""

    SUPPORTS_FUNCTION_CALLING = True

    @trace_chat_completion("scripted")
    async def _inner_get_chat_message_contents(
        self, chat_history: Any, settings: Any
    ) -> list[ChatMessageContent]:
        run, turn = current
        current[1] += 1
        if turn == 0:
            name, args, call_id = RUNS[run]
            call = FunctionCallContent(
                id=call_id, plugin_name="tools", function_name=name, arguments=json.dumps(args)
            )
            items: list[Any] = [call]
            return [
                ChatMessageContent(role=AuthorRole.ASSISTANT, items=items, ai_model_id="scripted")
            ]
        return [
            ChatMessageContent(
                role=AuthorRole.ASSISTANT, content=f"done: {C[12]}", ai_model_id="scripted"
            )
        ]


class Tools:
    """The plugin the agent calls."""

    def __init__(self, stub: Stub) -> None:
        self.stub = stub

    @kernel_function(description="Weather for a city.")
    def get_weather(self, city: str) -> str:
        return weather(city)

    @kernel_function(description="The forecast for a number of days.")
    def get_forecast(self, days: int) -> str:
        return json.dumps({"days": days, "rain": False})

    @kernel_function(description="A job by id.")
    def get_job(self, job_id: str) -> str:
        return job_lookup(job_id)

    @kernel_function(description="Delete a file.")
    def delete_file(self, path: str) -> str:
        return delete_file(path)

    @kernel_function(description="The account's quota, from the quota service.")
    def fetch_quota(self, account: str) -> str:
        return http_get(f"{self.stub.base}/rate?account={account}")

    @kernel_function(description="A document from the document service.")
    def fetch_doc(self, doc_id: str) -> str:
        return http_get(f"{self.stub.base}/missing?doc={doc_id}")

    @kernel_function(description="A report from the slow reporting service.")
    def slow_report(self, query: str) -> str:
        return http_get(f"{self.stub.base}/slow?q={query}")

    @kernel_function(description="Evaluate an expression.")
    def compute(self, expression: str) -> str:
        return compute(expression)


async def run_all() -> None:
    stub = Stub()
    kernel = Kernel()
    kernel.add_service(Scripted(ai_model_id="scripted", service_id="scripted"))
    kernel.add_plugin(Tools(stub), plugin_name="tools")
    agent = ChatCompletionAgent(
        kernel=kernel,
        name="assistant",
        instructions=f"be careful {C[13]}",
        function_choice_behavior=FunctionChoiceBehavior.Auto(),
    )
    for n in range(len(RUNS)):
        current[0], current[1] = n, 0
        try:
            await agent.get_response(messages=f"please help with {C[11]}")
        except Exception as exc:  # noqa: BLE001 - a failed run is part of the scenario
            print(f"run {n}: {type(exc).__name__}: {exc}", file=sys.stderr)
    stub.close()


def main() -> None:
    provider = tracing(CASE)
    asyncio.run(run_all())
    provider.shutdown()


if __name__ == "__main__":
    main()
