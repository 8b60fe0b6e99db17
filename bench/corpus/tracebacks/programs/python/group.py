"""A Python 3.11 ExceptionGroup from parallel tool calls, one member carrying an AWS key id."""

import os


def call_search_tool(query: str) -> None:
    raise ValueError(f"search tool rejected query {query!r}: access key {os.environ['AWS_KEY']} is disabled")


def call_weather_tool(city: str) -> None:
    raise TimeoutError(f"weather tool timed out for {city} after 30s (E3107)")


def run_tool_batch(batch_id: str) -> None:
    errors: list[Exception] = []
    for call in (lambda: call_search_tool("refund policy"), lambda: call_weather_tool("Lyon")):
        try:
            call()
        except Exception as exc:  # noqa: BLE001 - collect every tool failure
            errors.append(exc)
    raise ExceptionGroup(f"2 tool calls failed in batch {batch_id}", errors)


run_tool_batch("batch-7781")
