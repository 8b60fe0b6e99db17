"""The sidecar's counters and their Prometheus text exposition (GET /metrics).

Counts and gauges only, never a value from a span: labels are reasons, rule names, codes,
and the clients' own service and tool names, bounded to `MAX_TOOL_CALL_SERIES` series.
`Metrics` is shared by the receivers, the writer's commit callback and the API: every
update and every `render` holds its `lock`.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final

__all__ = ["MAX_TOOL_CALL_SERIES", "OTHER_LABEL", "Metrics"]

# Distinct (service, tool, code) series in /metrics; the names are the clients' own, and
# 20,000 tool names made 20,000 series.  Beyond this, new ones count under OTHER_LABEL.
MAX_TOOL_CALL_SERIES: Final = 2000
OTHER_LABEL: Final = "other"


@dataclass
class Metrics:
    """Counters for /metrics (Prometheus text format); values only, never payloads."""

    received: int = 0
    stored: int = 0
    rejected: Counter[str] = field(default_factory=Counter)  # spans, by reason
    refused: Counter[str] = field(default_factory=Counter)  # requests or connections
    redactions: Counter[str] = field(default_factory=Counter)
    tool_calls: Counter[tuple[str, str, str]] = field(default_factory=Counter)
    tool_call_series_overflow: int = 0  # calls counted under OTHER_LABEL (`count_tool_call`)
    commit_seconds_sum: float = 0.0
    commit_count: int = 0
    tracebacks_kept: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def count_tool_call(self, service: str, tool: str, code: str) -> None:
        """Count one stored call; hold the lock.

        Service and tool names come from clients: past `MAX_TOOL_CALL_SERIES` series a new
        (service, tool) is counted as (`OTHER_LABEL`, `OTHER_LABEL`, code), and the call in
        `tool_call_series_overflow`, so /metrics stays bounded (codes are a closed set).
        """
        key = (service, tool, code)
        if key not in self.tool_calls and len(self.tool_calls) >= MAX_TOOL_CALL_SERIES:
            key = (OTHER_LABEL, OTHER_LABEL, code)
            self.tool_call_series_overflow += 1
        self.tool_calls[key] += 1

    def render(self, extra: Mapping[str, float]) -> str:
        """The exposition text."""

        def esc(value: str) -> str:
            return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", " ")

        lines = [
            "# TYPE errscope_spans_received_total counter",
            f"errscope_spans_received_total {self.received}",
            "# TYPE errscope_tool_calls_stored_total counter",
            f"errscope_tool_calls_stored_total {self.stored}",
            "# TYPE errscope_spans_rejected_total counter",
        ]
        lines += [
            f'errscope_spans_rejected_total{{reason="{esc(r)}"}} {n}'
            for r, n in self.rejected.items()
        ]
        lines += ["# TYPE errscope_exports_refused_total counter"]
        lines += [
            f'errscope_exports_refused_total{{reason="{esc(r)}"}} {n}'
            for r, n in self.refused.items()
        ]
        lines += ["# TYPE errscope_redactions_total counter"]
        lines += [
            f'errscope_redactions_total{{rule="{esc(r)}"}} {n}' for r, n in self.redactions.items()
        ]
        lines += ["# TYPE errscope_tool_calls_total counter"]
        lines += [
            f'errscope_tool_calls_total{{service="{esc(s)}",tool="{esc(t)}",code="{esc(c)}"}} {n}'
            for (s, t, c), n in self.tool_calls.items()
        ]
        lines += [
            "# TYPE errscope_tool_call_series_overflow_total counter",
            f"errscope_tool_call_series_overflow_total {self.tool_call_series_overflow}",
            "# TYPE errscope_commit_seconds summary",
            f"errscope_commit_seconds_sum {self.commit_seconds_sum:.6f}",
            f"errscope_commit_seconds_count {self.commit_count}",
            "# TYPE errscope_traceback_samples_kept_total counter",
            f"errscope_traceback_samples_kept_total {self.tracebacks_kept}",
        ]
        for name, value in extra.items():
            lines += [f"# TYPE {name} gauge", f"{name} {value}"]
        return "\n".join(lines) + "\n"
