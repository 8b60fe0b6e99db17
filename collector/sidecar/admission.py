"""What the receivers ask of the sidecar: may this request in (`Admission`), and take it (`Ingest`).

    receiver (gRPC, OTLP/HTTP, API) ──authorised? admit(bytes)? draining?──▶ Admission
    receiver (gRPC, OTLP/HTTP) ──────ingest(body)──▶ Ingest (the Sidecar) ──▶ IngestResult

This module sits between the receivers and the `Sidecar` so that both can import it: the
sidecar builds the receivers, and the receivers call this, never the sidecar's insides.

Promises:
- admission is bounded in bytes: `admit` refuses a piece that would take the bytes in
  flight past `max_inflight_bytes` (unless nothing is in flight, so one body of the largest
  size always gets in), and the receivers answer the retryable overload status, retry after
  `RETRY_AFTER_S`;
- the bearer token is compared in constant time; no token configured admits everyone;
- every method is thread-safe: the receivers call them from their own threads at once;
- nothing here raises on a request: refusals are counted (`Metrics.refused`) and logged
  with their reason, never with a value from the request.
"""

from __future__ import annotations

import hmac
import logging
import threading
from dataclasses import dataclass
from typing import Final, Protocol

from errscope.collector.sidecar.metrics import Metrics

__all__ = ["RETRY_AFTER_S", "Admission", "Ingest", "IngestResult"]

log = logging.getLogger("errscope.serve")  # the sidecar's one logger name, in every module

# What a refused client is told to wait (HTTP `Retry-After`, gRPC RetryInfo), in seconds.
RETRY_AFTER_S: Final = 1


class Admission:
    """The gate every receiver passes a request through: token, bytes in flight, drain.

    `draining` is set by `Sidecar.stop`: from then on HTTP answers close their connection
    and new exports are refused as retryable.
    """

    def __init__(
        self,
        *,
        token: str | None,
        max_body_bytes: int,
        max_inflight_bytes: int,
        metrics: Metrics,
    ) -> None:
        self.max_body_bytes = max_body_bytes
        self.max_inflight_bytes = max_inflight_bytes
        self.draining = threading.Event()
        self._token = token
        self._metrics = metrics
        self._inflight = 0
        self._inflight_lock = threading.Lock()

    @property
    def inflight_bytes(self) -> int:
        """Bytes of request bodies admitted and not yet released."""
        return self._inflight

    def authorised(self, header: str | None) -> bool:
        """True when no token is configured or the bearer token matches (constant time)."""
        token = self._token
        if not token:
            return True
        # The scheme is case-insensitive (RFC 9110 §11.1): SDKs send `bearer` as well.
        scheme, _, credentials = (header or "").strip().partition(" ")
        if scheme.lower() != "bearer":
            return False
        return hmac.compare_digest(credentials.strip().encode(), token.encode())

    def admit(self, size: int) -> bool:
        """Reserve `size` bytes in flight; False (nothing reserved) when over the bound."""
        with self._inflight_lock:
            if self._inflight and self._inflight + size > self.max_inflight_bytes:
                return False
            self._inflight += size
            return True

    def release(self, size: int) -> None:
        """Give back `size` bytes reserved by `admit`."""
        with self._inflight_lock:
            self._inflight -= size

    def count_refusal(self, reason: str) -> None:
        """Count a refused export under `reason` (overloaded, too_large, timeout...) and log it."""
        with self._metrics.lock:
            self._metrics.refused[reason] += 1
        log.warning("export refused", extra={"code": "unavailable", "reason": reason})

    def count_refused_connection(self) -> None:
        """Count a connection refused at a listener's cap (`too_many_connections`); not logged."""
        with self._metrics.lock:
            self._metrics.refused["too_many_connections"] += 1


@dataclass(frozen=True, slots=True)
class IngestResult:
    """What an export request came to: accepted (with rejected spans) or refused."""

    accepted: bool
    rejected: int = 0
    reason: str = ""


class Ingest(Protocol):
    """What the OTLP receivers hand an admitted body to (the `Sidecar`)."""

    def ingest(self, raw: bytes, *, encoding: str = "", as_json: bool = False) -> IngestResult:
        """Decode, process and store one export request; answer once it is committed.

        Raises `OtlpDecodeError` (and its `UnsupportedEncodingError`) or
        `BodyTooLargeError` for a body the receiver must refuse.
        """
        ...
