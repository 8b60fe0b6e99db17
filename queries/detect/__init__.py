"""Detection: deploy regressions, new error signatures, spikes and loop misuse.

The one statistics package: the dashboard, `errscope check`, `errscope findings`, the
tests and the benchmarks all call it.  SQL does the counting (named queries, so it works
the same on a file and through the query API); this package does the statistics on the
small tables the queries return.  docs/detection.md explains the methods.

The names below are the public surface (pinned by tests/queries/test_detect.py):
- `detect_deploy`, `detect_spikes`, `detect_loop_misuse` and `detect_all` (here: every
  deploy in the horizon, spikes and loops) read a `Source` and return findings; every
  query they run is bounded by `as_of`, so evaluating "as if it were 10:05" sees nothing
  written after 10:05.  `find_deploy` looks up one deploy's marker.
- `evaluate_deploy` (on `DeployCounts`) and `evaluate_spike_series` (on `SpikeSeries`)
  are pure: arrays in, verdicts out.  The benchmarks drive them with simulated counts.
- `deploy_window` and `deploy_minute_counts` are the window a deploy is judged on and
  its minutes; the dashboard's before/after chart reads them too.
- `DetectConfig` / `DEFAULT_CONFIG` / `with_codes`: every threshold.

Inside, one module per part: `config` (thresholds, source, evaluation time), `stats` (the
statistical primitives), `deploy_evaluation` (the pure deploy tests), `deploys` (reading
a deploy and reporting it), `spikes`, `loops`.  Nothing here raises on sparse or empty
data: too little data is a verdict (`INSUFFICIENT_DATA`), never an exception and never a
pass.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from errscope.queries.detect.config import (
    DEFAULT_CONFIG,
    DetectConfig,
    Source,
    evaluation_time,
    first_hour,
    with_codes,
)
from errscope.queries.detect.deploy_evaluation import (
    DeployCounts,
    DeployEvaluation,
    DeployInfo,
    evaluate_deploy,
)
from errscope.queries.detect.deploys import (
    DeployReport,
    DeployWindow,
    deploy_info,
    deploy_minute_counts,
    deploy_window,
    detect_deploy,
    find_deploy,
)
from errscope.queries.detect.loops import detect_loop_misuse
from errscope.queries.detect.spikes import SpikeSeries, detect_spikes, evaluate_spike_series
from errscope.queries.findings import Finding

__all__ = [
    "DEFAULT_CONFIG",
    "DeployCounts",
    "DeployEvaluation",
    "DeployInfo",
    "DeployReport",
    "DeployWindow",
    "DetectConfig",
    "SpikeSeries",
    "deploy_minute_counts",
    "deploy_window",
    "detect_all",
    "detect_deploy",
    "detect_loop_misuse",
    "detect_spikes",
    "evaluate_deploy",
    "evaluate_spike_series",
    "find_deploy",
    "first_hour",
    "with_codes",
]


def detect_all(
    source: Source,
    *,
    as_of: datetime | None = None,
    service: str | None = None,
    environment: str | None = None,
    config: DetectConfig = DEFAULT_CONFIG,
    known_by: datetime | None = None,
    long_looks: bool = False,
) -> list[Finding]:
    """Current findings: every deploy within `horizon_s`, spikes, and loop misuse (only
    rows received by `known_by`, default `as_of`, count: see `detect_deploy`).

    `long_looks` also judges every deploy of the last `long_horizon_s` at its long looks
    (+2 h, +6 h, +24 h).  Off by default: each such deploy reads up to two days of its
    service's rows, which made `findings` on a 17M-row store take 53 s of CPU instead of
    3 s; `errscope check` judges one deploy at its long looks whatever this says.
    """
    now = evaluation_time(as_of)
    if not long_looks:
        config = first_hour(config)
    horizon_s = max(config.horizon_s, config.long_horizon_s) if long_looks else config.horizon_s
    deploys = source.run(
        "deploy_markers",
        {
            "since": now - timedelta(seconds=horizon_s),
            "until": now,
            "service": service,
            "environment": environment,
        },
    ).to_pylist()
    findings: list[Finding] = []
    notes: list[Finding] = []
    for d in deploys:
        info = deploy_info(d)
        report = detect_deploy(
            source,
            info.service,
            info.version,
            info.environment,
            as_of=now,
            config=config,
            deploy=info,
            known_by=known_by,
        )
        findings.extend(report.findings)
        notes.extend(report.notes)
    findings.extend(
        detect_spikes(
            source,
            as_of=now,
            service=service,
            environment=environment,
            config=config,
            known_by=known_by,
        )
    )
    loops = detect_loop_misuse(
        source,
        as_of=now,
        service=service,
        environment=environment,
        config=config,
        known_by=known_by,
    )
    # A deploy's storm note and the loop finding are one retry loop seen twice: the loop
    # finding (it names the field) is reported, the note only where no loop finding is.
    looped = {(f.service, f.environment, f.tool, f.code) for f in loops}
    findings.extend(
        n
        for n in notes
        if (n.service, n.environment, n.tool, n.code) not in looped
        and (n.service, None, n.tool, n.code) not in looped
    )
    findings.extend(loops)
    return findings
