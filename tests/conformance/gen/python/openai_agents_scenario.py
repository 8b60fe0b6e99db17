"""OpenAI Agents SDK with a scripted `Model`; runs inside the agents venv.

    python openai_agents_scenario.py openinference|openllmetry|logfire

One Runner.run per tool call (one trace each, in this order), each with a group_id (the
SDK's conversation id) that holds a canary.  The SDK's function tools turn a raising tool
into a "non-fatal" error result by default; the denied call uses failure_error_function=None
so its PermissionError ends the run (the fatal path) as users choose for dangerous tools.
The scripted model issues one tool call, then answers with a final text.  `logfire`: Logfire's
own OpenAI Agents integration (`logfire.instrument_openai_agents()`), Logfire configured as
its users run it without the Logfire backend (`send_to_logfire=False`, the two OTLP
exporters as additional span processors, its default scrubbing).
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from typing import Any

from _scenario import (
    Stub,
    canary,
    compute,
    delete_file,
    http_get,
    job_lookup,
    processors,
    tracing,
    weather,
)
from agents import Agent, ModelResponse, RunConfig, Runner, function_tool, set_trace_processors
from agents.models.interface import Model
from agents.tracing import generation_span
from agents.usage import Usage
from openai.types.responses import (
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
)

CASE = os.environ["CASE"]
C = {n: canary(CASE, n) for n in range(1, 20)}

# (tool, arguments, call id): run n issues RUNS[n]
RUNS: list[tuple[str, dict[str, Any], str]] = [
    ("get_weather", {"city": C[1]}, "call_oai_1"),
    ("get_job", {"job_id": C[2]}, "call_oai_2"),
    ("get_weather", {"city": 12345, "bogus": C[3]}, "call_oai_3"),
    ("delete_file", {"path": f"/srv/{C[5]}/secrets.txt"}, "call_oai_5"),
    ("fetch_quota", {"account": C[6]}, "call_oai_6"),
    ("fetch_doc", {"doc_id": C[7]}, "call_oai_7"),
    ("slow_report", {"query": C[8]}, "call_oai_8"),
    ("wait_for_batch", {"batch": C[9]}, "call_oai_9"),
    ("compute", {"expression": C[10]}, "call_oai_10"),
]
current = [0]


def _messages(input: Any) -> list[Any]:
    if isinstance(input, str):
        return [{"role": "user", "content": input}]
    return [i if isinstance(i, dict) else i.model_dump() for i in input]


class Scripted(Model):
    """First turn: the run's tool call; after the tool's answer: a final text."""

    async def get_response(
        self, system_instructions: Any, input: Any, *args: Any, **kwargs: Any
    ) -> ModelResponse:
        items = input if isinstance(input, list) else []
        answered = any(
            (item.get("type") if isinstance(item, dict) else getattr(item, "type", None))
            == "function_call_output"
            for item in items
        )
        if answered:
            text = ResponseOutputText(type="output_text", text=f"done: {C[12]}", annotations=[])
            out: Any = ResponseOutputMessage(
                id="msg_1", type="message", role="assistant", status="completed", content=[text]
            )
        else:
            tool, args, call_id = RUNS[current[0]]
            out = ResponseFunctionToolCall(
                type="function_call",
                call_id=call_id,
                name=tool,
                arguments=json.dumps(args),
                id=f"fc_{call_id}",
                status="completed",
            )
        # as the SDK's own OpenAIChatCompletionsModel does: a generation span per model call
        with generation_span(
            input=[{"role": "system", "content": system_instructions}, *_messages(input)],
            output=[out.model_dump()],
            model="scripted",
        ):
            return ModelResponse(output=[out], usage=Usage(), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> Any:
        # The SDK's Model interface requires it; the scenario runs the agent unstreamed, so
        # a call here would be a change in the scenario, and should fail loudly.
        raise NotImplementedError("the scripted model answers unstreamed runs only")


def instrument(which: str) -> Any:
    """The provider to shut down at the end (Logfire's own, for `logfire`)."""
    set_trace_processors([])  # no export to OpenAI's own trace backend
    if which == "logfire":
        import logfire

        logfire.configure(
            send_to_logfire=False,
            console=False,
            service_name=f"conformance-{CASE}",
            service_version="1",
            additional_span_processors=processors(),
        )
        logfire.instrument_openai_agents()
        return logfire
    provider = tracing(CASE)
    if which == "openinference":
        from openinference.instrumentation.openai_agents import OpenAIAgentsInstrumentor
    else:
        from opentelemetry.instrumentation.openai_agents import OpenAIAgentsInstrumentor
    OpenAIAgentsInstrumentor().instrument(tracer_provider=provider)
    return provider


async def main() -> None:
    provider = instrument(sys.argv[1])
    stub = Stub()

    @function_tool
    def get_weather(city: str) -> str:
        """Weather for a city."""
        return weather(city)

    @function_tool
    def get_job(job_id: str) -> str:
        """A job by id."""
        return job_lookup(job_id)

    @function_tool(failure_error_function=None)
    def delete_file_tool(path: str) -> str:
        """Delete a file."""
        return delete_file(path)

    delete_file_tool.name = "delete_file"

    @function_tool
    def fetch_quota(account: str) -> str:
        """The account's quota, from the quota service."""
        return http_get(f"{stub.base}/rate?account={account}")

    @function_tool
    def fetch_doc(doc_id: str) -> str:
        """A document from the document service."""
        return http_get(f"{stub.base}/missing?doc={doc_id}")

    @function_tool
    def slow_report(query: str) -> str:
        """A report from the slow reporting service."""
        return http_get(f"{stub.base}/slow?q={query}")

    @function_tool(timeout=0.3)
    async def wait_for_batch(batch: str) -> str:
        """Wait for a batch job."""
        await asyncio.sleep(3)
        return batch

    @function_tool
    def compute_tool(expression: str) -> str:
        """Evaluate an expression."""
        return compute(expression)

    compute_tool.name = "compute"

    agent = Agent(
        name="helper",
        instructions=f"be careful {C[13]}",
        model=Scripted(),
        tools=[
            get_weather,
            get_job,
            delete_file_tool,
            fetch_quota,
            fetch_doc,
            slow_report,
            wait_for_batch,
            compute_tool,
        ],
    )
    for n in range(len(RUNS)):
        current[0] = n
        config = RunConfig(group_id=f"sess-{C[14]}-{n}", workflow_name="conformance")
        try:
            await Runner.run(agent, f"please help with {C[11]}", run_config=config)
        except Exception as exc:  # noqa: BLE001 - the fatal path ends the run
            print(f"run {n}: {type(exc).__name__}", file=sys.stderr)
    stub.close()
    provider.shutdown()


if __name__ == "__main__":
    asyncio.run(main())
