"""A lake whose Parquet files live in an S3 bucket: httpfs from its wheel, credentials from
the AWS variables, against a real S3 endpoint run locally (moto's server; no MinIO here)."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from errscope.collector.errors import StoreError
from errscope.collector.store.lake import DuckLakeStore
from errscope.collector.store.lake.extensions import s3_secret_options
from tests.factories import make_call

BUCKET = "errscope-lake"
KEY_ID = "AKIAERRSCOPETEST0001"
SECRET = "errscope-test-secret-key-0123456789abcdef"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@pytest.fixture(scope="module")
def s3_endpoint(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """An S3 endpoint on loopback with one empty bucket; its URL."""
    port = _free_port()
    log = tmp_path_factory.mktemp("s3") / "server.log"
    server = Path(sys.executable).with_name("moto_server")
    with log.open("w") as out:
        process = subprocess.Popen(
            [str(server), "-H", "127.0.0.1", "-p", str(port)], stdout=out, stderr=out
        )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                with urllib.request.urlopen(url, timeout=2):
                    break
            except OSError:
                if time.monotonic() > deadline or process.poll() is not None:
                    pytest.fail(f"the S3 server did not start: {log.read_text()[-500:]}")
                time.sleep(0.2)
        request = urllib.request.Request(f"{url}/{BUCKET}", method="PUT")
        urllib.request.urlopen(request, timeout=5).close()
        yield url
    finally:
        process.terminate()
        process.wait(10)


@pytest.fixture
def aws_env(monkeypatch: pytest.MonkeyPatch, s3_endpoint: str) -> str:
    """The AWS variables a pod would have, pointing at the local endpoint."""
    for name in list(os.environ):
        if name.startswith("AWS_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", KEY_ID)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET)
    monkeypatch.setenv("AWS_REGION", "us-east-1")
    monkeypatch.setenv("AWS_ENDPOINT_URL", s3_endpoint)
    return s3_endpoint


def objects(endpoint: str, prefix: str) -> list[str]:
    """The keys under `prefix` in the bucket (S3 ListObjectsV2)."""
    url = f"{endpoint}/{BUCKET}?list-type=2&prefix={prefix}"
    with urllib.request.urlopen(url, timeout=5) as response:
        return re.findall(r"<Key>([^<]+)</Key>", response.read().decode())


def test_a_lake_keeps_its_files_in_s3_with_credentials_from_the_environment(
    lake_url: str, aws_env: str
) -> None:
    """With only the AWS variables set, a lake on s3:// stores its rows as Parquet objects
    in the bucket, httpfs coming from its wheel; reopened without a data path (the lake
    remembers it), every row reads back."""
    calls = [make_call() for _ in range(50)]
    with DuckLakeStore(lake_url, data_path=f"s3://{BUCKET}/lake/") as store:
        assert store.stats.extensions["httpfs"] in ("installed", "network", "wheel")
        assert store.append_tool_calls(calls) == 50
        assert store.append_tool_calls(calls) == 0  # a replay stores nothing twice
    assert any(key.endswith(".parquet") for key in objects(aws_env, "lake/"))
    with DuckLakeStore(lake_url) as store:
        assert store.count("tool_calls") == 50


def test_an_unreachable_object_store_fails_without_echoing_the_credentials(
    lake_url: str, aws_env: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A lake on an endpoint nobody answers fails (its first migration writes there) as a
    StoreError naming no credential."""
    monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://127.0.0.1:{_free_port()}")
    with (
        pytest.raises(StoreError) as raised,
        DuckLakeStore(lake_url, data_path=f"s3://{BUCKET}/dead/") as store,
    ):
        store.append_tool_calls([make_call()])
    text = str(raised.value.as_dict()) + repr(raised.value.__cause__)
    assert SECRET not in text
    assert KEY_ID not in text


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        pytest.param({}, None, id="no-keys"),
        pytest.param({"AWS_ACCESS_KEY_ID": "k"}, None, id="no-secret"),
        pytest.param(
            {"AWS_ACCESS_KEY_ID": "k", "AWS_SECRET_ACCESS_KEY": "s", "AWS_DEFAULT_REGION": "eu"},
            {"KEY_ID": "k", "SECRET": "s", "REGION": "eu"},
            id="aws",
        ),
        pytest.param(
            {
                "AWS_ACCESS_KEY_ID": "k",
                "AWS_SECRET_ACCESS_KEY": "s",
                "AWS_SESSION_TOKEN": "t",
                "AWS_ENDPOINT_URL": "https://minio.internal:9000/",
            },
            {
                "KEY_ID": "k",
                "SECRET": "s",
                "SESSION_TOKEN": "t",
                "ENDPOINT": "minio.internal:9000",
                "URL_STYLE": "path",
                "USE_SSL": "true",
            },
            id="endpoint",
        ),
    ],
)
def test_s3_secret_options_follow_the_aws_variables(
    env: dict[str, str], expected: dict[str, str] | None
) -> None:
    """The SDKs' variables map onto DuckDB's S3 secret; without both keys there is none."""
    assert s3_secret_options(env) == expected
