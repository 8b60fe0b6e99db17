"""The toolkit's public surface is small and pinned: changing it is a deliberate change here."""

from __future__ import annotations

import inspect
from pathlib import Path

import errscope.collector.toolkit


def test_public_surface() -> None:
    """errscope.collector.toolkit exports exactly these names, each defined and documented."""
    assert sorted(errscope.collector.toolkit.__all__) == sorted(
        [
            "AsyncTool", "BoolFromString", "Coerce", "Decision", "Denied", "InternalError",
            "InvalidArgs", "NotFound", "Observation", "PositiveInt", "RateLimited",
            "RetryBudget", "Timeout", "Tool", "ToolError", "TracebackReport", "TracebackSink",
            "coerce_bool_from_string", "coerce_positive_int", "set_traceback_sink", "tool",
        ]
    )  # fmt: skip
    for name in errscope.collector.toolkit.__all__:
        obj = getattr(errscope.collector.toolkit, name)
        # Type aliases (PositiveInt, Observation, TracebackSink) are documented in the source.
        if inspect.isclass(obj) or inspect.isfunction(obj):
            assert (obj.__doc__ or "").strip(), name


def test_issue_import_line() -> None:
    """The import line the README promises works."""
    from errscope.collector.toolkit import (  # noqa: F401
        InvalidArgs,
        NotFound,
        PositiveInt,
        RetryBudget,
        coerce_positive_int,
        tool,
    )


def test_docstring_names_the_real_exports_test() -> None:
    """The package docstring points at this file, which pins `__all__`."""
    assert "tests/toolkit/test_toolkit_exports.py" in (errscope.collector.toolkit.__doc__ or "")
    assert Path(__file__).name == "test_toolkit_exports.py"
