"""The query and deploy API, the forward target, the token and the logs, against a real
`errscope serve`: each test is a way a client, a web page or an operator could get a
wrong answer, no answer, or a secret in a log."""

from __future__ import annotations

import json
import logging
import random
import subprocess
import time
from pathlib import Path

import pytest

from errscope.collector.scrub.samples import SAMPLES
from errscope.collector.sidecar.api import negotiate
from errscope.collector.sidecar.process import _LibraryLogFilter
from tests.sidecar.harness import ERRSCOPE, Served, sidecar
from tests.sidecar.test_conformance import (
    MAX_BODY,
    chunked,
    exchange,
    head,
    request,
    statuses,
)

JSON = "application/json"
ARROW = "application/vnd.apache.arrow.stream"
PASSWORD = "Hunter2SecretPw"


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Served:
    """One sidecar with a small body limit, for the tests that do not stop it."""
    store = tmp_path_factory.mktemp("api") / "a.duckdb"
    with sidecar(store, "--max-body-bytes", str(MAX_BODY)) as running:
        yield running  # type: ignore[misc]


def post_deploy(served: Served, body: bytes, content_type: str = JSON) -> tuple[int, dict]:
    """POST /v1/deploys; (status, decoded JSON body)."""
    answer = exchange(
        served.api,
        head(
            "/v1/deploys",
            f"Content-Type: {content_type}",
            f"Content-Length: {len(body)}",
            "Connection: close",
        )
        + body,
    )
    status = int(statuses(answer)[0])
    return status, json.loads(answer.split(b"\r\n\r\n", 1)[1] or b"{}")


# ------------------------------------------------------------------ deploy marks


@pytest.mark.parametrize(
    "ts",
    ["0001-01-01T00:00:00+05:00", "1969-12-31T23:59:59Z", "9999-12-31T23:00:00-05:00"],
)
def test_a_deploy_time_out_of_range_is_refused_and_queries_still_answer(
    served: Served, ts: str
) -> None:
    """A mark in year 0 once stored made `deploy_markers` fail for good (OverflowError when
    read back), and with it `check` and `findings`: such a time is now 400."""
    body = json.dumps({"service": "range-agent", "version": "1", "ts": ts}).encode()
    status, answer = post_deploy(served, body)
    assert status == 400, answer
    assert "out of range" in answer["message"]
    assert (
        post_deploy(served, json.dumps({"service": "range-agent", "version": "2"}).encode())[0]
        == 201
    )
    assert served.get("/v1/query/deploy_markers?since=30d")[0] == 200


def test_a_label_that_is_not_unicode_text_is_400_not_a_dropped_connection(
    served: Served,
) -> None:
    """A lone surrogate (`\\ud800` in JSON) passed validation and broke the Arrow batch: the
    connection closed without an answer.  It is a bad value of that field now."""
    status, answer = post_deploy(served, b'{"service": "s-agent", "version": "2.4.0\\ud800"}')
    assert status == 400
    assert answer["field"] == "version"


def test_the_cli_refuses_a_deploy_time_out_of_range(served: Served) -> None:
    """`errscope deploy --time` goes through the same check, as a usage error."""
    result = subprocess.run(
        [
            *ERRSCOPE,
            "deploy",
            "--api",
            f"http://{served.api}",
            "--service",
            "cli-agent",
            "--version",
            "1",
            "--time",
            "0001-01-01T00:00:00+05:00",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 2, result.stderr
    assert result.stderr.startswith("error[")
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize("content_type", ["text/plain", "application/x-www-form-urlencoded", ""])
def test_a_deploy_mark_must_be_json(served: Served, content_type: str) -> None:
    """A web page may POST text/plain or a form to loopback without asking first (no CORS
    preflight): a deploy mark must be application/json, which makes the browser ask."""
    body = json.dumps({"service": "csrf-agent", "version": "6.6.6"}).encode()
    status, answer = post_deploy(served, body, content_type)
    assert status == 415
    assert answer["error"] == "unsupported_media_type"
    rows = served.query("deploy_markers", since="30d")
    assert not any(row["service"] == "csrf-agent" for row in rows)


# ------------------------------------------------------------------ framing and negotiation


def test_a_body_on_a_get_is_read_not_taken_for_the_next_request(served: Served) -> None:
    """`GET /healthz` with a body that looks like a request: one answer, not two (a proxy
    reusing the connection would hand the second to another client)."""
    smuggled = b"GET /nothing-here HTTP/1.1\r\nHost: x\r\n\r\n"
    answer = exchange(
        served.api,
        f"GET /healthz HTTP/1.1\r\nHost: x\r\nContent-Length: {len(smuggled)}\r\n"
        "Connection: close\r\n\r\n".encode()
        + smuggled,
    )
    assert statuses(answer) == [b"200"]


@pytest.mark.parametrize(
    ("accept", "expected"),
    [
        pytest.param("", JSON, id="none"),
        pytest.param("*/*", JSON, id="anything"),
        pytest.param(ARROW, ARROW, id="arrow"),
        pytest.param("Application/Vnd.Apache.Arrow.Stream", ARROW, id="arrow-any-case"),
        pytest.param(f"{JSON}, {ARROW};q=0.1", JSON, id="json-preferred"),
        pytest.param(f"{JSON};q=0, {ARROW}", ARROW, id="json-refused"),
        pytest.param(f"{ARROW};q=0", None, id="arrow-refused"),
        pytest.param(f"{ARROW}x", None, id="not-arrow"),
        pytest.param("text/csv", None, id="csv"),
        pytest.param("application/*", JSON, id="application-any"),
    ],
)
def test_query_answers_follow_accept(accept: str, expected: str | None) -> None:
    """The answer's type is chosen by q-values and ranges (RFC 9110 §12.5.1), not by a
    substring of the header; none acceptable is 406."""
    assert negotiate([accept] if accept else [], (JSON, ARROW)) == expected


def test_a_query_nobody_can_read_is_406_with_vary(served: Served) -> None:
    """Over HTTP: text/csv gets 406, and every query answer says `Vary: Accept`."""
    refused = request(served.api, "GET", "/v1/query/deploy_markers?since=1h", Accept="text/csv")
    assert refused.status == 406
    served_json = request(served.api, "GET", "/v1/query/deploy_markers?since=1h")
    assert served_json.status == 200
    assert served_json.getheader("Vary") == "Accept"


def test_the_query_listing_says_which_parameters_are_required(served: Served) -> None:
    """An optional parameter without a default is JSON null and `required: false`, not the
    text "null" (which read as a default value)."""
    status, body = served.get("/v1/queries")
    assert status == 200
    params = [p for q in json.loads(body) for p in q["params"]]
    assert all(isinstance(p["required"], bool) for p in params)
    assert all(p["default"] != "null" for p in params)
    assert all(p["required"] == (p["default"] is None) for p in params if p["required"])


def test_refused_exports_are_counted_in_metrics(served: Served) -> None:
    """An export refused while its body arrives (here a chunked body over the limit) shows
    in `errscope_exports_refused_total`, by reason; before, nothing counted it."""
    answer = exchange(
        served.http,
        head("/v1/traces", "Content-Type: application/x-protobuf", "Transfer-Encoding: chunked")
        + chunked(b"\0" * (MAX_BODY + 10), 4096),
    )
    assert statuses(answer) == [b"413"]
    status, text = served.get("/metrics")
    assert status == 200
    assert b'errscope_exports_refused_total{reason="too_large"}' in text


# ------------------------------------------------------------------ start-up refusals


def run_serve(
    tmp_path: Path, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """`errscope serve` that is expected to refuse to start."""
    return subprocess.run(
        [
            *ERRSCOPE,
            "serve",
            "--store",
            str(tmp_path / "s.duckdb"),
            "--otlp-grpc",
            "127.0.0.1:0",
            "--otlp-http",
            "127.0.0.1:0",
            "--api",
            "127.0.0.1:0",
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env=env,
    )


@pytest.mark.parametrize("scheme", ["grpc", "http"])
def test_a_forward_target_with_credentials_is_refused(tmp_path: Path, scheme: str) -> None:
    """`--forward grpc://user:password@host` put the password in every failed forward's log
    line (the exporter names its target): refused at start, before any store is made."""
    result = run_serve(tmp_path, "--forward", f"{scheme}://svc:{PASSWORD}@127.0.0.1:9")
    assert result.returncode == 2
    assert result.stderr.startswith("error[bad_value] forward:")
    assert PASSWORD not in result.stderr + result.stdout
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    "token",
    ["0123456789abcdef0123\n", "0123456789abcdef 0123", "pässwörd-0123456789abc"],
    ids=["trailing-newline", "space", "not-ascii"],
)
def test_a_token_no_client_can_send_is_refused(tmp_path: Path, token: str) -> None:
    """A token with a newline (read from a file), a space or accents started, then refused
    every client for ever: refused at start, without echoing it."""
    result = run_serve(tmp_path, "--token", token)
    assert result.returncode == 2
    assert result.stderr.startswith("error[bad_value] token:")
    assert token.strip() not in result.stderr


def test_sigterm_with_the_upstream_down_exits_well_before_a_10s_kill(tmp_path: Path) -> None:
    """With `--forward` to an upstream that is down, the drain gave the forwarder 10 s on
    top of the exporter's own retries (12-13 s): docker's stop timeout of 10 s killed the
    sidecar before its final checkpoint.  The forwarder now gets a few seconds."""
    with sidecar(tmp_path / "f.duckdb", "--forward", "grpc://127.0.0.1:9") as running:
        for n in range(3):
            exchange(
                running.http,
                head(
                    "/v1/traces",
                    "Content-Type: application/json",
                    "Content-Length: 2",
                    "Connection: close",
                )
                + b"{}",
            )
            time.sleep(0.1 * n)
        started = time.monotonic()
        assert running.terminate() == 0
        assert time.monotonic() - started < 8


# ------------------------------------------------------------------ library log lines


def test_a_library_log_line_loses_credentials_secrets_and_tracebacks() -> None:
    """The OTLP exporters log their target (userinfo included) and their upstream's words:
    such a line is masked, cut short, and carries no exception."""
    token = SAMPLES["github-pat"].make(random.Random(3)).core
    record = logging.LogRecord(
        "opentelemetry.exporter.otlp.proto.grpc.exporter",
        logging.WARNING,
        __file__,
        1,
        "Failed to export traces to %s, error code: %s; token %s",
        (f"svcuser:{PASSWORD}@127.0.0.1:9", "UNAVAILABLE", "ghp_" + "a1B2c3D4e5" * 4),
        (ValueError, ValueError("payload"), None),
    )
    assert _LibraryLogFilter().filter(record)
    text = record.getMessage()
    assert PASSWORD not in text
    assert token not in text
    assert "***@127.0.0.1:9" in text
    assert record.exc_info is None
    ours = logging.LogRecord(
        "errscope.serve", logging.INFO, __file__, 1, "kept %s", ("as is",), None
    )
    assert _LibraryLogFilter().filter(ours)
    assert ours.getMessage() == "kept as is"


def test_a_query_parameter_given_twice_is_refused(served: Served) -> None:
    """`since=1h&since=2h` kept the last silently (a proxy may keep the first): 400."""
    status, body = served.get("/v1/query/error_rates?since=1h&since=2h")
    assert status == 400
    assert json.loads(body)["error"] == "bad_param_value"
    assert "since" in json.loads(body)["message"]


def test_a_percent_encoded_query_name_is_read(served: Served) -> None:
    """`/v1/query/%65rror_rates` is `error_rates` (RFC 3986), not an unknown query."""
    assert served.get("/v1/query/%65rror_rates?since=1h")[0] == 200


def test_sighup_drains_and_exits_like_sigterm(tmp_path: Path) -> None:
    """A closed terminal's SIGHUP killed the sidecar with its store open (no drain, no
    checkpoint); it stops as SIGTERM does, exit 0."""
    import signal

    with sidecar(tmp_path / "h.duckdb") as running:
        running.process.send_signal(signal.SIGHUP)
        assert running.process.wait(30) == 0
    assert "stopped" in running.log.read_text()


@pytest.mark.parametrize("path", ["/nope", "/v1/deploys"])
def test_a_get_with_a_body_on_another_path_is_answered_at_once(served: Served, path: str) -> None:
    """The body was drained twice (the second read waited for bytes that never came):
    404/405 at once, and the next request on the connection is answered too."""
    answer = exchange(
        served.api,
        f"GET {path} HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello".encode()
        + b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
        timeout=4,
    )
    assert statuses(answer)[-1:] == [b"200"], answer[:300]
    assert statuses(answer)[0] in (b"404", b"405")


def test_many_repeated_query_parameters_are_one_short_refusal(served: Served) -> None:
    """Thousands of `a&a&...` are refused naming `a` once (the check is linear: it was
    quadratic, 12 s of CPU for a 64 KB request line)."""
    status, body = served.get("/v1/query/error_rates?" + "&".join(["a"] * 8000))
    assert status == 400
    assert json.loads(body)["message"] == "given more than once: a"


def test_a_library_password_with_at_and_slash_is_masked() -> None:
    """A password holding "@" or "/" was cut at the first one and its tail logged."""
    for url in ("http://alice:p@ss-w0rd@collector:4318", "http://alice:pa/ss-w0rd@collector"):
        record = logging.LogRecord("urllib3", logging.WARNING, __file__, 1, "to %s", (url,), None)
        _LibraryLogFilter().filter(record)
        assert "ss-w0rd" not in record.getMessage()
        assert "collector" in record.getMessage()


def test_a_malformed_forward_url_is_a_usage_error(tmp_path: Path) -> None:
    """`--forward 'http://[::1'` was an internal error (exit 70)."""
    result = run_serve(tmp_path, "--forward", "http://[::1")
    assert result.returncode == 2, result.stderr
    assert result.stderr.startswith("error[bad_value] forward:")


def test_a_closed_stdout_does_not_stop_the_drain(tmp_path: Path) -> None:
    """The ready line written to a closed terminal raised, and the sidecar exited 70 with
    its store open; it logs the fact and serves, and SIGTERM drains as ever."""
    import signal
    import socket

    ports = []
    for _ in range(3):
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            ports.append(probe.getsockname()[1])
    store = tmp_path / "c.duckdb"
    process = subprocess.Popen(
        [
            *ERRSCOPE,
            "serve",
            "--store",
            str(store),
            "--otlp-grpc",
            f"127.0.0.1:{ports[0]}",
            "--otlp-http",
            f"127.0.0.1:{ports[1]}",
            "--api",
            f"127.0.0.1:{ports[2]}",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    process.stdout.close()  # nobody reads the ready line
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", ports[2]), timeout=1):
                break
        except OSError:
            time.sleep(0.2)
    process.send_signal(signal.SIGTERM)
    _, stderr = process.communicate(timeout=30)
    assert process.returncode == 0, stderr
    assert "stdout_closed" in stderr
    assert not store.with_name(store.name + ".wal").exists()
