"""Tracebacks: sampled groups by fingerprint, a redacted sample, look-up by id."""

from __future__ import annotations

import streamlit as st

from errscope.dashboards import data, ui
from errscope.queries.links import trace_url

ctx = ui.current()
st.title("Tracebacks")

groups = data.traceback_groups(ctx.spec, ctx.range_s, ctx.service)
if groups.empty:
    st.info(f"No sampled tracebacks in the last {ctx.range_label}.")
else:
    st.caption(f"{int(groups['samples'].sum()):,} samples in {len(groups)} groups.")
    st.dataframe(
        groups[
            [
                "fingerprint",
                "exception_type",
                "service",
                "tool",
                "samples",
                "versions",
                "first_seen",
                "last_seen",
                "example_correlation_id",
            ]
        ],
        hide_index=True,
    )
    picked = st.selectbox("Sample of group", list(groups["fingerprint"]), key="tb_group")
    row = groups[groups["fingerprint"] == picked].iloc[0]
    text = data.traceback_sample(ctx.spec, str(row["example_correlation_id"]), str(picked))
    st.markdown(f"Redacted sample, correlation id `{row['example_correlation_id']}`")
    st.code(text or "(sample not found)", language="text")

st.subheader("Look up a call")
ident = st.text_input("Correlation id, trace id, call id or session id", key="tb_lookup").strip()
if ident:
    calls, samples = data.lookup(ctx.spec, ident)
    if calls.empty and samples.empty:
        st.info(f"No call or traceback carries `{ident}` in the last 7 days.")
    if not calls.empty:
        st.markdown(f"**{len(calls)} calls**")
        st.dataframe(
            ui.with_trace_links(calls, ctx.trace_url),
            hide_index=True,
            column_config=ui.trace_link_column(),
        )
    for _, s in samples.iterrows():
        link = trace_url(ctx.trace_url, str(s["trace_id"]), str(s["span_id"]))
        st.markdown(
            f"**{s['exception_type']}** in `{s['tool']}` ({s['service']} {s['version']}), "
            f"{ui.format_ts(s['ts'])}, trace `{s['trace_id']}`"
            + (f" ([open trace]({link}))" if link else "")
        )
        st.code(str(s["text"]), language="text")
