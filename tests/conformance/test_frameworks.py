"""errscope judged on real frameworks' payloads (tests/conformance/cases/*, any language).

Hard assertions hold what must hold and holds today; the ratchet (floor.toml) holds every
case to its measured figures so none gets worse.  The figures: report.py prints them.
"""

from __future__ import annotations

import atexit
import functools
import shutil
import tempfile
from pathlib import Path

import pytest

from tests.conformance.harness import (
    CAPTURE,
    Case,
    Figures,
    Stored,
    decode,
    discover,
    floors,
    judge,
    paths_of,
    request_strings,
    run_path,
    worse_than_floor,
)

CODES = {"ok", "invalid_args", "not_found", "denied", "rate_limited", "timeout", "internal_error"}
ALL = discover()
RUNS = [pytest.param(c, p, id=f"{c.name}-{p}") for c in ALL for p in paths_of(c)]
SIDECAR_RUNS = [pytest.param(c, p, id=f"{c.name}-{p}") for c in ALL for p in c.transports]
CASE_PARAMS = [pytest.param(c, id=c.name) for c in ALL]
_WORK = Path(tempfile.mkdtemp(prefix="conformance-runs-"))
atexit.register(shutil.rmtree, _WORK, ignore_errors=True)


@functools.cache
def _stored(path: str) -> Stored:
    """One run of every case through `path` per test session (a sidecar start costs seconds)."""
    return run_path(ALL, path, _WORK)


def figures_of(case: Case, path: str) -> Figures:
    """The judged figures of one case through one path."""
    transport = case.transports[0] if path == "inprocess" else path
    return judge(case, transport, _stored(path), path)


def test_corpus_is_not_empty() -> None:
    """The corpus holds cases with payloads, so the parametrised tests below run at all."""
    assert ALL, "no case folder under tests/conformance/cases"
    assert CAPTURE.is_file()


@pytest.mark.parametrize("case", CASE_PARAMS)
def test_truth_is_well_formed(case: Case) -> None:
    """Every truth.toml names its framework and version, and every call a key, a tool and a catalog code."""
    for key in ("framework", "version", "language", "transports", "canaries", "calls"):
        assert key in case.truth, f"truth.toml lacks {key}"
    assert set(case.truth["transports"]) == set(case.transports), "transports vs payloads"
    for call in case.calls:
        assert call["code"] in CODES, call
        assert call.get("tool"), call
        key = call["key"]
        assert "call_id" in key or {"trace_seq", "tool"} <= set(key), call


@pytest.mark.parametrize("case", CASE_PARAMS)
def test_canaries_are_planted(case: Case) -> None:
    """Every canary the truth lists is in the case's payloads of every transport (it was really planted)."""
    for transport in case.transports:
        text = "\n".join(s for p in case.bodies(transport) for s in request_strings(decode(p)))
        missing = [c for c in case.canaries if c not in text]
        assert not missing, f"{transport}: {missing}"


@pytest.mark.parametrize(("case", "path"), RUNS)
def test_every_payload_is_acknowledged(case: Case, path: str) -> None:
    """errscope acknowledges every payload of the case (sidecar: also on replay) and drains to exit 0."""
    figures = figures_of(case, path)
    assert figures.sent > 0
    assert figures.acknowledged == figures.sent
    assert set(figures.exit_codes) == {0}


@pytest.mark.parametrize(("case", "path"), RUNS)
def test_rows_keep_the_payload_ids(case: Case, path: str) -> None:
    """Every stored row of the case carries the trace and span id of a span in its payloads."""
    figures = figures_of(case, path)
    assert figures.rows > 0
    assert figures.foreign_rows == 0


@pytest.mark.parametrize(("case", "path"), SIDECAR_RUNS)
def test_replay_adds_no_rows(case: Case, path: str) -> None:
    """Sending the same payloads again (a resend after a lost acknowledgement) adds no tool_calls or tracebacks row."""
    assert figures_of(case, path).replay_changed == []


@pytest.mark.parametrize(("case", "path"), RUNS)
def test_not_worse_than_floor(case: Case, path: str) -> None:
    """The case's right codes, ids found, missing/extra rows and canary hits are no worse than floor.toml."""
    figures = figures_of(case, path)
    floor = floors().get(case.name)
    now = figures.summary()
    assert floor is not None, f'no floor for {case.name}; add ["{case.name}"] {now}'
    worse = worse_than_floor(figures, floor)
    assert not worse, (
        f"{case.name} via {path} got worse: {worse}; now {now}; wrong: {figures.wrong}"
    )
