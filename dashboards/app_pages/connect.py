"""Connect an agent: the exact environment variables that send an agent's spans here."""

from __future__ import annotations

from errscope.dashboards import source, ui

ui.connect_panel(source.spec_from_env())
