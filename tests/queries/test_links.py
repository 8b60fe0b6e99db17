"""Links to traces: each preset's URL, templates of one's own, bad templates refused at
config load with one error naming what is wrong, and `findings --json` carrying the links."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from click.testing import CliRunner

from errscope.collector.cli.gate import findings
from errscope.collector.errors import ConfigError, ConfigErrorKind
from errscope.collector.sidecar.config import ServeConfig
from errscope.collector.store.duckdb import DuckDBStore
from errscope.queries.links import expand_template, trace_url
from tests.queries.traffic import DEPLOY_TS, Scenario

ERRSCOPE = [sys.executable, "-m", "errscope.collector.cli"]
TRACE = "0af7651916cd43dd8448eb211c80319c"
SPAN = "b7ad6b7169203331"
# Datadog's ids for the two above: the low 64 bits, in decimal.
DD_TRACE = str(int(TRACE[16:], 16))
DD_SPAN = str(int(SPAN, 16))


@dataclass(frozen=True)
class Link:
    """A setting, the ids, and the URL it must give."""

    setting: str
    expected: str
    span_id: str | None = SPAN


@pytest.mark.parametrize(
    "case",
    [
        pytest.param(
            Link("jaeger:http://jaeger:16686", f"http://jaeger:16686/trace/{TRACE}?uiFind={SPAN}"),
            id="jaeger",
        ),
        pytest.param(
            # A trailing slash on the base is not doubled.
            Link(
                "jaeger:https://jaeger.example/",
                f"https://jaeger.example/trace/{TRACE}?uiFind={SPAN}",
            ),
            id="jaeger-trailing-slash",
        ),
        pytest.param(
            Link(
                "tempo:https://grafana.example",
                "https://grafana.example/explore?schemaVersion=1&panes="
                "%7B%22a%22%3A%7B%22datasource%22%3A%22tempo%22%2C%22queries%22%3A%5B%7B%22refId"
                "%22%3A%22A%22%2C%22datasource%22%3A%7B%22type%22%3A%22tempo%22%2C%22uid%22%3A%22"
                f"tempo%22%7D%2C%22queryType%22%3A%22traceql%22%2C%22query%22%3A%22{TRACE}%22%7D"
                "%5D%2C%22range%22%3A%7B%22from%22%3A%22now-1h%22%2C%22to%22%3A%22now%22%7D%7D%7D",
            ),
            id="tempo-grafana-explore",
        ),
        pytest.param(
            Link(
                "honeycomb:acme/prod",
                f"https://ui.honeycomb.io/acme/environments/prod/trace?trace_id={TRACE}&span={SPAN}",
            ),
            id="honeycomb",
        ),
        pytest.param(
            Link("datadog", f"https://app.datadoghq.com/apm/trace/{DD_TRACE}?spanID={DD_SPAN}"),
            id="datadog",
        ),
        pytest.param(
            Link(
                "datadog:https://app.datadoghq.eu",
                f"https://app.datadoghq.eu/apm/trace/{DD_TRACE}?spanID={DD_SPAN}",
            ),
            id="datadog-site",
        ),
        pytest.param(
            Link(
                "https://traces.example/t/{trace_id}?span={span_id}",
                f"https://traces.example/t/{TRACE}?span={SPAN}",
            ),
            id="custom",
        ),
        pytest.param(
            # Doubled braces are literal braces.
            Link("https://t.example/{{x}}/{trace_id}", f"https://t.example/{{x}}/{TRACE}"),
            id="custom-literal-braces",
        ),
        pytest.param(
            # No span id known: its place is left empty, the trace still links.
            Link("jaeger:http://j:16686", f"http://j:16686/trace/{TRACE}?uiFind=", span_id=None),
            id="no-span",
        ),
    ],
)
def test_presets_and_templates_give_the_backends_url(case: Link) -> None:
    """Each preset and template fills in the ids as that backend's trace view expects."""
    assert trace_url(case.setting, TRACE, case.span_id) == case.expected


@pytest.mark.parametrize(
    ("setting", "message"),
    [
        pytest.param("https://t.example/{trace}", "unknown placeholder {trace}", id="unknown-name"),
        pytest.param("https://t.example/{0}", "unknown placeholder {?}", id="positional"),
        pytest.param("https://t.example/{trace_id", "unbalanced braces", id="unbalanced"),
        pytest.param("https://t.example/{trace_id:>40}", "no format spec", id="format-spec"),
        pytest.param("https://t.example/{trace_id!r}", "no format spec", id="conversion"),
        pytest.param("https://t.example/{span_id}", "never names the trace", id="no-trace"),
        pytest.param("ftp://t.example/{trace_id}", "neither a preset", id="not-http"),
        pytest.param("zipkin:http://z:9411", "neither a preset", id="unknown-preset"),
        pytest.param("jaeger:", "http(s) base URL", id="preset-without-base"),
        pytest.param("tempo:grafana.example", "http(s) base URL", id="preset-base-not-url"),
        pytest.param("honeycomb:acme", "TEAM/ENVIRONMENT", id="honeycomb-without-env"),
        # A credential in the URL is never repeated by the error.
        pytest.param(
            "https://user:Hunter2Secret@t.example/{trace}", "unknown placeholder", id="no-echo"
        ),
    ],
)
def test_bad_templates_are_refused_naming_what_is_wrong(setting: str, message: str) -> None:
    """A bad setting raises ConfigError(BAD_VALUE, field trace_url) whose message says what
    is wrong and never holds the setting itself."""
    with pytest.raises(ConfigError) as caught:
        expand_template(setting)
    assert (caught.value.kind, caught.value.field) == (ConfigErrorKind.BAD_VALUE, "trace_url")
    assert message in caught.value.message
    assert "Hunter2Secret" not in caught.value.describe()
    assert trace_url(setting, TRACE, SPAN) is None
    with pytest.raises(ConfigError):
        ServeConfig(trace_url=setting).check()


@pytest.mark.parametrize(
    ("template", "trace_id"),
    [
        pytest.param(None, TRACE, id="no-template"),
        pytest.param("jaeger:http://j:16686", None, id="no-trace-id"),
        pytest.param("jaeger:http://j:16686", TRACE.upper(), id="uppercase-id"),
        pytest.param("jaeger:http://j:16686", TRACE[:16], id="short-id"),
        pytest.param("jaeger:http://j:16686", "../../admin" + "0" * 21, id="not-hex"),
    ],
)
def test_no_link_without_a_template_or_an_otel_trace_id(
    template: str | None, trace_id: str | None
) -> None:
    """Without a template, or with a trace id that is not 32 lowercase hex, there is no link."""
    assert trace_url(template, trace_id, SPAN) is None


def _run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("ERRSCOPE_")}
    return subprocess.run(
        [*ERRSCOPE, *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={**clean, **(env or {})},
        check=False,
    )


@pytest.mark.parametrize(
    ("text", "line"),
    [
        pytest.param(
            '[serve]\ntrace_url = "https://t.example/{trace}"\n',
            "error[bad_value] serve.trace_url: unknown placeholder {trace}",
            id="serve-bad-placeholder",
        ),
        pytest.param(
            '[check]\ntrace_url = "zipkin:http://z"\n',
            "error[bad_value] check.trace_url: neither a preset nor an http(s) URL",
            id="check-unknown-preset",
        ),
        pytest.param('[findings]\ntrace_url = "datadog"\n', None, id="good"),
    ],
)
def test_config_check_validates_the_template(tmp_path: Path, text: str, line: str | None) -> None:
    """`errscope config --check` refuses a bad trace_url in one line naming table, key and
    the problem, and accepts a good one."""
    path = tmp_path / "errscope.toml"
    path.write_text(text)
    result = _run("config", "--check", str(path))
    if line is None:
        assert result.returncode == 0, result.stderr
    else:
        assert result.returncode == 2
        assert result.stderr.startswith(line), result.stderr
        assert len(result.stderr.strip().splitlines()) == 1


def test_config_show_displays_the_trace_url_and_its_source(tmp_path: Path) -> None:
    """`errscope config --show` shows trace_url per command, from the file or ERRSCOPE_TRACE_URL."""
    path = tmp_path / "errscope.toml"
    path.write_text('[serve]\ntrace_url = "jaeger:http://jaeger:16686"\n')
    result = _run(
        "config",
        "--show",
        env={"ERRSCOPE_CONFIG": str(path), "ERRSCOPE_TRACE_URL": "honeycomb:acme/prod"},
    )
    assert result.returncode == 0, result.stderr
    sections = {block.split("]", 1)[0]: block for block in result.stdout.split("[")[1:]}
    # The variable wins over the file for serve, and is all the other commands have.
    for name in ("serve", "check", "findings", "dashboard"):
        assert "trace_url = honeycomb:acme/prod    (env ERRSCOPE_TRACE_URL)" in sections[name]


def test_a_bad_flag_is_one_line_naming_the_placeholder() -> None:
    """`--trace-url` with a bad template stops the command with exit 2 and one line."""
    result = _run("findings", "--db", "nowhere.duckdb", "--trace-url", "https://t/{tid}")
    assert result.returncode == 2
    assert result.stderr.startswith("error[bad_flag] --trace-url: unknown placeholder {tid}")


def test_findings_json_links_first_failing_calls(tmp_path: Path) -> None:
    """`errscope findings --json --trace-url` gives each regression's first failing calls a
    trace_url built from their own ids."""
    path = tmp_path / "links.duckdb"
    with DuckDBStore(path) as store:
        Scenario(rates_new={"get_job": 0.09}).load(store)
    as_of = DEPLOY_TS.replace(minute=20).isoformat()
    result = CliRunner().invoke(
        findings,
        ["--db", str(path), "--as-of", as_of, "--json", "--trace-url", "honeycomb:acme/prod"],
    )
    assert result.exit_code == 0, result.output
    body = json.loads(result.output)
    calls = [c for f in body["findings"] for c in f["first_failing_calls"]]
    assert calls
    for c in calls:
        assert c["trace_url"] == (
            "https://ui.honeycomb.io/acme/environments/prod/trace"
            f"?trace_id={c['trace_id']}&span={c['span_id']}"
        )
