"""Altair charts for the dashboard: frames from `errscope.dashboards.data` in, charts out.

One colour per code on every page, taken from the error catalog (`Catalog.color`): every
chart that colours by code uses `code_scale()`, so invalid_args is the same red on the
Overview, on a deploy's before/after chart and on the spike series.  Charts never fetch.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from functools import cache
from typing import Final

import altair as alt
import pandas as pd

from errscope.collector.catalog import default_catalog

__all__ = [
    "before_after",
    "calls_by_code",
    "code_color",
    "code_colors",
    "code_order",
    "code_scale",
    "loop_rules",
    "redactions_by_tool",
    "redactions_over_time",
    "spike_series",
]

_HEIGHT: Final = 260
_TIME_FORMAT: Final = "%H:%M"


@cache
def code_order() -> tuple[str, ...]:
    """Codes in legend order: ok, the catalog's codes, unknown."""
    return ("ok", *default_catalog().codes, "unknown")


def code_colors() -> dict[str, str]:
    """The catalog's colour of every code."""
    catalog = default_catalog()
    return {code: catalog.color(code) for code in code_order()}


def code_scale(extra: Iterable[str] = ()) -> alt.Scale:
    """The colour scale by code; codes outside the catalog get the `unknown` colour."""
    colors = code_colors()
    domain = [*code_order(), *(c for c in dict.fromkeys(extra) if c not in colors)]
    return alt.Scale(domain=domain, range=[colors.get(c, colors["unknown"]) for c in domain])


def code_color(codes: pd.Series) -> alt.Color:
    """Colour by code with the catalog's scale; the legend lists only the codes present."""
    present = [str(c) for c in dict.fromkeys(codes)]
    order = {c: i for i, c in enumerate(code_order())}
    present.sort(key=lambda c: order.get(c, len(order)))
    return alt.Color(
        "code:N", scale=code_scale(present), title="code", legend=alt.Legend(values=present)
    )


def _deploy_rules(deploys: pd.DataFrame, y_top: str = "top") -> alt.LayerChart:
    """Vertical rules at deploy times, labelled with the version."""
    marks = deploys.assign(label=deploys["service"] + " " + deploys["version"])
    base = alt.Chart(marks).encode(x=alt.X("ts:T"))
    rule = base.mark_rule(color="#333", strokeDash=[4, 3], strokeWidth=1.5)
    text = base.mark_text(align="left", dx=4, dy=6, baseline="top", fontSize=11, color="#333")
    return alt.layer(
        rule.encode(tooltip=["service", "version", "environment", alt.Tooltip("ts:T")]),
        text.encode(text="label:N", y=alt.value(0)),
    )


def calls_by_code(frame: pd.DataFrame, deploys: pd.DataFrame, *, include_ok: bool) -> alt.Chart:
    """Stacked bars of calls per bucket by code, with deploy markers."""
    data = frame if include_ok else frame[frame["code"] != "ok"]
    data = data.groupby(["bucket", "code"], as_index=False)["calls"].sum()
    bars = (
        alt.Chart(data)
        .mark_bar()
        .encode(
            x=alt.X("bucket:T", title=None, axis=alt.Axis(format=_TIME_FORMAT)),
            y=alt.Y("calls:Q", stack="zero", title="calls" if include_ok else "failing calls"),
            color=code_color(data["code"]),
            order=alt.Order("code:N"),
            tooltip=[alt.Tooltip("bucket:T", format="%Y-%m-%d %H:%M"), "code", "calls"],
        )
    )
    chart = bars if deploys.empty else alt.layer(bars, _deploy_rules(deploys))
    return chart.properties(height=_HEIGHT)


def before_after(frame: pd.DataFrame, deploy_ts: datetime, version: str) -> alt.Chart:
    """One tool's error rate per minute by code, with the deploy as a labelled rule."""
    bars = (
        alt.Chart(frame)
        .mark_bar()
        .encode(
            x=alt.X("minute:T", title=None, axis=alt.Axis(format=_TIME_FORMAT)),
            y=alt.Y("rate:Q", stack="zero", axis=alt.Axis(format="%"), title="errors / calls"),
            color=code_color(frame["code"]),
            tooltip=[
                alt.Tooltip("minute:T", format="%H:%M"),
                "code",
                "errors",
                "calls",
                alt.Tooltip("rate:Q", format=".1%"),
            ],
        )
    )
    marker = pd.DataFrame({"ts": [deploy_ts], "label": [f"deploy {version}"]})
    rule = alt.Chart(marker).mark_rule(color="#333", strokeDash=[4, 3]).encode(x="ts:T")
    text = (
        alt.Chart(marker)
        .mark_text(align="left", dx=4, baseline="top", color="#333")
        .encode(x="ts:T", y=alt.value(0), text="label:N")
    )
    return alt.layer(bars, rule, text).properties(height=_HEIGHT)


def spike_series(
    frame: pd.DataFrame, code: str, window_start: datetime, window_end: datetime
) -> alt.Chart:
    """Calls with `code` per bucket for one tool, the alarmed window shaded."""
    window = pd.DataFrame({"start": [window_start], "end": [window_end]})
    shade = (
        alt.Chart(window).mark_rect(color="#f2b134", opacity=0.25).encode(x="start:T", x2="end:T")
    )
    colors = code_colors()
    bars = (
        alt.Chart(frame)
        .mark_bar(color=colors.get(code, colors["unknown"]))
        .encode(
            x=alt.X("bucket:T", title=None, axis=alt.Axis(format=_TIME_FORMAT)),
            y=alt.Y("errors:Q", title=f"{code} calls"),
            tooltip=[
                alt.Tooltip("bucket:T", format="%H:%M"),
                "errors",
                "calls",
                alt.Tooltip("rate:Q", format=".1%"),
            ],
        )
    )
    return alt.layer(shade, bars).properties(height=200)


def loop_rules(frame: pd.DataFrame) -> alt.Chart:
    """Traces breaking each retry rule, by tool."""
    data = frame.groupby(["rule", "tool"], as_index=False).size().rename(columns={"size": "traces"})
    return (
        alt.Chart(data)
        .mark_bar()
        .encode(
            y=alt.Y("rule:N", title=None),
            x=alt.X("traces:Q", title="traces"),
            color=alt.Color("tool:N", title="tool"),
            tooltip=["rule", "tool", "traces"],
        )
        .properties(height=160)
    )


def redactions_by_tool(frame: pd.DataFrame) -> alt.Chart:
    """Values masked per tool, stacked by rule (counts only)."""
    return (
        alt.Chart(frame)
        .mark_bar()
        .encode(
            y=alt.Y("tool:N", title=None),
            x=alt.X("sum(redactions):Q", title="values masked"),
            color=alt.Color("rule:N", title="rule"),
            tooltip=["service", "tool", "rule", "redactions"],
        )
        .properties(height=max(120, 28 * frame["tool"].nunique()))
    )


def redactions_over_time(frame: pd.DataFrame) -> alt.Chart:
    """Values masked per time bucket, stacked by rule."""
    return (
        alt.Chart(frame)
        .mark_bar()
        .encode(
            x=alt.X("bucket:T", title=None),
            y=alt.Y("sum(redactions):Q", title="values masked"),
            color=alt.Color("rule:N", title="rule"),
            tooltip=[
                alt.Tooltip("bucket:T", format="%Y-%m-%d %H:%M"),
                "tool",
                "rule",
                "redactions",
            ],
        )
        .properties(height=_HEIGHT)
    )
