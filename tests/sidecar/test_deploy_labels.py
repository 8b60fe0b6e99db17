"""A deploy mark whose service, version or environment holds a secret is refused, by
`POST /v1/deploys` and by `errscope deploy`, as the span path refuses such labels: nothing is
stored and the answer names the field, never the value."""

from __future__ import annotations

import json
import subprocess
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import duckdb
import pytest

from tests.pipeline.spans import DB_URL, GITHUB_TOKEN
from tests.sidecar.harness import ERRSCOPE, Served, sidecar

# Each a label a scrub rule matches; the field it is sent in.
_SECRET_LABELS = [
    pytest.param("environment", DB_URL, id="environment-db-url"),
    pytest.param("version", f"1.4.0+{GITHUB_TOKEN}", id="version-token"),
    pytest.param("service", f"https://x-access-token:{GITHUB_TOKEN}@github.com/a", id="service"),
]


def _post_deploy(served: Served, mark: dict[str, Any]) -> tuple[int, bytes]:
    request = urllib.request.Request(
        served.url("/v1/deploys"),
        data=json.dumps(mark).encode(),
        headers={"Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as exc:
        with exc:
            return exc.code, exc.read()


def _mark(field: str, value: str) -> dict[str, Any]:
    return {"service": "billing-agent", "version": "1.4.0", "environment": "prod", field: value}


def _deploy_cli(field: str, value: str, *where: str) -> subprocess.CompletedProcess[str]:
    mark = _mark(field, value)
    return subprocess.run(
        [
            *ERRSCOPE,
            "deploy",
            "--service",
            mark["service"],
            "--version",
            mark["version"],
            "--environment",
            mark["environment"],
            *where,
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@pytest.mark.parametrize(("field", "secret"), _SECRET_LABELS)
def test_the_api_refuses_a_deploy_label_holding_a_secret(
    tmp_path: Path, field: str, secret: str
) -> None:
    """POST /v1/deploys answers 400 in the canonical error shape naming the field, with a
    hint and without the value; nothing is stored and a clean mark still goes in."""
    with sidecar(tmp_path / "s.duckdb") as served:
        status, body = _post_deploy(served, _mark(field, secret))
        assert status == 400, body
        answer = json.loads(body)
        assert (answer["error"], answer["entry"], answer["field"]) == (
            "bad_value",
            "deploys",
            field,
        )
        assert answer["hint"]
        assert secret not in body.decode()
        assert served.query("deploy_markers", since="1h") == []
        assert _post_deploy(served, _mark(field, "clean-label"))[0] == 201
        rows = served.query("deploy_markers", since="1h")
        assert len(rows) == 1
        assert secret not in json.dumps(rows)


@pytest.mark.parametrize(("field", "secret"), _SECRET_LABELS)
def test_the_cli_refuses_a_deploy_label_holding_a_secret(
    tmp_path: Path, field: str, secret: str
) -> None:
    """`errscope deploy`, to a sidecar (--api) or to a store file (--db), exits 2 with one
    error line naming the field, without the value, and marks nothing."""
    store = tmp_path / "s.duckdb"
    with sidecar(store) as served:
        result = _deploy_cli(field, secret, "--api", served.url(""))
        assert result.returncode == 2, result.stderr
        assert f"error[bad_value] deploys.{field}:" in result.stderr
        assert secret not in result.stdout + result.stderr
        assert served.query("deploy_markers", since="1h") == []
    result = _deploy_cli(field, secret, "--db", str(store))
    assert result.returncode == 2, result.stderr
    assert f"error[bad_value] deploys.{field}:" in result.stderr
    assert secret not in result.stdout + result.stderr
    con = duckdb.connect(str(store), read_only=True)
    try:
        assert con.execute("SELECT count(*) FROM deploys").fetchone() == (0,)
    finally:
        con.close()
