"""The calls behind a finding: its first failing calls and traceback samples, with trace links.

A finding names the first failing calls by correlation id (`Finding.correlation_ids`); a
human wants to open them in the tracing backend.  `gather_evidence` looks each id up
(`calls_by_correlation`, `tracebacks_by_correlation`) and returns, per finding, the keys
that `finding_dict` adds to its JSON:

    first_failing_calls  [{correlation_id, ts, trace_id, span_id, trace_url}]
    tracebacks           [{ts, trace_id, span_id, exception_type, fingerprint, trace_url}]

`trace_url` is null without a template (errscope.queries.links).  No traceback text is
included: the JSON goes to pipelines and chat, the text stays behind the query API.  At
most `MAX_IDS` ids per finding are looked up, two queries each.  Reads only; a query that
fails raises as the source raises (the caller's one error path).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import Final

from errscope.queries.detect.config import Source
from errscope.queries.findings import Finding
from errscope.queries.links import trace_url

__all__ = ["MAX_IDS", "gather_evidence"]

#: The ids per finding whose calls and tracebacks are looked up.
MAX_IDS: Final = 3
_TRACEBACKS_PER_ID: Final = 1


def _iso(value: object) -> object:
    return value.isoformat().replace("+00:00", "Z") if isinstance(value, datetime) else value


def _evidence(source: Source, finding: Finding, template: str | None) -> dict[str, object]:
    calls: list[dict[str, object]] = []
    tracebacks: list[dict[str, object]] = []
    # The window the finding was judged on; a microsecond past its end, as `until` excludes.
    since = finding.window_start
    until = max(finding.window_end, finding.detected_at) + timedelta(microseconds=1)
    for ident in finding.correlation_ids[:MAX_IDS]:
        rows = source.run(
            "calls_by_correlation", {"id": ident, "since": since, "until": until, "limit": 100}
        ).to_pylist()
        first = next(
            (
                r
                for r in rows
                if r["code"] == finding.code
                and finding.tool in (None, r["tool"])
                and finding.field in (None, r["field"])
            ),
            None,
        )
        if first is not None:
            calls.append(
                {
                    "correlation_id": ident,
                    "ts": _iso(first["ts"]),
                    "trace_id": first["trace_id"],
                    "span_id": first["span_id"],
                    "trace_url": trace_url(template, first["trace_id"], first["span_id"]),
                }
            )
        samples = source.run("tracebacks_by_correlation", {"id": ident, "limit": 20}).to_pylist()
        picked = [s for s in samples if finding.tool in (None, s["tool"])][:_TRACEBACKS_PER_ID]
        tracebacks.extend(
            {
                "ts": _iso(s["ts"]),
                "trace_id": s["trace_id"],
                "span_id": s["span_id"],
                "exception_type": s["exception_type"],
                "fingerprint": s["fingerprint"],
                "trace_url": trace_url(template, s["trace_id"], s["span_id"]),
            }
            for s in picked
        )
    return {"first_failing_calls": calls, "tracebacks": tracebacks}


def gather_evidence(
    source: Source, findings: Sequence[Finding], template: str | None
) -> Mapping[Finding, Mapping[str, object]]:
    """For each finding, its first failing calls and traceback samples with their links."""
    return {f: _evidence(source, f, template) for f in findings}
