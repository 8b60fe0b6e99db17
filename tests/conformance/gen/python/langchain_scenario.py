"""LangGraph's prebuilt ReAct agent (LangChain tools, ToolNode) with a scripted chat model.

    python langchain_scenario.py openinference|openllmetry

One graph invocation per tool call (one trace each, in this order), each with metadata
session_id/thread_id holding a canary.  ToolNode's default error handling returns argument
errors to the model (ToolInvocationError) and lets every other exception end the run; the
lookup tool handles its own ToolException (handle_tool_error=True), which LangChain turns
into a ToolMessage with status "error" on an OK span.
"""

from __future__ import annotations

import os
import sys
import warnings
from typing import Any

from _scenario import Stub, canary, compute, delete_file, http_get, job_lookup, tracing, weather
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage
from langchain_core.tools import StructuredTool, ToolException, tool

CASE = os.environ["CASE"]
C = {n: canary(CASE, n) for n in range(1, 20)}

RUNS: list[tuple[str, dict[str, Any], str]] = [
    ("get_weather", {"city": C[1]}, "call_lc_1"),
    ("get_job", {"job_id": C[2]}, "call_lc_2"),
    ("get_weather", {"city": 12345, "bogus": C[3]}, "call_lc_3"),
    ("lookup_user", {"user_id": C[4]}, "call_lc_4"),
    ("delete_file", {"path": f"/srv/{C[5]}/secrets.txt"}, "call_lc_5"),
    ("fetch_quota", {"account": C[6]}, "call_lc_6"),
    ("fetch_doc", {"doc_id": C[7]}, "call_lc_7"),
    ("slow_report", {"query": C[8]}, "call_lc_8"),
    ("compute", {"expression": C[10]}, "call_lc_10"),
]


class Scripted(GenericFakeChatModel):
    """GenericFakeChatModel that accepts tools (the scripted replies already name them)."""

    def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
        return self


def instrument(which: str, provider: Any) -> None:
    if which == "openinference":
        from openinference.instrumentation.langchain import LangChainInstrumentor

        LangChainInstrumentor().instrument(tracer_provider=provider)
    else:
        from opentelemetry.instrumentation.langchain import LangchainInstrumentor

        LangchainInstrumentor().instrument(tracer_provider=provider)


def main() -> None:
    warnings.simplefilter("ignore")
    provider = tracing(CASE)
    instrument(sys.argv[1], provider)
    from langgraph.prebuilt import create_react_agent

    stub = Stub()

    @tool
    def get_weather(city: str) -> str:
        """Weather for a city."""
        return weather(city)

    @tool
    def get_job(job_id: str) -> str:
        """A job by id."""
        return job_lookup(job_id)

    def _lookup_user(user_id: str) -> str:
        raise ToolException(f"user {user_id} not found")

    lookup_user = StructuredTool.from_function(
        _lookup_user, name="lookup_user", description="A user by id.", handle_tool_error=True
    )

    @tool("delete_file")
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

    @tool("compute")
    def compute_tool(expression: str) -> str:
        """Evaluate an expression."""
        return compute(expression)

    tools = [
        get_weather,
        get_job,
        lookup_user,
        delete_file_tool,
        fetch_quota,
        fetch_doc,
        slow_report,
        compute_tool,
    ]
    for n, (name, args, call_id) in enumerate(RUNS):
        replies = iter(
            [
                AIMessage(content="", tool_calls=[{"name": name, "args": args, "id": call_id}]),
                AIMessage(content=f"done: {C[12]}"),
            ]
        )
        agent = create_react_agent(Scripted(messages=replies), tools, prompt=f"be careful {C[13]}")
        session = f"sess-{C[14]}-{n}"
        config = {"metadata": {"session_id": session, "thread_id": f"thread-{C[15]}-{n}"}}
        try:
            agent.invoke({"messages": [("user", f"please help with {C[11]}")]}, config=config)
        except Exception as exc:  # noqa: BLE001 - raising tools end the run
            print(f"run {n}: {type(exc).__name__}", file=sys.stderr)
    stub.close()
    provider.shutdown()


if __name__ == "__main__":
    main()
