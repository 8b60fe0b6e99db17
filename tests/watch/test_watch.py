"""`errscope watch` in process: episodes, webhook bodies, retries, rate, restarts, secrets.

Each test runs the real `Watcher` on a real store (through the named queries detection
uses), a real state file and a real HTTP receiver on loopback; the clock is passed in, so
"an hour later" is an argument, not a wait.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import replace
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from errscope.collector.errors import ConfigError, StoreError, StoreErrorKind
from errscope.collector.record import TracebackSample
from errscope.collector.store.duckdb import DuckDBStore
from errscope.collector.watch.loop import WatchConfig, Watcher
from errscope.collector.watch.sinks import Event, Message, Sink, SinkFormat, parse_sink, relink
from errscope.collector.watch.state import OutboxStatus, WatchState
from tests.queries.traffic import DEPLOY_TS, StoreSource, call
from tests.watch.receiver import Receiver, receiver

T0 = DEPLOY_TS + timedelta(minutes=5)  # when the looping trace runs
SEEN = T0 + timedelta(minutes=15)  # inside the loop window (1 h)
CLEARED = T0 + timedelta(hours=2)  # past it
# Secrets in every part of a webhook URL a credential can hide in.
SLACK_PATH = "/services/T0SECRET1/B0SECRET2/XsecretPathToken123"
QUERY_TOKEN = "qsecretQueryToken456"
PASSWORD = "pwSecret789"
SECRETS = ("T0SECRET1", "B0SECRET2", "XsecretPathToken123", QUERY_TOKEN, PASSWORD)
ROUTING_KEY = "R0UTINGKEYSECRET0000000000000000"
FAST = WatchConfig(resolve_after_s=0, rate_per_min=6000, backoff_s=0.001, max_attempts=3)


def _loop(store: DuckDBStore, tool: str = "get_job", trace: str = "f" * 32) -> None:
    """A trace that retries one field four times: one loop_misuse finding."""
    store.append_tool_calls(
        [
            call(
                T0 + timedelta(seconds=i),
                tool=tool,
                code="invalid_args",
                field="job_id",
                trace_id=trace,
            )
            for i in range(4)
        ]
    )


@pytest.fixture
def store() -> Iterator[DuckDBStore]:
    """A migrated in-memory store holding one looping trace."""
    s = DuckDBStore(":memory:")
    _loop(s)
    yield s
    s.close()


def _sinks(rx: Receiver) -> list[Sink]:
    return [
        parse_sink(f"json={rx.url('/json')}", index=0),
        parse_sink(f"slack={rx.url(SLACK_PATH + '?token=' + QUERY_TOKEN)}", index=1),
        parse_sink(
            f"pagerduty={rx.url('/v2/enqueue', userinfo='ops:' + PASSWORD)}",
            index=2,
            routing_key=ROUTING_KEY,
        ),
    ]


def _watcher(
    store: DuckDBStore, state: WatchState, sinks: list[Sink], config: WatchConfig = FAST
) -> Watcher:
    return Watcher(StoreSource(store), state, sinks, config)


def _by_path(rx: Receiver) -> dict[str, list[dict[str, object]]]:
    out: dict[str, list[dict[str, object]]] = {}
    for post in rx.posts:
        out.setdefault(post.path.split("?")[0], []).append(post.body)
    return out


def test_one_message_per_episode_and_a_resolve_when_it_clears(
    store: DuckDBStore, tmp_path: Path
) -> None:
    """An episode posts one trigger to each webhook however many runs see it, and one
    resolve when a run finds it gone; the PagerDuty pair shares its dedup_key."""
    with receiver() as rx, WatchState(tmp_path / "w.duckdb") as state:
        watcher = _watcher(store, state, _sinks(rx))
        for minute in range(3):  # three runs see the same finding
            assert watcher.run_once(SEEN + timedelta(minutes=minute))
            watcher.deliver(SEEN + timedelta(minutes=minute))
        assert len(rx.posts) == 3
        assert watcher.run_once(CLEARED)
        watcher.deliver(CLEARED)
        watcher.deliver(CLEARED + timedelta(minutes=1))
        posts = _by_path(rx)
    assert [p["event"] for p in posts["/json"]] == ["trigger", "resolve"]
    trigger, resolve = posts["/json"]
    assert trigger["finding"]["kind"] == "loop_misuse"  # type: ignore[index]
    assert (trigger["finding"]["tool"], trigger["finding"]["field"]) == ("get_job", "job_id")  # type: ignore[index]
    assert resolve["episode"]["resolved_at"] is not None  # type: ignore[index]
    slack = posts[SLACK_PATH]
    assert [s["text"].split("]")[0] for s in slack] == ["[errscope open", "[errscope resolved"]  # type: ignore[union-attr]
    assert all(b["type"] in ("section", "context") for s in slack for b in s["blocks"])  # type: ignore[union-attr,index]
    pd_trigger, pd_resolve = posts["/v2/enqueue"]
    assert (pd_trigger["event_action"], pd_resolve["event_action"]) == ("trigger", "resolve")
    assert pd_trigger["dedup_key"] == pd_resolve["dedup_key"]
    assert pd_trigger["routing_key"] == ROUTING_KEY
    assert pd_trigger["payload"]["severity"] == "warning"  # type: ignore[index]
    assert "payload" not in pd_resolve


def test_a_restart_sends_nothing_already_sent(store: DuckDBStore, tmp_path: Path) -> None:
    """A watch started again on the same state file posts no second trigger for an
    episode still open, and still posts its resolve when it clears."""
    path = tmp_path / "w.duckdb"
    with receiver() as rx:
        with WatchState(path) as state:
            first = _watcher(store, state, _sinks(rx))
            first.run_once(SEEN)
            first.deliver(SEEN)
        assert len(rx.posts) == 3
        with WatchState(path) as state:
            again = _watcher(store, state, _sinks(rx))
            again.run_once(SEEN + timedelta(minutes=1))
            again.deliver(SEEN + timedelta(minutes=1))
            assert len(rx.posts) == 3
            again.run_once(CLEARED)
            again.deliver(CLEARED)
        after = rx.posts[3:]
    assert len(after) == 3  # one resolve to each webhook, nothing else
    events = {p.path.split("?")[0]: p.body for p in after}
    assert events["/json"]["event"] == "resolve"
    assert events["/v2/enqueue"]["event_action"] == "resolve"
    assert str(events[SLACK_PATH]["text"]).startswith("[errscope resolved]")


@pytest.mark.parametrize(
    ("answers", "tries", "status"),
    [
        pytest.param([(500, {})], 2, OutboxStatus.SENT, id="500-then-ok"),
        pytest.param([(429, {"Retry-After": "0"})], 2, OutboxStatus.SENT, id="429-then-ok"),
        pytest.param([(503, {}), (429, {})], 3, OutboxStatus.SENT, id="503-429-then-ok"),
        pytest.param([(500, {})] * 3, 3, OutboxStatus.FAILED, id="every-attempt-fails"),
        # 400 means the body is wrong: sending it again would be refused again.
        pytest.param([(400, {})], 1, OutboxStatus.REFUSED, id="400-is-not-retried"),
    ],
)
def test_retries_after_500_and_429_with_backoff(
    store: DuckDBStore,
    tmp_path: Path,
    answers: list[tuple[int, dict[str, str]]],
    tries: int,
    status: OutboxStatus,
) -> None:
    """A 5xx or 429 is retried after the backoff until sent or out of attempts; a 400 is not."""
    with receiver(answers) as rx, WatchState(tmp_path / "w.duckdb") as state:
        watcher = _watcher(store, state, [parse_sink(f"json={rx.url('/hook')}", index=0)])
        watcher.run_once(SEEN)
        for second in range(6):  # each step is past the (1 ms, doubling) backoff
            watcher.deliver(SEEN + timedelta(seconds=second))
        assert len(rx.posts) == tries
        assert state.counts() == {str(status): 1}


def test_retry_waits_for_the_backoff(store: DuckDBStore, tmp_path: Path) -> None:
    """After a 500 nothing is posted again before the backoff has passed."""
    config = replace(FAST, backoff_s=30.0)
    with receiver([(500, {})]) as rx, WatchState(tmp_path / "w.duckdb") as state:
        watcher = _watcher(store, state, [parse_sink(f"json={rx.url('/hook')}", index=0)], config)
        watcher.run_once(SEEN)
        watcher.deliver(SEEN)
        watcher.deliver(SEEN + timedelta(seconds=29))
        assert len(rx.posts) == 1
        watcher.deliver(SEEN + timedelta(seconds=30))
        assert len(rx.posts) == 2


def test_each_webhook_is_rate_limited(tmp_path: Path) -> None:
    """Two episodes opening at once reach a webhook allowed one post a minute a minute apart."""
    s = DuckDBStore(":memory:")
    _loop(s, tool="get_job", trace="a" * 32)
    _loop(s, tool="list_jobs", trace="b" * 32)
    config = replace(FAST, rate_per_min=1)
    try:
        with receiver() as rx, WatchState(tmp_path / "w.duckdb") as state:
            watcher = _watcher(s, state, [parse_sink(f"json={rx.url('/hook')}", index=0)], config)
            watcher.run_once(SEEN)
            watcher.deliver(SEEN)
            watcher.deliver(SEEN + timedelta(seconds=59))
            assert len(rx.posts) == 1
            watcher.deliver(SEEN + timedelta(seconds=60))
            assert len(rx.posts) == 2
            assert {p.body["finding"]["tool"] for p in rx.posts} == {"get_job", "list_jobs"}  # type: ignore[index]
    finally:
        s.close()


def test_no_url_secret_reaches_a_log_or_the_state_file(
    store: DuckDBStore, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Failed, retried, refused and sent posts log the sink's name and host, never a
    path, query or password of its URL; the state file holds none of them either."""
    caplog.set_level(logging.DEBUG)
    path = tmp_path / "w.duckdb"
    with receiver([(500, {}), (429, {}), (400, {})]) as rx, WatchState(path) as state:
        watcher = _watcher(store, state, _sinks(rx))
        watcher.run_once(SEEN)
        for second in range(4):
            watcher.deliver(SEEN + timedelta(seconds=second))
        assert len(rx.posts) >= 4
        (basic,) = {p.headers.get("Authorization", "") for p in rx.posts if p.path == "/v2/enqueue"}
    # An unreachable webhook fails inside urllib, whose own error text names the URL.
    with receiver() as gone:
        dead = gone.url(SLACK_PATH)
    with WatchState(tmp_path / "dead.duckdb") as state:
        watcher = _watcher(store, state, [parse_sink(f"slack={dead}", index=0)])
        watcher.run_once(SEEN)
        watcher.deliver(SEEN)
        assert state.counts() == {"pending": 1}
    # Every field of every record, the extras the log formatters print included.
    text = "\n".join(repr(record.__dict__) for record in caplog.records)
    assert "webhook delivered" in text
    assert "will retry" in text
    assert "abandoned" in text
    assert "URLError" in text or "ConnectionRefusedError" in text
    stored = path.read_bytes()
    for secret in SECRETS:
        assert secret not in text
        assert secret.encode() not in stored
    assert ROUTING_KEY not in text
    assert basic.startswith("Basic ")  # userinfo went as a header, not in the request line


@pytest.mark.parametrize(
    "text",
    [
        pytest.param(f"teams=https://example.invalid{SLACK_PATH}", id="unknown-format"),
        pytest.param(f"https://example.invalid{SLACK_PATH}", id="no-format"),
        pytest.param(f"slack=ftp://u:{PASSWORD}@example.invalid{SLACK_PATH}", id="not-http"),
        pytest.param(
            f"pagerduty=https://example.invalid/{QUERY_TOKEN}", id="pagerduty-without-key"
        ),
    ],
)
def test_a_bad_webhook_flag_is_refused_without_its_url(text: str) -> None:
    """A webhook flag that cannot be used is one ConfigError that never repeats the URL."""
    with pytest.raises(ConfigError) as caught:
        parse_sink(text, index=0)
    shown = caught.value.describe()
    for secret in SECRETS:
        assert secret not in shown


def test_the_sink_shows_only_scheme_and_host() -> None:
    """A sink's name, host and state key carry no part of its URL's path, query or userinfo."""
    sink = Sink(
        SinkFormat.SLACK,
        f"https://ops:{PASSWORD}@hooks.example.invalid:8443{SLACK_PATH}?t={QUERY_TOKEN}",
    )
    assert sink.shown == "https://hooks.example.invalid:8443"
    assert sink.name == "slack#0"
    for secret in SECRETS:
        assert secret not in f"{sink.shown} {sink.name} {sink.ident} {sink!r}"


def test_open_findings_are_gauges_and_episodes_a_counter(
    store: DuckDBStore, tmp_path: Path
) -> None:
    """/metrics (read with prometheus_client's parser) has a 1 per open finding with its
    identity as labels, drops it when the episode clears, and counts the episode once."""
    with receiver() as rx, WatchState(tmp_path / "w.duckdb") as state:
        watcher = _watcher(store, state, _sinks(rx)[:1])
        watcher.run_once(SEEN)
        watcher.run_once(SEEN + timedelta(minutes=1))
        watcher.deliver(SEEN + timedelta(minutes=1))
        while_open = {f.name: f for f in text_string_to_metric_families(watcher.exposition())}
        watcher.run_once(CLEARED)
        cleared = {f.name: f for f in text_string_to_metric_families(watcher.exposition())}
    (sample,) = while_open["errscope_finding_open"].samples
    assert sample.value == 1
    assert sample.labels == {
        "kind": "loop_misuse",
        "service": "billing-agent",
        "version": "1.0",
        "environment": "",
        "tool": "get_job",
        "code": "invalid_args",
        "field": "job_id",
    }
    assert [s.value for s in while_open["errscope_finding_episodes"].samples] == [1]
    (sent,) = while_open["errscope_webhook_deliveries"].samples
    assert (sent.labels["status"], sent.value) == ("sent", 1)
    assert cleared["errscope_finding_open"].samples == []
    assert [s.value for s in cleared["errscope_finding_episodes"].samples] == [1]
    assert {s.labels["result"]: s.value for s in cleared["errscope_watch_runs"].samples} == {
        "ok": 3,
        "failed": 0,
    }


def test_a_failed_run_clears_nothing(store: DuckDBStore, tmp_path: Path) -> None:
    """When detection cannot read its source (the sidecar is down), open episodes stay
    open and no resolve is posted: an outage is not every finding clearing."""
    from errscope.queries.source import ApiSource

    with receiver() as rx, WatchState(tmp_path / "w.duckdb") as state:
        watcher = _watcher(store, state, _sinks(rx)[:1])
        watcher.run_once(SEEN)
        watcher.deliver(SEEN)
        with receiver() as gone:
            down = gone.url("")
        watcher.source = ApiSource(down, timeout_s=5)
        assert not watcher.run_once(CLEARED)
        watcher.deliver(CLEARED)
        assert [p.body["event"] for p in rx.posts] == ["trigger"]
        assert len(state.open_episodes()) == 1
        families = {f.name: f for f in text_string_to_metric_families(watcher.exposition())}
    assert [s.value for s in families["errscope_watch_up"].samples] == [0]


def test_a_second_watch_on_one_state_file_is_refused(tmp_path: Path) -> None:
    """DuckDB's one-writer lock keeps two watches from sharing a state file (and double-posting)."""
    import subprocess
    import sys

    path = tmp_path / "w.duckdb"
    with WatchState(path):
        probe = subprocess.run(
            [
                sys.executable,
                "-c",
                "import sys; from errscope.collector.watch.state import WatchState\n"
                "from errscope.collector.errors import StoreError\n"
                f"try:\n    WatchState({str(path)!r})\nexcept StoreError as e:\n    print(e.kind)",
            ],
            capture_output=True,
            text=True,
            timeout=120,
            check=True,
        )
    assert probe.stdout.strip() == str(StoreErrorKind.LOCKED)
    assert issubclass(StoreError, Exception)


def test_a_flicker_within_resolve_after_stays_one_episode(tmp_path: Path) -> None:
    """A finding missing from one run and back in the next, within resolve_after, is one
    episode: no resolve and no second trigger."""
    s = DuckDBStore(":memory:")
    _loop(s)
    config = replace(FAST, resolve_after_s=600)
    try:
        with receiver() as rx, WatchState(tmp_path / "w.duckdb") as state:
            watcher = _watcher(s, state, [parse_sink(f"json={rx.url('/hook')}", index=0)], config)
            last_seen = T0 + timedelta(minutes=58)
            watcher.run_once(last_seen)
            watcher.deliver(last_seen)
            gone = T0 + timedelta(hours=1, minutes=1)  # the loop left the 1 h window
            watcher.run_once(gone)  # 3 minutes unseen: within the 10 of resolve_after
            s.append_tool_calls(  # the same loop again, in a new trace
                [
                    call(
                        gone + timedelta(seconds=i),
                        code="invalid_args",
                        field="job_id",
                        trace_id="d" * 32,
                    )
                    for i in range(4)
                ]
            )
            watcher.run_once(gone + timedelta(minutes=1))
            watcher.deliver(gone + timedelta(minutes=1))
            assert [p.body["event"] for p in rx.posts] == ["trigger"]
            assert len(state.open_episodes()) == 1
    finally:
        s.close()


def test_time_is_utc_in_the_bodies(store: DuckDBStore, tmp_path: Path) -> None:
    """Episode times in a json body are ISO 8601 UTC with a Z, as the findings JSON is."""
    with receiver() as rx, WatchState(tmp_path / "w.duckdb") as state:
        watcher = _watcher(store, state, _sinks(rx)[:1])
        watcher.run_once(SEEN)
        watcher.deliver(SEEN)
    opened = rx.posts[0].body["episode"]["opened_at"]  # type: ignore[index]
    assert opened.endswith("Z")
    assert datetime.fromisoformat(opened.replace("Z", "+00:00")) == SEEN


@pytest.mark.parametrize(
    ("configured", "wakes_early"),
    [
        pytest.param(True, True, id="configured-webhook-wakes-the-loop"),
        # Its posts stay owed (they go out if it is configured again) but are not spun on.
        pytest.param(False, False, id="removed-webhook-does-not"),
    ],
)
def test_the_loop_wakes_only_for_webhooks_it_can_post_to(
    store: DuckDBStore, tmp_path: Path, configured: bool, wakes_early: bool
) -> None:
    """A delivery owed to a configured webhook wakes the loop before the next run; one
    owed to a webhook no longer configured leaves the wait at the next run."""
    path = tmp_path / "w.duckdb"
    with receiver([(500, {})]) as rx:
        sink = parse_sink(f"json={rx.url('/hook')}", index=0)
        with WatchState(path) as state:
            first = _watcher(store, state, [sink])
            first.run_once(SEEN)
            first.deliver(SEEN)  # 500: a retry is owed
        with WatchState(path) as state:
            again = _watcher(store, state, [sink] if configured else [])
            next_run = SEEN + timedelta(minutes=1)
            wake = again.next_wake(SEEN, next_run)
    assert (wake < next_run) is wakes_early


JAEGER = "jaeger:http://jaeger.example:16686"


def _linked_store() -> DuckDBStore:
    """A looping trace whose calls have known ids, and a traceback sample for its first."""
    s = DuckDBStore(":memory:")
    calls = [
        call(
            T0 + timedelta(seconds=i),
            code="invalid_args",
            field="job_id",
            trace_id="f" * 32,
            span_id=f"{i + 1:016x}",
            correlation_id=f"link-{i}",
        )
        for i in range(4)
    ]
    s.append_tool_calls(calls)
    s.append_tracebacks(
        [
            TracebackSample(
                ts=calls[0].ts,
                service=calls[0].service,
                tool=calls[0].tool,
                trace_id=calls[0].trace_id,
                span_id=calls[0].span_id,
                exception_type="ValidationError",
                fingerprint="fp-1",
                text="ValidationError: job_id is not a job id",
                version=calls[0].version,
                correlation_id=calls[0].correlation_id,
            )
        ]
    )
    return s


def _link(span: int) -> str:
    return f"http://jaeger.example:16686/trace/{'f' * 32}?uiFind={span:016x}"


@pytest.mark.parametrize(
    ("template", "linked"),
    [
        pytest.param(JAEGER, True, id="with-a-template"),
        pytest.param(None, False, id="no-template-no-link"),
    ],
)
def test_messages_carry_the_trace_links(tmp_path: Path, template: str | None, linked: bool) -> None:
    """With --trace-url every webhook's trigger links the first failing calls (at most 3)
    and the traceback sample: json `links` and finding fields, a Slack mrkdwn link per
    call, PagerDuty's `links`; without one no body holds a trace URL."""
    s = _linked_store()
    config = replace(FAST, trace_url=template)
    try:
        with receiver() as rx, WatchState(tmp_path / "w.duckdb") as state:
            watcher = _watcher(s, state, _sinks(rx), config)
            watcher.run_once(SEEN)
            watcher.run_once(SEEN + timedelta(minutes=1))  # carried over, not gathered again
            watcher.deliver(SEEN + timedelta(minutes=1))
            posts = {k: v[0] for k, v in _by_path(rx).items()}
            raw = "\n".join(str(p.body) for p in rx.posts)
    finally:
        s.close()
    body = posts["/json"]
    finding = body["finding"]
    ids = [c["correlation_id"] for c in finding["first_failing_calls"]]  # type: ignore[index]
    assert ids[0] == "link-0"
    slack_text = "\n".join(
        b["text"]["text"]  # type: ignore[index]
        for b in posts[SLACK_PATH]["blocks"]  # type: ignore[union-attr]
        if b["type"] == "section"  # type: ignore[index]
    )
    if not linked:
        assert body["links"] == []
        assert "links" not in posts["/v2/enqueue"]
        assert "jaeger" not in raw
        assert "uiFind" not in raw
        assert all(c["trace_url"] is None for c in finding["first_failing_calls"])  # type: ignore[index]
        return
    calls = [_link(int(i.split("-")[1]) + 1) for i in ids][:3]
    assert [link["href"] for link in body["links"]] == calls  # type: ignore[union-attr,index]
    assert [c["trace_url"] for c in finding["first_failing_calls"]] == calls  # type: ignore[index]
    (sample,) = finding["tracebacks"]  # type: ignore[index]
    assert sample["trace_url"] == _link(1)  # the same span as the first call: one link
    assert posts["/v2/enqueue"]["links"] == [
        {"href": h, "text": f"call {i}"} for i, h in zip(ids, calls, strict=True)
    ]
    for i, href in zip(ids, calls, strict=True):
        assert f"<{href}|call {i}>" in slack_text
    assert slack_text.count("<http") == len(calls)
    for secret in SECRETS:
        assert secret not in raw


def test_links_follow_the_template_the_watch_runs_with(tmp_path: Path) -> None:
    """An episode opened without a template and posted by a watch restarted with one
    carries the links: they are drawn at post time from the stored ids."""
    s = _linked_store()
    path = tmp_path / "w.duckdb"
    try:
        with receiver() as rx:
            sink = [parse_sink(f"json={rx.url('/hook')}", index=0)]
            with WatchState(path) as state:
                _watcher(s, state, sink).run_once(SEEN)
            with WatchState(path) as state:
                again = _watcher(s, state, sink, replace(FAST, trace_url=JAEGER))
                again.deliver(SEEN)
            (post,) = rx.posts
    finally:
        s.close()
    assert [link["href"] for link in post.body["links"]][:1] == [_link(1)]  # type: ignore[index]


def test_old_resolved_episodes_leave_the_state_file(store: DuckDBStore, tmp_path: Path) -> None:
    """A run deletes episodes resolved longer than keep_s ago with their deliveries, keeps
    younger ones, and a later episode gets a new id (no dedup_key reused)."""
    config = replace(FAST, keep_s=86400.0)
    path = tmp_path / "w.duckdb"
    with receiver() as rx, WatchState(path) as state:
        watcher = _watcher(store, state, _sinks(rx)[:1], config)
        watcher.run_once(SEEN)
        watcher.deliver(SEEN)
        watcher.run_once(CLEARED)
        watcher.deliver(CLEARED)
        assert state.counts() == {"sent": 2}
        watcher.run_once(CLEARED + timedelta(hours=23))  # younger than keep: still there
        assert state.counts() == {"sent": 2}
        watcher.run_once(CLEARED + timedelta(days=1, minutes=1))
        assert state.counts() == {}
        assert state._con.execute("SELECT count(*) FROM watch_episodes").fetchone() == (0,)
        _loop(store, trace="e" * 32)
        later = CLEARED + timedelta(days=1, minutes=2)
        store.append_tool_calls(
            [
                call(
                    later + timedelta(seconds=i),
                    code="invalid_args",
                    field="job_id",
                    trace_id="c" * 32,
                )
                for i in range(4)
            ]
        )
        watcher.run_once(later + timedelta(minutes=1))
        (episode,) = state.open_episodes()
    assert episode.episode_id == 2


def test_a_pending_delivery_to_a_configured_sink_is_not_pruned(
    store: DuckDBStore, tmp_path: Path
) -> None:
    """A resolved episode past keep whose resolve is still owed to a configured webhook
    stays; once no configured webhook is owed it goes."""
    config = replace(FAST, keep_s=60.0)
    with receiver() as rx, WatchState(tmp_path / "w.duckdb") as state:
        sinks = [parse_sink(f"json={rx.url('/hook')}", index=0)]
        watcher = _watcher(store, state, sinks, config)
        watcher.run_once(SEEN)
        watcher.deliver(SEEN)
        watcher.run_once(CLEARED)  # the resolve is owed, not posted
        watcher.run_once(CLEARED + timedelta(hours=1))
        assert state.counts() == {"sent": 1, "pending": 1}
        assert state.prune(CLEARED + timedelta(hours=1), keep_pending_for=[]) == 1
        assert state.counts() == {}


@pytest.mark.parametrize(
    ("calls", "shown"),
    [
        pytest.param(5, 3, id="five-calls-three-links"),
        pytest.param(2, 2, id="two-calls-two-links"),
    ],
)
def test_slack_has_a_link_per_call_at_most_three(calls: int, shown: int) -> None:
    """A Slack body links each first failing call once, at most three, and escapes `&`."""
    finding: dict[str, object] = {
        "kind": "spike",
        "first_failing_calls": [
            {"correlation_id": f"c{i}", "trace_id": f"{i + 1:032x}", "span_id": f"{i + 1:016x}"}
            for i in range(calls)
        ],
        "tracebacks": [],
    }
    linked = relink(finding, "honeycomb:acme/prod")
    message = Message(Event.TRIGGER, 1, "k", SEEN, None, linked)
    text = str(Sink(SinkFormat.SLACK, "https://hooks.example.invalid/x").body(message))
    assert text.count("<https://ui.honeycomb.io/") == shown
    assert "&amp;span=" in text
