"""The tool author's kit: narrow coercion, structured errors, retry caps, counted spans.

    from errscope.collector.toolkit import tool, PositiveInt, NotFound, RetryBudget

    @tool("get_job", not_found_hint="job ids look like 17 or 42")
    def get_job(job_id: PositiveInt) -> dict:
        if job_id not in JOBS:
            raise NotFound()
        return JOBS[job_id]

    budget = RetryBudget()
    observation = get_job({"job_id": "17"}, call_id="call_1", budget=budget)
    # {"ok": True, "result": {...}}  or  {"error": "invalid_args", "hint": ..., "field": ...}
    budget.take_decision()  # the most severe since last taken: "continue", "stop", "handoff"

The handler's annotations are its schema: arguments are validated (one object, no unknown
keys, required fields present), then coerced (`PositiveInt`, `BoolFromString`, your own
`Coerce`) or strictly type-checked, and the handler runs only when both passed.  Whatever
happens comes back as an observation dict (see `errscope.collector.toolkit.observation`) under a
byte cap, with `got` scrubbed; an execute_tool span in the OTel GenAI conventions records
the code; `RetryBudget` applies the catalog's retry caps.  Nothing raises into the loop.

This module's `__all__` is the public surface (pinned by tests/toolkit/test_toolkit_exports.py);
the submodules are internal.  docs/toolkit.md is the guide for tool authors.
"""

from __future__ import annotations

from errscope.collector.toolkit.adapter import (
    AsyncTool,
    Tool,
    TracebackReport,
    TracebackSink,
    set_traceback_sink,
    tool,
)
from errscope.collector.toolkit.budget import Decision, RetryBudget
from errscope.collector.toolkit.coerce import (
    BoolFromString,
    Coerce,
    PositiveInt,
    coerce_bool_from_string,
    coerce_positive_int,
)
from errscope.collector.toolkit.exceptions import (
    Denied,
    InternalError,
    InvalidArgs,
    NotFound,
    RateLimited,
    Timeout,
    ToolError,
)
from errscope.collector.toolkit.observation import Observation

__all__ = [
    "AsyncTool",
    "BoolFromString",
    "Coerce",
    "Decision",
    "Denied",
    "InternalError",
    "InvalidArgs",
    "NotFound",
    "Observation",
    "PositiveInt",
    "RateLimited",
    "RetryBudget",
    "Timeout",
    "Tool",
    "ToolError",
    "TracebackReport",
    "TracebackSink",
    "coerce_bool_from_string",
    "coerce_positive_int",
    "set_traceback_sink",
    "tool",
]

# The catalog maps these exceptions by their public dotted names (`errscope.NotFound`, ...;
# the names of earlier releases, `collector.toolkit.NotFound`, stay mapped too); make
# `__module__` say so, for the OTel SDK's exception.type and for the catalog.
for _cls in (ToolError, InvalidArgs, NotFound, Denied, RateLimited, Timeout, InternalError):
    _cls.__module__ = "errscope"
del _cls
