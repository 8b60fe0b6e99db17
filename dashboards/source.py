"""Where the dashboard reads: one `QuerySource`, chosen by environment variables.

`errscope dashboard` sets `ERRSCOPE_DASHBOARD_API` (with `ERRSCOPE_TOKEN`) for the
sidecar's query API, or `ERRSCOPE_DASHBOARD_DB` for a DuckDB file no sidecar holds, for
the Streamlit process; tests set them directly.  `ERRSCOPE_DASHBOARD_AS_OF` pins "now"
(offline analysis of an old file, tests, benchmarks); without it every window ends at
the time of the query.  `SourceSpec` is hashable, so `dashboards/data.py` uses it as the
cache key of every read.  Nothing here reads data.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Final

from errscope.collector.errors import ConfigError, ConfigErrorKind
from errscope.collector.units import parse_time
from errscope.queries.source import ApiSource, FileSource, QuerySource

__all__ = [
    "ENV_API",
    "ENV_AS_OF",
    "ENV_DB",
    "ENV_REFRESH_S",
    "ENV_TOKEN",
    "SourceSpec",
    "refresh_s",
    "spec_from_env",
]

ENV_API: Final = "ERRSCOPE_DASHBOARD_API"
ENV_DB: Final = "ERRSCOPE_DASHBOARD_DB"
ENV_TOKEN: Final = "ERRSCOPE_TOKEN"  # noqa: S105 - a variable name, not a secret
ENV_AS_OF: Final = "ERRSCOPE_DASHBOARD_AS_OF"
ENV_REFRESH_S: Final = "ERRSCOPE_DASHBOARD_REFRESH_S"

_API_TIMEOUT_S: Final = 15.0


@dataclass(frozen=True, slots=True)
class SourceSpec:
    """Where the dashboard reads, and the pinned "now" if any (hashable: a cache key)."""

    api: str | None = None
    token: str | None = None
    db: str | None = None
    as_of: datetime | None = None

    def open(self) -> QuerySource:
        """The query source; `ConfigError` when none or both are configured."""
        if self.api and not self.db:
            # ApiSource leaves out parameters given as None (the query's null default), as
            # detection needs: it passes None for every open filter.
            return ApiSource(self.api, token=self.token or None, timeout_s=_API_TIMEOUT_S)
        if self.db and not self.api:
            return FileSource(self.db)
        raise ConfigError(
            ConfigErrorKind.BAD_VALUE,
            "the dashboard needs exactly one source",
            entry="dashboard",
            field="source",
            hint="start it with `errscope dashboard --api URL [--token T]` or `--db PATH`",
        )

    def describe(self) -> str:
        """The address or path read, for the sidebar and banners (never the token)."""
        return self.api or self.db or "no source configured"

    def now(self) -> datetime:
        """The pinned time, or the current time."""
        return self.as_of or datetime.now(UTC)


def spec_from_env(environ: Mapping[str, str] | None = None) -> SourceSpec:
    """The source configured by `errscope dashboard` through environment variables."""
    env = os.environ if environ is None else environ
    as_of_text = env.get(ENV_AS_OF)
    as_of = parse_time(as_of_text).astimezone(UTC) if as_of_text else None
    return SourceSpec(
        api=env.get(ENV_API) or None,
        token=env.get(ENV_TOKEN) or None,
        db=env.get(ENV_DB) or None,
        as_of=as_of,
    )


def refresh_s(environ: Mapping[str, str] | None = None) -> int:
    """The auto-refresh interval offered by default (0: off)."""
    env = os.environ if environ is None else environ
    try:
        return max(0, int(env.get(ENV_REFRESH_S, "0")))
    except ValueError:
        return 0
