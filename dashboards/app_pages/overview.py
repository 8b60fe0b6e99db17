"""Overview: current findings, calls by code over time with deploy markers, filters."""

from __future__ import annotations

import streamlit as st

from errscope.dashboards import charts, data, shape, ui

ctx = ui.current()
st.title("Overview")

tool_names = data.tools(ctx.spec, ctx.range_s, ctx.service, ctx.environment)
tool = st.selectbox(
    "Tool", [None, *tool_names], key="overview_tool", format_func=ui.all_label("All tools")
)
st.subheader("Current findings")
findings_slot = st.container()  # filled last, so the chart does not wait for detection

frame = data.calls_by_code(ctx.spec, ctx.range_s, ctx.service, ctx.environment, tool)
marks = data.deploy_markers(ctx.spec, ctx.range_s, ctx.service, ctx.environment)
total = int(frame["calls"].sum())
failing = int(frame.loc[frame["code"] != "ok", "calls"].sum())

st.subheader(f"Calls by code, last {ctx.range_label}")
cols = st.columns(4)
cols[0].metric("Tool calls", f"{total:,}")
cols[1].metric("Failing calls", f"{failing:,}")
cols[2].metric("Error rate", f"{failing / total:.2%}" if total else "—")
cols[3].metric("Deploys", f"{len(marks):,}")

if frame.empty:
    st.info(f"No tool calls in the last {ctx.range_label} for these filters.")
else:
    include_ok = st.toggle("Include ok calls", value=False, key="overview_include_ok")
    st.altair_chart(charts.calls_by_code(frame, marks, include_ok=include_ok), width="stretch")
    st.dataframe(
        shape.code_totals(frame),
        hide_index=True,
        column_config={"share": st.column_config.NumberColumn(format="percent")},
    )

with findings_slot:
    every = st.session_state.get("overview_all_deploys", False)
    result = data.findings(
        ctx.spec, ctx.service, ctx.environment, limit=None if every else data.MAX_DEPLOYS
    )
    found = [f for f in result.found if tool is None or f.tool in (None, tool)]
    ui.findings_list(found, empty="No findings: no regressed deploy, spike or retry loop now.")
    if result.skipped or every:
        st.toggle(
            f"Evaluate all {result.deploys} deploys of the last "
            f"{ui.hours(data.HORIZON_S)} (slower)",
            key="overview_all_deploys",
        )
    if result.skipped:
        st.caption(
            f"Deploy findings cover the {result.deploys - result.skipped} newest of "
            f"{result.deploys} deploys; pick a service to see the rest."
        )
