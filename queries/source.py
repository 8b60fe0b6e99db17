"""Where named queries run: a database file no sidecar holds, or a sidecar's query API.

The CLI, the detection module and the dashboard all read through a `QuerySource`, so the
same code works offline on a copied file and live against a running sidecar (which holds
its DuckDB file and serves reads over `GET /v1/query/{name}`).

`FileSource` opens the file read-only for each call and closes it at once, so it never
keeps a sidecar from starting; a one-shot command (`findings`, one look of `check`) holds one
read-only connection for its whole pass with `held(source)`, because opening a 17M-row file
55 times cost about a second of a one-second answer.  `ApiSource` asks for Arrow IPC and
sends the bearer token when one is given; connection failures and refusals become
`SourceError` with the address tried, never a traceback.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager, nullcontext
from datetime import datetime
from pathlib import Path
from typing import Any, Final, Protocol

import pyarrow as pa
import pyarrow.ipc

from errscope.collector.config import API_TIMEOUT_S, API_URL
from errscope.collector.errors import QueryError, QueryErrorKind, StoreError, StoreErrorKind
from errscope.collector.store import open_store
from errscope.collector.store.lake import mask_secrets
from errscope.queries.runner import run_query

__all__ = [
    "ARROW_STREAM",
    "ApiSource",
    "FileSource",
    "QuerySource",
    "SourceError",
    "held",
    "split_http_url",
]

ARROW_STREAM: Final = "application/vnd.apache.arrow.stream"


class SourceError(StoreError):
    """The query source cannot be reached or refused the request (kind UNREADABLE/LOCKED)."""


class QuerySource(Protocol):
    """Anything that runs a named query with parameters and returns an Arrow table."""

    def run(self, name: str, params: Mapping[str, object] | None = None) -> pa.Table:
        """Run the named query."""
        ...

    def describe(self) -> str:
        """Where this source reads from, for banners and error messages."""
        ...


class FileSource:
    """Named queries on a DuckDB file that no running process holds, or on a DuckLake.

    `path` is what `open_store` takes: a file path or `ducklake:postgres:<conninfo>` (many
    readers may attach a lake while sidecars write it).
    """

    def __init__(self, path: str | Path) -> None:
        self.path = str(path)
        self._held: Any = None

    def run(self, name: str, params: Mapping[str, object] | None = None) -> pa.Table:
        """Run the query on the held store, or open the store read-only, run, close."""
        if self._held is not None:
            return run_query(self._held.cursor(), name, params or {})
        with open_store(self.path, read_only=True) as store:
            return run_query(store.cursor(), name, params or {})

    @contextmanager
    def held(self) -> Iterator[None]:
        """Keep one read-only store open for every `run` inside the block (re-entrant).

        The file stays held, so a sidecar cannot open it meanwhile: only for one pass of a
        command, never across a wait.
        """
        if self._held is not None:
            yield
            return
        with open_store(self.path, read_only=True) as store:
            self._held = store
            try:
                yield
            finally:
                self._held = None

    def describe(self) -> str:
        """The file path, or the lake URL with its password hidden."""
        return mask_secrets(self.path)


def held(source: QuerySource) -> AbstractContextManager[None]:
    """One pass of queries on one open store, for a `FileSource`; a no-op for other sources."""
    return source.held() if isinstance(source, FileSource) else nullcontext()


def _wire(value: object) -> str:
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def split_http_url(url: str) -> urllib.parse.SplitResult | None:
    """The parts of an http(s) URL with a host and a numeric port, if any; else None
    (`foo`, `ftp://host`, `http://[::1`, `http://host:port`)."""
    try:
        parts = urllib.parse.urlsplit(url)
        parts.port  # noqa: B018 - raises on a port that is not a number
    except ValueError:
        return None
    return parts if parts.scheme in ("http", "https") and parts.hostname else None


class ApiSource:
    """Named queries through a running sidecar's query API."""

    def __init__(
        self, url: str, *, token: str | None = None, timeout_s: float = API_TIMEOUT_S
    ) -> None:
        if split_http_url(url) is None:
            raise SourceError(
                StoreErrorKind.BAD_URL,
                "the query API address must be an http(s) URL",
                entry=mask_secrets(url),
                hint=f"for example {API_URL}",
            )
        self.url = url.rstrip("/")
        self.token = token
        self.timeout_s = timeout_s

    def describe(self) -> str:
        """The API base URL (userinfo hidden)."""
        return mask_secrets(self.url)

    def _request(self, path: str, accept: str) -> tuple[bytes, str]:
        headers = {"Accept": accept}
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        request = urllib.request.Request(self.url + path, headers=headers)  # noqa: S310 - http(s) checked above
        try:
            with urllib.request.urlopen(request, timeout=self.timeout_s) as response:  # noqa: S310
                return response.read(), response.headers.get("Content-Type", "")
        except urllib.error.HTTPError as exc:
            raise self._http_error(exc) from None
        except (urllib.error.URLError, OSError) as exc:
            raise SourceError(
                StoreErrorKind.UNREADABLE,
                f"cannot reach the query API ({type(exc).__name__})",
                entry=mask_secrets(self.url),
                hint="is `errscope serve` running with --api at this address?",
            ) from None

    def _http_error(self, exc: urllib.error.HTTPError) -> Exception:
        body: dict[str, object] = {}
        try:
            loaded = json.loads(exc.read() or b"{}")
            body = loaded if isinstance(loaded, dict) else {}
        except (ValueError, OSError):
            body = {}
        if exc.code in (401, 403):
            return SourceError(
                StoreErrorKind.UNREADABLE,
                "the query API refused the token",
                entry=mask_secrets(self.url),
                hint="pass the sidecar's token with --token or ERRSCOPE_TOKEN",
            )
        kind = body.get("error")
        if (
            exc.code in (400, 404)
            and isinstance(kind, str)
            and kind in QueryErrorKind.__members__.values()
        ):
            return QueryError(
                QueryErrorKind(kind),
                str(body.get("message", "query refused")),
                entry=_opt_str(body.get("entry")),
                field=_opt_str(body.get("field")),
                hint=_opt_str(body.get("hint")),
            )
        return SourceError(
            StoreErrorKind.UNREADABLE,
            f"the query API answered HTTP {exc.code}",
            entry=mask_secrets(self.url),
        )

    def run(self, name: str, params: Mapping[str, object] | None = None) -> pa.Table:
        """GET /v1/query/{name}?params as Arrow IPC."""
        # None means "use the query's default" (usually "no filter"): leave it out entirely.
        given = {k: _wire(v) for k, v in (params or {}).items() if v is not None}
        query = urllib.parse.urlencode(given)
        path = f"/v1/query/{urllib.parse.quote(name, safe='')}" + (f"?{query}" if query else "")
        body, _ = self._request(path, ARROW_STREAM)
        try:
            return pyarrow.ipc.open_stream(body).read_all()
        except pa.ArrowInvalid as exc:
            raise SourceError(
                StoreErrorKind.UNREADABLE,
                "the query API sent an unreadable answer",
                entry=mask_secrets(self.url),
            ) from exc

    def health(self) -> dict[str, object]:
        """GET /healthz as a dict."""
        body, _ = self._request("/healthz", "application/json")
        loaded = json.loads(body or b"{}")
        return loaded if isinstance(loaded, dict) else {}


def _opt_str(value: object) -> str | None:
    return value if isinstance(value, str) else None
