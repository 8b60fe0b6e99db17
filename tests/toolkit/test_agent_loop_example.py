"""examples/agent_loop.py: the scripted conversations end with the decisions they show."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "agent_loop.py"


@pytest.fixture(scope="module")
def example() -> ModuleType:
    """The example module, loaded from its file (examples/ is not a package)."""
    spec = importlib.util.spec_from_file_location("errscope_example_agent_loop", EXAMPLE)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize(
    ("script", "codes", "decisions"),
    [
        pytest.param("happy", ["ok", "ok"], ["continue", "continue"], id="happy"),
        pytest.param("recovers", ["invalid_args", "ok"], ["continue", "continue"], id="recovers"),
        pytest.param(
            "schema_loop", ["invalid_args"] * 2, ["continue", "handoff"], id="schema-loop"
        ),
        pytest.param("invented_ids", ["not_found"] * 2, ["continue", "handoff"], id="invented-ids"),
        pytest.param("denied", ["denied"], ["stop"], id="denied"),
    ],
)
def test_scripts(
    example: ModuleType, traced: Any, script: str, codes: list[str], decisions: list[str]
) -> None:
    """Each script ends where the catalog's caps say, with one span per call in one trace."""
    tools = example.make_tools(tracer_provider=traced.provider)
    turns = example.run_conversation(
        example.SCRIPTS[script], tools, tracer_provider=traced.provider
    )
    assert [t.observation.get("error", "ok") for t in turns] == codes
    assert [t.decision for t in turns] == decisions
    tool_spans = [s for s in traced.spans() if s.name.startswith("execute_tool")]
    assert [s.attributes["errscope.retry.decision"] for s in tool_spans] == decisions
    assert len({s.context.trace_id for s in traced.spans()}) == 1


def test_main_runs(example: ModuleType, capsys: pytest.CaptureFixture[str]) -> None:
    """`python examples/agent_loop.py --spans` prints every conversation and its spans."""
    assert example.main(["--spans"]) == 0
    out = capsys.readouterr().out
    assert "== invented_ids" in out
    assert "[handoff]" in out
    assert "execute_tool get_job" in out
