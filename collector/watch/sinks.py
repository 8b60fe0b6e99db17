"""Where a finding episode is posted: a webhook of one of three formats, and how.

    json        errscope's own object: {"schema": "errscope.watch/1", "event", "episode", "finding"}
    slack       Slack's incoming-webhook body: {"text": ..., "blocks": [...]}
    pagerduty   PagerDuty Events API v2: `trigger` / `resolve` with a `dedup_key` per episode

A `Sink` knows its URL and format and posts one message (`post`), returning a closed
`Delivery` instead of raising: sent, retry (HTTP 429, 5xx, no answer; with the server's
`Retry-After` when it gave one) or refused (any other 4xx, which a retry would not fix).

The URL is a credential (Slack's hooks.slack.com/services/T/B/X path, a token in the query,
userinfo), so it appears in no log line, error message, metric label or state row:
`Sink.shown` is its scheme and host only, `Sink.name` its format and host, and `Sink.ident`
(what the state file keys deliveries by) a truncated SHA-256 of it.  `Delivery.reason` is a
status code or an exception's class name, never the exception's text (which can quote the
URL).

Trace links (`--trace-url`): a message carries the links of its finding's first failing
calls and traceback samples (`Message.links`, at most `MAX_LINKS` of each, one per
distinct URL): the json body's `links` and the finding's own `trace_url` fields, a Slack
section with one mrkdwn link per call, PagerDuty's Events v2 `links` array.  `relink` draws
them from the ids with the template the watch runs with now, so a template changed across a
restart applies to what is still owed; with no template there is no link anywhere.
"""

from __future__ import annotations

import base64
import hashlib
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from typing import Final

import orjson

from errscope.collector.errors import ConfigError, ConfigErrorKind
from errscope.queries.links import trace_url

__all__ = [
    "MAX_LINKS",
    "WATCH_SCHEMA",
    "Delivery",
    "DeliveryOutcome",
    "Event",
    "Message",
    "Sink",
    "SinkFormat",
    "check_webhook",
    "parse_sink",
    "relink",
]

WATCH_SCHEMA: Final = "errscope.watch/1"
_DEFAULT_TIMEOUT_S: Final = 10.0
_MAX_RETRY_AFTER_S: Final = 3600.0  # a server asking for longer is asked again in an hour
_IDENT_HEX: Final = 16
#: Links of each kind (first failing calls, traceback samples) a message carries at most.
MAX_LINKS: Final = 3
_SLACK_SECTION_MAX: Final = 3000  # Slack refuses a section text longer than this


class SinkFormat(StrEnum):
    """The body a webhook takes."""

    JSON = "json"
    SLACK = "slack"
    PAGERDUTY = "pagerduty"


class Event(StrEnum):
    """What a message says about its episode: it opened, or it cleared."""

    TRIGGER = "trigger"
    RESOLVE = "resolve"


class DeliveryOutcome(StrEnum):
    """How one post ended."""

    SENT = "sent"
    RETRY = "retry"  # 429, 5xx, no answer: worth another try after a backoff
    REFUSED = "refused"  # another 4xx: the same body would be refused again


@dataclass(frozen=True, slots=True)
class Delivery:
    """One post's outcome; `reason` is `HTTP 503` or an exception class, never its text."""

    outcome: DeliveryOutcome
    reason: str = ""
    retry_after_s: float | None = None


@dataclass(frozen=True, slots=True)
class Message:
    """What a sink renders: the event, the episode's identity and times, the finding's JSON."""

    event: Event
    episode_id: int
    key: str
    opened_at: datetime
    resolved_at: datetime | None
    finding: dict[str, object]

    @property
    def dedup_key(self) -> str:
        """Stable for the episode across restarts: PagerDuty folds trigger and resolve on it."""
        digest = hashlib.sha256(self.key.encode()).hexdigest()[:_IDENT_HEX]
        return f"errscope-{digest}-{self.episode_id}"

    @property
    def title(self) -> str:
        """One line: what opened or cleared, where."""
        f = self.finding
        where = "/".join(str(v) for v in (f.get("service"), f.get("tool")) if v)
        version = f" {f['version']}" if f.get("version") else ""
        field = f" field {f['field']}" if f.get("field") else ""
        state = "resolved" if self.event is Event.RESOLVE else "open"
        return f"[errscope {state}] {f.get('kind')}: {where}{version} {f.get('code')}{field}"

    @property
    def links(self) -> list[dict[str, str]]:
        """`[{href, text}]`: the first failing calls', then the traceback samples' trace
        links (at most MAX_LINKS of each, a URL once); empty without a template."""
        out: list[dict[str, str]] = []
        seen: set[str] = set()
        for key, label in (("first_failing_calls", "call"), ("tracebacks", "traceback")):
            taken = 0
            for item in _items(self.finding.get(key)):
                href = item.get("trace_url")
                if not isinstance(href, str) or not href or href in seen or taken >= MAX_LINKS:
                    continue
                seen.add(href)
                taken += 1
                what = item.get("correlation_id") if key == "first_failing_calls" else None
                what = what or item.get("exception_type") or item.get("trace_id")
                out.append({"href": href, "text": f"{label} {what}" if what else label})
        return out


def _items(value: object) -> list[Mapping[str, object]]:
    return [v for v in value if isinstance(v, Mapping)] if isinstance(value, list) else []


def _text(value: object) -> str | None:
    return value if isinstance(value, str) else None


def relink(finding: Mapping[str, object], template: str | None) -> dict[str, object]:
    """The finding with each first failing call's and traceback sample's `trace_url` drawn
    again from its ids with `template` (None everywhere without one)."""
    out = dict(finding)
    for key in ("first_failing_calls", "tracebacks"):
        if isinstance(finding.get(key), list):
            out[key] = [
                {
                    **item,
                    "trace_url": trace_url(
                        template, _text(item.get("trace_id")), _text(item.get("span_id"))
                    ),
                }
                for item in _items(finding.get(key))
            ]
    return out


def _time(value: datetime | None) -> str | None:
    return None if value is None else value.astimezone(UTC).isoformat().replace("+00:00", "Z")


def _severity(kind: object) -> str:
    return "critical" if kind == "deploy_regression" else "error" if kind == "spike" else "warning"


def _check_url(fmt: SinkFormat, url: str) -> urllib.parse.SplitResult:
    """The URL's parts, once it is an http(s) URL with a host (and a port, if any, a number)."""
    try:
        parts = urllib.parse.urlsplit(url)
        _ = parts.port  # raises ValueError for a port that is not a number
    except ValueError:
        parts = None  # its text quotes the URL: not kept
    if parts is None or parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigError(
            ConfigErrorKind.BAD_VALUE,
            "a webhook must be an http(s) URL",
            field="--webhook",
            hint=f"for example {fmt}=https://host/path (the URL is not repeated here)",
        )
    return parts


def check_webhook(text: str) -> tuple[SinkFormat, str]:
    """`FORMAT=URL` checked for its format and URL shape (what `errscope watch` refuses at
    start, the PagerDuty routing key aside): ConfigError BAD_VALUE, field `--webhook`, never
    holding the URL."""
    fmt, sep, url = text.partition("=")
    if not sep or fmt.strip().lower() not in SinkFormat.__members__.values():
        raise ConfigError(
            ConfigErrorKind.BAD_VALUE,
            "must be FORMAT=URL with FORMAT one of " + ", ".join(SinkFormat),
            field="--webhook",
            hint="for example slack=https://hooks.slack.com/services/... (the value is not shown)",
        )
    kind = SinkFormat(fmt.strip().lower())
    _check_url(kind, url.strip())
    return kind, url.strip()


class Sink:
    """One webhook: its format, its URL (a credential) and how to post a message to it."""

    def __init__(
        self,
        fmt: SinkFormat,
        url: str,
        *,
        index: int = 0,
        routing_key: str | None = None,
        timeout_s: float = _DEFAULT_TIMEOUT_S,
    ) -> None:
        parts = _check_url(fmt, url)
        if fmt is SinkFormat.PAGERDUTY and not routing_key:
            raise ConfigError(
                ConfigErrorKind.BAD_VALUE,
                "a pagerduty webhook needs an integration (routing) key",
                field="--pagerduty-routing-key",
                hint="or ERRSCOPE_PAGERDUTY_ROUTING_KEY",
            )
        self.format = fmt
        original = url
        self._headers = {"Content-Type": "application/json", "User-Agent": "errscope-watch"}
        if parts.username is not None:
            # urllib would take `user:pw@` for part of the host: send it as Basic auth.
            userinfo = f"{urllib.parse.unquote(parts.username)}:"
            userinfo += urllib.parse.unquote(parts.password or "")
            self._headers["Authorization"] = "Basic " + base64.b64encode(userinfo.encode()).decode(
                "ascii"
            )
            netloc = parts.netloc.rpartition("@")[2]
            url = urllib.parse.urlunsplit(parts._replace(netloc=netloc))
        self._url = url
        self._routing_key = routing_key
        self.timeout_s = timeout_s
        port = f":{parts.port}" if parts.port else ""
        self.shown = f"{parts.scheme}://{parts.hostname}{port}"
        self.name = f"{fmt}#{index}"
        self.ident = f"{fmt}:" + hashlib.sha256(original.encode()).hexdigest()[:_IDENT_HEX]

    def __repr__(self) -> str:
        return f"Sink({self.name}, {self.shown})"

    def body(self, message: Message) -> dict[str, object]:
        """The JSON body this sink posts for `message`."""
        match self.format:
            case SinkFormat.JSON:
                return {
                    "schema": WATCH_SCHEMA,
                    "event": str(message.event),
                    "title": message.title,
                    "episode": {
                        "id": message.episode_id,
                        "dedup_key": message.dedup_key,
                        "opened_at": _time(message.opened_at),
                        "resolved_at": _time(message.resolved_at),
                    },
                    "finding": message.finding,
                    "links": message.links,
                }
            case SinkFormat.SLACK:
                return _slack(message)
            case SinkFormat.PAGERDUTY:
                return _pagerduty(message, str(self._routing_key))

    def post(self, message: Message) -> Delivery:
        """POST the message once; never raises (see the module docstring)."""
        data = orjson.dumps(self.body(message))
        request = urllib.request.Request(  # noqa: S310 - http(s) checked in __init__
            self._url,
            data=data,
            method="POST",
            headers=self._headers,
        )
        try:
            with urllib.request.urlopen(request, timeout=self.timeout_s) as response:  # noqa: S310
                response.read()
                return Delivery(DeliveryOutcome.SENT, f"HTTP {response.status}")
        except urllib.error.HTTPError as exc:
            with exc:
                retry_after = _retry_after(exc.headers.get("Retry-After"))
                if exc.code == 429 or exc.code >= 500:
                    return Delivery(DeliveryOutcome.RETRY, f"HTTP {exc.code}", retry_after)
                return Delivery(DeliveryOutcome.REFUSED, f"HTTP {exc.code}")
        except Exception as exc:  # noqa: BLE001 - any failure to post is a retry, named by class only
            return Delivery(DeliveryOutcome.RETRY, type(exc).__name__)


def _retry_after(value: str | None) -> float | None:
    """Retry-After in seconds (the delta form; a date form is left to the backoff)."""
    if value is None:
        return None
    try:
        seconds = float(value.strip())
    except ValueError:
        return None
    return min(max(seconds, 0.0), _MAX_RETRY_AFTER_S)


def _details(finding: dict[str, object]) -> str:
    keys = ("service", "version", "environment", "tool", "code", "field")
    return ", ".join(f"{k} `{finding[k]}`" for k in keys if finding.get(k))


def _slack(message: Message) -> dict[str, object]:
    f = message.finding
    raw_ids = f.get("correlation_ids")
    ids = ", ".join(str(i) for i in raw_ids) if isinstance(raw_ids, list) else ""
    lines = [f"*{message.title}*", str(f.get("summary") or ""), _details(f)]
    if message.event is Event.RESOLVE:
        lines.append(f"cleared at {_time(message.resolved_at)}")
    context = f"opened {_time(message.opened_at)} · episode {message.dedup_key}"
    if ids:
        context += f" · correlation ids: {ids}"
    blocks: list[dict[str, object]] = [
        {"type": "section", "text": {"type": "mrkdwn", "text": "\n".join(x for x in lines if x)}}
    ]
    linked = _slack_links(message.links)
    if linked:
        blocks.append({"type": "section", "text": {"type": "mrkdwn", "text": linked}})
    blocks.append({"type": "context", "elements": [{"type": "mrkdwn", "text": context}]})
    return {"text": message.title, "blocks": blocks}


def _slack_escape(text: str) -> str:
    """Slack's mrkdwn control characters as its entities (in a link's URL too)."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _slack_links(links: list[dict[str, str]]) -> str:
    """One `<url|text>` line per link, as many as fit Slack's section limit."""
    lines: list[str] = []
    size = 0
    for link in links:
        href = _slack_escape(link["href"]).replace("|", "%7C")
        line = f"<{href}|{_slack_escape(link['text']).replace('|', '/')}>"
        if size + len(line) + 1 > _SLACK_SECTION_MAX:
            break
        lines.append(line)
        size += len(line) + 1
    return "\n".join(lines)


def _pagerduty(message: Message, routing_key: str) -> dict[str, object]:
    body: dict[str, object] = {
        "routing_key": routing_key,
        "event_action": str(message.event),
        "dedup_key": message.dedup_key,
    }
    if message.event is Event.TRIGGER:
        f = message.finding
        body["client"] = "errscope"
        body["payload"] = {
            "summary": message.title[:1024],  # Events v2 caps the summary at 1024 characters
            "source": str(f.get("service") or "errscope"),
            "severity": _severity(f.get("kind")),
            "timestamp": _time(message.opened_at),
            "component": f.get("tool"),
            "group": f.get("service"),
            "class": f.get("kind"),
            "custom_details": f,
        }
        links = message.links
        if links:
            body["links"] = links
    return body


def parse_sink(
    text: str, *, index: int, routing_key: str | None = None, timeout_s: float = _DEFAULT_TIMEOUT_S
) -> Sink:
    """`FORMAT=URL` (json=, slack=, pagerduty=) as a `Sink`; an error never holds the URL."""
    fmt, url = check_webhook(text)
    return Sink(fmt, url, index=index, routing_key=routing_key, timeout_s=timeout_s)
