"""Shaping query answers for the dashboard's charts and tables: frames in, frames out.

Pure pandas on the small tables the named queries return (and on detection's findings):
no source, no cache, no Streamlit, so each function is tested on a hand-built frame.
`dashboards/data.py` fetches and calls these; the pages call the ones that shape what
they already hold (a deploy table from deploy rows, rule counts from findings).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Final

import pandas as pd
import pyarrow as pa

from errscope.collector.catalog import default_catalog
from errscope.queries.findings import Finding

if TYPE_CHECKING:
    from errscope.dashboards.data import DeployRow

__all__ = [
    "RULE_LABELS",
    "bucket_for",
    "code_totals",
    "deploy_table",
    "findings_by_tool",
    "rule_counts",
    "shape_before_after",
    "shape_calls_by_code",
    "shape_fields",
    "to_frame",
]


def to_frame(table: pa.Table) -> pd.DataFrame:
    """An Arrow answer as a DataFrame; DuckDB's DECIMAL sums become int64 or float64."""
    for i, f in enumerate(table.schema):
        if pa.types.is_decimal(f.type):
            target = pa.int64() if f.type.scale == 0 else pa.float64()
            table = table.set_column(i, f.name, table.column(i).cast(target))
    return table.to_pandas()


def bucket_for(range_s: int) -> int:
    """A bucket width giving at most ~300 buckets, in whole minutes."""
    return max(60, math.ceil(range_s / 300 / 60) * 60)


def shape_calls_by_code(rollup: pd.DataFrame, *, bucket_s: int) -> pd.DataFrame:
    """`minute_rollup` rows -> calls per (bucket, tool, code), ok included."""
    columns = ["bucket", "tool", "code", "calls"]
    if rollup.empty:
        return pd.DataFrame(columns=columns)
    rows = rollup.assign(bucket=pd.to_datetime(rollup["minute"], utc=True).dt.floor(f"{bucket_s}s"))
    failing = (
        rows[rows["code"] != "ok"]
        .groupby(["bucket", "tool", "code"], as_index=False)["errors"]
        .sum()
        .rename(columns={"errors": "calls"})
    )
    # `calls` repeats the tool's total on every row of its minute and version: count it once
    groups = rows.drop_duplicates(["minute", "service", "version", "environment", "tool"])
    totals = groups.groupby(["bucket", "tool"])["calls"].sum()
    failed = failing.groupby(["bucket", "tool"])["calls"].sum()
    ok = (totals - failed.reindex(totals.index, fill_value=0)).reset_index().assign(code="ok")
    out = pd.concat([failing, ok[columns]], ignore_index=True)
    out = out[out["calls"] > 0].reset_index(drop=True)
    out["calls"] = out["calls"].astype("int64")
    return out[columns]


def shape_before_after(counts: pd.DataFrame) -> pd.DataFrame:
    """`deploy_minute_counts` of one tool -> error rate per minute and code, all versions."""
    columns = ["minute", "code", "errors", "calls", "rate"]
    if counts.empty:
        return pd.DataFrame(columns=columns)
    calls = counts.groupby(["minute", "version"], as_index=False)["calls"].max()
    calls = calls.groupby("minute", as_index=False)["calls"].sum()
    errors = counts[counts["code"] != "ok"].groupby(["minute", "code"], as_index=False)["n"].sum()
    out = errors.merge(calls, on="minute", how="left").rename(columns={"n": "errors"})
    out["rate"] = out["errors"] / out["calls"].where(out["calls"] > 0)
    return out[columns]


def shape_fields(counts: pd.DataFrame, version: str) -> pd.DataFrame:
    """Per (code, field): errors and rate before (other versions) and after (this version)."""
    columns = ["code", "field", "errors_before", "rate_before", "errors_after", "rate_after", "new"]
    if counts.empty:
        return pd.DataFrame(columns=columns)
    calls = counts.groupby(["minute", "version"], as_index=False)["calls"].max()
    calls_after = float(calls.loc[calls["version"] == version, "calls"].sum())
    calls_before = float(calls.loc[calls["version"] != version, "calls"].sum())
    errs = counts[counts["code"] != "ok"].assign(field=lambda f: f["field"].fillna("—"))
    is_new = errs["version"] == version
    after = errs[is_new].groupby(["code", "field"])["n"].sum().rename("errors_after")
    before = errs[~is_new].groupby(["code", "field"])["n"].sum().rename("errors_before")
    out = pd.concat([before, after], axis=1).fillna(0).reset_index()
    out["rate_before"] = out["errors_before"] / calls_before if calls_before else float("nan")
    out["rate_after"] = out["errors_after"] / calls_after if calls_after else float("nan")
    out["new"] = out["errors_before"] == 0
    out = out[out["errors_after"] > 0].sort_values("errors_after", ascending=False)
    for c in ("errors_before", "errors_after"):
        out[c] = out[c].astype("int64")
    return out[columns].reset_index(drop=True)


def code_totals(frame: pd.DataFrame) -> pd.DataFrame:
    """Calls per code over the window with each code's share, in catalog order."""
    totals = frame.groupby("code", as_index=False)["calls"].sum()
    totals["share"] = totals["calls"] / totals["calls"].sum()
    order = {c: i for i, c in enumerate(("ok", *default_catalog().codes, "unknown"))}
    return totals.sort_values("code", key=lambda s: s.map(order).fillna(len(order)))


def deploy_table(rows: Sequence[DeployRow]) -> pd.DataFrame:
    """One line per deploy: where, when, what it replaced, the verdict and why."""
    return pd.DataFrame(
        [
            {
                "service": r.deploy.service,
                "version": r.deploy.version,
                "environment": r.deploy.environment,
                "deployed_at": r.deploy.ts,
                "previous_version": r.deploy.previous_version,
                "verdict": str(r.report.verdict).replace("_", " "),
                "findings": len(r.report.findings),
                "reason": r.report.reason,
            }
            for r in rows
        ]
    )


#: Loop-misuse rules as the Loop health page names them.
RULE_LABELS: Final = {
    "invalid_args_repeated": "invalid_args retried on the same field",
    "retry_after_denied": "retried after denied",
    "not_found_repeated": "guessed ids (repeated not_found)",
}


def rule_counts(found: Sequence[Finding]) -> dict[str, int]:
    """Traces breaking each retry rule (every rule listed, zero included)."""
    counts = dict.fromkeys(RULE_LABELS.values(), 0)
    for f in found:
        for rule in f.label:
            if rule in RULE_LABELS:
                counts[RULE_LABELS[rule]] += f.traces_after
    return counts


def findings_by_tool(found: Sequence[Finding]) -> dict[str, list[Finding]]:
    """A deploy's per-tool findings grouped by tool, in the order detection reported them."""
    out: dict[str, list[Finding]] = {}
    for f in found:
        if f.tool is not None:
            out.setdefault(f.tool, []).append(f)
    return out
