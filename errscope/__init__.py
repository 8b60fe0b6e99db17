"""errscope: tool-call error analytics for AI agent services.

The one import root.  The repository keeps its folders at the top (`collector/`, the write
side; `queries/`, the read side; `dashboards/`, the Streamlit app); they install as
`errscope.collector`, `errscope.queries` and `errscope.dashboards` (this folder links
them in a checkout, and the wheel carries them inside `errscope/`), so installing errscope
beside the PyPI packages named `collector` or `queries` breaks neither.

Python services and tool authors need only this module:

    from errscope import instrument, tool, PositiveInt, NotFound

- `instrument(...)` / `ScrubbingSpanExporter(inner)`: the in-process exporter (scrubs, then
  exports; never raises into the application);
- the tool author's kit (`tool`, `PositiveInt`, `NotFound`, `RetryBudget`, ...): see
  docs/toolkit.md.

Everything loads lazily, so that `import errscope` stays cheap for the CLI.  `__all__` is
the public surface, pinned by tests/test_exported_members.py.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

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
    "ScrubbingSpanExporter",
    "Timeout",
    "Tool",
    "ToolError",
    "TracebackReport",
    "TracebackSink",
    "__version__",
    "coerce_bool_from_string",
    "coerce_positive_int",
    "instrument",
    "set_traceback_sink",
    "tool",
]

# Where each public name is defined (loaded on first use); the in-process exporter, then
# the tool author's kit.
_EXPORTS: dict[str, str] = {
    "ScrubbingSpanExporter": "errscope.collector.export",
    "instrument": "errscope.collector.export",
    **dict.fromkeys(
        (n for n in __all__ if n not in {"ScrubbingSpanExporter", "instrument", "__version__"}),
        "errscope.collector.toolkit",
    ),
}

if TYPE_CHECKING:
    from errscope.collector.export import ScrubbingSpanExporter, instrument
    from errscope.collector.toolkit import (
        AsyncTool,
        BoolFromString,
        Coerce,
        Decision,
        Denied,
        InternalError,
        InvalidArgs,
        NotFound,
        Observation,
        PositiveInt,
        RateLimited,
        RetryBudget,
        Timeout,
        Tool,
        ToolError,
        TracebackReport,
        TracebackSink,
        coerce_bool_from_string,
        coerce_positive_int,
        set_traceback_sink,
        tool,
    )


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'errscope' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later look-ups skip this hook
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
