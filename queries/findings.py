"""What detection reports: `Finding`, the gate's `Verdict`, and their JSON form.

The JSON form is a public contract: deploy pipelines parse `errscope check --json`, so
keys are only ever added, never renamed or removed (docs/detection.md documents every
key).  Times are ISO 8601 in UTC; a ratio with an empty baseline is `null`, never
`Infinity` (which is not JSON).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from typing import Final

import orjson

__all__ = [
    "CHECK_SCHEMA",
    "Finding",
    "FindingKind",
    "Verdict",
    "check_dict",
    "finding_dict",
    "findings_json",
]

CHECK_SCHEMA: Final = "errscope.check/1"


class FindingKind(StrEnum):
    """What a finding says happened."""

    DEPLOY_REGRESSION = "deploy_regression"
    NEW_SIGNATURE = "new_signature"
    SPIKE = "spike"
    LOOP_MISUSE = "loop_misuse"


class Verdict(StrEnum):
    """The gate's answer; `INSUFFICIENT_DATA` is never reported as healthy."""

    HEALTHY = "healthy"
    REGRESSION = "regression"
    INSUFFICIENT_DATA = "insufficient_data"

    @property
    def exit_code(self) -> int:
        """The `errscope check` exit status: 0 healthy, 1 regression, 3 insufficient data."""
        match self:
            case Verdict.HEALTHY:
                return 0
            case Verdict.REGRESSION:
                return 1
            case Verdict.INSUFFICIENT_DATA:
                return 3


@dataclass(frozen=True, slots=True)
class Finding:
    """One thing detection found, with what a human needs to believe it and find the calls.

    `*_before` is the comparison exposure (the previous version's window for a deploy, the
    expected counts from earlier days for a spike); `*_after` is what was observed.  Error
    counts are calls with the code; `traces_after` counts distinct traces among them, the
    unit the tests are computed on.  `excess_share` is the share of the deploy's excess
    errors of this code that this tool (and field) accounts for.
    """

    kind: FindingKind
    service: str
    code: str
    detected_at: datetime
    window_start: datetime
    window_end: datetime
    version: str | None = None
    environment: str | None = None
    tool: str | None = None
    field: str | None = None
    previous_version: str | None = None
    calls_before: int = 0
    errors_before: int = 0
    calls_after: int = 0
    errors_after: int = 0
    traces_after: int = 0
    ratio: float | None = None
    ratio_ci: tuple[float, float] | None = None
    p_value: float | None = None
    p_adjusted: float | None = None
    excess_share: float | None = None
    phase: str | None = None
    # How sure (deploy regressions): the look that decided (seconds after the deploy), the
    # level of its family, the share of that level spent by the looks so far, the next look.
    look_s: int | None = None
    level: float | None = None
    alpha_spent: float | None = None
    next_look_at: datetime | None = None
    label: tuple[str, ...] = ()
    correlation_ids: tuple[str, ...] = ()
    summary: str = ""

    @property
    def rate_before(self) -> float | None:
        """Errors per call in the comparison exposure."""
        return self.errors_before / self.calls_before if self.calls_before else None

    @property
    def rate_after(self) -> float | None:
        """Errors per call in the observed window."""
        return self.errors_after / self.calls_after if self.calls_after else None


def _time(value: datetime) -> str:
    return value.astimezone(UTC).isoformat().replace("+00:00", "Z")


def _num(value: float | None, digits: int = 6) -> float | None:
    if value is None or not math.isfinite(value):
        return None
    return float(f"{value:.{digits}g}")


#: The keys evidence adds to a finding (errscope.queries.evidence); empty lists without it.
_EVIDENCE_KEYS: Final = ("first_failing_calls", "tracebacks")
Evidence = Mapping[Finding, Mapping[str, object]]


def finding_dict(
    finding: Finding, evidence: Mapping[str, object] | None = None
) -> dict[str, object]:
    """The JSON object for one finding (docs/detection.md, "Finding JSON"), with the calls
    and traceback samples behind it when `evidence` (errscope.queries.evidence) is given."""
    ci = finding.ratio_ci
    out: dict[str, object] = {
        "kind": str(finding.kind),
        "service": finding.service,
        "version": finding.version,
        "previous_version": finding.previous_version,
        "environment": finding.environment,
        "tool": finding.tool,
        "code": finding.code,
        "field": finding.field,
        "detected_at": _time(finding.detected_at),
        "window_start": _time(finding.window_start),
        "window_end": _time(finding.window_end),
        "calls_before": finding.calls_before,
        "errors_before": finding.errors_before,
        "calls_after": finding.calls_after,
        "errors_after": finding.errors_after,
        "traces_after": finding.traces_after,
        "rate_before": _num(finding.rate_before),
        "rate_after": _num(finding.rate_after),
        "ratio": _num(finding.ratio, 4),
        "ratio_ci": None if ci is None else [_num(ci[0], 4), _num(ci[1], 4)],
        "p_value": _num(finding.p_value, 4),
        "p_adjusted": _num(finding.p_adjusted, 4),
        "excess_share": _num(finding.excess_share, 3),
        "phase": finding.phase,
        "look_s": finding.look_s,
        "level": finding.level,
        "alpha_spent": _num(finding.alpha_spent, 4),
        "next_look_at": None if finding.next_look_at is None else _time(finding.next_look_at),
        "label": list(finding.label),
        "correlation_ids": list(finding.correlation_ids),
        "summary": finding.summary,
    }
    for key in _EVIDENCE_KEYS:
        value = (evidence or {}).get(key)
        out[key] = list(value) if isinstance(value, list) else []
    return out


def findings_json(findings: Sequence[Finding], evidence: Evidence | None = None) -> str:
    """`errscope findings --json`: {"schema": ..., "findings": [...]}."""
    found = [finding_dict(f, (evidence or {}).get(f)) for f in findings]
    return orjson.dumps({"schema": "errscope.findings/1", "findings": found}).decode()


def check_dict(
    verdict: Verdict,
    findings: Sequence[Finding],
    *,
    service: str,
    version: str,
    environment: str | None,
    as_of: datetime,
    reason: str,
    notes: Sequence[Finding] = (),
    evidence: Evidence | None = None,
    confidence: Mapping[str, object] | None = None,
) -> dict[str, object]:
    """`errscope check --json` (and `GET /v1/check`): the verdict, the findings that decided
    it, and why; the exit status as fields, for a rollout controller that reads no exit code
    (`inconclusive`: too little data yet, neither a pass nor a failure)."""
    known = evidence or {}
    return {
        "schema": CHECK_SCHEMA,
        "verdict": str(verdict),
        "exit_code": verdict.exit_code,
        "regression": verdict is Verdict.REGRESSION,
        "inconclusive": verdict is Verdict.INSUFFICIENT_DATA,
        "service": service,
        "version": version,
        "environment": environment,
        "as_of": _time(as_of),
        "reason": reason,
        "findings": [finding_dict(f, known.get(f)) for f in findings],
        "notes": [finding_dict(f, known.get(f)) for f in notes],
        # how sure the verdict is and what would make it surer (docs/detection.md)
        "confidence": None if confidence is None else dict(confidence),
    }
