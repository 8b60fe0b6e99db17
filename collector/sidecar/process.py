"""The `errscope serve` process: its logs, its memory, and its run loop.

    configure_logging(fmt)   stderr as text or JSON lines; libraries' messages masked
    limit_malloc_arenas()    glibc's arenas capped (peak RSS)
    keep_pandas_out()        pandas made unimportable (~33 MiB of RSS nobody uses)
    run(config)              start, print the ready line, serve until a signal, drain

Promises:
- logs carry codes, counts and correlation ids (`_LOG_FIELDS`), never payload contents nor
  tracebacks: exception text is dropped from every record, errscope's and the libraries';
- SIGTERM/SIGINT (and SIGHUP, a closed terminal; from start-up on) stop the listeners,
  answer the requests already read, drain the queue, commit, and exit 0; when the store's
  final checkpoint fails (a full disk), `run` logs `store_io_error` and returns
  `EXIT_STORE_IO` (74, sysexits' EX_IOERR): the acknowledged spans are in the store's
  write-ahead log, which the next start folds in.  A store file deleted under the sidecar
  also ends in `EXIT_STORE_IO`.
"""

from __future__ import annotations

import ctypes
import importlib.abc
import logging
import os
import re
import signal
import sys
import threading
import time
from datetime import UTC, datetime
from typing import Any, Final

import orjson

from errscope.collector.errors import StoreError
from errscope.collector.scrub import default_scrubber
from errscope.collector.sidecar.app import Sidecar
from errscope.collector.sidecar.config import ServeConfig
from errscope.collector.signals import set_soon
from errscope.collector.store import StoreFault

__all__ = [
    "EXIT_STORE_IO",
    "JsonLogFormatter",
    "TextLogFormatter",
    "configure_logging",
    "keep_pandas_out",
    "limit_malloc_arenas",
    "run",
]

log = logging.getLogger("errscope.serve")  # the sidecar's one logger name, in every module

# `errscope serve`'s exit status when the store cannot be closed cleanly (sysexits EX_IOERR).
EXIT_STORE_IO: Final = 74
_LOG_FIELDS: Final = (
    "code",
    "error_class",
    "trace_id",
    "span_id",
    "spans",
    "rejected",
    "reason",
    "address",
)


class JsonLogFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, message and whitelisted fields only."""

    def format(self, record: logging.LogRecord) -> str:
        """Render a record without its exception text (which may carry payload)."""
        entry: dict[str, Any] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        for key in _LOG_FIELDS:
            if key in record.__dict__:
                entry[key] = record.__dict__[key]
        return orjson.dumps(entry, default=str).decode()


class TextLogFormatter(logging.Formatter):
    """`time level logger: message key=value ...`, whitelisted fields only, no exception text."""

    def format(self, record: logging.LogRecord) -> str:
        """Render a record without its exception text."""
        fields = " ".join(f"{k}={record.__dict__[k]}" for k in _LOG_FIELDS if k in record.__dict__)
        stamp = datetime.fromtimestamp(record.created, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        head = f"{stamp} {record.levelname.lower()} {record.name}: {record.getMessage()}"
        return f"{head} {fields}".rstrip()


# `scheme://user:password@` and a bare `user:password@host` (how gRPC names a target).
# Greedy to the last "@" of the word: a password may hold "@" and "/" itself.
_USERINFO_RE: Final = re.compile(r"((?:[a-zA-Z][a-zA-Z0-9+.-]*://)?)[^\s/@:]+:\S*@")
_LIBRARY_MESSAGE_CHARS: Final = 300


class _LibraryLogFilter(logging.Filter):
    """A library's message (the OTLP exporters', gRPC's) as one short line with no secret.

    Their text is not ours: an exporter names its target, userinfo included, and quotes its
    upstream's answers.  Userinfo and anything the secret rules find are masked, the line
    is cut to `_LIBRARY_MESSAGE_CHARS`, and the exception and stack are dropped.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        """Rewrite a non-errscope record in place; always keep it."""
        if record.name == "errscope" or record.name.startswith("errscope."):
            return True
        try:
            text = record.getMessage()
        except Exception:  # noqa: BLE001 - a library's bad format string: keep its name only
            text = "unformattable message"
        text = _USERINFO_RE.sub(r"\1***@", " ".join(text.split()))
        text = default_scrubber().scrub_secrets(text).text[:_LIBRARY_MESSAGE_CHARS]
        record.msg, record.args = text, ()
        record.exc_info, record.exc_text, record.stack_info = None, None, None
        return True


def configure_logging(fmt: str) -> None:
    """Send the process's logs to stderr as text or JSON lines: errscope's from INFO, the
    libraries' (the OTLP exporters of --forward, gRPC) from WARNING and masked
    (`_LibraryLogFilter`), all in one format, so a collector reading JSON lines never meets
    a plain-text line."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonLogFormatter() if fmt == "json" else TextLogFormatter())
    handler.addFilter(_LibraryLogFilter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(logging.WARNING)
    ours = logging.getLogger("errscope")
    ours.handlers[:] = []
    ours.setLevel(logging.INFO)
    ours.propagate = True


_M_ARENA_MAX: Final = -8  # glibc's mallopt() parameter number
MALLOC_ARENAS: Final = 2


def limit_malloc_arenas(arenas: int = MALLOC_ARENAS) -> bool:
    """Cap glibc's malloc arenas before the sidecar starts its threads; True if applied.

    glibc gives busy threads arenas of their own, up to eight per core, and each keeps
    freed memory: with gRPC's, the HTTP server's and the writer's threads the sidecar's
    peak RSS under load measured 299 MiB, and 263 MiB with two arenas at the same rate.
    A user's MALLOC_ARENA_MAX wins; another C library (musl) is left alone.
    """
    if os.environ.get("MALLOC_ARENA_MAX") or not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        return bool(libc.mallopt(_M_ARENA_MAX, arenas))
    except (OSError, AttributeError):
        return False


class _NoPandas(importlib.abc.MetaPathFinder):
    """Answer every import of pandas with ImportError, as if it were not installed."""

    def find_spec(self, fullname: str, path: object, target: object = None) -> None:
        if fullname == "pandas" or fullname.startswith("pandas."):
            raise ImportError("the errscope sidecar does not load pandas")


def keep_pandas_out() -> bool:
    """Stop this process from loading pandas; True if it was not loaded yet.

    Nothing in the sidecar uses pandas, but DuckDB's client imports it on the first bound
    parameter and pyarrow's on the first `pa.array`, only to ask whether a value is a
    pandas object. Loaded, it costs ~33 MiB of RSS, a ninth of the 300 MB budget. Both
    clients treat a failed import as "pandas is not installed" and carry on (DuckDB asks
    again at each bound parameter: ~20 us per statement, against ~4 ms per commit).
    """
    if "pandas" in sys.modules:
        return False
    if not any(isinstance(finder, _NoPandas) for finder in sys.meta_path):
        sys.meta_path.insert(0, _NoPandas())
    return True


def run(config: ServeConfig) -> int:
    """Start the sidecar, print the ready line, serve until SIGTERM/SIGINT, drain; the exit
    status: 0, or `EXIT_STORE_IO` when the store could not be closed cleanly."""
    limit_malloc_arenas()
    keep_pandas_out()
    stop = threading.Event()

    def on_signal(signum: int, _frame: object) -> None:
        set_soon(stop)  # not stop.set(): it can deadlock inside stop.wait() (collector.signals)

    # Before the store opens: a stop asked for during start-up (or a closed terminal's
    # SIGHUP at any time) drains and checkpoints like SIGTERM, instead of killing the
    # process with the store open.
    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, on_signal)
    sidecar = Sidecar(config)
    try:
        addresses = sidecar.start()
    except BaseException:
        sidecar.stop()
        raise
    try:
        print(orjson.dumps({"event": "ready", **addresses}).decode(), flush=True)
    except OSError:  # stdout is gone (a closed terminal): serve, or drain, all the same
        log.warning("cannot print the ready line", extra={"code": "stdout_closed"})
    log.info("serving", extra={"address": " ".join(f"{k}={v}" for k, v in addresses.items())})
    while not stop.wait(0.5):
        pass  # wake twice a second so the signal handler's flag is seen promptly
    log.info("draining")
    started = time.monotonic()
    try:
        sidecar.stop()
    except StoreError as exc:
        log.error(  # noqa: TRY400 - one line with the code, never a traceback
            "store not closed cleanly; acknowledged spans stay in its write-ahead log",
            extra={"code": "store_io_error", "reason": str(exc.kind)},
        )
        return EXIT_STORE_IO
    if sidecar.writer.fault is StoreFault.FILE_MISSING:
        # Closed cleanly, but into an unlinked inode: what was stored since is gone.  A
        # supervisor must see that, not a clean exit.
        log.error(
            "stopped; the store file was deleted or replaced while serving",
            extra={"code": str(StoreFault.FILE_MISSING)},
        )
        return EXIT_STORE_IO
    log.info(
        "stopped",
        extra={
            "spans": sidecar.metrics.stored,
            "reason": f"drained in {time.monotonic() - started:.2f}s",
        },
    )
    return 0
