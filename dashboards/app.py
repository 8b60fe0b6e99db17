"""errscope dashboard: the router around the pages in app_pages/.

`errscope dashboard` runs this file with Streamlit.  Each run: read the source from the
environment (`errscope.dashboards.source`), check it answers, then either
- show a banner with the address tried (sidecar unreachable, token refused, file locked
  or missing) instead of any page — never a traceback;
- show how to connect an agent, whatever page was asked for, while the store is empty;
- or draw the sidebar filters and run the chosen page.
"""

from __future__ import annotations

import streamlit as st

from errscope.collector.errors import ErrscopeError
from errscope.dashboards import data, source, ui

st.set_page_config(page_title="errscope", page_icon=":material/troubleshoot:", layout="wide")

connect = st.Page("app_pages/connect.py", title="Connect an agent", icon=":material/cable:")
pages = [
    st.Page("app_pages/overview.py", title="Overview", icon=":material/monitoring:", default=True),
    st.Page("app_pages/deploys.py", title="Deploys", icon=":material/rocket_launch:"),
    st.Page("app_pages/spikes.py", title="Spikes", icon=":material/trending_up:"),
    st.Page("app_pages/loop_health.py", title="Loop health", icon=":material/loop:"),
    st.Page("app_pages/tracebacks.py", title="Tracebacks", icon=":material/bug_report:"),
    st.Page("app_pages/secrets.py", title="Secret exposure", icon=":material/key:"),
    connect,
]

spec: source.SourceSpec | None = None
try:
    spec = source.spec_from_env()
    spec.open()
    scope = data.scope(spec)
except (ErrscopeError, ValueError) as exc:
    st.navigation(pages)
    if isinstance(exc, ErrscopeError):
        ui.source_banner(exc, spec)
    else:
        st.error(f"The dashboard's settings are not valid: {exc}.")
    st.stop()

if scope.empty:
    # Every address shows how to send data: there is nothing else to show yet.
    st.navigation(pages, position="hidden")
    ui.connect_panel(spec)
    st.stop()

page = st.navigation(pages)
ui.sidebar(spec, scope)
ui.auto_refresh(source.refresh_s())
try:
    page.run()
except ErrscopeError as exc:
    ui.source_banner(exc, spec)
