"""The sidecar's API (:4320): health, metrics, named queries, deploy marks.

    GET  /healthz            no token needed; 503 while the writer is unhealthy
    GET  /metrics            Prometheus text; OpenMetrics with exemplars if asked (`Metrics.render`)
    GET  /v1/queries         the named queries and their parameters
    GET  /v1/query/{name}    a named query: JSON or an Arrow IPC stream (`negotiate`)
    GET  /v1/check           the deploy gate: what `errscope check --json` answers
                             (docs/rollouts.md); POST too, for webhook callers (Flagger)
    POST /v1/deploys         mark a deploy: JSON {service, version, environment?, ts?}

Promises:
- only named queries run; no SQL text is accepted, and a parameter given twice is refused;
- a query's answer is what `Accept` prefers of JSON and Arrow (RFC 9110 §12.5.1), else 406;
- a deploy mark is JSON only (a web page cannot POST it to loopback without a CORS
  preflight, which is never granted), at most `_MAX_DEPLOY_BYTES`, its labels validated and
  refused whole when one looks like a secret (`refuse_secret_labels`); a mark the store
  cannot take answers 503 + `Retry-After`;
- /v1/check is read-only: it is judged in a worker process (errscope.collector.sidecar.
  checks), never in this one, which imports no scipy; it answers 200 whatever the verdict,
  or with `gate=http` 200 / 409 / 412 by verdict (`GATE_STATUS`); a worker that cannot
  answer in time gets 503 + `Retry-After`;
- errors carry errscope's one error shape (`ErrscopeError.as_dict`) or `{error, message}`.
"""

from __future__ import annotations

import ipaddress
import json
import logging
from collections import Counter
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from http import HTTPStatus
from typing import TYPE_CHECKING, Any, Final
from urllib.parse import parse_qsl, unquote, urlsplit

import orjson
import pyarrow as pa
import pyarrow.ipc

from errscope.collector.errors import (
    ErrscopeError,
    QueryError,
    QueryErrorKind,
    RecordError,
    RecordErrorKind,
)
from errscope.collector.receive.http_server import MEDIA_JSON, FramingError, HttpHandler, HttpServer
from errscope.collector.record import Deploy
from errscope.collector.scrub import Scrubber, default_scrubber
from errscope.collector.sidecar.admission import RETRY_AFTER_S
from errscope.collector.sidecar.checks import GATE_STATUS, CheckUnavailable, parse_check_params
from errscope.collector.sidecar.config import join_address
from errscope.collector.sidecar.metrics import OPENMETRICS, PROMETHEUS_TEXT
from errscope.collector.units import parse_time
from errscope.queries.runner import json_value, run_query
from errscope.queries.source import ARROW_STREAM

if TYPE_CHECKING:
    from errscope.collector.sidecar.app import Sidecar  # which builds this module's handler

__all__ = ["ApiHandler", "negotiate", "refuse_secret_labels"]

log = logging.getLogger("errscope.serve")  # the sidecar's one logger name, in every module

_MAX_DEPLOY_BYTES: Final = 64 * 1024
# What /metrics offers, the plain text first: a scraper that names neither gets text.
_METRICS_MEDIA: Final = ("text/plain", "application/openmetrics-text")


class ApiHandler(HttpHandler):
    """The API's paths; others get 404, other methods on them 405 with `Allow`."""

    server: HttpServer[Sidecar]
    allowed: Mapping[str, tuple[str, ...]] = {
        "/healthz": ("GET", "HEAD"),
        "/metrics": ("GET", "HEAD"),
        "/v1/queries": ("GET", "HEAD"),
        "/v1/query/": ("GET", "HEAD"),
        "/v1/check": ("GET", "HEAD", "POST"),
        "/v1/deploys": ("POST",),
    }

    def do_HEAD(self) -> None:  # noqa: N802 - http.server dispatches on this name
        """As GET, without the body (`_send` leaves it out)."""
        self.do_GET()

    def do_GET(self) -> None:  # noqa: N802 - http.server dispatches on this name
        """/healthz, /metrics, /v1/queries, /v1/query/{name}."""
        sidecar = self.server.app
        parts = urlsplit(self.path)
        # Not read, a body would be taken for the next request on this connection: a proxy
        # reusing it would hand one client's answer to another.
        self._drain()
        if parts.path == "/healthz":
            health = sidecar.health()
            status = HTTPStatus.OK if health["status"] == "ok" else HTTPStatus.SERVICE_UNAVAILABLE
            self._send(status, orjson.dumps(health), MEDIA_JSON)
            return
        if not self._authorised():
            return
        if parts.path == "/metrics":
            # OpenMetrics (with exemplars) only when asked for; plain text otherwise.
            media = negotiate(self.headers.get_all("Accept") or [], _METRICS_MEDIA)
            openmetrics = media is not None and media.startswith("application/openmetrics-text")
            with sidecar.metrics.lock:
                text = sidecar.metrics.render(sidecar.gauges(), openmetrics=openmetrics)
            self._send(
                HTTPStatus.OK,
                text.encode(),
                OPENMETRICS if openmetrics else PROMETHEUS_TEXT,
                {"Vary": "Accept"},
            )
            return
        if parts.path == "/v1/queries":
            from errscope.queries.runner import default_queries  # noqa: PLC0415

            listing = [
                {
                    "name": q.name,
                    "returns": q.returns,
                    "params": [
                        {
                            "name": p.name,
                            "type": str(p.type),
                            "required": p.required,
                            "default": p.shown_default,
                        }
                        for p in q.params
                    ],
                }
                for q in default_queries().values()
            ]
            self._send(HTTPStatus.OK, orjson.dumps(listing), MEDIA_JSON)
            return
        if parts.path.startswith("/v1/query/"):
            self._query(unquote(parts.path.removeprefix("/v1/query/")), parts.query)
            return
        if parts.path == "/v1/check":
            self._check(parts.query)
            return
        self._not_allowed()

    def _check(self, query_string: str) -> None:
        """The deploy gate, judged by the worker; the body is `errscope check --json`'s."""
        try:
            params = parse_check_params(query_string)
        except QueryError as exc:
            self._send(HTTPStatus.BAD_REQUEST, orjson.dumps(exc.as_dict()), MEDIA_JSON)
            return
        host, port = self.server.server_address[:2]
        api_url = f"http://{join_address(_reachable(str(host)), int(port))}"
        try:
            reply = self.server.app.checks.judge(api_url, params.request)
        except CheckUnavailable as exc:
            log.warning("check not answered", extra={"code": str(exc)})
            self._error(
                HTTPStatus.SERVICE_UNAVAILABLE,
                "unavailable",
                "the check worker did not answer; retry",
            )
            return
        answer = reply.get("answer")
        if not isinstance(answer, dict):
            status = HTTPStatus(int(reply.get("status", 500)))
            self._send_error(status, orjson.dumps(reply.get("error") or {}), MEDIA_JSON)
            return
        status = HTTPStatus.OK
        if params.http_gate:
            status = HTTPStatus(GATE_STATUS[str(answer["verdict"])])
        self._send(status, orjson.dumps(answer), MEDIA_JSON)

    def _query(self, name: str, query_string: str) -> None:
        pairs = parse_qsl(query_string, keep_blank_values=True)
        params = dict(pairs)
        if len(params) < len(pairs):
            # `since=1h&since=2h`: which one was meant is unknown, and a proxy may keep the
            # other; refused, as an unknown parameter is.
            twice = sorted(k for k, n in Counter(k for k, _ in pairs).items() if n > 1)
            self._error(
                HTTPStatus.BAD_REQUEST,
                "bad_param_value",
                f"given more than once: {', '.join(twice)}",
            )
            return
        try:
            table = run_query(self.server.app.store.cursor(), name, params)
        except QueryError as exc:
            status = (
                HTTPStatus.NOT_FOUND
                if exc.kind is QueryErrorKind.UNKNOWN_QUERY
                else HTTPStatus.BAD_REQUEST
            )
            self._send(status, orjson.dumps(exc.as_dict()), MEDIA_JSON)
            return
        except ErrscopeError as exc:
            self._send(HTTPStatus.SERVICE_UNAVAILABLE, orjson.dumps(exc.as_dict()), MEDIA_JSON)
            return
        vary = {"Vary": "Accept"}
        answer = negotiate(self.headers.get_all("Accept") or [], (MEDIA_JSON, ARROW_STREAM))
        if answer is None:
            self._error(
                HTTPStatus.NOT_ACCEPTABLE,
                "not_acceptable",
                f"this answers {MEDIA_JSON} or {ARROW_STREAM}",
                headers=vary,
            )
            return
        if answer == ARROW_STREAM:
            sink = pa.BufferOutputStream()
            with pyarrow.ipc.new_stream(sink, table.schema) as writer:
                writer.write_table(table)
            self._send(HTTPStatus.OK, sink.getvalue().to_pybytes(), ARROW_STREAM, vary)
            return
        body = orjson.dumps(table.to_pylist(), default=json_value, option=orjson.OPT_NAIVE_UTC)
        self._send(HTTPStatus.OK, body, MEDIA_JSON, vary)

    def do_POST(self) -> None:  # noqa: N802 - http.server dispatches on this name
        """POST /v1/deploys: mark a deploy (service, version, environment, optional ts);
        POST /v1/check: as GET, the body ignored (a Flagger webhook POSTs its payload)."""
        parts = urlsplit(self.path)
        if parts.path == "/v1/check":
            self._drain()
            if self._authorised():
                self._check(parts.query)
            return
        if parts.path != "/v1/deploys":
            self._not_allowed()
            return
        if not self._authorised():
            return
        content_type = self._media_type()
        if content_type != MEDIA_JSON:
            # Only JSON: a web page can POST text/plain to loopback without asking, and
            # application/json makes the browser ask first (CORS), which is never granted.
            self._drain()
            self._error(
                HTTPStatus.UNSUPPORTED_MEDIA_TYPE,
                "unsupported_media_type",
                "send application/json",
            )
            return
        try:
            framing = self._framing()
        except FramingError as exc:
            self._refuse_framing(exc)
            return
        if framing is not None and framing > _MAX_DEPLOY_BYTES:
            self._error(HTTPStatus.REQUEST_ENTITY_TOO_LARGE, "too_large", "deploy marks are small")
            return
        raw = b"" if framing is None else self._read_or_refuse(framing, _MAX_DEPLOY_BYTES)
        if raw is None:
            return
        try:
            deploy = _deploy_from(
                json.loads(raw or b"{}"),
                source="api",
                scrubber=self.server.app.pipeline.scrubber,
            )
        except (ValueError, TypeError) as exc:
            self._error(
                HTTPStatus.BAD_REQUEST,
                "bad_request",
                str(exc) if isinstance(exc, _DeployError) else "body must be JSON",
            )
            return
        except ErrscopeError as exc:  # a label refused by validation: the client's to fix
            self._send(HTTPStatus.BAD_REQUEST, orjson.dumps(exc.as_dict()), MEDIA_JSON)
            return
        try:
            self.server.app.store.add_deploys([deploy])
        except ErrscopeError as exc:  # the store failed (a full disk): ours, and retryable
            log.warning(
                "deploy mark not stored",
                extra={"code": str(exc.kind), "error_class": type(exc).__name__},
            )
            self._send(
                HTTPStatus.SERVICE_UNAVAILABLE,
                orjson.dumps(exc.as_dict()),
                MEDIA_JSON,
                {"Retry-After": str(RETRY_AFTER_S)},
            )
            return
        self._send(
            HTTPStatus.CREATED,
            orjson.dumps(
                {
                    "service": deploy.service,
                    "version": deploy.version,
                    "environment": deploy.environment,
                    "ts": deploy.ts.isoformat(),
                }
            ),
            MEDIA_JSON,
        )


def _reachable(host: str) -> str:
    """The address a local process reaches a listener on: loopback for a wildcard bind."""
    try:
        ip = ipaddress.ip_address(host or "0.0.0.0")  # noqa: S104 - read, not bound
    except ValueError:
        return host  # a host name: it resolves here as it did for the bind
    if ip.is_unspecified:
        return "::1" if ip.version == 6 else "127.0.0.1"
    return host


def negotiate(accept: Sequence[str], offered: Sequence[str]) -> str | None:
    """The media type of `offered` that `Accept` prefers (RFC 9110 §12.5.1); None if none.

    q-values, `type/*` and `*/*` count, a more specific range wins over a wider one, and
    on a tie the first offered wins; no header means anything, so the first.
    """
    ranges: list[tuple[str, str, float]] = []
    for header in accept:
        for item in header.split(","):
            media, *params = (part.strip() for part in item.split(";"))
            if not media:
                continue
            kind, _, sub = media.lower().partition("/")
            q = 1.0
            for param in params:
                key, _, value = param.partition("=")
                if key.strip().lower() == "q":
                    try:
                        q = min(max(float(value), 0.0), 1.0)
                    except ValueError:
                        q = 0.0
            ranges.append((kind, sub or "*", q))
    if not ranges:
        return offered[0] if offered else None
    scored: list[tuple[float, int, str]] = []
    for position, media in enumerate(offered):
        kind, _, sub = media.lower().partition("/")
        matches = [
            (specificity, q)
            for r_kind, r_sub, q in ranges
            if (specificity := _specificity(kind, sub, r_kind, r_sub)) >= 0
        ]
        if matches:
            q = max(matches)[1]  # the most specific range that matches decides
            if q > 0:
                scored.append((q, -position, media))
    return max(scored)[2] if scored else None


def _specificity(kind: str, sub: str, r_kind: str, r_sub: str) -> int:
    """2 for an exact range, 1 for `type/*`, 0 for `*/*`, -1 when it does not match."""
    if r_kind == "*" and r_sub == "*":
        return 0
    if r_kind != kind:
        return -1
    if r_sub == "*":
        return 1
    return 2 if r_sub == sub else -1


class _DeployError(ValueError):
    """A deploy mark is missing a field or has a bad one (the message names the field)."""


# A deploy marked "now" by a machine whose clock runs a little ahead is still accepted.
_DEPLOY_CLOCK_SKEW: Final = timedelta(minutes=5)


def _required_text(data: dict[str, Any], name: str) -> str:
    value = data.get(name)
    if value is None or value == "":
        raise _DeployError(f"{name} is required")
    if not isinstance(value, str):
        raise _DeployError(f"{name} must be text")
    return value


def refuse_secret_labels(deploy: Deploy, scrubber: Scrubber) -> None:
    """Raise `RecordError` naming the first label of a deploy mark a scrub rule matches.

    The span path keeps no such label (`Pipeline._label`); a mark is refused whole instead,
    since a deploy without its service or version means nothing.  The error never holds
    the value.
    """
    for name in ("service", "version", "environment"):
        value = getattr(deploy, name)
        if value is not None and scrubber.contains_secret(value):
            raise RecordError(
                RecordErrorKind.BAD_VALUE,
                "looks like a secret; not stored",
                entry="deploys",
                field=name,
                hint="pass a plain label, without credentials, tokens or keys",
            )


def _deploy_from(data: Any, *, source: str, scrubber: Scrubber | None = None) -> Deploy:
    if not isinstance(data, dict):
        raise _DeployError("body must be a JSON object")
    service, version = _required_text(data, "service"), _required_text(data, "version")
    environment = data.get("environment")
    if environment is not None and not isinstance(environment, str):
        raise _DeployError("environment must be text")
    ts_raw = data.get("ts")
    if ts_raw is not None and not isinstance(ts_raw, str):
        raise _DeployError("ts must be text: ISO 8601 or a duration ago")
    now = datetime.now(UTC)
    try:
        ts = parse_time(ts_raw, now=now) if ts_raw else now
    except ValueError as exc:
        raise _DeployError(f"ts: {exc}") from None
    if ts > now + _DEPLOY_CLOCK_SKEW:
        raise _DeployError("ts is in the future")
    marked_by = data.get("source", source)
    if marked_by not in ("api", "cli"):
        raise _DeployError("source must be api or cli")
    deploy = Deploy(
        service=service, version=version, environment=environment or None, ts=ts, source=marked_by
    )
    deploy.validate()
    refuse_secret_labels(deploy, scrubber or default_scrubber())
    return deploy
