"""The sidecar's counters and their exposition (GET /metrics): Prometheus text or OpenMetrics.

Counts and gauges only, never a value from a span: labels are reasons, rule names, codes,
and the clients' own service and tool names, bounded to `MAX_TOOL_CALL_SERIES` series.
`Metrics` is shared by the receivers, the writer's commit callback and the API: every
update and every `render` holds its `lock`.

A scraper that asks for OpenMetrics (`Accept: application/openmetrics-text`, as Prometheus
does with exemplar storage on) gets the same counters with an exemplar on each tool-call
series: the trace and span id of the latest stored call counted there, so a panel of
`errscope_tool_calls_total` links a spike to one of its traces.  Ids are not values from a
span's content; the plain text format (0.0.4) has no exemplars and is unchanged.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final

__all__ = [
    "MAX_TOOL_CALL_SERIES",
    "OPENMETRICS",
    "OTHER_LABEL",
    "PROMETHEUS_TEXT",
    "Metrics",
    "escape_label",
]

PROMETHEUS_TEXT: Final = "text/plain; version=0.0.4; charset=utf-8"
OPENMETRICS: Final = "application/openmetrics-text; version=1.0.0; charset=utf-8"

# Distinct (service, tool, code) series in /metrics; the names are the clients' own, and
# 20,000 tool names made 20,000 series.  Beyond this, new ones count under OTHER_LABEL.
MAX_TOOL_CALL_SERIES: Final = 2000
OTHER_LABEL: Final = "other"


def escape_label(value: str) -> str:
    """A label value as both exposition formats quote it (backslash, quote; newline as space)."""
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", " ")


@dataclass(frozen=True, slots=True)
class Exemplar:
    """The latest call counted on a tool-call series: its ids and when it was stored."""

    trace_id: str
    span_id: str
    at_s: float  # seconds since the epoch


@dataclass
class Metrics:
    """Counters for /metrics (Prometheus text format); values only, never payloads."""

    received: int = 0
    stored: int = 0
    rejected: Counter[str] = field(default_factory=Counter)  # spans, by reason
    refused: Counter[str] = field(default_factory=Counter)  # requests or connections
    redactions: Counter[str] = field(default_factory=Counter)
    tool_calls: Counter[tuple[str, str, str]] = field(default_factory=Counter)
    exemplars: dict[tuple[str, str, str], Exemplar] = field(default_factory=dict)
    tool_call_series_overflow: int = 0  # calls counted under OTHER_LABEL (`count_tool_call`)
    commit_seconds_sum: float = 0.0
    commit_count: int = 0
    tracebacks_kept: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def count_tool_call(
        self,
        service: str,
        tool: str,
        code: str,
        *,
        trace_id: str | None = None,
        span_id: str | None = None,
        at_s: float = 0.0,
    ) -> None:
        """Count one stored call, keeping its ids as the series' exemplar; hold the lock.

        Service and tool names come from clients: past `MAX_TOOL_CALL_SERIES` series a new
        (service, tool) is counted as (`OTHER_LABEL`, `OTHER_LABEL`, code), and the call in
        `tool_call_series_overflow`, so /metrics stays bounded (codes are a closed set).
        """
        key = (service, tool, code)
        if key not in self.tool_calls and len(self.tool_calls) >= MAX_TOOL_CALL_SERIES:
            key = (OTHER_LABEL, OTHER_LABEL, code)
            self.tool_call_series_overflow += 1
        self.tool_calls[key] += 1
        if trace_id and span_id:
            self.exemplars[key] = Exemplar(trace_id, span_id, at_s)

    def render(self, extra: Mapping[str, float], *, openmetrics: bool = False) -> str:
        """The exposition: Prometheus text 0.0.4, or OpenMetrics 1.0 with exemplars."""
        if openmetrics:
            return self._render_openmetrics(extra)
        esc = escape_label
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

    def _render_openmetrics(self, extra: Mapping[str, float]) -> str:
        """OpenMetrics 1.0: counter families named without `_total`, exemplars, `# EOF`."""
        esc = escape_label

        def counter(name: str, samples: list[str]) -> list[str]:
            return [f"# TYPE {name} counter", *samples]

        lines = counter(
            "errscope_spans_received", [f"errscope_spans_received_total {self.received}"]
        )
        lines += counter(
            "errscope_tool_calls_stored", [f"errscope_tool_calls_stored_total {self.stored}"]
        )
        lines += counter(
            "errscope_spans_rejected",
            [
                f'errscope_spans_rejected_total{{reason="{esc(r)}"}} {n}'
                for r, n in self.rejected.items()
            ],
        )
        lines += counter(
            "errscope_exports_refused",
            [
                f'errscope_exports_refused_total{{reason="{esc(r)}"}} {n}'
                for r, n in self.refused.items()
            ],
        )
        lines += counter(
            "errscope_redactions",
            [
                f'errscope_redactions_total{{rule="{esc(r)}"}} {n}'
                for r, n in self.redactions.items()
            ],
        )
        calls = []
        for (s, t, c), n in self.tool_calls.items():
            labels = f'service="{esc(s)}",tool="{esc(t)}",code="{esc(c)}"'
            sample = f"errscope_tool_calls_total{{{labels}}} {n}"
            ex = self.exemplars.get((s, t, c))
            if ex is not None:
                sample += f' # {{trace_id="{ex.trace_id}",span_id="{ex.span_id}"}} 1 {ex.at_s:.3f}'
            calls.append(sample)
        lines += counter("errscope_tool_calls", calls)
        lines += counter(
            "errscope_tool_call_series_overflow",
            [f"errscope_tool_call_series_overflow_total {self.tool_call_series_overflow}"],
        )
        lines += [
            "# TYPE errscope_commit_seconds summary",
            "# UNIT errscope_commit_seconds seconds",
            f"errscope_commit_seconds_sum {self.commit_seconds_sum:.6f}",
            f"errscope_commit_seconds_count {self.commit_count}",
        ]
        lines += counter(
            "errscope_traceback_samples_kept",
            [f"errscope_traceback_samples_kept_total {self.tracebacks_kept}"],
        )
        for name, value in extra.items():
            lines += [f"# TYPE {name} gauge", f"{name} {value}"]
        return "\n".join([*lines, "# EOF"]) + "\n"
