"""Secret exposure: how many values each scrub rule masked, by tool and over time (counts only)."""

from __future__ import annotations

import streamlit as st

from errscope.dashboards import charts, data, ui

ctx = ui.current()
st.title("Secret exposure")
st.caption(
    "Counts of values the scrubber masked before anything was stored or forwarded. "
    "errscope never keeps the values themselves."
)

summary = data.redactions(ctx.spec, ctx.range_s, ctx.service)
if summary.empty:
    st.success(f"No secrets masked in the last {ctx.range_label}.", icon=":material/verified:")
    st.stop()

cols = st.columns(3)
cols[0].metric("Values masked", f"{int(summary['redactions'].sum()):,}")
cols[1].metric("Tools leaking", f"{summary[['service', 'tool']].drop_duplicates().shape[0]:,}")
cols[2].metric("Rules hit", f"{summary['rule'].nunique():,}")

left, right = st.columns(2)
with left:
    st.markdown("**By tool and rule**")
    st.altair_chart(charts.redactions_by_tool(summary), width="stretch")
with right:
    st.markdown("**Over time**")
    st.altair_chart(
        charts.redactions_over_time(data.redactions_over_time(ctx.spec, ctx.range_s, ctx.service)),
        width="stretch",
    )
st.dataframe(summary, hide_index=True)
