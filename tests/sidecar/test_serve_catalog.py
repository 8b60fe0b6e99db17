"""`errscope serve --catalog FILE`: a team's own codes are stored as themselves, not as
`unknown`, and a bad catalog file stops start-up with one line."""

from __future__ import annotations

import subprocess
from pathlib import Path

from tests.sidecar.harness import ERRSCOPE, finished_spans, http_exporter, send, sidecar

_USER_CATALOG = (
    '[codes.quota_exceeded]\nmeaning = "The monthly quota is used up."\n'
    'retry_by = "nobody"\nmax_tries = 1\nscope = "trace"\non_cap = "stop"\n'
    'hint = "Say when it resets."\ncolor = "#123456"\n'
)
_SPAN = (
    "execute_tool charge",
    {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "charge",
        "errscope.code": "quota_exceeded",
    },
)


def _stored_codes(tmp_path: Path, *args: str) -> list[tuple[str, str | None]]:
    store = tmp_path / f"s{len(args)}.duckdb"
    with sidecar(store, *args) as served:
        spans = finished_spans([_SPAN], {"service.name": "billing-agent"})
        assert send(http_exporter(served), spans)
        rows = served.query("calls_by_correlation", id=format(spans[0].context.trace_id, "032x"))
    return [(r["code"], r.get("raw_code")) for r in rows]


def test_a_user_code_is_stored_as_itself_with_the_catalog(tmp_path: Path) -> None:
    """With --catalog the code counts as quota_exceeded; without it, as unknown."""
    catalog = tmp_path / "my-catalog.toml"
    catalog.write_text(_USER_CATALOG)
    assert _stored_codes(tmp_path, "--catalog", str(catalog)) == [("quota_exceeded", None)]
    assert _stored_codes(tmp_path) == [("unknown", "quota_exceeded")]


def test_a_bad_catalog_file_stops_start_up_with_one_line(tmp_path: Path) -> None:
    """A catalog entry missing a field is refused before anything listens."""
    catalog = tmp_path / "bad.toml"
    catalog.write_text('[codes.quota_exceeded]\nmeaning = "x"\n')
    done = subprocess.run(
        [*ERRSCOPE, "serve", "--catalog", str(catalog), "--store", str(tmp_path / "s.duckdb")],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith("error["), done.stderr
    assert "Traceback" not in done.stderr
