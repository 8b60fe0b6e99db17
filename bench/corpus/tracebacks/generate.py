"""Regenerate the traceback corpus: install runtimes, run programs that really crash, write goldens.

    python bench/corpus/tracebacks/generate.py            # every runtime
    python bench/corpus/tracebacks/generate.py --only go  # one runtime (others keep their captures)

Each runtime's programs are copied under a fake home, /home/alice-<runtime>/app, and run with
HOME and USER pointing there, so home paths and the user name appear in frames as they do on a
developer's machine. Planted secrets are fake (seeded, in the providers' published formats) and
reach the programs through environment variables, as configuration does.

Writes captured/<runtime>/<case>.txt (what the runtime printed, stdout and stderr merged, with
heap and code addresses replaced by stable placeholders) and cases.jsonl (one line per case and
variant, with the truth the scorer checks). Needs root for apt-get; everything else installs
into the fake homes. This script is independent of errscope: it imports nothing from it.
"""

from __future__ import annotations

import argparse
import html
import json
import os
import random
import re
import shutil
import subprocess
import sys
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
PROGRAMS = HERE / "programs"
CAPTURED = HERE / "captured"
CASES_FILE = HERE / "cases.jsonl"
VERSIONS_FILE = HERE / "captured" / "versions.json"

# Pinned dependencies installed into the fake homes (each from its own registry).
PY_DEPS = ["python-dateutil==2.9.0.post0", "six==1.16.0"]
APT_PACKAGES = {
    "ruby": ["ruby"],
    "php": ["php-cli"],
    "csharp": ["mono-mcs", "mono-runtime"],
    "kotlin": ["kotlin"],
    "java": ["libgoogle-gson-java"],
}
# Fallbacks when a preinstalled toolchain is missing on a fresh machine.
APT_FALLBACK = {
    "python3": ["python3", "python3-venv"],
    "node": ["nodejs", "npm"],
    "javac": ["openjdk-17-jdk-headless"],
    "go": ["golang-go"],
    "cargo": ["cargo"],
}

ATTRIBUTE_LIMIT = 4095  # characters: a common span-attribute length limit
LOG_TS = "2025-03-14T09:26:53.589Z"


# ---------------------------------------------------------------------------------------------
# Planted secrets: fake, seeded, shaped as each provider publishes them.

BASE62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"


def _b62(n: int, width: int) -> str:
    out = ""
    while n:
        n, r = divmod(n, 62)
        out = BASE62[r] + out
    return out.rjust(width, "0")


def make_secrets(seed: int = 20250314) -> dict[str, str]:
    """Fake credentials: a checksum-valid GitHub PAT, an AWS key id, an OpenAI project key,
    a Slack bot token and a DSN whose password is the secret."""
    rnd = random.Random(seed)

    def pick(alphabet: str, n: int) -> str:
        return "".join(rnd.choice(alphabet) for _ in range(n))

    gh_body = pick(BASE62, 30)
    upper = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"
    url_safe = BASE62 + "-_"
    return {
        "GH_TOKEN": "ghp_" + gh_body + _b62(zlib.crc32(gh_body.encode()), 6),
        "AWS_KEY": "AKIA" + pick(upper, 16),
        "OPENAI_KEY": "sk-proj-" + pick(url_safe, 74) + "T3BlbkFJ" + pick(url_safe, 74),
        "SLACK_TOKEN": "xoxb-"
        + pick("0123456789", 12)
        + "-"
        + pick("0123456789", 13)
        + "-"
        + pick(BASE62, 24),
        "DB_PASSWORD": "S3cr3tPass",
    }


SECRETS = make_secrets()
ENV_SECRETS = {k: v for k, v in SECRETS.items() if k != "DB_PASSWORD"}
ENV_SECRETS["DB_DSN"] = f"postgres://app:{SECRETS['DB_PASSWORD']}@db/x"
# Which planted secret string each environment variable carries (the DSN's secret is its password).
SECRET_OF_ENV = {
    **{k: v for k, v in ENV_SECRETS.items() if k != "DB_DSN"},
    "DB_DSN": SECRETS["DB_PASSWORD"],
}


# ---------------------------------------------------------------------------------------------
# The cases: what each program is, and the truth about its output that does not need parsing.


@dataclass
class Case:
    """One crashing program run: its command and the truth a scrubber is scored against."""

    case: str
    cmd: list[str]
    keep: list[str]  # must survive in the kept value (outside frames)
    ids: list[str]  # the ids/codes among keep
    types: list[str]  # exception type names as printed
    app_functions: list[str]
    secrets: list[str]  # env var names whose secret appears in the output
    env: dict[str, str] = field(default_factory=dict)


@dataclass
class Runtime:
    """A runtime: how to install and build it, how to read its version, and its cases."""

    name: str
    setup: Callable[[Path, dict[str, str]], None]
    version_cmd: list[str]
    cases: list[Case]


def _run(cmd: list[str], cwd: Path | None = None, env: dict[str, str] | None = None) -> str:
    proc = subprocess.run(
        cmd, cwd=cwd, env=env, capture_output=True, text=True, check=False, timeout=900
    )
    if proc.returncode != 0:
        raise RuntimeError(
            f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}"
        )
    return proc.stdout + proc.stderr


def apt_install(packages: list[str]) -> None:
    """Install Debian packages that are not installed yet (idempotent)."""
    missing = [
        p
        for p in packages
        if subprocess.run(["dpkg", "-s", p], capture_output=True, check=False).returncode != 0
    ]
    if not missing:
        return
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    subprocess.run(["apt-get", "update", "-qq"], check=False, env=env)
    _run(["apt-get", "install", "-y", "--no-install-recommends", *missing], env=env)


def ensure_tool(tool: str) -> None:
    if shutil.which(tool) is None and tool in APT_FALLBACK:
        apt_install(APT_FALLBACK[tool])


def fake_home(runtime: str) -> Path:
    return Path(f"/home/alice-{runtime}")


def run_env(runtime: str) -> dict[str, str]:
    home = fake_home(runtime)
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(home),
        "USER": home.name,
        "LOGNAME": home.name,
        "LANG": "C.UTF-8",
        "TERM": "dumb",
        "NO_COLOR": "1",
        **ENV_SECRETS,
    }
    return env


# --- per-runtime setup: copy programs under the fake home, install dependencies, build ---------


def setup_python(app: Path, env: dict[str, str]) -> None:
    ensure_tool("python3")
    venv = app / ".venv"
    if not (venv / "bin" / "python").exists():
        _run([shutil.which("python3") or "python3", "-m", "venv", str(venv)])
    _run(
        [
            str(venv / "bin" / "python"),
            "-m",
            "pip",
            "install",
            "-q",
            "--disable-pip-version-check",
            *PY_DEPS,
        ],
        env={**env, "PIP_NO_CACHE_DIR": "1"},
    )


def setup_node(app: Path, env: dict[str, str]) -> None:
    ensure_tool("node")
    if not (app / "node_modules" / "semver").exists():
        _run(
            ["npm", "install", "--no-audit", "--no-fund", "--silent"],
            cwd=app,
            env={**env, "npm_config_cache": str(app.parent / ".npm")},
        )


def setup_java(app: Path, env: dict[str, str]) -> None:
    ensure_tool("javac")
    apt_install(APT_PACKAGES["java"])
    (app / "lib").mkdir(exist_ok=True)
    shutil.copy("/usr/share/java/gson.jar", app / "lib" / "gson-2.10.jar")
    sources = sorted(str(p) for p in (app / "src").rglob("*.java"))
    _run(
        [
            "javac",
            "-g",
            "-d",
            str(app / "build"),
            "-cp",
            str(app / "lib" / "gson-2.10.jar"),
            *sources,
        ],
        env=env,
    )


def setup_kotlin(app: Path, env: dict[str, str]) -> None:
    ensure_tool("javac")
    apt_install(APT_PACKAGES["kotlin"])
    if not (app / "build" / "com" / "acme" / "agent" / "AgentKt.class").exists():
        _run(["kotlinc", "Agent.kt", "Parse.kt", "-d", str(app / "build")], cwd=app, env=env)


def go_env(env: dict[str, str]) -> dict[str, str]:
    home = Path(env["HOME"])
    return {
        **env,
        "GOPATH": str(home / "go"),
        "GOMODCACHE": str(home / "go" / "pkg" / "mod"),
        "GOCACHE": str(home / ".cache" / "go-build"),
        "GOTOOLCHAIN": "local",
        "GOFLAGS": "-mod=vendor",
    }


def setup_go(app: Path, env: dict[str, str]) -> None:
    ensure_tool("go")
    genv = go_env(env)
    _run(["go", "mod", "vendor"], cwd=app, env={**genv, "GOFLAGS": "-mod=mod"})
    for main in sorted(p.parent.name for p in app.glob("*/main.go")):
        _run(["go", "build", "-o", str(app / "build" / main), f"./{main}"], cwd=app, env=genv)


def rust_env(env: dict[str, str]) -> dict[str, str]:
    rustup_home = os.environ.get("RUSTUP_HOME", str(Path.home() / ".rustup"))
    return {**env, "CARGO_HOME": str(Path(env["HOME"]) / ".cargo"), "RUSTUP_HOME": rustup_home}


def setup_rust(app: Path, env: dict[str, str]) -> None:
    ensure_tool("cargo")
    cargo = shutil.which("cargo") or "cargo"
    _run([cargo, "build", "-q", "--bins"], cwd=app, env=rust_env(env))


def setup_ruby(app: Path, env: dict[str, str]) -> None:
    apt_install(APT_PACKAGES["ruby"])


def setup_php(app: Path, env: dict[str, str]) -> None:
    apt_install(APT_PACKAGES["php"])


def setup_csharp(app: Path, env: dict[str, str]) -> None:
    apt_install(APT_PACKAGES["csharp"])
    (app / "build").mkdir(exist_ok=True)
    for src in sorted(app.glob("*.cs")):
        _run(
            ["mcs", "-debug", "-nologo", f"-out:{app / 'build' / (src.stem + '.exe')}", src.name],
            cwd=app,
            env=env,
        )


RB = "PaymentDeclined"
RUNTIMES: list[Runtime] = [
    Runtime(
        "python",
        setup_python,
        ["python3", "--version"],
        [
            Case(
                "uncaught",
                [".venv/bin/python", "billing.py"],
                keep=["PaymentDeclined", "card declined for order ORD-40917", "E1042"],
                ids=["ORD-40917", "E1042"],
                types=["PaymentDeclined"],
                app_functions=["charge_card", "load_order", "handle_request"],
                secrets=["GH_TOKEN"],
            ),
            Case(
                "chained",
                [".venv/bin/python", "chained.py"],
                keep=[
                    "DatabaseUnavailable",
                    "for tenant acme-corp",
                    "E2203",
                    "TimeoutError",
                    "connect timed out after 5.0s",
                    "req_8f3a2c",
                ],
                ids=["E2203", "req_8f3a2c"],
                types=["DatabaseUnavailable", "TimeoutError"],
                app_functions=["fetch_invoices", "open_connection"],
                secrets=["DB_DSN"],
            ),
            Case(
                "context",
                [".venv/bin/python", "context.py"],
                keep=["FileNotFoundError", "No such file or directory", "KeyError", "'model'"],
                ids=[],
                types=["FileNotFoundError", "KeyError"],
                app_functions=["read_settings", "resolve_model"],
                secrets=[],
            ),
            Case(
                "exception_group",
                [".venv/bin/python", "group.py"],
                keep=[
                    "ExceptionGroup",
                    "2 tool calls failed in batch batch-7781",
                    "ValueError",
                    "search tool rejected query",
                    "TimeoutError",
                    "weather tool timed out for Lyon",
                    "E3107",
                ],
                ids=["batch-7781", "E3107"],
                types=["ExceptionGroup", "ValueError", "TimeoutError"],
                app_functions=["run_tool_batch", "call_search_tool", "call_weather_tool"],
                secrets=["AWS_KEY"],
            ),
            Case(
                "asyncio",
                [".venv/bin/python", "async_task.py"],
                keep=["UpstreamError", "slack returned 403 invalid_auth", "req_51c0de"],
                ids=["req_51c0de"],
                types=["UpstreamError"],
                app_functions=["post_to_slack", "notify_oncall"],
                secrets=["SLACK_TOKEN"],
            ),
            Case(
                "dependency",
                [".venv/bin/python", "dependency.py"],
                keep=["ParserError", "Unknown string format", "TCK-88412"],
                ids=["TCK-88412"],
                types=["ParserError"],
                app_functions=["parse_deadline", "schedule_followup"],
                secrets=["SLACK_TOKEN"],
            ),
            Case(
                "locals_logged",
                [".venv/bin/python", "locals_logged.py"],
                keep=[
                    "2025-03-14 09:26:53,589 ERROR [support-agent] request_id=req_9d41b7",
                    "tool call answer_ticket failed code=E1042",
                    "ConnectionError",
                    "model endpoint unreachable for prompt prm_77a01f",
                ],
                ids=["req_9d41b7", "E1042", "prm_77a01f"],
                types=["ConnectionError"],
                app_functions=["call_model", "answer_ticket"],
                secrets=["OPENAI_KEY"],
            ),
        ],
    ),
    Runtime(
        "node",
        setup_node,
        ["node", "--version"],
        [
            Case(
                "uncaught",
                ["node", "billing.js"],
                keep=["PaymentDeclined", "card declined for order ORD-40917", "E1042"],
                ids=["ORD-40917", "E1042"],
                types=["PaymentDeclined"],
                app_functions=["chargeCard", "loadOrder", "handleRequest"],
                secrets=["GH_TOKEN"],
            ),
            Case(
                "cause",
                ["node", "cause.js"],
                keep=["Error", "for tenant acme-corp", "E2203", "connect ETIMEDOUT"],
                ids=["E2203"],
                types=["Error"],
                app_functions=["fetchInvoices", "openConnection"],
                secrets=["DB_DSN"],
            ),
            Case(
                "async_rejection",
                ["node", "async_reject.js"],
                keep=["UpstreamError", "slack returned 403 invalid_auth", "req_51c0de"],
                ids=["req_51c0de"],
                types=["UpstreamError"],
                app_functions=["postToSlack", "notifyOncall"],
                secrets=["SLACK_TOKEN"],
            ),
            Case(
                "error_properties",
                ["node", "props.js"],
                keep=["Error", "upstream 502 from model gateway for prompt prm_77a01f"],
                ids=["prm_77a01f"],
                types=["Error"],
                app_functions=["callModel", "answerTicket"],
                secrets=["OPENAI_KEY"],
            ),
            Case(
                "dependency",
                ["node", "dependency.js"],
                keep=["TypeError", "Invalid Version", "dep-3391"],
                ids=["dep-3391"],
                types=["TypeError"],
                app_functions=["parseReleaseTag", "checkDeploy"],
                secrets=["AWS_KEY"],
            ),
        ],
    ),
    Runtime(
        "java",
        setup_java,
        ["java", "-version"],
        [
            Case(
                "uncaught",
                ["java", "-cp", "build", "com.acme.billing.Billing"],
                keep=["PaymentDeclinedException", "card declined for order ORD-40917", "E1042"],
                ids=["ORD-40917", "E1042"],
                types=["com.acme.billing.Billing$PaymentDeclinedException"],
                app_functions=["chargeCard", "loadOrder", "handleRequest"],
                secrets=["GH_TOKEN"],
            ),
            Case(
                "caused_by",
                ["java", "-cp", "build", "com.acme.billing.Chained"],
                keep=[
                    "IllegalStateException",
                    "invoice sync failed for tenant acme-corp",
                    "DatabaseUnavailableException",
                    "E2203",
                    "SocketTimeoutException",
                    "connect timed out after 5000ms",
                    "req_8f3a2c",
                ],
                ids=["E2203", "req_8f3a2c"],
                types=[
                    "java.lang.IllegalStateException",
                    "com.acme.billing.Chained$DatabaseUnavailableException",
                    "java.net.SocketTimeoutException",
                ],
                app_functions=["fetchInvoices", "openConnection", "openSocket"],
                secrets=["DB_DSN"],
            ),
            Case(
                "suppressed",
                ["java", "-cp", "build", "com.acme.billing.Suppressed"],
                keep=[
                    "ArithmeticException",
                    "ledger imbalance of 13 cents in entry LED-00917",
                    "E4410",
                    "IllegalStateException",
                    "ledger session close failed",
                    "job-5521",
                ],
                ids=["LED-00917", "E4410", "job-5521"],
                types=["java.lang.ArithmeticException", "java.lang.IllegalStateException"],
                app_functions=["postLedgerEntry", "close"],
                secrets=["AWS_KEY"],
            ),
            Case(
                "dependency",
                ["java", "-cp", "build:lib/gson-2.10.jar", "com.acme.billing.Webhook"],
                keep=[
                    "IllegalArgumentException",
                    "bad webhook payload in delivery dlv_3c9e11",
                    "JsonSyntaxException",
                ],
                ids=["dlv_3c9e11"],
                types=["java.lang.IllegalArgumentException", "com.google.gson.JsonSyntaxException"],
                app_functions=["handleWebhook", "parsePayload"],
                secrets=["SLACK_TOKEN"],
            ),
            Case(
                "thread",
                ["java", "-cp", "build", "com.acme.billing.Worker"],
                keep=[
                    'Exception in thread "refund-worker-1"',
                    "NullPointerException",
                    "ledger for ORD-55102 not loaded",
                    "E5001",
                ],
                ids=["ORD-55102", "E5001"],
                types=["java.lang.NullPointerException"],
                app_functions=["refundOrder"],
                secrets=["OPENAI_KEY"],
            ),
        ],
    ),
    Runtime(
        "kotlin",
        setup_kotlin,
        ["kotlinc", "-version"],
        [
            Case(
                "caused_by",
                ["kotlin", "-cp", "build", "com.acme.agent.AgentKt"],
                keep=[
                    "ToolFailure",
                    "tool lookup_customer failed for call call_5b2d90",
                    "IllegalStateException",
                    "customer cus_9f2e71 missing from cache",
                    "E6120",
                ],
                ids=["call_5b2d90", "cus_9f2e71", "E6120"],
                types=["com.acme.agent.ToolFailure", "java.lang.IllegalStateException"],
                app_functions=["runTool", "lookupCustomer"],
                secrets=["GH_TOKEN"],
            ),
            Case(
                "stdlib_lambda",
                ["kotlin", "-cp", "build", "com.acme.agent.ParseKt"],
                keep=["NumberFormatException", "For input string"],
                ids=[],
                types=["java.lang.NumberFormatException"],
                app_functions=["parseQuantities", "importOrder"],
                secrets=["AWS_KEY"],
            ),
        ],
    ),
    Runtime(
        "go",
        setup_go,
        ["go", "version"],
        [
            Case(
                "panic",
                ["build/panic"],
                keep=["panic", "card declined for order ORD-40917", "E1042"],
                ids=["ORD-40917", "E1042"],
                types=["panic"],
                app_functions=["chargeCard", "loadOrder", "handleRequest"],
                secrets=["GH_TOKEN"],
            ),
            Case(
                "nil_pointer",
                ["build/nilptr"],
                keep=[
                    "refund start order=ORD-55102 request_id=req_77b1e0",
                    "invalid memory address or nil pointer dereference",
                ],
                ids=["ORD-55102", "req_77b1e0"],
                types=["panic", "runtime error"],
                app_functions=["applyRefund", "refundOrder"],
                secrets=[],
            ),
            Case(
                "goroutine_dump",
                ["build/goroutines"],
                env={"GOTRACEBACK": "all"},
                keep=["panic", "invoice 3 sync failed against", "E2203"],
                ids=["E2203"],
                types=["panic"],
                app_functions=["syncInvoice", "startWorkers"],
                secrets=["DB_DSN"],
            ),
            Case(
                "deadlock",
                ["build/deadlock"],
                keep=[
                    "waiting for approval job=job-5521 request_id=req_2b7c44",
                    "fatal error: all goroutines are asleep - deadlock!",
                ],
                ids=["job-5521", "req_2b7c44"],
                types=["fatal error"],
                app_functions=["awaitApproval"],
                secrets=[],
            ),
            Case(
                "dependency",
                ["build/dependency"],
                keep=["panic", "uuid: Parse(", "invalid UUID length"],
                ids=[],
                types=["panic"],
                app_functions=["sessionFromCookie", "authorize"],
                secrets=["SLACK_TOKEN"],
            ),
        ],
    ),
    Runtime(
        "rust",
        setup_rust,
        ["rustc", "--version"],
        [
            Case(
                "panic_no_backtrace",
                ["target/debug/panic"],
                keep=["panic", "card declined for order ORD-40917", "E1042"],
                ids=["ORD-40917", "E1042"],
                types=["panic"],
                app_functions=[],
                secrets=["GH_TOKEN"],
            ),
            Case(
                "panic",
                ["target/debug/panic"],
                env={"RUST_BACKTRACE": "1"},
                keep=["panic", "card declined for order ORD-40917", "E1042"],
                ids=["ORD-40917", "E1042"],
                types=["panic"],
                app_functions=["charge_card", "load_order", "handle_request"],
                secrets=["GH_TOKEN"],
            ),
            Case(
                "panic_full",
                ["target/debug/panic"],
                env={"RUST_BACKTRACE": "full"},
                keep=["panic", "card declined for order ORD-40917", "E1042"],
                ids=["ORD-40917", "E1042"],
                types=["panic"],
                app_functions=["charge_card", "load_order", "handle_request"],
                secrets=["GH_TOKEN"],
            ),
            Case(
                "unwrap_err",
                ["target/debug/unwrap"],
                env={"RUST_BACKTRACE": "1"},
                keep=[
                    "fetching invoices tenant=acme-corp request_id=req_8f3a2c",
                    "called `Result::unwrap()` on an `Err` value",
                    "DatabaseUnavailable",
                    "E2203",
                ],
                ids=["req_8f3a2c", "E2203"],
                types=["panic", "DatabaseUnavailable"],
                app_functions=["fetch_invoices"],
                secrets=["DB_DSN"],
            ),
            Case(
                "thread",
                ["target/debug/thread"],
                env={"RUST_BACKTRACE": "1"},
                keep=[
                    "thread 'invoice-worker-3'",
                    "panic",
                    "index out of bounds: the len is 3 but the index is 7",
                ],
                ids=["invoice-worker-3"],
                types=["panic"],
                app_functions=["sync_invoice"],
                secrets=[],
            ),
            Case(
                "dependency",
                ["target/debug/dependency"],
                env={"RUST_BACKTRACE": "1"},
                keep=["panic", "slack client init failed", "invalid_auth", "req_51c0de"],
                ids=["req_51c0de"],
                types=["panic"],
                app_functions=["notify_oncall"],
                secrets=["SLACK_TOKEN"],
            ),
        ],
    ),
    Runtime(
        "ruby",
        setup_ruby,
        ["ruby", "--version"],
        [
            Case(
                "uncaught",
                ["ruby", "{app}/billing.rb"],
                keep=["PaymentDeclined", "card declined for order ORD-40917", "E1042"],
                ids=["ORD-40917", "E1042"],
                types=["PaymentDeclined"],
                app_functions=["charge_card", "load_order", "handle_request"],
                secrets=["GH_TOKEN"],
            ),
            Case(
                "cause",
                ["ruby", "{app}/cause.rb"],
                keep=[
                    "ConfigError",
                    "no settings for tenant acme-corp",
                    "E2203",
                    "Errno::ENOENT",
                    "No such file or directory",
                ],
                ids=["E2203"],
                types=["ConfigError", "Errno::ENOENT"],
                app_functions=["connect_database", "read_settings"],
                secrets=["DB_DSN"],
            ),
            Case(
                "dependency",
                ["ruby", "{app}/dependency.rb"],
                keep=["JSON::ParserError", "unexpected token"],
                ids=[],
                types=["JSON::ParserError"],
                app_functions=["parse_webhook", "handle_delivery"],
                secrets=["SLACK_TOKEN"],
            ),
            Case(
                "vendored_gem",
                ["ruby", "{app}/vendored.rb"],
                keep=["TinyMoney::InvalidAmount", "invalid amount"],
                ids=[],
                types=["TinyMoney::InvalidAmount"],
                app_functions=["price_line_item", "build_invoice"],
                secrets=["AWS_KEY"],
            ),
        ],
    ),
    Runtime(
        "php",
        setup_php,
        ["php", "--version"],
        [
            Case(
                "uncaught",
                ["php", "billing.php"],
                keep=["PaymentDeclinedException", "card declined for order ORD-40917", "E1042"],
                ids=["ORD-40917", "E1042"],
                types=["PaymentDeclinedException"],
                app_functions=["chargeCard", "loadOrder", "handleRequest"],
                secrets=["GH_TOKEN"],
            ),
            Case(
                "previous",
                ["php", "previous.php"],
                keep=[
                    "PDOException",
                    "SQLSTATE[08006]",
                    "req_8f3a2c",
                    "RuntimeException",
                    "for tenant acme-corp",
                    "E2203",
                ],
                ids=["req_8f3a2c", "E2203"],
                types=["PDOException", "RuntimeException"],
                app_functions=["fetchInvoices", "openConnection"],
                secrets=["DB_DSN"],
            ),
            Case(
                "call_arguments",
                [
                    "php",
                    "-d",
                    "zend.exception_ignore_args=0",
                    "-d",
                    "zend.exception_string_param_max_len=100",
                    "args.php",
                ],
                keep=[
                    "UnexpectedValueException",
                    "slack returned 403 invalid_auth for #oncall",
                    "req_51c0de",
                ],
                ids=["req_51c0de"],
                types=["UnexpectedValueException"],
                app_functions=["postToSlack", "notifyOncall"],
                secrets=["SLACK_TOKEN"],
            ),
            Case(
                "vendor",
                ["php", "vendored.php"],
                keep=["InvalidArgumentException", "invalid amount"],
                ids=[],
                types=["InvalidArgumentException"],
                app_functions=["priceLineItem", "buildInvoice"],
                secrets=["AWS_KEY"],
            ),
        ],
    ),
    Runtime(
        "csharp",
        setup_csharp,
        ["mono", "--version"],
        [
            Case(
                "uncaught",
                ["mono", "--debug", "build/Billing.exe"],
                keep=["PaymentDeclinedException", "card declined for order ORD-40917", "E1042"],
                ids=["ORD-40917", "E1042"],
                types=["Acme.Billing.PaymentDeclinedException"],
                app_functions=["ChargeCard", "LoadOrder", "HandleRequest"],
                secrets=["GH_TOKEN"],
            ),
            Case(
                "inner_exception",
                ["mono", "--debug", "build/Inner.exe"],
                keep=[
                    "InvalidOperationException",
                    "invoice sync failed for tenant acme-corp",
                    "E2203",
                    "KeyNotFoundException",
                ],
                ids=["E2203"],
                types=[
                    "System.InvalidOperationException",
                    "System.Collections.Generic.KeyNotFoundException",
                ],
                app_functions=["FetchInvoices", "LookupTenant"],
                secrets=["DB_DSN"],
            ),
            Case(
                "aggregate",
                ["mono", "--debug", "build/Aggregate.exe"],
                keep=[
                    "AggregateException",
                    "ArgumentException",
                    "search tool rejected query 'refund policy'",
                ],
                ids=[],
                types=["System.AggregateException", "System.ArgumentException"],
                app_functions=["RunToolBatch", "CallSearchTool"],
                secrets=["AWS_KEY"],
            ),
            Case(
                "framework",
                ["mono", "--debug", "build/Framework.exe"],
                keep=["XmlException"],
                ids=[],
                types=["System.Xml.XmlException"],
                app_functions=["ParseInvoiceXml", "ImportInvoice"],
                secrets=[],
            ),
        ],
    ),
]


# ---------------------------------------------------------------------------------------------
# Capture and normalise.

ADDRESS = re.compile(r"0x[0-9a-f]{6,16}")
GO_GOROUTINE = re.compile(r"\bgoroutine (\d+)\b")
RUST_THREAD_ID = re.compile(r"(thread '[^']*' )\((\d+)\)")


def stabilise(text: str) -> str:
    """Replace heap/code addresses (which move from run to run) with stable same-length ones."""
    mapping: dict[str, str] = {}

    def repl(m: re.Match[str]) -> str:
        addr = m.group(0)
        if addr not in mapping:
            n = len(mapping) + 1
            mapping[addr] = (
                "0x" + f"{0xA0000 + n * 16:x}".rjust(len(addr) - 2, "0")[-(len(addr) - 2) :]
            )
        return mapping[addr]

    tids: dict[str, str] = {}

    def tid(m: re.Match[str]) -> str:  # Rust prints the OS thread id, a new one each run
        return f"{m.group(1)}({tids.setdefault(m.group(2), str(4242 + len(tids)))})"

    gids: dict[str, str] = {"1": "1"}

    def gid(m: re.Match[str]) -> str:  # Go numbers goroutines in creation order, which varies
        return f"goroutine {gids.setdefault(m.group(1), str(17 + len(gids)))}"

    text = GO_GOROUTINE.sub(gid, ADDRESS.sub(repl, text))
    return RUST_THREAD_ID.sub(tid, text)


def capture(runtime: Runtime, case: Case) -> str:
    app = fake_home(runtime.name) / "app"
    env = run_env(runtime.name)
    if runtime.name == "go":
        env = go_env(env)
    if runtime.name == "rust":
        env = rust_env(env)
    env.update(case.env)
    cmd = [arg.replace("{app}", str(app)) for arg in case.cmd]
    proc = subprocess.run(
        cmd,
        cwd=app,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        check=False,
        timeout=300,
    )
    if proc.returncode == 0:
        raise RuntimeError(f"{runtime.name}/{case.case} did not crash:\n{proc.stdout}")
    # The JVM's own warnings (kotlin's launcher on a newer JDK) are not part of the trace.
    lines = [
        ln
        for ln in proc.stdout.splitlines()
        if not ln.startswith("OpenJDK 64-Bit Server VM warning")
    ]
    return stabilise("\n".join(lines).rstrip("\n") + "\n")


# ---------------------------------------------------------------------------------------------
# Frame lines: the lines a kept value must lose, as each runtime prints them.

PY_GROUP_PREFIX = re.compile(r"^(\s*[|+] )")


def frames_python(lines: list[str]) -> list[str]:
    out: list[str] = []
    in_tb = False
    for line in lines:
        body = PY_GROUP_PREFIX.sub("", line, count=1)
        if body.startswith(("Traceback (most recent call last):", "Exception Group Traceback")):
            in_tb = True
        elif in_tb and body.startswith("  ") and body.strip():
            out.append(line)
        elif body.strip() and not body.startswith(" "):
            in_tb = False
    return out


def frames_node(lines: list[str]) -> list[str]:
    out: list[str] = []
    # The source excerpt Node prints first: "file:line", the source line, a caret line.
    if lines and re.match(r"^(/\S+|node:\S+):\d+$", lines[0]):
        for line in lines:
            if not line.strip():
                break
            out.append(line)
    depth = 0
    for line in lines[len(out) :]:
        stripped = line.strip()
        if re.match(r"^\s+(at |\.\.\. \d+ lines matching cause stack trace)", line):
            out.append(line)
        elif (
            depth > 0
            and stripped
            and not re.match(r"^\[cause\]:", stripped)
            and stripped not in ("}", "},", "]")
        ):
            out.append(line)  # an error object's own properties, printed like locals
        depth += line.count("{") - line.count("}")
        depth = max(depth, 0)
    return out


def frames_jvm(lines: list[str]) -> list[str]:
    return [ln for ln in lines if re.match(r"^\s+(at |\.\.\. \d+ more)", ln)]


def frames_go(lines: list[str]) -> list[str]:
    out: list[str] = []
    in_stack = False
    for line in lines:
        if re.match(r"^goroutine \d+ .*\]:$", line):
            in_stack = True
        elif not line.strip():
            in_stack = False
        elif in_stack:
            out.append(line)
    return out


def frames_rust(lines: list[str]) -> list[str]:
    out: list[str] = []
    in_bt = False
    for line in lines:
        if line.startswith("stack backtrace:"):
            in_bt = True
        elif in_bt and re.match(r"^\s+(\d+:|at )", line):
            out.append(line)
        elif line.strip():
            in_bt = False
    return out


def frames_ruby(lines: list[str]) -> list[str]:
    return [
        ln
        for ln in lines
        if re.match(r"^\s+from \S+:\d+:in ", ln) or re.match(r"^\s+\.\.\. \d+ levels\.\.\.", ln)
    ]


def frames_php(lines: list[str]) -> list[str]:
    return [
        ln
        for ln in lines
        if re.match(r"^(PHP )?#\d+ ", ln) or re.match(r"^(PHP )?\s+thrown in ", ln)
    ]


def frames_dotnet(lines: list[str]) -> list[str]:
    return [ln for ln in lines if re.match(r"^\s+at ", ln)]


FRAMES = {
    "python": frames_python,
    "node": frames_node,
    "java": frames_jvm,
    "kotlin": frames_jvm,
    "go": frames_go,
    "rust": frames_rust,
    "ruby": frames_ruby,
    "php": frames_php,
    "csharp": frames_dotnet,
}


# ---------------------------------------------------------------------------------------------
# Variants of one captured trace, each with its truth.


def _rid(seed: str) -> str:
    return "req_" + f"{zlib.crc32(seed.encode()):08x}"[:6]


# Frame lines that show code rather than a location: Python's source and locals lines (a frame's
# location line starts `File "`), Node's source excerpt and error properties (its frames start
# `at `). A function name or an id written there is code or data, not a frame the trace names.
_PY_LOCATION = re.compile(r'^  File "')
_NODE_LOCATION = re.compile(r"^\s+(at |\.\.\. \d+ lines matching cause stack trace)")
SOURCE_LINE: dict[str, Callable[[str], bool]] = {
    "python": lambda ln: not _PY_LOCATION.match(PY_GROUP_PREFIX.sub("", ln, count=1)),
    "node": lambda ln: not _NODE_LOCATION.match(ln),
}


def truth_for(
    text: str, base: dict[str, object], runtime: str, extra_frames: tuple[str, ...] = ()
) -> dict[str, object]:
    """Restrict a trace's truth to what `text` (a variant's value, decoded) still contains.

    Ids, kept text and types count only where they stand outside the frame lines: a value cut
    before the exception line may still hold an id or a type inside a source line
    (`load_order("ORD-40917")`, `raise ConnectionError(...`), which the kept value must drop
    with its frame. App function names count where a frame line locates them (not in a
    source or locals line), or outside the frames.
    """
    frame_lines = [ln for ln in base["frame_lines"] if ln in text]  # type: ignore[attr-defined]
    frame_lines += [ln for ln in extra_frames if ln not in frame_lines]
    frames = set(frame_lines)
    lines = text.split("\n")
    outside = "\n".join(ln for ln in lines if ln not in frames)
    is_source = SOURCE_LINE.get(runtime, lambda _: False)
    located = "\n".join(ln for ln in lines if ln not in frames or not is_source(ln))

    def present(items: object, where: str) -> list[str]:
        return [s for s in items if s in where]  # type: ignore[attr-defined]

    return {
        "frame_lines": frame_lines,
        "keep": present(base["keep"], outside),
        "ids": present(base["ids"], outside),
        "secrets": present(base["secrets"], text),
        "home": base["home"],
        "types": present(base["types"], outside),
        "app_functions": present(base["app_functions"], located),
    }


def merge(a: dict[str, object], b: dict[str, object]) -> dict[str, object]:
    out: dict[str, object] = {}
    for key, items in a.items():
        out[key] = list(dict.fromkeys([*items, *b[key]]))  # type: ignore[misc]
    return out


ANSI_RED, ANSI_DIM, ANSI_CYAN, ANSI_RESET = "\x1b[1;31m", "\x1b[2m", "\x1b[36m", "\x1b[0m"


def colourise(trace: str, frames: set[str]) -> str:
    out = []
    for line in trace.split("\n"):
        if not line:
            out.append(line)
        elif line in frames:
            out.append(f"{ANSI_DIM}{line}{ANSI_RESET}")
        else:
            out.append(f"{ANSI_RED}{line}{ANSI_RESET}")
    return "\n".join(out)


def cut_point(trace: str, frame_lines: list[str], secrets: list[str]) -> int:
    """Where in the trace the length limit should fall: in the middle of the first frame line past
    the trace's middle (or at the middle), never inside a secret."""
    cut = len(trace) // 2
    for line in frame_lines:
        pos = trace.find(line)
        if pos >= len(trace) // 2 and len(line) > 8:
            cut = pos + len(line) // 2
            break
    for secret in secrets:
        start = trace.find(secret)
        while start != -1:
            if start < cut < start + len(secret):
                cut = start
            start = trace.find(secret, start + 1)
    return cut


def filler(length: int, rid: str) -> str:
    """Log lines of exactly `length` characters that came before the trace in the same value."""
    lines = []
    i = 0
    while length > 0:
        line = f"{LOG_TS} INFO checkout request_id={rid} step {i:03d} ok\n"
        if length - len(line) < 60:
            base = f"{LOG_TS} INFO checkout heartbeat "
            line = base + "." * (length - len(base) - 1) + "\n"
        lines.append(line)
        length -= len(line)
        i += 1
    return "".join(lines)


def variants(
    runtime: str,
    case: str,
    trace: str,
    base: dict[str, object],
    other: tuple[str, str, dict[str, object]],
) -> list[dict[str, object]]:
    rid = _rid(f"{runtime}/{case}")
    code = "E" + str(1000 + zlib.crc32(case.encode()) % 9000)
    frames = set(base["frame_lines"])  # type: ignore[arg-type]
    out: list[dict[str, object]] = []

    def add(
        variant: str,
        value: str,
        decoded: str,
        extra_keep: tuple[str, ...] | list[str] = (),
        truth: dict[str, object] | None = None,
    ) -> None:
        t = dict(truth if truth is not None else truth_for(decoded, base, runtime))
        t["keep"] = [*t["keep"], *extra_keep]  # type: ignore[misc]
        t["ids"] = [*t["ids"], *[k for k in extra_keep if re.match(r"^(req_|E\d|ORD-|job-)", k)]]  # type: ignore[misc]
        out.append(
            {
                "id": f"{runtime}/{case}/{variant}",
                "runtime": runtime,
                "case": case,
                "variant": variant,
                "value": value,
                **t,
            }
        )

    add("raw", trace, trace)
    envelope = {"level": "error", "service": "checkout", "request_id": rid, "error": trace}
    add("json", json.dumps(envelope), trace, [f'"request_id": "{rid}"'])
    add(
        "json-double",
        json.dumps({"event": "tool_error", "payload": json.dumps(envelope)}),
        trace,
        ["tool_error", rid],
    )
    order = f"ORD-{zlib.crc32(case.encode()) % 90000 + 10000}"
    prefix = (
        f"{LOG_TS} ERROR checkout request_id={rid} order_id={order} code={code} tool call failed\n"
    )
    add("log-line", prefix + trace, prefix + trace, [prefix.strip()])
    page = (
        "<!DOCTYPE html>\n<html><head><title>500 Internal Server Error</title></head>\n"
        "<body><h1>Internal Server Error</h1>\n"
        f"<p>Request ID: {rid}</p>\n<pre>{html.escape(trace)}</pre>\n</body></html>\n"
    )
    add("html", page, trace, ["500 Internal Server Error", f"Request ID: {rid}"])
    add("ansi", colourise(trace, frames), trace)
    add("crlf", trace.replace("\n", "\r\n"), trace)
    # The value is cut at the attribute limit; log lines before the trace put the limit in the
    # middle of a frame line (a trace longer than the limit is cut where the limit falls).
    pos = cut_point(trace, base["frame_lines"], base["secrets"])  # type: ignore[arg-type]
    lead = filler(ATTRIBUTE_LIMIT - pos, rid) if ATTRIBUTE_LIMIT - pos >= 60 else ""
    head = (lead + trace)[:ATTRIBUTE_LIMIT]
    # The line the limit cut through is still a frame line if it was one (its start is kept).
    tail_line = head.rsplit("\n", 1)[-1]
    cut_frame = tail_line and any(
        ln.startswith(tail_line) and ln != tail_line
        for ln in base["frame_lines"]  # type: ignore[attr-defined]
    )
    cut_truth = truth_for(head, base, runtime, (tail_line,) if cut_frame else ())
    first_log = lead.split("\n", 1)[0]
    add(f"cut-{ATTRIBUTE_LIMIT}", head, head, [first_log] if first_log else [], truth=cut_truth)
    other_case, other_trace, other_base = other
    sep = f"\n{LOG_TS} ERROR checkout request_id={rid} retry 2 of 3 failed, next: {other_case}\n"
    joined = trace + sep + other_trace
    multi_truth = merge(
        truth_for(trace, base, runtime), truth_for(other_trace, other_base, runtime)
    )
    add("multi", joined, joined, [sep.strip()], truth=multi_truth)
    return out


# ---------------------------------------------------------------------------------------------


def version_of(runtime: Runtime) -> str:
    proc = subprocess.run(runtime.version_cmd, capture_output=True, text=True, check=False)
    text = (proc.stdout + proc.stderr).strip().splitlines()
    lines = [ln for ln in text if "warning" not in ln.lower()]
    return lines[0] if lines else "unknown"


def prepare(runtime: Runtime) -> None:
    home = fake_home(runtime.name)
    app = home / "app"
    app.mkdir(parents=True, exist_ok=True)
    shutil.copytree(PROGRAMS / runtime.name, app, dirs_exist_ok=True)
    env = run_env(runtime.name)
    runtime.setup(app, env)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--only", action="append", help="rerun only this runtime's programs (repeatable)"
    )
    ap.add_argument(
        "--cases-only",
        action="store_true",
        help="rebuild cases.jsonl from the captures without running anything",
    )
    args = ap.parse_args()

    versions: dict[str, str] = (
        json.loads(VERSIONS_FILE.read_text()) if VERSIONS_FILE.exists() else {}
    )
    failures: dict[str, str] = {}
    for runtime in RUNTIMES:
        if args.cases_only or (args.only and runtime.name not in args.only):
            continue
        try:
            prepare(runtime)
        except (RuntimeError, OSError, subprocess.SubprocessError) as exc:
            failures[runtime.name] = str(exc)[-2000:]
            print(f"{runtime.name}: could not install or build:\n{exc}", file=sys.stderr)
            continue
        versions[runtime.name] = version_of(runtime)
        out_dir = CAPTURED / runtime.name
        out_dir.mkdir(parents=True, exist_ok=True)
        for case in runtime.cases:
            text = capture(runtime, case)
            (out_dir / f"{case.case}.txt").write_text(text)
            print(f"captured {runtime.name}/{case.case}: {len(text)} chars", file=sys.stderr)
    VERSIONS_FILE.parent.mkdir(parents=True, exist_ok=True)
    if not args.cases_only:
        VERSIONS_FILE.write_text(json.dumps(versions, indent=2, sort_keys=True) + "\n")

    rows: list[dict[str, object]] = []
    for runtime in RUNTIMES:
        captured: list[tuple[str, str, dict[str, object]]] = []
        for case in runtime.cases:
            path = CAPTURED / runtime.name / f"{case.case}.txt"
            if not path.exists():
                continue
            trace = path.read_text()
            home = fake_home(runtime.name)
            base: dict[str, object] = {
                "frame_lines": FRAMES[runtime.name](trace.split("\n")),
                "keep": case.keep,
                "ids": case.ids,
                "secrets": [SECRET_OF_ENV[e] for e in case.secrets],
                "home": [str(home), home.name],
                "types": case.types,
                "app_functions": case.app_functions,
            }
            missing = [k for k in [*case.keep, *base["secrets"], *case.types] if k not in trace]  # type: ignore[list-item]
            if missing:
                raise SystemExit(f"{runtime.name}/{case.case}: truth not in the capture: {missing}")
            captured.append((case.case, trace, base))
        for i, (name, trace, base) in enumerate(captured):
            other = captured[(i + 1) % len(captured)]
            rows.extend(variants(runtime.name, name, trace, base, other))
    with CASES_FILE.open("w") as fh:
        for row in rows:
            fh.write(json.dumps(row, ensure_ascii=False) + "\n")
    print(f"wrote {len(rows)} cases to {CASES_FILE.relative_to(HERE)}", file=sys.stderr)
    if failures:
        print("runtimes not installed: " + ", ".join(sorted(failures)), file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
