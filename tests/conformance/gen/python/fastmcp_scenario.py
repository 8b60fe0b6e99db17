"""fastmcp (4.x): a FastMCP server over stdio and a fastmcp Client, in two processes, as deployed.

    python fastmcp_scenario.py server|client     (the client)
    python fastmcp_scenario.py --serve EXPORT    (the server)

The client launches this file again as its stdio server.  Only the named side installs a
TracerProvider (each side is its own service), so a case holds one side's spans: fastmcp's
native telemetry (`tools/call <tool>`, SERVER in the server, CLIENT in the client) and what
the mcp SDK under it records.  The client calls each tool once, in this order: success, a
structured not_found result, mistyped arguments, a tool that is not there, a
PermissionError, a real 429 and a real 404 from the loopback stub, a call the client
abandons after its timeout, and a bug.  Only the server side is a case (cases.py): the
client's fastmcp span nests the mcp SDK's own client span for the same call
(docs/conventions.md).
"""

from __future__ import annotations

import asyncio
import os
import sys
from typing import Any

from _scenario import Stub, canary, compute, delete_file, http_get, job_lookup, tracing, weather

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


def serve(export: str) -> None:
    provider = tracing(CASE) if export == "server" else None
    from fastmcp import FastMCP

    stub = Stub()
    server = FastMCP("conformance")

    @server.tool
    def get_weather(city: str) -> str:
        """Weather for a city."""
        return weather(city)

    @server.tool
    def get_job(job_id: str) -> str:
        """A job by id."""
        return job_lookup(job_id)

    @server.tool(name="delete_file")
    def delete_file_tool(path: str) -> str:
        """Delete a file."""
        return delete_file(path)

    @server.tool
    def fetch_quota(account: str) -> str:
        """The account's quota."""
        return http_get(f"{stub.base}/rate?account={account}")

    @server.tool
    def fetch_doc(doc_id: str) -> str:
        """A document."""
        return http_get(f"{stub.base}/missing?doc={doc_id}")

    @server.tool
    async def slow_report(query: str) -> str:
        """A slow report."""
        await asyncio.sleep(2)
        return query

    @server.tool(name="compute")
    def compute_tool(expression: str) -> str:
        """Evaluate an expression."""
        return compute(expression)

    try:
        server.run("stdio", show_banner=False)
    finally:
        stub.close()
        if provider is not None:
            provider.shutdown()


async def client(side: str) -> None:
    provider = tracing(CASE) if side == "client" else None
    from fastmcp import Client
    from fastmcp.client.transports import StdioTransport

    transport = StdioTransport(
        command=sys.executable,
        args=[__file__, "--serve", side],
        env={**os.environ},
    )
    async with Client(transport) as session:
        for name, args in CALLS:
            timeout = 0.5 if name == "slow_report" else 10
            try:
                result = await session.call_tool(name, args, timeout=timeout, raise_on_error=False)
                print(f"{name}: isError={result.is_error}", file=sys.stderr)
            except Exception as exc:  # noqa: BLE001 - JSON-RPC errors and the timeout raise
                print(f"{name}: {type(exc).__name__}", file=sys.stderr)
        await asyncio.sleep(2.5)  # let the abandoned slow call finish on the server
    if provider is not None:
        provider.shutdown()


if __name__ == "__main__":
    if sys.argv[1] == "--serve":
        serve(sys.argv[2])
    else:
        asyncio.run(client(sys.argv[1]))
