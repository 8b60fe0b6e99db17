"""docker-compose.yml without Docker: each service's command runs as a local process.

There is no Docker engine in CI, so this reads docker-compose.yml (and the Dockerfile) and
runs every service's command with that service's environment, as Compose would: variables
interpolated from the test's environment, service host names mapped to 127.0.0.1, the
container ports remapped to free local ports, the data volume mapped to a temporary
directory, `errscope` and `python` mapped to this interpreter.  It proves that the
commands, ports, variables and health checks fit together: the demo agent's spans reach
the sidecar and come back out of the query API with the token, and not without it.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.demo.procs import Proc, free_port, start, stop

yaml = pytest.importorskip("yaml")

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
COMPOSE = ROOT / "docker-compose.yml"
DOCKERFILE = ROOT / "Dockerfile"
SERVICES = ("sidecar", "dashboard", "demo-agent")
CONTAINER_PORTS = (4317, 4318, 4320, 8501)
TOKEN = uuid.uuid4().hex  # 32 characters; the sidecar wants 16 or more
# `errscope` as the image's console script runs it (the console script's own name in messages).
_ERRSCOPE_MAIN = (
    "import sys\n"
    "from errscope.collector.cli import main\n"
    "main(sys.argv[1:], prog_name='errscope')\n"
)
ERRSCOPE = [sys.executable, "-c", _ERRSCOPE_MAIN]

_VAR = re.compile(r"\$\$|\$\{([A-Za-z_][A-Za-z0-9_]*)(?:(:?[-?+])((?:[^{}]|\{[^{}]*\})*))?\}")


def interpolate(text: str, env: Mapping[str, str]) -> str:
    """Compose's variable interpolation: ${V}, ${V:-d}, ${V-d}, ${V:?e}, ${V?e}, ${V:+a}, $$."""

    def one(match: re.Match[str]) -> str:
        if match.group(0) == "$$":
            return "$"
        name, op, arg = match.group(1), match.group(2), match.group(3) or ""
        value = env.get(name)
        empty = value is None or (op is not None and op.startswith(":") and value == "")
        match op:
            case None:
                return value or ""
            case ":-" | "-":
                return arg if empty else str(value)
            case ":?" | "?":
                if empty:
                    raise AssertionError(f"compose would refuse to start: {name}: {arg}")
                return str(value)
            case _:  # ":+" / "+"
                return "" if empty else arg

    return _VAR.sub(one, text)


def _walk(node: Any, env: Mapping[str, str]) -> Any:
    if isinstance(node, str):
        return interpolate(node, env)
    if isinstance(node, list):
        return [_walk(v, env) for v in node]
    if isinstance(node, dict):
        return {k: _walk(v, env) for k, v in node.items()}
    return node


def load(env: Mapping[str, str]) -> dict[str, Any]:
    """docker-compose.yml, parsed, with YAML merge keys resolved and variables interpolated."""
    loaded: dict[str, Any] = yaml.safe_load(COMPOSE.read_text())
    return {k: v for k, v in _walk(loaded, env).items() if not k.startswith("x-")}


@dataclass(frozen=True)
class Local:
    """How container addresses map to this machine."""

    ports: Mapping[int, int]
    data_dir: Path

    def rewrite(self, text: str) -> str:
        """Bind addresses, service host names and in-container loopback URLs, then /data."""
        for container, local in self.ports.items():
            for host in ("0.0.0.0", "127.0.0.1", "localhost", *SERVICES):  # noqa: S104 - a pattern, not a bind
                text = text.replace(f"{host}:{container}", f"127.0.0.1:{local}")
        return re.sub(r"(?<![\w/])/data\b", str(self.data_dir), text)

    def argv(self, command: list[str] | str) -> list[str]:
        """A service's command as a local argv."""
        words = shlex.split(command) if isinstance(command, str) else list(command)
        words = [self.rewrite(w) for w in words]
        # A bare `--port N` / `--host 0.0.0.0` pair is the same address, spelled in two words.
        for i in range(1, len(words)):
            if words[i - 1] == "--port" and words[i].isdigit() and int(words[i]) in self.ports:
                words[i] = str(self.ports[int(words[i])])
            if words[i - 1] == "--host" and words[i] == "0.0.0.0":  # noqa: S104 - a pattern
                words[i] = "127.0.0.1"
        if words[0] == "errscope":
            return [*ERRSCOPE, *words[1:]]
        if words[0] == "python":
            return [sys.executable, *words[1:]]
        if words[:2] == ["sh", "-c"]:
            errscope = " ".join(shlex.quote(w) for w in ERRSCOPE)
            script = re.sub(r"(?<=exec )errscope\b", errscope, words[2])
            return ["sh", "-c", script]
        raise AssertionError(f"unexpected command {words[0]!r}")


def service_env(service: Mapping[str, Any]) -> dict[str, str]:
    """The process environment: this one without ERRSCOPE_*, plus the service's own."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("ERRSCOPE_")}
    declared = service.get("environment") or {}
    if isinstance(declared, list):
        declared = dict(item.split("=", 1) for item in declared)
    env.update({k: str(v) for k, v in declared.items()})
    return env


def healthcheck(local: Local, service: Mapping[str, Any]) -> int:
    """Run the service's health check command locally; its exit status."""
    test = service["healthcheck"]["test"]
    assert test[0] == "CMD"
    return subprocess.run(local.argv(test[1:]), timeout=30, check=False).returncode


def api_get(url: str, token: str | None) -> tuple[int, bytes]:
    """GET with an optional bearer token; (status, body)."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    request = urllib.request.Request(url, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


# ------------------------------------------------------------------ static checks

INTERPOLATION_ENV = {"ERRSCOPE_TOKEN": TOKEN}


def test_compose_declares_the_three_services_the_volume_and_the_upstream_profile() -> None:
    """sidecar, dashboard and demo-agent by default; the trace viewer only under a profile."""
    compose = load(INTERPOLATION_ENV)
    services = compose["services"]
    default = {name for name, s in services.items() if not s.get("profiles")}
    assert default == set(SERVICES)
    upstream = {name for name, s in services.items() if "upstream" in s.get("profiles", [])}
    assert upstream == {"jaeger"}
    assert "errscope-data:/data" in services["sidecar"]["volumes"]
    assert "errscope-data" in compose["volumes"]
    for name in SERVICES:
        assert services[name]["build"] == "."
        assert services[name]["environment"]["ERRSCOPE_TOKEN"] == TOKEN
    for name in ("dashboard", "demo-agent"):
        assert services[name]["depends_on"]["sidecar"]["condition"] == "service_healthy"
    published = [p for s in services.values() for p in s.get("ports", [])]
    assert all(p.startswith("127.0.0.1:") for p in published)


def test_compose_refuses_to_start_without_a_token() -> None:
    """ERRSCOPE_TOKEN is required (`${ERRSCOPE_TOKEN:?...}`), empty counts as missing."""
    with pytest.raises(AssertionError, match="ERRSCOPE_TOKEN"):
        load({})
    with pytest.raises(AssertionError, match="ERRSCOPE_TOKEN"):
        load({"ERRSCOPE_TOKEN": ""})


@pytest.mark.parametrize(
    ("text", "env", "expected"),
    [
        pytest.param("${A:-x}", {}, "x", id="default-when-unset"),
        pytest.param("${A:-x}", {"A": ""}, "x", id="default-when-empty"),
        pytest.param("${A-x}", {"A": ""}, "", id="dash-keeps-empty"),
        pytest.param('$${A:+--f "$$A"}', {"A": "v"}, '${A:+--f "$A"}', id="dollar-escape"),
        pytest.param("${A:+--f}", {"A": "v"}, "--f", id="alternative"),
    ],
)
def test_interpolation_follows_compose(text: str, env: dict[str, str], expected: str) -> None:
    """The test's reader interpolates the way Compose does."""
    assert interpolate(text, env) == expected


def test_dockerfile_is_slim_non_root_with_a_health_check() -> None:
    """A slim Python base, a non-root USER, a HEALTHCHECK, the ports compose uses."""
    text = DOCKERFILE.read_text()
    bases = re.findall(r"^FROM\s+(\S+)", text, flags=re.MULTILINE)
    assert bases
    assert all(b.startswith("python:3.11-slim") for b in bases)
    users = re.findall(r"^USER\s+(\S+)", text, flags=re.MULTILINE)
    assert users
    assert users[-1] not in ("root", "0")
    assert re.search(r"^HEALTHCHECK ", text, flags=re.MULTILINE)
    exposed = re.search(r"^EXPOSE\s+(.+)$", text, flags=re.MULTILINE)
    assert exposed is not None
    assert {int(p) for p in exposed.group(1).split()} == set(CONTAINER_PORTS)


# ------------------------------------------------------------------ the stack, locally


@dataclass
class Stack:
    compose: dict[str, Any]
    local: Local
    sidecar: Proc
    demo_summary: dict[str, Any]

    def api(self) -> str:
        return f"http://127.0.0.1:{self.local.ports[4320]}"


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    tmp = tmp_path_factory.mktemp("compose")
    compose = load({**INTERPOLATION_ENV, "ERRSCOPE_DEMO_HOURS": "3"})
    local = Local({p: free_port() for p in CONTAINER_PORTS}, tmp / "data")
    local.data_dir.mkdir()
    services = compose["services"]
    procs: list[Proc] = []
    try:
        sidecar = start(
            local.argv(services["sidecar"]["command"]),
            tmp / "sidecar.log",
            service_env(services["sidecar"]),
        )
        procs.append(sidecar)
        ready = sidecar.wait_json("ready", timeout_s=60)
        assert ready["otlp_http"] == f"127.0.0.1:{local.ports[4318]}"
        assert ready["api"] == f"127.0.0.1:{local.ports[4320]}"
        assert healthcheck(local, services["sidecar"]) == 0
        demo = start(
            local.argv(services["demo-agent"]["command"]),
            tmp / "demo.log",
            service_env(services["demo-agent"]),
        )
        procs.append(demo)
        summary = demo.wait_json("backfilled", timeout_s=240)
        yield Stack(compose, local, sidecar, summary)
        assert stop(demo) == 0, demo.tail()  # live traffic stops cleanly on SIGTERM
        assert stop(sidecar) == 0, sidecar.tail()  # the sidecar drains and exits 0
    finally:
        for proc in reversed(procs):
            stop(proc)


def test_demo_agent_spans_reach_the_sidecar_and_the_query_api(stack: Stack) -> None:
    """The demo agent's back-fill is stored and readable through the API with the token."""
    assert stack.demo_summary["spans_failed"] == 0
    assert stack.demo_summary["deploy"]["marked"] is True
    status, body = api_get(
        f"{stack.api()}/v1/query/deploy_markers?since=30d&service=billing-agent", TOKEN
    )
    assert status == 200, body
    versions = {row["version"] for row in json.loads(body)}
    assert {"2.3.0", "2.4.0"} <= versions


def test_the_token_from_the_environment_is_enforced(stack: Stack) -> None:
    """Bound beyond loopback in the container, the sidecar refuses requests without the token."""
    status, _ = api_get(f"{stack.api()}/v1/query/deploy_markers?since=30d", None)
    assert status == 401
    status, _ = api_get(f"{stack.api()}/v1/query/deploy_markers?since=30d", "wrong" * 4)
    assert status == 401


def test_dashboard_service_serves_against_the_sidecar(stack: Stack, tmp_path: Path) -> None:
    """The dashboard's command comes up on its port and passes its own health check."""
    service = stack.compose["services"]["dashboard"]
    board = start(
        stack.local.argv(service["command"]), tmp_path / "dashboard.log", service_env(service)
    )
    try:
        deadline = time.monotonic() + 90
        while healthcheck(stack.local, service) != 0:
            assert board.process.poll() is None, board.tail()
            assert time.monotonic() < deadline, board.tail()
            time.sleep(1)
    finally:
        assert stop(board) is not None
