"""DSPy (`dspy.ReAct`) with DSPy's own `DummyLM` as the scripted model, under OpenInference;
runs inside the dspy venv.

    python dspy_scenario.py

One ReAct call per tool call (one trace each, in this order), each inside OpenInference's
`using_session` with a canary in the id.  The scripted model picks the run's tool and
arguments on its first turn, `finish` on the next, then the extract step's answer.  ReAct
catches whatever a tool raises and gives the model `Execution error in <tool>: ...` as the
observation.  The calls: a success, a structured not_found result, a mistyped argument (the
`Tool` checks the arguments against its JSON schema and raises ValueError before the
function runs), a PermissionError, a real 429 and a real 404 from the loopback stub, a real
client timeout and a bug.  DSPy has no tool timeout of its own, and ReAct's signature types
the tool name as a `Literal` of the tools it has: a model that names an unknown tool fails
the parse of its own reply, and no call exists.
"""

from __future__ import annotations

import os
import sys
import warnings
from typing import Any

import dspy
from _scenario import Stub, canary, compute, delete_file, http_get, job_lookup, tracing, weather
from dspy.utils.dummies import DummyLM
from openinference.instrumentation import using_session
from openinference.instrumentation.dspy import DSPyInstrumentor

CASE = os.environ["CASE"]
C = {n: canary(CASE, n) for n in range(1, 20)}

RUNS: list[tuple[str, dict[str, Any]]] = [
    ("get_weather", {"city": C[1]}),
    ("get_job", {"job_id": C[2]}),
    ("get_weather", {"city": 12345}),
    ("delete_file", {"path": f"/srv/{C[5]}/secrets.txt"}),
    ("fetch_quota", {"account": C[6]}),
    ("fetch_doc", {"doc_id": C[7]}),
    ("slow_report", {"query": C[8]}),
    ("compute", {"expression": C[10]}),
]


def tools(stub: Stub) -> list[dspy.Tool]:
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
    return [dspy.Tool(f) for f in plain] + [
        dspy.Tool(delete_file_tool, name="delete_file"),
        dspy.Tool(compute_tool, name="compute"),
    ]


def main() -> None:
    warnings.simplefilter("ignore")
    provider = tracing(CASE)
    DSPyInstrumentor().instrument(tracer_provider=provider)
    stub = Stub()
    for n, (name, args) in enumerate(RUNS):
        lm = DummyLM(
            [
                {"next_thought": f"use {name}", "next_tool_name": name, "next_tool_args": args},
                {"next_thought": "enough", "next_tool_name": "finish", "next_tool_args": {}},
                {"reasoning": "the tool answered", "answer": f"done: {C[12]}"},
            ]
        )
        dspy.configure(lm=lm)
        react = dspy.ReAct("question -> answer", tools=tools(stub), max_iters=3)
        with using_session(f"sess-{C[14]}-{n}"):
            try:
                react(question=f"please help with {C[11]}")
            except Exception as exc:  # noqa: BLE001 - a failed run is part of the scenario
                print(f"run {n}: {type(exc).__name__}", file=sys.stderr)
    stub.close()
    provider.shutdown()


if __name__ == "__main__":
    main()
