"""What `errscope serve` can be told (`ServeConfig`), and listener addresses read and written.

`ServeConfig` is passive data whose defaults are safe: every listener on loopback, no
forwarding, bounded bodies, bytes in flight and store memory.  `ServeConfig.check` refuses
an unsafe or unusable combination with a `ConfigError` naming the flag (a non-loopback bind
without a token, a token a client cannot send, limits that would refuse every export);
nothing here opens a socket or a file.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final

from errscope.collector.config import (
    API_ADDRESS,
    OTLP_GRPC_ADDRESS,
    OTLP_HTTP_ADDRESS,
    STORE_PATH,
    Matcher,
)
from errscope.collector.errors import ConfigError, ConfigErrorKind
from errscope.collector.pipeline import ContentPolicy, NonToolPolicy
from errscope.collector.ports import is_loopback
from errscope.collector.receive.otlp_decode import DEFAULT_MAX_BODY_BYTES
from errscope.collector.scrub.rules import PII_GROUPS
from errscope.collector.store.duckdb import DEFAULT_MEMORY_LIMIT, MEMORY_SIZE_HINT, is_memory_size
from errscope.queries.links import expand_template

__all__ = [
    "DEFAULT_MAX_INFLIGHT_BYTES",
    "DEFAULT_STORE_MEMORY",
    "MIN_LIMIT_BYTES",
    "ServeConfig",
    "join_address",
    "parse_address",
]

DEFAULT_MAX_INFLIGHT_BYTES: Final = 64 * 1024 * 1024
MIN_LIMIT_BYTES: Final = 1024  # a smaller body or in-flight limit would refuse every export
DEFAULT_STORE_MEMORY: Final = DEFAULT_MEMORY_LIMIT
# What a bearer token may hold: visible ASCII, as every client can send it in a header.
_TOKEN_RE: Final = re.compile(r"[\x21-\x7e]+")
_DEFAULT_PORTS: Final = {"otlp-grpc": 4317, "otlp-http": 4318, "api": 4320}


def parse_address(text: str, name: str) -> tuple[str, int]:
    """`HOST:PORT` (IPv6 as `[::1]:PORT`) as a (host, port) pair; ConfigError naming the flag."""
    host, sep, port = text.rpartition(":")
    host = host.strip("[]")
    if not sep or not host or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ConfigError(
            ConfigErrorKind.BAD_VALUE,
            "must be HOST:PORT",
            field=name,
            hint=f"for example 127.0.0.1:{_DEFAULT_PORTS.get(name, 4318)}",
        )
    return host, int(port)


def join_address(host: str, port: int) -> str:
    """`host:port`, an IPv6 host in brackets: what `parse_address` reads back."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


@dataclass
class ServeConfig:
    """Everything `errscope serve` can be told; defaults are safe (loopback, no forwarding)."""

    otlp_grpc: str | None = OTLP_GRPC_ADDRESS
    otlp_http: str | None = OTLP_HTTP_ADDRESS
    api: str | None = API_ADDRESS
    store: str = STORE_PATH
    data_path: str | None = None  # DuckLake stores only: where the Parquet files go
    # DuckDB's buffer pool for a file store; without a bound it caches the table's blocks
    # up to 80% of the machine's memory.  None: DuckDB's default.
    store_memory: str | None = DEFAULT_STORE_MEMORY
    token: str | None = None
    insecure: bool = False
    forward: str | None = None
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    max_inflight_bytes: int = DEFAULT_MAX_INFLIGHT_BYTES
    ack_timeout_s: float = 8.0
    commit_delay_s: float = 0.2
    commit_spans: int = 5000
    non_tool: NonToolPolicy = NonToolPolicy.SCRUB
    # Conversation content on forwarded spans: dropped (counted as content:<family>) or kept.
    content: ContentPolicy = ContentPolicy.DROP
    # User catalog files: their codes are stored as themselves, not as `unknown`.
    catalog_files: tuple[str, ...] = ()
    # errscope.toml's [[matchers]]: user rules for tool spans, after the known conventions.
    matchers: tuple[Matcher, ...] = ()
    # Where a human reads a trace: a preset or template (errscope.queries.links); used in
    # /v1/check's answers.  None: no links.
    trace_url: str | None = None
    # `--rules`: gitleaks-shaped scrub rule files after the built-in rules, checked at start.
    rule_files: tuple[str, ...] = ()
    # The PII groups masked in every free text that leaves (`--no-pii`, `--no-pii-group`).
    pii_groups: tuple[str, ...] = PII_GROUPS

    def check(self) -> None:
        """Refuse unsafe or unusable settings with a ConfigError naming the flag."""
        if self.trace_url is not None:
            expand_template(self.trace_url)  # a ConfigError naming trace_url
        for name in ("otlp_grpc", "otlp_http", "api"):
            value = getattr(self, name)
            if value is None:
                continue
            host, _ = parse_address(value, name.replace("_", "-"))
            if not is_loopback(host) and not self.token and not self.insecure:
                raise ConfigError(
                    ConfigErrorKind.BAD_VALUE,
                    "binding a non-loopback address needs a token",
                    field=name.replace("_", "-"),
                    hint="set --token (or ERRSCOPE_TOKEN), or pass --insecure on a trusted network",
                )
        if self.store_memory is not None and not is_memory_size(self.store_memory):
            raise ConfigError(
                ConfigErrorKind.BAD_VALUE,
                "not a memory size",
                field="store-memory",
                hint=MEMORY_SIZE_HINT,
            )
        if self.token is not None and len(self.token) < 16:
            raise ConfigError(
                ConfigErrorKind.BAD_VALUE, "must be at least 16 characters", field="token"
            )
        if self.token is not None and not _TOKEN_RE.fullmatch(self.token):
            # A client sends the header as ASCII, and strips the space or newline a file's
            # token ends in: the sidecar would refuse every export for ever.
            raise ConfigError(
                ConfigErrorKind.BAD_VALUE,
                "must be visible ASCII characters only (no spaces, newlines or accents)",
                field="token",
                hint="a token from a file: strip its trailing newline",
            )
        if not any((self.otlp_grpc, self.otlp_http, self.api)):
            raise ConfigError(
                ConfigErrorKind.BAD_VALUE,
                "every listener is off: nothing to serve",
                field="otlp-grpc",
                hint="give at least one of --otlp-grpc, --otlp-http, --api an address",
            )
        for name, value in (
            ("max-body-bytes", self.max_body_bytes),
            ("max-inflight-bytes", self.max_inflight_bytes),
        ):
            if value < MIN_LIMIT_BYTES:
                raise ConfigError(
                    ConfigErrorKind.BAD_VALUE,
                    f"must be at least {MIN_LIMIT_BYTES:,} bytes",
                    field=name,
                    hint="the defaults are 16 MiB per body and 64 MiB in flight",
                )
        if self.max_inflight_bytes < self.max_body_bytes:
            # A body of the largest size would never be admitted once anything else is in
            # flight: under steady load its client would get 503 for ever.
            raise ConfigError(
                ConfigErrorKind.BAD_VALUE,
                f"must be at least --max-body-bytes ({self.max_body_bytes:,})",
                field="max-inflight-bytes",
                hint="raise --max-inflight-bytes or lower --max-body-bytes",
            )
