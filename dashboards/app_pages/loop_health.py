"""Loop health: retry rules the agents break, and codes outside the catalog (handler bugs)."""

from __future__ import annotations

import streamlit as st

from errscope.dashboards import charts, data, shape, ui

ctx = ui.current()
st.title("Loop health")

st.subheader("Retry-rule breaches, last hour")
found = data.loop_findings(ctx.spec, ctx.service)
counts = shape.rule_counts(found)
cols = st.columns(len(counts))
for col, (label, n) in zip(cols, counts.items(), strict=True):
    col.metric(label, f"{n:,} traces")
ui.findings_list(found, empty="No retry loops: every agent stops or hands off as the catalog says.")

rows = data.loop_rows(ctx.spec, ctx.range_s, ctx.service)
if not rows.empty:
    st.subheader(f"Traces breaking a rule, last {ctx.range_label}")
    st.altair_chart(charts.loop_rules(rows), width="stretch")
    st.dataframe(
        rows[["last_ts", "service", "version", "tool", "rule", "field", "calls", "correlation_id"]],
        hide_index=True,
    )

st.subheader("Unknown codes: handler bugs to fix")
unknown = data.unknown_codes(ctx.spec, ctx.range_s, ctx.service)
if unknown.empty:
    st.success(f"Every code in the last {ctx.range_label} is in the catalog.")
else:
    st.warning(
        f"{int(unknown['calls'].sum()):,} calls returned a code outside the catalog. "
        "A handler returns a string the catalog does not know: map it to a catalog code "
        "or add the code to the catalog.",
        icon=":material/build:",
    )
    st.dataframe(unknown, hide_index=True)
