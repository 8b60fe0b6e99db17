"""LlamaIndex (`FunctionAgent`, the workflow agent) with a scripted `FunctionCallingLLM`, under
OpenInference; runs inside the llamaindex venv.

    python llamaindex_scenario.py

One `agent.run` per tool call (one trace each, in this order), each inside OpenInference's
`using_session` with a canary in the id.  The scripted model asks for the run's tool call
(an OpenAI-shaped tool call in `additional_kwargs`, as llama-index-llms-openai keeps it) on its first turn and answers with a text on the next.  The agent catches whatever a tool
raises and gives the model `str(exc)` as an error `ToolOutput`; a tool it does not have is
answered "Tool X not found" without running anything.  The calls: a success, a structured
not_found result, an argument the tool does not take (LlamaIndex's `FunctionTool` does not
check arguments: Python's own call rejects it with TypeError before the body runs), a tool
that is not there, a PermissionError, a real 429 and a real 404 from the loopback stub, a
real client timeout and a bug.  LlamaIndex has no tool timeout of its own.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import Sequence
from typing import Any

from _scenario import Stub, canary, compute, delete_file, http_get, job_lookup, tracing, weather
from llama_index.core.agent.workflow import FunctionAgent
from llama_index.core.base.llms.types import (
    ChatMessage,
    ChatResponse,
    CompletionResponse,
    LLMMetadata,
    MessageRole,
)
from llama_index.core.llms.function_calling import FunctionCallingLLM
from llama_index.core.llms.llm import ToolSelection
from llama_index.core.tools import FunctionTool
from openinference.instrumentation import using_session
from openinference.instrumentation.llama_index import LlamaIndexInstrumentor

CASE = os.environ["CASE"]
C = {n: canary(CASE, n) for n in range(1, 20)}

RUNS: list[tuple[str, dict[str, Any], str]] = [
    ("get_weather", {"city": C[1]}, "call_li_1"),
    ("get_job", {"job_id": C[2]}, "call_li_2"),
    ("get_weather", {"city": C[1], "bogus": C[3]}, "call_li_3"),
    ("get_invoice", {"invoice_id": C[4]}, "call_li_4"),
    ("delete_file", {"path": f"/srv/{C[5]}/secrets.txt"}, "call_li_5"),
    ("fetch_quota", {"account": C[6]}, "call_li_6"),
    ("fetch_doc", {"doc_id": C[7]}, "call_li_7"),
    ("slow_report", {"query": C[8]}, "call_li_8"),
    ("compute", {"expression": C[10]}, "call_li_10"),
]
current = [0, 0]  # run index, model turns in this run


class Scripted(FunctionCallingLLM):
    """First turn: the run's tool call (in `additional_kwargs`); then a final text."""

    @property
    def metadata(self) -> LLMMetadata:
        return LLMMetadata(model_name="scripted", is_function_calling_model=True)

    def _prepare_chat_with_tools(
        self,
        tools: Sequence[Any],
        user_msg: Any = None,
        chat_history: list[ChatMessage] | None = None,
        verbose: bool = False,
        allow_parallel_tool_calls: bool = False,
        **kwargs: Any,
    ) -> dict[str, Any]:
        messages = list(chat_history or [])
        if user_msg is not None:
            messages.append(
                user_msg if isinstance(user_msg, ChatMessage) else ChatMessage(content=user_msg)
            )
        return {"messages": messages}

    def get_tool_calls_from_response(
        self, response: ChatResponse, error_on_no_tool_call: bool = True, **kwargs: Any
    ) -> list[ToolSelection]:
        calls = response.message.additional_kwargs.get("tool_calls", [])
        return [
            ToolSelection(
                tool_id=c["id"],
                tool_name=c["function"]["name"],
                tool_kwargs=json.loads(c["function"]["arguments"]),
            )
            for c in calls
        ]

    def _reply(self) -> ChatResponse:
        run, turn = current
        current[1] += 1
        if turn == 0:
            name, args, call_id = RUNS[run]
            # the shape llama-index-llms-openai keeps: the OpenAI tool call, as a dict
            call = {
                "id": call_id,
                "type": "function",
                "function": {"name": name, "arguments": json.dumps(args)},
            }
            message = ChatMessage(
                role=MessageRole.ASSISTANT, content="", additional_kwargs={"tool_calls": [call]}
            )
        else:
            message = ChatMessage(role=MessageRole.ASSISTANT, content=f"done: {C[12]}")
        return ChatResponse(message=message)

    def chat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponse:
        return self._reply()

    async def achat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponse:
        return self._reply()

    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        raise NotImplementedError  # the agent only chats

    async def acomplete(
        self, prompt: str, formatted: bool = False, **kwargs: Any
    ) -> CompletionResponse:
        raise NotImplementedError

    def stream_chat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> Any:
        raise NotImplementedError  # the agent runs with streaming=False

    async def astream_chat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> Any:
        raise NotImplementedError

    def stream_complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> Any:
        raise NotImplementedError

    async def astream_complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> Any:
        raise NotImplementedError


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

    plain = [get_weather, get_job, fetch_quota, fetch_doc, slow_report]
    return [FunctionTool.from_defaults(f) for f in plain] + [
        FunctionTool.from_defaults(delete_file_tool, name="delete_file"),
        FunctionTool.from_defaults(compute_tool, name="compute"),
    ]


async def run_all() -> None:
    stub = Stub()
    agent = FunctionAgent(
        tools=tools(stub),
        llm=Scripted(),
        system_prompt=f"be careful {C[13]}",
        streaming=False,
    )
    for n in range(len(RUNS)):
        current[0], current[1] = n, 0
        with using_session(f"sess-{C[14]}-{n}"):
            try:
                await agent.run(user_msg=f"please help with {C[11]}")
            except Exception as exc:  # noqa: BLE001 - a failed run is part of the scenario
                print(f"run {n}: {type(exc).__name__}", file=sys.stderr)
    stub.close()


def main() -> None:
    provider = tracing(CASE)
    LlamaIndexInstrumentor().instrument(tracer_provider=provider)
    asyncio.run(run_all())
    provider.shutdown()


if __name__ == "__main__":
    main()
