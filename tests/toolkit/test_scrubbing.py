"""The toolkit's door to the scrub engine: warmed off the caller's thread, fail closed."""

from __future__ import annotations

import pytest

from errscope.collector.toolkit import scrubbing, tool


@pytest.fixture
def cold_engine(monkeypatch: pytest.MonkeyPatch) -> scrubbing._Engine:
    """A fresh, not yet loaded engine in place of the process's one."""
    engine = scrubbing._Engine()
    monkeypatch.setattr(scrubbing, "_engine", engine)
    return engine


def test_declaring_a_tool_warms_the_engine(cold_engine: scrubbing._Engine) -> None:
    """@tool compiles the scrub engine on a background thread, before the first call."""

    @tool("ping")
    def ping() -> str:
        return "pong"

    assert cold_engine.warming
    # The first call waits for the warm-up instead of compiling a second copy.
    assert scrubbing.scrub_text("plain") == "plain"
    assert cold_engine.loaded
    assert scrubbing.warm_up() is None  # already loaded: no second thread


def test_warm_up_runs_once(cold_engine: scrubbing._Engine) -> None:
    """A second warm-up while the first runs starts no thread."""
    thread = scrubbing.warm_up()
    assert thread is not None
    assert scrubbing.warm_up() is None
    thread.join(timeout=30)
    assert cold_engine.loaded
    assert cold_engine.scrubber is not None


def test_fork_child_starts_over_when_warm_up_was_running(cold_engine: scrubbing._Engine) -> None:
    """A child forked mid-warm-up gets a fresh lock: the parent's thread is not in it."""
    lock = cold_engine.lock
    cold_engine.warming = True
    cold_engine.after_fork_in_child()
    assert cold_engine.lock is not lock
    assert not cold_engine.warming
