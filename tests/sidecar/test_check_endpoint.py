"""`/v1/check` against a real `errscope serve`: the answer `errscope check --json` gives, the
gate as HTTP statuses, its parameter errors, scipy kept out of the sidecar process, and
the Argo Rollouts and Flagger manifests of docs/rollouts.md evaluated on its answers."""

from __future__ import annotations

import json
import os
import re
import signal
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, replace
from datetime import timedelta
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import pytest
import yaml
from click.testing import CliRunner
from jsonpath_ng import parse as jsonpath

from errscope.collector.cli.gate import check
from errscope.collector.record import Deploy, TracebackSample
from errscope.collector.store.duckdb import DuckDBStore
from tests.queries.traffic import DEPLOY_TS, Scenario
from tests.sidecar.harness import Served, sidecar

ROLLOUTS_DOC = Path(__file__).parents[2] / "docs" / "rollouts.md"
TRACE_URL = "jaeger:http://jaeger.example:16686"
JAEGER_TRACE = "http://jaeger.example:16686/trace/"
REGRESSED = "payments-agent"  # the regression scenario's traffic, under its own service name


@dataclass(frozen=True)
class Case:
    """One deploy judged as of `minutes` after it, and what every caller must conclude."""

    service: str
    minutes: int
    verdict: str
    exit_code: int
    argo_phase: str  # what Argo's EvaluateResult decides on the AnalysisTemplate
    flagger_passes: bool  # whether Flagger's webhook check passes (status <= 202)
    gate_status: int  # the status with gate=http

    def params(self, **extra: str) -> dict[str, str]:
        """The /v1/check parameters for this case."""
        as_of = (DEPLOY_TS + timedelta(minutes=self.minutes)).isoformat()
        base = {"service": self.service, "version": "2.0", "environment": "prod"}
        return {**base, "as_of": as_of, **extra}


CASES = [
    pytest.param(Case("billing-agent", 20, "healthy", 0, "Successful", True, 200), id="healthy"),
    pytest.param(Case(REGRESSED, 20, "regression", 1, "Failed", False, 409), id="regression"),
    # Three minutes in: too little data, which is neither a pass nor a failure.
    pytest.param(
        Case("billing-agent", 3, "insufficient_data", 3, "Inconclusive", False, 412),
        id="insufficient-data",
    ),
]


@dataclass
class World:
    """The running sidecar, and what `errscope check --json --db` said before it started."""

    served: Served
    cli: Mapping[tuple[str, int], tuple[int, dict[str, Any]]]


def _load(store: DuckDBStore) -> None:
    """A healthy deploy of billing-agent and a regressed one of payments-agent, with
    traceback samples for the regressed version's failing calls."""
    Scenario().load(store)
    regressed = [
        replace(c, service=REGRESSED) for c in Scenario(rates_new={"get_job": 0.09}).calls()
    ]
    store.append_tool_calls(regressed)
    store.add_deploys(
        [
            Deploy(REGRESSED, "1.0", DEPLOY_TS - timedelta(days=1), "prod"),
            Deploy(REGRESSED, "2.0", DEPLOY_TS, "prod"),
        ]
    )
    store.append_tracebacks(
        TracebackSample(
            ts=c.ts,
            service=c.service,
            tool=c.tool,
            trace_id=c.trace_id,
            span_id=c.span_id,
            exception_type="ValidationError",
            fingerprint="fp-get-job",
            text="ValidationError: job_id is not a job id",
            version=c.version,
            correlation_id=c.correlation_id,
        )
        for c in regressed
        if c.version == "2.0" and c.code == "invalid_args" and c.tool == "get_job"
    )


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    """One store, judged first by the CLI on the file, then served by a real sidecar."""
    path = tmp_path_factory.mktemp("check") / "check.duckdb"
    with DuckDBStore(path) as store:
        _load(store)
    cli: dict[tuple[str, int], tuple[int, dict[str, Any]]] = {}
    for param in CASES:
        case: Case = param.values[0]
        args = [f"--{k.replace('_', '-')}={v}" for k, v in case.params().items()]
        result = CliRunner().invoke(
            check, [*args, "--db", str(path), "--json", "--trace-url", TRACE_URL]
        )
        cli[(case.service, case.minutes)] = (result.exit_code, json.loads(result.output))
    with sidecar(path, "--trace-url", TRACE_URL) as served:
        yield World(served, cli)


def _call(
    served: Served,
    path: str,
    *,
    method: str = "GET",
    body: bytes | None = None,
    headers: Mapping[str, str] | None = None,
) -> tuple[int, dict[str, Any]]:
    """One request to the API; (status, decoded JSON) whatever the status."""
    request = urllib.request.Request(
        served.url(path), data=body, method=method, headers=dict(headers or {})
    )
    try:
        with urllib.request.urlopen(request, timeout=120) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        with exc:
            return exc.code, json.loads(exc.read())


@pytest.mark.parametrize("case", CASES)
def test_endpoint_answers_what_check_json_prints(world: World, case: Case) -> None:
    """GET /v1/check answers 200 with the very object `errscope check --json` printed for the
    same store and time, its exit status expressed as fields."""
    exit_code, printed = world.cli[(case.service, case.minutes)]
    status, answer = _call(world.served, f"/v1/check?{urlencode(case.params())}")
    assert status == 200
    assert answer == printed
    assert (exit_code, answer["exit_code"]) == (case.exit_code, case.exit_code)
    assert answer["verdict"] == case.verdict
    assert answer["regression"] is (case.verdict == "regression")
    assert answer["inconclusive"] is (case.verdict == "insufficient_data")


def test_regression_links_its_calls_and_tracebacks_to_the_trace(world: World) -> None:
    """A regression's first failing calls and traceback samples carry Jaeger links built
    from the sidecar's --trace-url, with their own trace and span ids."""
    case = Case(REGRESSED, 20, "regression", 1, "Failed", False, 409)
    _, answer = _call(world.served, f"/v1/check?{urlencode(case.params())}")
    calls = [c for f in answer["findings"] for c in f["first_failing_calls"]]
    samples = [t for f in answer["findings"] for t in f["tracebacks"]]
    assert calls
    assert samples
    for item in (*calls, *samples):
        assert item["trace_url"] == f"{JAEGER_TRACE}{item['trace_id']}?uiFind={item['span_id']}"
    assert all("text" not in t for t in samples)  # the traceback text stays behind the API


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("method", ["GET", "POST"])
def test_http_gate_answers_the_verdict_as_a_status(world: World, case: Case, method: str) -> None:
    """With gate=http the status is 200 healthy, 409 regression, 412 insufficient data, by
    GET and by POST (a webhook's payload is ignored), the body still the verdict."""
    body = b'{"name": "billing-agent", "namespace": "prod"}' if method == "POST" else None
    status, answer = _call(
        world.served,
        f"/v1/check?{urlencode(case.params(gate='http'))}",
        method=method,
        body=body,
        headers={"Content-Type": "application/json"} if body else None,
    )
    assert (status, answer["verdict"]) == (case.gate_status, case.verdict)


@pytest.mark.parametrize(
    ("query", "error", "field"),
    [
        pytest.param("service=billing-agent", "missing_param", "version", id="no-version"),
        pytest.param("version=2.0", "missing_param", "service", id="no-service"),
        pytest.param("service=a&version=1&colour=red", "unknown_param", "colour", id="unknown"),
        pytest.param("service=a&service=b&version=1", "bad_param_value", "service", id="twice"),
        pytest.param(
            "service=a&version=1&as_of=tomorrow", "bad_param_value", "as_of", id="bad-time"
        ),
        pytest.param(
            "service=a&version=1&as_of=2099-01-01T00:00:00Z",
            "bad_param_value",
            "as_of",
            id="future",
        ),
        pytest.param(
            "service=a&version=1&as_of=1h&known_by=2h",
            "bad_param_value",
            "known_by",
            id="known-early",
        ),
        pytest.param("service=a&version=1&gate=xml", "bad_param_value", "gate", id="bad-gate"),
        pytest.param("service=a&version=1&codes=,", "bad_param_value", "codes", id="no-codes"),
        # Checked by the worker, against the sidecar's catalog: a typo must not make a gate pass.
        pytest.param(
            "service=billing-agent&version=2.0&codes=invalid_args,invalid_arg",
            "bad_param_value",
            "codes",
            id="unknown-code",
        ),
    ],
)
def test_bad_parameters_get_the_structured_error(
    world: World, query: str, error: str, field: str
) -> None:
    """A wrong query string is refused with 400 and errscope's error shape: a stable kind,
    entry `check`, the parameter as field, and a hint."""
    status, answer = _call(world.served, f"/v1/check?{query}")
    assert status == 400
    assert (answer["error"], answer["entry"], answer["field"]) == (error, "check", field)
    assert answer["hint"]
    assert answer.keys() == {"error", "message", "entry", "field", "hint"}


@pytest.mark.parametrize(
    "query",
    [
        pytest.param("service=a&version=1&codes=invalid_args,sk-Hunter2SecretValue", id="code"),
        pytest.param("service=a&version=1&sk-Hunter2SecretValue=1", id="unknown-name"),
        pytest.param(
            "service=a&version=1&sk-Hunter2SecretValue=1&sk-Hunter2SecretValue=2", id="twice"
        ),
    ],
)
def test_errors_never_repeat_a_value_from_the_url(world: World, query: str) -> None:
    """A parameter name or code that is not identifier-shaped is shown as `?`, never repeated."""
    status, answer = _call(world.served, f"/v1/check?{query}")
    assert status == 400
    assert "Hunter2" not in json.dumps(answer)
    assert "?" in f"{answer['field']} {answer['message']}"


def _children(pid: int) -> list[int]:
    """The child processes of `pid`, whichever of its threads started them."""
    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        text = (task / "children").read_text().split()
        found.extend(int(p) for p in text)
    return found


def test_scipy_runs_in_the_worker_not_in_the_sidecar(world: World) -> None:
    """After a check was judged, scipy is mapped into the worker process and not into the
    sidecar's own: the sidecar never imports detection."""
    case = Case("billing-agent", 20, "healthy", 0, "Successful", True, 200)
    status, _ = _call(world.served, f"/v1/check?{urlencode(case.params())}")
    assert status == 200
    sidecar_pid = world.served.process.pid
    workers = _children(sidecar_pid)
    assert len(workers) == 1
    assert "/scipy/" not in Path(f"/proc/{sidecar_pid}/maps").read_text()
    assert "/scipy/" in Path(f"/proc/{workers[0]}/maps").read_text()


# ------------------------------------------------------------------ docs/rollouts.md


def _manifests() -> dict[str, dict[str, Any]]:
    """The YAML manifests of docs/rollouts.md, by kind."""
    blocks = re.findall(r"```yaml\n(.*?)```", ROLLOUTS_DOC.read_text(), flags=re.DOTALL)
    loaded = [yaml.safe_load(block) for block in blocks]
    return {doc["kind"]: doc for doc in loaded}


_CONDITION = re.compile(r'result == "([^"\\]*)"')


def _condition(expression: str, result: object) -> bool:
    """An Argo condition, evaluated: only `result == "<string>"`, which expr evaluates as
    string equality; any other expression fails the test rather than being guessed at."""
    match = _CONDITION.fullmatch(expression.strip())
    assert match is not None, f'this evaluator knows only result == "...": {expression}'
    return result == match.group(1)


def _argo_phase(result: object, success: str, failure: str) -> str:
    """Argo's evaluate.EvaluateResult with both conditions set: failure wins, then success,
    else Inconclusive."""
    if _condition(failure, result):
        return "Failed"
    if _condition(success, result):
        return "Successful"
    return "Inconclusive"


def _at(served: Served, url: str, **params: str) -> str:
    """A manifest's URL aimed at the test's sidecar, with `params` set in its query."""
    parts = urlsplit(url)
    query = {**dict(parse_qsl(parts.query)), **params}
    return urlunsplit(("http", served.api, parts.path, urlencode(query), ""))


@pytest.mark.parametrize("case", CASES)
def test_argo_analysis_template_decides_on_the_answer(world: World, case: Case) -> None:
    """The AnalysisTemplate's web metric, its args filled, GETs /v1/check, extracts its
    Kubernetes JSONPath with jsonpath-ng and decides Successful / Failed / Inconclusive."""
    template = _manifests()["AnalysisTemplate"]
    (metric,) = template["spec"]["metrics"]
    web = metric["provider"]["web"]
    args = {a["name"]: a.get("value") for a in template["spec"]["args"]}
    args.update(service=case.service, version="2.0", environment="prod")
    args["errscope-token"] = "not-checked-by-a-sidecar-without-a-token"

    def fill(text: str) -> str:
        return re.sub(r"\{\{args\.([\w-]+)\}\}", lambda m: str(args[m.group(1)]), text)

    url = _at(world.served, fill(web["url"]), as_of=case.params()["as_of"])
    headers = {h["key"]: fill(h["value"]) for h in web["headers"]}
    request = urllib.request.Request(url, headers=headers)
    with urllib.request.urlopen(request, timeout=120) as response:
        assert 200 <= response.status < 300  # Argo counts anything else as an error
        body = json.loads(response.read())
    path = web["jsonPath"]
    assert (path[0], path[-1]) == ("{", "}")  # Kubernetes JSONPath's template braces
    (match,) = jsonpath(path[1:-1]).find(body)
    phase = _argo_phase(match.value, metric["successCondition"], metric["failureCondition"])
    assert phase == case.argo_phase


@pytest.mark.parametrize("case", CASES)
def test_flagger_webhooks_gate_on_the_status(world: World, case: Case) -> None:
    """Each of the Canary's webhooks, POSTed Flagger's payload with the case's service and
    version templated in, passes exactly when the deploy is healthy (status <= 202)."""
    canary = _manifests()["Canary"]
    hooks = canary["spec"]["analysis"]["webhooks"]
    assert {h["type"] for h in hooks} == {"rollout", "confirm-promotion"}
    for hook in hooks:
        url = _at(
            world.served,
            hook["url"],
            service=case.service,
            version="2.0",
            as_of=case.params()["as_of"],
        )
        payload = {
            "name": canary["metadata"]["name"],
            "namespace": canary["metadata"]["namespace"],
            "phase": "Progressing",
            "type": hook["type"],
            "metadata": hook.get("metadata", {}),
        }
        request = urllib.request.Request(
            url,
            data=json.dumps(payload).encode(),
            method="POST",
            headers={"Content-Type": "application/json"},
        )
        try:
            with urllib.request.urlopen(request, timeout=120) as response:
                status = response.status
        except urllib.error.HTTPError as exc:
            with exc:
                status = exc.code
        assert (status <= 202) is case.flagger_passes, (hook["name"], status)


def test_a_killed_worker_is_replaced(world: World) -> None:
    """A worker that died is replaced on the next request, which is answered as before."""
    case = Case("billing-agent", 20, "healthy", 0, "Successful", True, 200)
    path = f"/v1/check?{urlencode(case.params())}"
    assert _call(world.served, path)[0] == 200
    (old,) = _children(world.served.process.pid)
    os.kill(old, signal.SIGKILL)  # the worker this test's sidecar started
    status, answer = _call(world.served, path)
    assert (status, answer["verdict"]) == (200, "healthy")
    (new,) = _children(world.served.process.pid)
    assert new != old


def test_with_a_token_the_worker_reads_back_and_exits_with_the_sidecar(tmp_path: Path) -> None:
    """On a token-protected sidecar /v1/check needs the token, the worker reads the API back
    with it, and the worker exits when the sidecar stops."""
    token = "a-token-of-sixteen-chars"
    path = "/v1/check?service=billing-agent&version=2.0"
    with sidecar(tmp_path / "token.duckdb", "--token", token) as served:
        assert _call(served, path)[0] == 401
        status, answer = _call(served, path, headers={"Authorization": f"Bearer {token}"})
        assert (status, answer["verdict"]) == (200, "insufficient_data")  # an empty store
        (worker,) = _children(served.process.pid)
        assert served.terminate() == 0
    assert not Path(f"/proc/{worker}").exists()


def test_a_check_in_flight_does_not_hold_the_drain(tmp_path: Path) -> None:
    """SIGTERM while a check is being judged answers it 503 at once (its worker is killed,
    even a stopped one) and the sidecar exits cleanly, instead of waiting out the check's
    deadline."""
    with sidecar(tmp_path / "drain.duckdb") as served:
        answers: list[int] = []
        asking = threading.Thread(
            target=lambda: answers.append(
                _call(served, "/v1/check?service=billing-agent&version=2.0")[0]
            )
        )
        asking.start()
        deadline = time.monotonic() + 60
        while not (workers := _children(served.process.pid)):  # the worker is starting
            assert time.monotonic() < deadline, "no worker was started"
            time.sleep(0.01)
        # Freeze the worker so the check stays in flight however fast it would be judged
        # (an empty store answers in well under a second); the drain must kill it anyway.
        for worker in workers:
            os.kill(worker, signal.SIGSTOP)
        started = time.monotonic()
        assert served.terminate() == 0
        asking.join(60)
        assert answers == [503]
        assert time.monotonic() - started < 30  # the check's own deadline is 60 s
