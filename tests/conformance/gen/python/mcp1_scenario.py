"""The `mcp` SDK 1.x (no built-in telemetry): a FastMCP server over stdio and a ClientSession.

    python mcp1_scenario.py logfire-client|openllmetry-client   (the client)
    python mcp1_scenario.py --serve none                        (the server, not traced)

The instrumentations that patch mcp 1.x: Logfire's `instrument_mcp()` (a no-op on mcp 2,
which traces itself) and OpenLLMetry's opentelemetry-instrumentation-mcp (which does not
load against mcp 2).  Only the client is traced.  The client calls each tool once, in the
order of mcp_scenario.py: success, a structured not_found result, mistyped arguments, a
tool that is not there, a PermissionError, a real 429 and a real 404 from the loopback
stub, a call the client abandons after its read timeout, and a bug.
"""

from __future__ import annotations

import asyncio
import os
import sys
from datetime import timedelta
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

CASE = os.environ["CASE"]
C = {n: canary(CASE, n) for n in range(1, 20)}

CALLS: list[tuple[str, dict[str, Any]]] = [
    ("get_weather", {"city": C[1]}),
    ("get_job", {"job_id": C[2]}),
    ("get_weather", {"city": {"nested": C[3]}}),
    ("get_invoice", {"invoice_id": C[4]}),
    ("delete_file", {"path": f"/srv/{C[5]}/secrets.txt"}),
    ("fetch_quota", {"account": C[6]}),
    ("fetch_doc", {"doc_id": C[7]}),
    ("slow_report", {"query": C[8]}),
    ("compute", {"expression": C[10]}),
]


def _instrument(which: str) -> Any:
    if which.startswith("logfire"):
        # Logfire as its users run it without its backend: its own provider, the two OTLP
        # exporters as additional span processors, its default scrubbing.
        import logfire

        logfire.configure(
            send_to_logfire=False,
            console=False,
            service_name=f"conformance-{CASE}",
            service_version="1",
            additional_span_processors=processors(),
        )
        logfire.instrument_mcp()
        return logfire
    provider = tracing(CASE)
    from opentelemetry.instrumentation.mcp import McpInstrumentor

    McpInstrumentor().instrument(tracer_provider=provider)
    return provider


def serve() -> None:
    from mcp.server.fastmcp import FastMCP

    stub = Stub()
    server = FastMCP("conformance")

    @server.tool()
    def get_weather(city: str) -> str:
        """Weather for a city."""
        return weather(city)

    @server.tool()
    def get_job(job_id: str) -> str:
        """A job by id."""
        return job_lookup(job_id)

    @server.tool(name="delete_file")
    def delete_file_tool(path: str) -> str:
        """Delete a file."""
        return delete_file(path)

    @server.tool()
    def fetch_quota(account: str) -> str:
        """The account's quota."""
        return http_get(f"{stub.base}/rate?account={account}")

    @server.tool()
    def fetch_doc(doc_id: str) -> str:
        """A document."""
        return http_get(f"{stub.base}/missing?doc={doc_id}")

    @server.tool()
    async def slow_report(query: str) -> str:
        """A slow report."""
        await asyncio.sleep(2)
        return query

    @server.tool(name="compute")
    def compute_tool(expression: str) -> str:
        """Evaluate an expression."""
        return compute(expression)

    try:
        server.run("stdio")
    finally:
        stub.close()


async def client(which: str) -> None:
    provider = _instrument(which)
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    params = StdioServerParameters(
        command=sys.executable, args=[__file__, "--serve", "none"], env={**os.environ}
    )
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        for name, args in CALLS:
            timeout = timedelta(seconds=0.5 if name == "slow_report" else 10)
            try:
                result = await session.call_tool(name, args, read_timeout_seconds=timeout)
                print(f"{name}: isError={result.isError}", file=sys.stderr)
            except Exception as exc:  # noqa: BLE001 - JSON-RPC errors and the timeout raise
                print(f"{name}: {type(exc).__name__} {getattr(exc, 'error', '')}", file=sys.stderr)
        await asyncio.sleep(2.5)  # let the abandoned slow call finish on the server
    if provider is not None:
        if hasattr(provider, "force_flush"):
            provider.force_flush()
        provider.shutdown()


if __name__ == "__main__":
    if sys.argv[1] == "--serve":
        serve()
    else:
        asyncio.run(client(sys.argv[1]))
