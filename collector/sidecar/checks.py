"""`GET /v1/check` in the sidecar: its parameters, and the worker process that judges.

The gate needs detection, and detection needs numpy and scipy, which the sidecar never
imports (docs/benchmarks-ingest.md: ~70 MB resident).  So the judgement runs in one worker
process, `python -m errscope.queries.gate`, started on the first /v1/check and kept for
the sidecar's life: a rollout controller asks every minute, and a process per request
would pay the start-up (10.9 s on a loaded machine, docs/rollouts.md) every time.  The worker reads
the store through this sidecar's own query API, exactly as `errscope check --api` does,
because DuckDB lets no other process open the file the sidecar holds.

`parse_check_params` turns a query string into the worker's request or a `QueryError`
(the API's one error shape: stable kind, entry `check`, field, hint).  `CheckRunner`
serialises requests to the worker (one at a time, `timeout_s` each); a worker found dead
is replaced at once, one that does not answer in time is killed and replaced on the next
request, and the caller gets a `CheckUnavailable` it answers with 503 + Retry-After.
Thread-safe; `close` once.
"""

from __future__ import annotations

import contextlib
import logging
import os
import selectors
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Final
from urllib.parse import parse_qsl

import orjson

from errscope.collector.errors import QueryError, QueryErrorKind
from errscope.collector.units import parse_time

__all__ = [
    "CHECK_PARAMS",
    "GATE_STATUS",
    "CheckParams",
    "CheckRunner",
    "CheckUnavailable",
    "parse_check_params",
]

log = logging.getLogger("errscope.serve")  # the sidecar's one logger name, in every module

_ENTRY: Final = "check"
#: The parameters /v1/check takes (docs/rollouts.md).
CHECK_PARAMS: Final = ("service", "version", "environment", "as_of", "known_by", "codes", "gate")
#: With `gate=http`, the status for each verdict: a webhook caller (Flagger) gates on it.
GATE_STATUS: Final = {"healthy": 200, "regression": 409, "insufficient_data": 412}
# A time this far ahead of the sidecar's clock still counts as now (another machine's clock).
_CLOCK_SKEW: Final = timedelta(minutes=1)
_DEFAULT_TIMEOUT_S: Final = 60.0
_WORKER: Final = (sys.executable, "-m", "errscope.queries.gate")
_MAX_ANSWER_BYTES: Final = 16 * 1024 * 1024


class CheckUnavailable(Exception):  # noqa: N818 - it names the answer (503), not a failure kind
    """The worker is busy past the deadline, did not answer in time, or died."""


def _shown(name: str) -> str:
    """A parameter name as an error may repeat it: identifier-shaped, or `?`."""
    return name if name.isidentifier() and len(name) <= 32 else "?"


def _bad(field: str, message: str, hint: str | None = None) -> QueryError:
    return QueryError(QueryErrorKind.BAD_PARAM_VALUE, message, entry=_ENTRY, field=field, hint=hint)


def _time(params: Mapping[str, str], name: str, now: datetime) -> datetime | None:
    text = params.get(name)
    if text is None:
        return None
    try:
        when = parse_time(text, now=now).astimezone(UTC)
    except ValueError as exc:
        raise _bad(
            name, str(exc), "ISO 8601 (2026-11-30T10:15:00Z), now, or a duration ago such as 2h"
        ) from None
    return when


@dataclass(frozen=True, slots=True)
class CheckParams:
    """A /v1/check request, checked: what the worker judges and how to answer it."""

    request: Mapping[str, object]
    http_gate: bool


def parse_check_params(query_string: str, *, now: datetime | None = None) -> CheckParams:
    """The /v1/check query string as the worker's request; QueryError when it is wrong.

    Refused: a parameter given twice or not known, a missing service or version, a time
    that does not parse or lies in the future, `known_by` before `as_of`, an empty codes
    list, a `gate` other than `http`.  The messages name the parameter, never its value.
    """
    now = now or datetime.now(UTC)
    pairs = parse_qsl(query_string, keep_blank_values=True)
    twice = sorted(k for k, n in Counter(k for k, _ in pairs).items() if n > 1)
    if twice:
        raise _bad(_shown(twice[0]), "given more than once", "give each parameter once")
    params = dict(pairs)
    for name in params:
        if name not in CHECK_PARAMS:
            raise QueryError(
                QueryErrorKind.UNKNOWN_PARAM,
                "is not a parameter of /v1/check",
                entry=_ENTRY,
                field=_shown(name),
                hint=f"parameters: {', '.join(CHECK_PARAMS)}",
            )
    for name in ("service", "version"):
        if not params.get(name):
            raise QueryError(
                QueryErrorKind.MISSING_PARAM,
                "is required",
                entry=_ENTRY,
                field=name,
                hint="/v1/check?service=NAME&version=VERSION[&environment=ENV]",
            )
    as_of = _time(params, "as_of", now) or now
    if as_of > now + _CLOCK_SKEW:
        raise _bad("as_of", "in the future", "a gate judged as of a time to come passes on no data")
    known_by = _time(params, "known_by", now)
    if known_by is not None and known_by < as_of - _CLOCK_SKEW:
        raise _bad(
            "known_by",
            "earlier than as_of (or now)",
            "rows received after it would be left out of a judgement of a later time",
        )
    codes: list[str] | None = None
    if "codes" in params:
        codes = [c.strip() for c in params["codes"].split(",") if c.strip()]
        if not codes:
            raise _bad("codes", "no codes given", "a comma-separated list of error codes")
    gate = params.get("gate")
    if gate not in (None, "http"):
        raise _bad(
            "gate",
            "must be http",
            "gate=http answers 409 on a regression and 412 on insufficient data",
        )
    request: dict[str, object] = {
        "service": params["service"],
        "version": params["version"],
        "environment": params.get("environment") or None,
        "as_of": as_of.isoformat(),
        "known_by": None if known_by is None else known_by.isoformat(),
        "codes": codes,
    }
    return CheckParams(request=request, http_gate=gate == "http")


class CheckRunner:
    """The one worker process that judges /v1/check requests, started on first use.

    `token`, `trace_url` and `catalog_files` are the sidecar's: the worker reads its API
    with the token (sent on the worker's stdin, never on its command line or environment)
    and answers with the sidecar's trace links and catalog.
    """

    def __init__(
        self,
        *,
        token: str | None,
        trace_url: str | None,
        catalog_files: Sequence[str] = (),
        timeout_s: float = _DEFAULT_TIMEOUT_S,
    ) -> None:
        self._setup = {"token": token, "trace_url": trace_url, "catalogs": list(catalog_files)}
        self.timeout_s = timeout_s
        self._lock = threading.Lock()
        self._process: subprocess.Popen[bytes] | None = None
        self._closed = False

    @property
    def pid(self) -> int | None:
        """The running worker's process id, if one runs."""
        process = self._process
        return process.pid if process is not None and process.poll() is None else None

    def judge(self, api_url: str, request: Mapping[str, object]) -> dict[str, Any]:
        """The worker's answer line for one request: {"answer": ...} or {"error", "status"}.

        Raises CheckUnavailable when the worker is busy past `timeout_s`, fails to answer
        within it (it is killed, and replaced on the next request), or dies twice.
        """
        deadline = time.monotonic() + self.timeout_s
        if not self._lock.acquire(timeout=self.timeout_s):
            raise CheckUnavailable("busy")
        try:
            # A worker found dead (killed, out of memory) is replaced once, in the deadline.
            for _ in range(2):
                if self._closed:
                    raise CheckUnavailable("stopping")
                line = self._exchange(self._running(api_url), request, deadline)
                if line:
                    answer: dict[str, Any] = orjson.loads(line)
                    return answer
                self._kill()
                if line is None:
                    raise CheckUnavailable("no answer in time")
            raise CheckUnavailable("worker gone")
        finally:
            self._lock.release()

    def _exchange(
        self, process: subprocess.Popen[bytes], request: Mapping[str, object], deadline: float
    ) -> bytes | None:
        """Send one request, read its answer line: b"" when the worker is gone, None when
        it did not answer before `deadline`."""
        assert process.stdin is not None  # noqa: S101 - Popen was given PIPE
        try:
            process.stdin.write(orjson.dumps(request) + b"\n")
            process.stdin.flush()
        except OSError:
            return b""
        return self._read_line(process, deadline)

    def _running(self, api_url: str) -> subprocess.Popen[bytes]:
        if self._process is not None and self._process.poll() is None:
            return self._process
        self._kill()  # a dead one's pipes
        try:
            process = subprocess.Popen(  # noqa: S603 - our own interpreter and module
                _WORKER,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                env=os.environ.copy(),
                # Its own session: a Ctrl-C meant for the sidecar must not kill it mid-answer;
                # it ends when the sidecar closes its stdin, or dies (end of file).
                start_new_session=True,
            )
        except OSError as exc:  # no process left for us, no memory
            raise CheckUnavailable(f"cannot start the worker ({type(exc).__name__})") from None
        self._process = process
        assert process.stdin is not None  # noqa: S101 - Popen was given PIPE
        # Dead at once, it fails here quietly: the request's read sees the end of its output.
        with contextlib.suppress(OSError):
            process.stdin.write(orjson.dumps({"api": api_url, **self._setup}) + b"\n")
            process.stdin.flush()
        log.info("check worker started", extra={"pid": process.pid})
        return process

    @staticmethod
    def _read_line(process: subprocess.Popen[bytes], deadline: float) -> bytes | None:
        """One answer line before `deadline`; b"" when the worker exited, None on timeout
        (or an answer past `_MAX_ANSWER_BYTES`)."""
        assert process.stdout is not None  # noqa: S101 - Popen was given PIPE
        fd = process.stdout.fileno()
        chunks: list[bytes] = []
        size = 0
        with selectors.DefaultSelector() as selector:
            selector.register(fd, selectors.EVENT_READ)
            while True:
                remaining = deadline - time.monotonic()
                if remaining <= 0 or not selector.select(remaining):
                    return None
                chunk = os.read(fd, 65536)
                if not chunk:
                    return b""  # the worker exited
                chunks.append(chunk)
                size += len(chunk)
                if chunk.endswith(b"\n"):
                    return b"".join(chunks)
                if size > _MAX_ANSWER_BYTES:
                    return None

    def _kill(self) -> None:
        process, self._process = self._process, None
        if process is None:
            return
        process.kill()
        process.wait(10)
        for stream in (process.stdin, process.stdout):
            if stream is not None:
                with contextlib.suppress(OSError):  # a write it never read: a broken pipe
                    stream.close()

    def close(self) -> None:
        """Stop the worker: its stdin closes and it exits; killed after a short grace.

        Called as the API stops listening: a judgement in flight would wait on queries
        the API no longer takes, so its worker is killed at once and the request gets
        CheckUnavailable (503) instead of holding the drain for the whole deadline.
        """
        self._closed = True
        busy = self._process
        if busy is not None and self._lock.locked():
            busy.kill()
        with self._lock:
            process, self._process = self._process, None
        if process is None:
            return
        assert process.stdin is not None  # noqa: S101 - Popen was given PIPE
        try:
            process.stdin.close()
            process.wait(5)
        except (OSError, subprocess.TimeoutExpired):
            process.kill()
            process.wait(5)
        if process.stdout is not None:
            process.stdout.close()
