"""CrewAI (one Agent, one Task, a Crew) with a scripted `BaseLLM`, under OpenInference in its
event-listener mode; runs inside the crewai venv.

    python crewai_scenario.py

One `crew.kickoff` per tool call (one trace each, in this order), each inside OpenInference's
`using_session` with a canary in the id.  The scripted LLM answers in CrewAI's ReAct text
format (it does not claim native function calling): the run's `Action` and `Action Input`
first, a `Final Answer` after the observation.  CrewAI's ToolUsage parses the input, checks
it against the tool's argument schema, runs the tool and gives the model the error text when
it raises.  The calls: a success, a structured not_found result, a mistyped argument, a tool
that is not there, a PermissionError, a real 429 and a real 404 from the loopback stub, a
real client timeout and a bug.  CrewAI's own telemetry and tracing (which would call home)
are switched off the way its docs say.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

# read when crewai is imported: set before the imports below
os.environ["CREWAI_DISABLE_TELEMETRY"] = "true"
os.environ["CREWAI_TRACING_ENABLED"] = "false"
os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"

from _scenario import Stub, canary, compute, delete_file, http_get, job_lookup, tracing, weather
from crewai import Agent, Crew, Task
from crewai.events.types.llm_events import LLMCallType
from crewai.llms.base_llm import BaseLLM
from crewai.tools import tool
from openinference.instrumentation import using_session
from openinference.instrumentation.crewai import CrewAIInstrumentor

CASE = os.environ["CASE"]
C = {n: canary(CASE, n) for n in range(1, 20)}

RUNS: list[tuple[str, dict[str, Any]]] = [
    ("get_weather", {"city": C[1]}),
    ("get_job", {"job_id": C[2]}),
    ("get_forecast", {"days": C[3]}),
    ("get_invoice", {"invoice_id": C[4]}),
    ("delete_file", {"path": f"/srv/{C[5]}/secrets.txt"}),
    ("fetch_quota", {"account": C[6]}),
    ("fetch_doc", {"doc_id": C[7]}),
    ("slow_report", {"query": C[8]}),
    ("compute", {"expression": C[10]}),
]
current = [0, 0]  # run index, model turns in this run


class Scripted(BaseLLM):
    """First turn: the run's Action in ReAct text; then the Final Answer.  It emits CrewAI's
    LLM call events as CrewAI's own providers do, so the event listener makes its LLM spans."""

    def call(self, messages: Any, *args: Any, **kwargs: Any) -> str:
        task, agent = kwargs.get("from_task"), kwargs.get("from_agent")
        self._emit_call_started_event(messages=messages, from_task=task, from_agent=agent)
        run, turn = current
        current[1] += 1
        if turn == 0:
            name, args_ = RUNS[run]
            text = (
                f"Thought: I should use {name}\nAction: {name}\nAction Input: {json.dumps(args_)}"
            )
        else:
            text = f"Thought: I now know the final answer\nFinal Answer: done: {C[12]}"
        self._emit_call_completed_event(
            response=text,
            call_type=LLMCallType.LLM_CALL,
            from_task=task,
            from_agent=agent,
            messages=messages,
            usage={"prompt_tokens": 20, "completion_tokens": 5, "total_tokens": 25},
        )
        return text

    def supports_function_calling(self) -> bool:
        return False

    def supports_stop_words(self) -> bool:
        return False

    def get_context_window_size(self) -> int:
        return 8192


STUB = Stub()


@tool("get_weather")
def get_weather(city: str) -> str:
    """Weather for a city."""
    return weather(city)


@tool("get_forecast")
def get_forecast(days: int) -> str:
    """The forecast for a number of days."""
    return json.dumps({"days": days, "rain": False})


@tool("get_job")
def get_job(job_id: str) -> str:
    """A job by id."""
    return job_lookup(job_id)


@tool("delete_file")
def delete_file_tool(path: str) -> str:
    """Delete a file."""
    return delete_file(path)


@tool("fetch_quota")
def fetch_quota(account: str) -> str:
    """The account's quota, from the quota service."""
    return http_get(f"{STUB.base}/rate?account={account}")


@tool("fetch_doc")
def fetch_doc(doc_id: str) -> str:
    """A document from the document service."""
    return http_get(f"{STUB.base}/missing?doc={doc_id}")


@tool("slow_report")
def slow_report(query: str) -> str:
    """A report from the slow reporting service."""
    return http_get(f"{STUB.base}/slow?q={query}")


@tool("compute")
def compute_tool(expression: str) -> str:
    """Evaluate an expression."""
    return compute(expression)


def main() -> None:
    provider = tracing(CASE)
    # the event-listener mode: its spans come from CrewAI's own event bus, which sees the
    # ReAct path's tool use (the default mode wraps Tool.run, which that path never calls)
    CrewAIInstrumentor().instrument(tracer_provider=provider, use_event_listener=True)
    tools = [
        get_weather,
        get_forecast,
        get_job,
        delete_file_tool,
        fetch_quota,
        fetch_doc,
        slow_report,
        compute_tool,
    ]
    for n in range(len(RUNS)):
        current[0], current[1] = n, 0
        agent = Agent(
            role="assistant",
            goal=f"be careful {C[13]}",
            backstory="a careful helper",
            tools=tools,
            llm=Scripted(model="scripted"),
            max_iter=3,
            verbose=False,
        )
        task = Task(
            description=f"please help with {C[11]}", expected_output="an answer", agent=agent
        )
        with using_session(f"sess-{C[14]}-{n}"):
            try:
                Crew(agents=[agent], tasks=[task], verbose=False).kickoff()
            except Exception as exc:  # noqa: BLE001 - a failed run is part of the scenario
                print(f"run {n}: {type(exc).__name__}: {exc}", file=sys.stderr)
    STUB.close()
    provider.shutdown()


if __name__ == "__main__":
    main()
