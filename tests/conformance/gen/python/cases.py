"""The Python cases: which framework, at which pinned versions, through which scenario.

Each entry names its venv (shared by cases that pin the same packages), the exact pins
installed there, the scenario script (run inside that venv) and its arguments.
regenerate.py calls `CASES[name]()` for each case it regenerates.
"""

from __future__ import annotations

from collections.abc import Callable

from _driver import generate

OTEL = "1.45.2"
OTEL_PINS = [
    f"opentelemetry-sdk=={OTEL}",
    f"opentelemetry-exporter-otlp-proto-grpc=={OTEL}",
    f"opentelemetry-exporter-otlp-proto-http=={OTEL}",
]
PYDANTIC_AI = ["pydantic-ai-slim==2.68.0", "httpx==0.28.1", *OTEL_PINS]
PYDANTIC_AI_1 = [
    "pydantic-ai-slim==1.0.0",
    "httpx==0.28.1",
    "opentelemetry-sdk==1.37.0",
    "opentelemetry-exporter-otlp-proto-grpc==1.37.0",
    "opentelemetry-exporter-otlp-proto-http==1.37.0",
]

AGENTS = [
    "openai-agents==0.24.0",
    "openinference-instrumentation-openai-agents==2.6.0",
    "opentelemetry-instrumentation-openai-agents==0.62.4",
    "httpx==0.28.1",
    *OTEL_PINS,
]
LANGCHAIN = [
    "langchain-core==1.8.1",
    "langgraph==1.2.22",
    "openinference-instrumentation-langchain==0.1.80",
    "opentelemetry-instrumentation-langchain==0.62.4",
    "httpx==0.28.1",
    *OTEL_PINS,
]
SMOLAGENTS = [
    "smolagents==1.26.0",
    "openinference-instrumentation-smolagents==0.1.43",
    "httpx==0.28.1",
    *OTEL_PINS,
]
FASTMCP = ["fastmcp==4.1.6", "httpx==0.28.1", *OTEL_PINS]
AUTOGEN = ["autogen-agentchat==0.7.5", "autogen-ext==0.7.5", "httpx==0.28.1", *OTEL_PINS]
DSPY = ["dspy==3.4.1", "openinference-instrumentation-dspy==0.1.48", "httpx==0.28.1", *OTEL_PINS]
LLAMAINDEX = [
    "llama-index-core==0.14.25",
    "openinference-instrumentation-llama-index==4.6.1",
    "httpx==0.28.1",
    *OTEL_PINS,
]
HAYSTACK = ["haystack-ai==3.4.1", "opentelemetry-haystack==2.0.0", "httpx==0.28.1", *OTEL_PINS]
SEMANTIC_KERNEL = ["semantic-kernel==1.45.0", "httpx==0.28.1", *OTEL_PINS]
AGNO = ["agno==3.1.10", "openinference-instrumentation-agno==1.0.15", "httpx==0.28.1", *OTEL_PINS]
LOGFIRE = ["logfire==5.4.0", "openai-agents==0.24.0", "httpx==0.28.1", *OTEL_PINS]
CREWAI = [
    "crewai==1.15.30",
    "openinference-instrumentation-crewai==1.1.21",
    "httpx==0.28.1",
    *OTEL_PINS,
]
LOGFIRE_MCP = ["logfire==5.4.0", "mcp==1.30.0", "httpx==0.28.1", *OTEL_PINS]
OPENLLMETRY_MCP1 = [
    "mcp==1.30.0",
    "opentelemetry-instrumentation-mcp==0.62.4",
    "httpx==0.28.1",
    *OTEL_PINS,
]
MCP = ["mcp==2.3.0", "opentelemetry-instrumentation-mcp==0.62.4", "httpx==0.28.1", *OTEL_PINS]


def _case(venv: str, pins: list[str], script: str, *args: str) -> Callable[[str], int]:
    return lambda case: generate(case, venv, pins, script, *args)


CASES: dict[str, Callable[[str], int]] = {
    "python-pydantic-ai": _case("pydantic-ai-2", PYDANTIC_AI, "pydantic_ai_scenario.py", "5"),
    "python-pydantic-ai-v2": _case("pydantic-ai-2", PYDANTIC_AI, "pydantic_ai_scenario.py", "2"),
    "python-pydantic-ai-1.0": _case(
        "pydantic-ai-1.0", PYDANTIC_AI_1, "pydantic_ai_scenario.py", "1"
    ),
    "python-openai-agents-openinference": _case(
        "agents", AGENTS, "openai_agents_scenario.py", "openinference"
    ),
    "python-openai-agents-openllmetry": _case(
        "agents", AGENTS, "openai_agents_scenario.py", "openllmetry"
    ),
    "python-openai-agents-logfire": _case(
        "logfire", LOGFIRE, "openai_agents_scenario.py", "logfire"
    ),
    "python-langgraph-openinference": _case(
        "langchain", LANGCHAIN, "langchain_scenario.py", "openinference"
    ),
    "python-langgraph-openllmetry": _case(
        "langchain", LANGCHAIN, "langchain_scenario.py", "openllmetry"
    ),
    "python-smolagents-openinference": _case("smolagents", SMOLAGENTS, "smolagents_scenario.py"),
    "python-fastmcp-server": _case("fastmcp", FASTMCP, "fastmcp_scenario.py", "server"),
    "python-fastmcp-client": _case("fastmcp", FASTMCP, "fastmcp_scenario.py", "client"),
    "python-mcp-server": _case("mcp", MCP, "mcp_scenario.py", "server"),
    "python-mcp-client": _case("mcp", MCP, "mcp_scenario.py", "client"),
    "python-mcp1-openllmetry-client": _case(
        "openllmetry-mcp1", OPENLLMETRY_MCP1, "mcp1_scenario.py", "openllmetry-client"
    ),
    "python-mcp1-logfire-client": _case(
        "logfire-mcp1", LOGFIRE_MCP, "mcp1_scenario.py", "logfire-client"
    ),
    "python-autogen-agentchat": _case("autogen", AUTOGEN, "autogen_scenario.py"),
    "python-dspy-openinference": _case("dspy", DSPY, "dspy_scenario.py"),
    "python-crewai-openinference": _case("crewai", CREWAI, "crewai_scenario.py"),
    "python-agno-openinference": _case("agno", AGNO, "agno_scenario.py"),
    "python-semantic-kernel": _case(
        "semantic-kernel", SEMANTIC_KERNEL, "semantic_kernel_scenario.py"
    ),
    "python-haystack": _case("haystack", HAYSTACK, "haystack_scenario.py"),
    "python-llamaindex-openinference": _case("llamaindex", LLAMAINDEX, "llamaindex_scenario.py"),
}
