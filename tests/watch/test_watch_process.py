"""`errscope watch` as a process beside a real `errscope serve`: it reads through the
query API, exports the open finding on /metrics, posts it once to a loopback webhook, and
after a restart posts nothing again; its stderr never shows the webhook URL's secrets, and
scipy loads in the watch, never in the sidecar."""

from __future__ import annotations

import json
import signal
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from prometheus_client.parser import text_string_to_metric_families

from tests.sidecar.harness import ERRSCOPE, Served, http_exporter, send, sidecar
from tests.watch.receiver import Receiver, receiver

SLACK_PATH = "/services/T0PROCSECRET/B0PROCSECRET/XprocSecretToken42"
SECRETS = ("T0PROCSECRET", "B0PROCSECRET", "XprocSecretToken42")
_DEADLINE_S = 120.0  # start-up imports scipy and DuckDB on a shared 2-core machine


def _looping_trace() -> list[ReadableSpan]:
    """One agent run retrying a tool on the same bad field four times (a loop_misuse)."""
    provider = TracerProvider(
        resource=Resource.create({"service.name": "billing-agent", "service.version": "3.1.0"})
    )
    memory = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("tests")
    with tracer.start_as_current_span("invoke_agent"):
        for attempt in range(4):
            with tracer.start_as_current_span(
                "execute_tool get_job",
                attributes={
                    "gen_ai.operation.name": "execute_tool",
                    "gen_ai.tool.name": "get_job",
                    "gen_ai.tool.call.id": f"call_{attempt}",
                    "gen_ai.tool.call.result": json.dumps(
                        {"error": "invalid_args", "field": "job_id"}
                    ),
                },
            ):
                pass
    provider.shutdown()
    spans = list(memory.get_finished_spans())
    assert len({s.context.trace_id for s in spans}) == 1
    assert trace.get_current_span() is trace.INVALID_SPAN
    return spans


@dataclass
class Watch:
    """A running `errscope watch` process, its /metrics address and its stderr file."""

    process: subprocess.Popen[str]
    metrics: str
    log: Path

    def scrape(self) -> dict[str, list[tuple[dict[str, str], float]]]:
        """/metrics parsed by prometheus_client: sample name -> [(labels, value)]."""
        with urllib.request.urlopen(f"http://{self.metrics}/metrics", timeout=30) as r:
            text = r.read().decode()
        out: dict[str, list[tuple[dict[str, str], float]]] = {}
        for family in text_string_to_metric_families(text):
            for s in family.samples:
                out.setdefault(s.name, []).append((s.labels, s.value))
        return out

    def wait_runs(self, runs: int) -> dict[str, list[tuple[dict[str, str], float]]]:
        """Scrape until `runs` detection runs succeeded and nothing is pending (or fail)."""
        deadline = time.monotonic() + _DEADLINE_S
        while time.monotonic() < deadline:
            got = self.scrape()
            runs_by = {
                labels["result"]: v for labels, v in got.get("errscope_watch_runs_total", [])
            }
            ok = runs_by.get("ok", 0)
            pending = got.get("errscope_webhook_pending", [({}, 1)])[0][1]
            if ok >= runs and pending == 0:
                return got
            time.sleep(0.2)  # polling a condition (the watch's own counters), with a deadline
        raise AssertionError(f"the watch did not finish {runs} runs: {self.log.read_text()}")


@contextmanager
def watching(served: Served, rx: Receiver, state: Path, log: Path) -> Iterator[Watch]:
    """`errscope watch` on the sidecar's API, posting to `rx`; SIGTERM at the end, exit 0."""
    with log.open("a") as err:
        process = subprocess.Popen(
            [
                *ERRSCOPE,
                "watch",
                "--api",
                served.url(""),
                "--state",
                str(state),
                "--metrics",
                "127.0.0.1:0",
                "--interval",
                "1s",
                "--webhook-backoff",
                "10ms",
                "--webhook",
                f"slack={rx.url(SLACK_PATH)}",
            ],
            stdout=subprocess.PIPE,
            stderr=err,
            text=True,
        )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        if not line:
            process.wait(30)
            raise AssertionError(f"watch did not start: {log.read_text()}")
        ready = json.loads(line)
        assert ready["event"] == "ready"
        yield Watch(process, ready["metrics"], log)
        process.send_signal(signal.SIGTERM)
        assert process.wait(60) == 0, log.read_text()
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(10)
        if process.stdout is not None:
            process.stdout.close()


@pytest.mark.slow
def test_watch_beside_a_sidecar_posts_each_episode_once_across_a_restart(tmp_path: Path) -> None:
    """The finding a real sidecar's data shows is a gauge on /metrics and one Slack post
    per episode; a restarted watch (same state file) posts none again; no URL secret is
    in its stderr."""
    state, log = tmp_path / "watch.duckdb", tmp_path / "watch.log"
    with sidecar(tmp_path / "s.duckdb") as served, receiver() as rx:
        assert send(http_exporter(served), _looping_trace())
        with watching(served, rx, state, log) as first:
            metrics = first.wait_runs(1)
        open_series = [labels for labels, value in metrics["errscope_finding_open"] if value == 1]
        loops = [s for s in open_series if s["kind"] == "loop_misuse"]
        # The loop is one finding with its field, not also the new version's storm note
        # (no field): one retry loop, one episode.
        assert [(s["service"], s["tool"], s["code"], s["field"]) for s in loops] == [
            ("billing-agent", "get_job", "invalid_args", "job_id")
        ]
        posts = rx.wait_for(len(open_series))
        assert len(posts) == len(open_series)  # one per episode
        keys = [p.body["blocks"][1]["elements"][0]["text"].split("episode ")[1] for p in posts]
        assert len(set(keys)) == len(keys)
        with watching(served, rx, state, log) as second:
            again = second.wait_runs(2)
            # Detection ran against this sidecar all along; its statistics never loaded
            # into it (numpy's own libscipy_openblas is not scipy).
            maps = Path(f"/proc/{served.process.pid}/maps").read_text()
            assert "site-packages/scipy/" not in maps
            assert "site-packages/scipy/" in Path(f"/proc/{second.process.pid}/maps").read_text()
        assert len(rx.posts) == len(posts)  # nothing posted again after the restart
        assert [s for s, v in again["errscope_finding_open"] if v == 1] == open_series
    stderr = log.read_text()
    assert "webhook delivered" in stderr
    for secret in SECRETS:
        assert secret not in stderr
