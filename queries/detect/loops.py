"""Loop misuse: traces that broke a retry rule, one finding per (service, tool, rule).

The rules live in the `loop_misuse` query (invalid_args on one field more than twice in a
trace, a call after denied, more than two not_found on different calls); this module only
groups its rows into findings.  Deploy evaluation reports loop *storms* separately, as
notes of `detect_deploy` (see `deploys.py`).
"""

from __future__ import annotations

from datetime import datetime, timedelta

from errscope.queries.detect.config import (
    DEFAULT_CONFIG,
    DetectConfig,
    Source,
    evaluation_time,
    received_by,
)
from errscope.queries.findings import Finding, FindingKind

__all__ = ["detect_loop_misuse"]


def detect_loop_misuse(
    source: Source,
    *,
    as_of: datetime | None = None,
    service: str | None = None,
    environment: str | None = None,
    config: DetectConfig = DEFAULT_CONFIG,
    known_by: datetime | None = None,
) -> list[Finding]:
    """Retry-rule breaches in the last `loop_window_s`, one finding per (service, tool, rule)."""
    now = evaluation_time(as_of)
    since = now - timedelta(seconds=config.loop_window_s)
    rows = source.run(
        "loop_misuse",
        {
            "since": since,
            "until": now,
            "known_by": received_by(known_by, now),
            "service": service,
            "environment": environment,
            "limit": 10000,
        },
    ).to_pylist()
    groups: dict[tuple[str, str, str, str | None], list[dict[str, object]]] = {}
    for r in rows:
        key = (str(r["service"]), str(r["tool"]), str(r["rule"]), r["field"])
        groups.setdefault(key, []).append(r)
    findings: list[Finding] = []
    for (svc, tool, rule, fld), items in sorted(groups.items(), key=lambda kv: str(kv[0])):
        items.sort(key=lambda r: str(r["first_ts"]))
        code = {"invalid_args_repeated": "invalid_args", "not_found_repeated": "not_found"}.get(
            rule, "denied"
        )
        calls = sum(int(str(r["calls"])) for r in items)
        findings.append(
            Finding(
                kind=FindingKind.LOOP_MISUSE,
                service=svc,
                environment=environment,
                version=str(items[-1]["version"]) if items[-1]["version"] else None,
                tool=tool,
                code=code,
                field=fld,
                detected_at=now,
                window_start=since,
                window_end=now,
                errors_after=calls,
                traces_after=len(items),
                label=(rule,),
                correlation_ids=tuple(dict.fromkeys(str(r["correlation_id"]) for r in items))[
                    : config.first_ids
                ],
                summary=f"{rule} on {svc}/{tool}: {len(items)} traces, {calls} calls",
            )
        )
    return findings
