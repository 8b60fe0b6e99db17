"""Deploys: each deploy's verdict; for a flagged one, what broke, where, and the first ids."""

from __future__ import annotations

import streamlit as st

from errscope.dashboards import charts, data, shape, ui

ctx = ui.current()
st.title("Deploys")

limit = st.columns(4)[0].selectbox(
    "Deploys evaluated (newest first)", ui.DEPLOY_LIMITS, key="deploys_limit"
)
rows, total = data.deploy_rows(ctx.spec, ctx.range_s, ctx.service, ctx.environment, limit=limit)
if not rows:
    st.info(f"No deploys in the last {ctx.range_label} for these filters.")
    st.stop()
if total > len(rows):
    st.caption(
        f"The {len(rows)} newest of {total} deploys in the last {ctx.range_label}; "
        "evaluate more above, or pick a service."
    )

st.dataframe(shape.deploy_table(rows), hide_index=True)

for row in rows:
    if not row.flagged:
        continue
    d = row.deploy
    st.header(f"{d.service} {d.version} regressed", divider="red")
    st.markdown(
        f"Deployed {ui.format_ts(d.ts)}"
        + (f" in `{d.environment}`" if d.environment else "")
        + (f", replacing {d.previous_version}" if d.previous_version else "")
        + f". {row.report.reason}."
    )
    for f in row.report.findings:
        if f.tool is None:
            st.error(ui.finding_line(f))
    for tool, tool_findings in shape.findings_by_tool(row.report.findings).items():
        st.subheader(f"Tool `{tool}`")
        for f in tool_findings:
            st.error(ui.finding_line(f))
        detail = data.deploy_detail(ctx.spec, d, tool)
        left, right = st.columns([4, 3])
        with left:
            st.markdown("**Before / after** (errors per call, by code)")
            st.altair_chart(charts.before_after(detail.rates, d.ts, d.version), width="stretch")
        with right:
            st.markdown("**Fields that started failing**")
            st.dataframe(
                detail.fields,
                hide_index=True,
                column_order=[
                    "field",
                    "code",
                    "errors_before",
                    "errors_after",
                    "rate_before",
                    "rate_after",
                    "new",
                ],
                column_config={
                    "rate_before": st.column_config.NumberColumn(format="percent"),
                    "rate_after": st.column_config.NumberColumn(format="percent"),
                },
            )
        st.markdown("**First failing calls** (look them up on the Tracebacks page)")
        codes = {f.code for f in tool_findings}
        first = ui.with_trace_links(detail.first_calls, ctx.trace_url)
        st.dataframe(
            first[first["code"].isin(codes)],
            hide_index=True,
            column_config=ui.trace_link_column(),
        )
