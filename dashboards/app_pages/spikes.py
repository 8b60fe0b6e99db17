"""Spikes: a code's bursts per tool, labelled deploy-related or world-empty."""

from __future__ import annotations

import streamlit as st

from errscope.dashboards import charts, data, ui

ctx = ui.current()
st.title("Spikes")
st.caption(
    "Each 5-minute slot of the last hour against the same slot on earlier days "
    "(or the last 24 hours): two significant slots in a row make a spike."
)

code = st.selectbox("Code", data.spike_codes(), key="spikes_code")
found = data.spikes(ctx.spec, code, ctx.service, ctx.environment)
if not found:
    st.success(f"No {code} spikes in the last hour.", icon=":material/check_circle:")

for f in found:
    st.subheader(f"{f.service} / {f.tool}: {ui.spike_label(f)}")
    st.warning(ui.finding_line(f), icon=":material/trending_up:")
    cols = st.columns(3)
    cols[0].metric(f"{code} calls (10 min)", f"{f.errors_after:,}")
    cols[1].metric("Ratio to expected", f"x{f.ratio:.1f}" if f.ratio else "—")
    cols[2].metric("Deploy nearby", f.version or "none")
    if f.tool:
        series = data.error_series(ctx.spec, ctx.range_s, f.service, f.tool, code)
        st.altair_chart(
            charts.spike_series(series, code, f.window_start, f.window_end), width="stretch"
        )
