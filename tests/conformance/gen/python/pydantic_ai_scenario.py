"""pydantic-ai with a scripted FunctionModel; runs inside the pydantic-ai venv.

    python pydantic_ai_scenario.py VERSION    (InstrumentationSettings(version=VERSION))

Seven agent runs (one trace each).  Run 1 issues four tool calls in ONE model response
(parallel: pydantic-ai 1.x wraps them in a `running tools` span that is no call of its
own): a success, a structured not_found result, arguments the framework rejects, and a
ModelRetry for a missing user.  The other runs each call one tool that raises (denied, a
real 429, a real 404, a real client timeout, a bug) or, on 2.x, overruns pydantic-ai's own
tool timeout.  Call ids are `call_pyd_<n>`; canaries come from _scenario.canary.
"""

from __future__ import annotations

import asyncio
import os
import sys
from typing import Any

import pydantic_ai
from _scenario import Stub, canary, compute, delete_file, http_get, job_lookup, tracing, weather
from pydantic_ai import Agent, ModelRetry
from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.models.instrumented import InstrumentationSettings

CASE = os.environ["CASE"]
MAJOR = int(pydantic_ai.__version__.split(".")[0])
C = {n: canary(CASE, n) for n in range(1, 20)}

# run -> the tool calls the scripted model issues first: (tool, args, call id)
RUNS: list[list[tuple[str, dict[str, Any], str]]] = [
    [
        ("get_weather", {"city": C[1]}, "call_pyd_1"),
        ("get_job", {"job_id": C[2]}, "call_pyd_2"),
        ("get_weather", {"city": 12345, "bogus": C[3]}, "call_pyd_3"),
        ("lookup_user", {"user_id": C[4]}, "call_pyd_4"),
    ],
    [("delete_file", {"path": f"/srv/{C[5]}/secrets.txt"}, "call_pyd_5")],
    [("fetch_quota", {"account": C[6]}, "call_pyd_6")],
    [("fetch_doc", {"doc_id": C[7]}, "call_pyd_7")],
    [("slow_report", {"query": C[8]}, "call_pyd_8")],
    [("compute", {"expression": C[10]}, "call_pyd_10")],
]
if MAJOR >= 2:
    RUNS.insert(5, [("wait_for_batch", {"batch": C[9]}, "call_pyd_9")])

current: list[int] = [0]


def scripted(messages: list[Any], info: AgentInfo) -> ModelResponse:
    """First turn: the run's tool calls; after any tool answer: a final text."""
    if len(messages) == 1:
        calls = RUNS[current[0]]
        return ModelResponse(
            parts=[ToolCallPart(tool_name=t, args=a, tool_call_id=i) for t, a, i in calls]
        )
    return ModelResponse(parts=[TextPart(f"done: {C[12]}")])


def main() -> None:
    version = int(sys.argv[1])
    provider = tracing(CASE)
    stub = Stub()
    settings = InstrumentationSettings(tracer_provider=provider, version=version)  # type: ignore[arg-type]
    Agent.instrument_all(settings)
    agent = Agent(FunctionModel(scripted), instructions=f"be careful {C[13]}", retries=1)

    @agent.tool_plain
    def get_weather(city: str) -> str:
        """Weather for a city."""
        return weather(city)

    @agent.tool_plain
    def get_job(job_id: str) -> str:
        """A job by id."""
        return job_lookup(job_id)

    @agent.tool_plain
    def lookup_user(user_id: str) -> str:
        """A user by id."""
        raise ModelRetry(f"user {user_id} not found")

    @agent.tool_plain
    def delete_file(path: str) -> str:
        """Delete a file."""
        return globals()["delete_file"](path)

    @agent.tool_plain
    def fetch_quota(account: str) -> str:
        """The account's quota, from the quota service."""
        return http_get(f"{stub.base}/rate?account={account}")

    @agent.tool_plain
    def fetch_doc(doc_id: str) -> str:
        """A document from the document service."""
        return http_get(f"{stub.base}/missing?doc={doc_id}")

    @agent.tool_plain
    def slow_report(query: str) -> str:
        """A report from the slow reporting service."""
        return http_get(f"{stub.base}/slow?q={query}")

    if MAJOR >= 2:

        @agent.tool_plain(timeout=0.3)
        async def wait_for_batch(batch: str) -> str:
            """Wait for a batch job."""
            await asyncio.sleep(3)
            return batch

    @agent.tool_plain
    def compute(expression: str) -> str:
        """Evaluate an expression."""
        return globals()["compute"](expression)

    for n in range(len(RUNS)):
        current[0] = n
        kwargs: dict[str, Any] = {}
        if MAJOR >= 2:
            kwargs["conversation_id"] = f"sess-{C[14]}-{n}"
        try:
            agent.run_sync(f"please help with {C[11]}", **kwargs)
        except Exception as exc:  # noqa: BLE001 - the failing runs end with the tool's error
            print(f"run {n}: {type(exc).__name__}", file=sys.stderr)
    stub.close()
    provider.shutdown()


_ = (delete_file, compute)  # the shared bodies, called through globals() by the tools above

if __name__ == "__main__":
    main()
