"""Layout pieces every page shares: the sidebar filters, banners, findings, auto-refresh.

Pages read the filters through `current()`; the widgets themselves are drawn once per
run by `dashboards/app.py` (`sidebar()`), so a choice made on one page holds on the next.
Nothing here fetches: values come from `errscope.dashboards.data`.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Final

import pandas as pd
import streamlit as st

from errscope.collector.errors import ErrscopeError, StoreErrorKind
from errscope.dashboards import data, source
from errscope.queries.findings import Finding, FindingKind
from errscope.queries.links import TRACE_URL_ENV, trace_url

__all__ = [
    "DEPLOY_LIMITS",
    "RANGES",
    "Context",
    "all_label",
    "auto_refresh",
    "connect_panel",
    "current",
    "finding_line",
    "findings_list",
    "format_ts",
    "hours",
    "sidebar",
    "source_banner",
    "spike_label",
    "trace_link_column",
    "with_trace_links",
]

#: Time ranges offered, label -> seconds.
RANGES: Final = {"1 h": 3600, "6 h": 6 * 3600, "24 h": 86400, "7 d": 7 * 86400}
_DEFAULT_RANGE: Final = "6 h"
#: Choices for how many deploys the Deploys page evaluates in one render.
DEPLOY_LIMITS: Final = (data.MAX_DEPLOYS, 10, 25, 100)
_KEY_SERVICE: Final = "filter_service"
_KEY_ENVIRONMENT: Final = "filter_environment"
_KEY_RANGE: Final = "filter_range"
_KEY_REFRESH: Final = "auto_refresh"
_KEY_LAST_RUN: Final = "_last_full_run"
_REFRESH_CHOICES_S: Final = (15, 30, 60, 300)

_ICONS: Final = {
    FindingKind.DEPLOY_REGRESSION: ":material/rocket_launch:",
    FindingKind.NEW_SIGNATURE: ":material/fiber_new:",
    FindingKind.SPIKE: ":material/trending_up:",
    FindingKind.LOOP_MISUSE: ":material/loop:",
}


@dataclass(frozen=True, slots=True)
class Context:
    """The source and the sidebar's filters, as a page sees them."""

    spec: source.SourceSpec
    scope: data.Scope
    service: str | None
    environment: str | None
    range_label: str
    # The trace URL preset or template (`errscope dashboard --trace-url`); None: no links.
    trace_url: str | None = None

    @property
    def range_s(self) -> int:
        """The chosen time range in seconds."""
        return RANGES[self.range_label]


def current() -> Context:
    """The context of this run (the source from the environment, filters from the sidebar)."""
    spec = source.spec_from_env()
    return Context(
        spec=spec,
        scope=data.scope(spec),
        service=st.session_state.get(_KEY_SERVICE),
        environment=st.session_state.get(_KEY_ENVIRONMENT),
        range_label=st.session_state.get(_KEY_RANGE, _DEFAULT_RANGE),
        trace_url=os.environ.get(TRACE_URL_ENV) or None,
    )


def with_trace_links(frame: pd.DataFrame, template: str | None) -> pd.DataFrame:
    """`frame` with a `trace_url` column built from its `trace_id` (and `span_id`, when it
    has one); unchanged without a template or a trace id column."""
    if not template or "trace_id" not in frame.columns or frame.empty:
        return frame
    spans = frame["span_id"] if "span_id" in frame.columns else [None] * len(frame)
    links = [
        trace_url(template, None if pd.isna(t) else str(t), None if pd.isna(s) else str(s))
        for t, s in zip(frame["trace_id"], spans, strict=True)
    ]
    return frame.assign(trace_url=links)


def trace_link_column() -> dict[str, object]:
    """The `column_config` that shows `trace_url` as a link."""
    return {"trace_url": st.column_config.LinkColumn("trace", display_text="open trace")}


def all_label(label: str) -> Callable[[object], str]:
    """A selectbox `format_func` showing `label` for the None ("all") choice."""
    return lambda value: label if value is None else str(value)


def sidebar(spec: source.SourceSpec, scope: data.Scope) -> None:
    """The filters every page obeys, and where the data comes from."""
    with st.sidebar:
        st.selectbox(
            "Service",
            [None, *scope.services],
            key=_KEY_SERVICE,
            format_func=all_label("All services"),
        )
        st.selectbox(
            "Environment",
            [None, *scope.environments],
            key=_KEY_ENVIRONMENT,
            format_func=all_label("All environments"),
        )
        st.segmented_control(
            "Time range", list(RANGES), key=_KEY_RANGE, default=_DEFAULT_RANGE, required=True
        )
        st.caption(f"Source: `{spec.describe()}`")
        if spec.as_of is not None:
            st.caption(f"As of {format_ts(spec.as_of)} (pinned)")


def auto_refresh(default_s: int) -> None:
    """An optional timer that reruns the whole app, so new calls and verdicts show up."""
    choices = [0, *_REFRESH_CHOICES_S]
    if default_s and default_s not in choices:
        choices.append(default_s)
    with st.sidebar:
        interval = st.selectbox(
            "Auto-refresh",
            choices,
            index=choices.index(default_s) if default_s in choices else 0,
            key=_KEY_REFRESH,
            format_func=lambda s: "off" if s == 0 else f"every {s} s",
        )
    st.session_state[_KEY_LAST_RUN] = time.monotonic()
    if not interval:
        return

    @st.fragment(run_every=interval)
    def _tick() -> None:
        # The fragment runs with the page and then every `interval`; only a timer run,
        # when a whole interval has passed since the last full run, reruns the app.
        if time.monotonic() - st.session_state.get(_KEY_LAST_RUN, 0.0) >= interval * 0.9:
            st.rerun(scope="app")

    _tick()


def source_banner(exc: ErrscopeError, spec: source.SourceSpec | None) -> None:
    """A clear banner for an unreachable sidecar, a refused token or an unreadable file."""
    where = exc.entry or (spec.describe() if spec else "the configured source")
    if exc.kind is StoreErrorKind.LOCKED:
        title = "The database file is held by a running sidecar"
    elif "token" in exc.message:
        title = "The query API refused the token"
    elif exc.kind is StoreErrorKind.UNREADABLE and spec is not None and spec.api:
        title = "Cannot reach the errscope sidecar"
    else:
        title = "Cannot read the errscope data"
    lines = [f"**{title}.**", f"Address tried: `{where}`", f"Reason: {exc.message}."]
    if exc.hint:
        lines.append(f"What to do: {exc.hint}.")
    st.error("  \n".join(lines), icon=":material/cloud_off:")


def hours(seconds: int) -> str:
    """A whole number of hours as `2 h`."""
    return f"{seconds // 3600} h"


def format_ts(value: datetime | None) -> str:
    """A UTC time as `YYYY-MM-DD HH:MM UTC`."""
    if value is None:
        return "—"
    return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC")


def spike_label(finding: Finding) -> str:
    """What a spike most likely means, in the on-call engineer's words."""
    deploy_related = "deploy_related" in finding.label
    broad = "broad" in finding.label
    if deploy_related:
        return "deploy-related"
    if broad:
        return "world-empty (many tools, no deploy)"
    return "one tool, no deploy (model guessing ids?)"


def finding_line(finding: Finding) -> str:
    """One line for a finding: what, where, and the first correlation ids."""
    where = " ".join(
        part for part in (finding.service, finding.version, finding.environment) if part
    )
    text = f"**{finding.kind.replace('_', ' ')}** · {where} — {finding.summary}"
    if finding.kind is FindingKind.SPIKE:
        text += f" · _{spike_label(finding)}_"
    if finding.correlation_ids:
        text += " · first ids: " + ", ".join(f"`{c}`" for c in finding.correlation_ids[:3])
    return text


def findings_list(found: Sequence[Finding], *, empty: str) -> None:
    """Findings as coloured callouts, most severe first; `empty` when there are none."""
    if not found:
        st.success(empty, icon=":material/check_circle:")
        return
    for f in found:
        icon = _ICONS[f.kind]
        if f.kind in (FindingKind.DEPLOY_REGRESSION, FindingKind.NEW_SIGNATURE):
            st.error(finding_line(f), icon=icon)
        else:
            st.warning(finding_line(f), icon=icon)


def connect_panel(spec: source.SourceSpec) -> None:
    """How to point an agent service at the sidecar: the exact OTel variables."""
    st.title("Connect an agent service")
    if data.scope(spec).empty:
        st.info(
            "No tool calls stored yet. Point an agent service at the sidecar and its tool "
            "calls appear here within seconds.",
            icon=":material/inbox:",
        )
    endpoints = data.ingest_endpoints(spec)
    st.markdown(
        "Any OpenTelemetry SDK exports to errscope with the standard variables. "
        "Set them in the agent service's environment and restart it:"
    )
    st.code(
        "\n".join(
            [
                f"export OTEL_EXPORTER_OTLP_ENDPOINT={endpoints.otlp_http}",
                "export OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf",
                "export OTEL_TRACES_EXPORTER=otlp",
                "export OTEL_SERVICE_NAME=billing-agent",
                "export OTEL_RESOURCE_ATTRIBUTES="
                "service.version=1.4.2,deployment.environment.name=prod",
            ]
        ),
        language="bash",
    )
    st.markdown(
        "For OTLP over gRPC use `OTEL_EXPORTER_OTLP_PROTOCOL=grpc` and "
        f"`OTEL_EXPORTER_OTLP_ENDPOINT=http://{endpoints.otlp_grpc}`. "
        "When the sidecar runs with `--token`, also set "
        "`OTEL_EXPORTER_OTLP_HEADERS=Authorization=Bearer%20<token>`."
    )
    if not endpoints.from_sidecar:
        st.caption(
            "These are the sidecar's default ports; use the addresses `errscope serve` printed."
        )
    st.markdown(
        "Tool calls are recognised by their attributes (OTel GenAI `execute_tool` spans, MCP "
        "`tools/call`, OpenInference, OpenLLMetry, pydantic-ai). Set `service.version` on "
        "every deploy so errscope can compare versions."
    )
