"""errscope judged on real frameworks' payloads (tests/conformance/cases/*, any language).

Hard assertions hold what must hold and holds today; the ratchet (floor.toml) holds every
case to its measured figures so none gets worse; gaps.toml lists every call errscope gets
wrong, with why, and is held exact: a failure it does not list fails, and so does a listed
gap that starts passing.  The figures: report.py prints them.
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
    GAP_CAUSES,
    Case,
    Figures,
    Gap,
    Stored,
    decode,
    discover,
    floors,
    gaps,
    judge,
    key_text,
    paths_of,
    request_strings,
    run_path,
    spans_of,
    undocumented,
    worse_than_floor,
)

CODES = {"ok", "invalid_args", "not_found", "denied", "rate_limited", "timeout", "internal_error"}
ALL = discover()
RUNS = [pytest.param(c, p, id=f"{c.name}-{p}") for c in ALL for p in paths_of(c)]
SIDECAR_RUNS = [pytest.param(c, p, id=f"{c.name}-{p}") for c in ALL for p in c.transports]
CASE_PARAMS = [pytest.param(c, id=c.name) for c in ALL]
GAPS = gaps()
GAP_PARAMS = [pytest.param(g, id=f"{g.case}-{g.key}-{g.what}") for g in GAPS]
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


@pytest.mark.parametrize("gap", GAP_PARAMS)
def test_gap_names_a_real_call(gap: Gap) -> None:
    """Every gaps.toml entry names a case, its framework and version, a call of its truth, the truth's code and a known cause."""
    case = next((c for c in ALL if c.name == gap.case), None)
    assert case is not None, f"no case {gap.case}"
    assert (gap.framework, gap.version) == (case.truth["framework"], case.truth["version"])
    calls = [c for c in case.calls if key_text(c["key"]) == gap.key]
    assert len(calls) == 1, f"{gap.key} is not one call of {gap.case}"
    assert gap.cause in GAP_CAUSES
    assert gap.missing.strip()
    assert gap.paths is None or set(gap.paths) <= set(paths_of(case))
    if gap.what in ("code", "row"):
        assert gap.want == calls[0]["code"]
    else:
        meaning = gap.what.removeprefix("id:")
        assert gap.what.startswith("id:"), gap.what
        assert meaning in calls[0].get("ids", {}), gap.what
        if gap.cause == "payload":
            # an id the payload lacks must really be absent from every span of the case
            value = str(calls[0]["ids"][meaning])
            for transport in case.transports:
                assert not any(value in x for s in spans_of(case, transport) for x in s.strings)


@pytest.mark.parametrize(("case", "path"), RUNS)
def test_failures_are_the_documented_gaps(case: Case, path: str) -> None:
    """Every wrong code, missing row and missing id of the case is a gaps.toml entry, and every entry still fails."""
    unlisted, passing = undocumented(figures_of(case, path), GAPS)
    assert not unlisted, f"failures gaps.toml does not list: {unlisted}"
    assert not passing, f"gaps that pass now (delete them from gaps.toml): {passing}"


README = Path(__file__).resolve().parents[2] / "README.md"


def readme_frameworks(text: str) -> dict[str, tuple[str, str]]:
    """The README's "Frameworks tested" table: case -> (framework, version)."""
    section = text.split("### Frameworks tested", 1)[1].split("\n#", 1)[0]
    rows = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 4 and cells[0].startswith("`"):
            rows[cells[0].strip("`")] = (cells[1], cells[2])
    return rows


def test_readme_lists_exactly_the_tested_frameworks() -> None:
    """The README's framework table has one row per case, with the framework and version its truth.toml names."""
    listed = readme_frameworks(README.read_text())
    tested = {c.name: (str(c.truth["framework"]), str(c.truth["version"])) for c in ALL}
    assert listed == tested
