"""The DuckLake store: many sidecars write one lake (PostgreSQL catalog, Parquet data).

url.py          ducklake:postgres:<conninfo> parsed; passwords masked in every message
extensions.py   postgres_scanner, ducklake and httpfs loaded; the S3 secret
retry.py        the one retry loop for commit conflicts, within a time budget
store.py        DuckLakeStore: the `Store` protocol, exact under concurrent replays
maintain.py     flush, merge, expire, clean up, and the crash-leftover sweep
"""

from __future__ import annotations

from errscope.collector.store.lake.maintain import MaintenanceReport
from errscope.collector.store.lake.retry import RetryPolicy
from errscope.collector.store.lake.store import DuckLakeStore
from errscope.collector.store.lake.url import LAKE_PREFIX, LakeUrl, mask_secrets, parse_lake_url

__all__ = [
    "LAKE_PREFIX",
    "DuckLakeStore",
    "LakeUrl",
    "MaintenanceReport",
    "RetryPolicy",
    "mask_secrets",
    "parse_lake_url",
]
