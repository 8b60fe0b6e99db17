"""The deploy gate judged once: what `errscope check --json` prints and `GET /v1/check` serves.

`check_answer` is the one place a `DeployReport` becomes the gate's JSON object (the
verdict, the exit status as fields, the findings with the calls and tracebacks behind
them), so the CLI and the sidecar's endpoint cannot drift apart.  `judge` runs detection
once and answers; `errscope check` loops over `detect_deploy` while it waits, then calls
`check_answer` itself.

Run as `python -m errscope.queries.gate`, this module is the worker the sidecar starts
for `GET /v1/check` (errscope.collector.sidecar.checks): detection needs numpy and scipy,
which the sidecar process never imports (~70 MB resident, and start-up time), so the
judgement runs here and reads the store back through the sidecar's own query API, as
`errscope check --api` would.  The protocol is JSON lines on stdin/stdout:

    first line   {"api": URL, "token": str|null, "trace_url": str|null, "catalogs": [path]}
    then         {"service", "version", "environment", "as_of", "known_by", "codes"} per request
    answers      {"answer": {...check JSON...}}  or  {"error": {...as_dict...}, "status": int}

The worker answers every request with one line and never prints a traceback: a failure
becomes an error line naming the exception class only.  It exits when stdin closes.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

import orjson

from errscope.collector.catalog import load_catalog
from errscope.collector.errors import ErrscopeError, QueryError, QueryErrorKind
from errscope.queries.detect import (
    DEFAULT_CONFIG,
    DeployReport,
    DetectConfig,
    detect_deploy,
    with_codes,
)
from errscope.queries.detect.deploys import confidence
from errscope.queries.evidence import gather_evidence
from errscope.queries.findings import check_dict
from errscope.queries.source import ApiSource, QuerySource, SourceError

__all__ = ["check_answer", "judge", "known_codes"]

_ENTRY: Final = "check"
_CODE_SHAPE: Final = re.compile(r"[a-z][a-z0-9_]{0,63}")


def check_answer(
    source: QuerySource,
    report: DeployReport,
    *,
    service: str,
    version: str,
    environment: str | None,
    as_of: datetime,
    trace_url: str | None = None,
) -> dict[str, object]:
    """The gate's JSON object for a report (docs/detection.md, docs/rollouts.md)."""
    evidence = gather_evidence(source, (*report.findings, *report.notes), trace_url)
    return check_dict(
        report.verdict,
        report.findings,
        service=service,
        version=version,
        # The environment judged: the one named, or the deploy's only one.
        environment=report.deploy.environment if report.deploy else environment,
        as_of=as_of,
        reason=report.reason,
        notes=report.notes,
        evidence=evidence,
        confidence=confidence(report),
    )


def known_codes(codes: Sequence[str], catalogs: Sequence[Path] = ()) -> tuple[str, ...]:
    """`codes`, deduplicated, each one the catalog knows; QueryError (BAD_PARAM_VALUE,
    field `codes`) otherwise: a typo must not make a gate pass."""
    wanted = tuple(dict.fromkeys(c.strip() for c in codes if c.strip()))
    known = load_catalog(catalogs).codes
    # Repeated only when code-shaped: a value from a URL is not echoed whole.
    unknown = [c if _CODE_SHAPE.fullmatch(c) else "?" for c in wanted if c not in known]
    if not wanted or unknown:
        raise QueryError(
            QueryErrorKind.BAD_PARAM_VALUE,
            f"not in the error catalog: {', '.join(unknown)}" if unknown else "no codes given",
            entry=_ENTRY,
            field="codes",
            hint=f"a comma-separated list of: {', '.join(known)}",
        )
    return wanted


def judge(
    source: QuerySource,
    *,
    service: str,
    version: str,
    environment: str | None,
    as_of: datetime,
    known_by: datetime | None = None,
    config: DetectConfig = DEFAULT_CONFIG,
    trace_url: str | None = None,
) -> dict[str, object]:
    """Judge one deploy as of `as_of`, once, and answer as `errscope check --json` would."""
    report = detect_deploy(
        source,
        service,
        version,
        environment,
        as_of=as_of,
        known_by=None if known_by is None else max(known_by, as_of),
        config=config,
    )
    return check_answer(
        source,
        report,
        service=service,
        version=version,
        environment=environment,
        as_of=as_of,
        trace_url=trace_url,
    )


def _time(value: object) -> datetime | None:
    return datetime.fromisoformat(value) if isinstance(value, str) else None


def _answer(setup: Mapping[str, Any], source: QuerySource, request: Mapping[str, Any]) -> bytes:
    try:
        codes = request.get("codes")
        config = DEFAULT_CONFIG
        if codes:
            catalogs = [Path(p) for p in setup.get("catalogs") or ()]
            config = with_codes(DEFAULT_CONFIG, known_codes(codes, catalogs))
        as_of = _time(request.get("as_of")) or datetime.now(UTC)
        answer = judge(
            source,
            service=str(request["service"]),
            version=str(request["version"]),
            environment=request.get("environment"),
            as_of=as_of,
            known_by=_time(request.get("known_by")),
            config=config,
            trace_url=setup.get("trace_url"),
        )
    except QueryError as exc:
        return orjson.dumps({"error": exc.as_dict(), "status": 400})
    except SourceError as exc:
        return orjson.dumps({"error": exc.as_dict(), "status": 503})
    except ErrscopeError as exc:
        return orjson.dumps({"error": exc.as_dict(), "status": 503})
    except Exception as exc:  # noqa: BLE001 - one answer per request, whatever fails
        error = {"error": "failed", "message": f"detection failed ({type(exc).__name__})"}
        return orjson.dumps({"error": error, "status": 500})
    return orjson.dumps({"answer": answer})


def main() -> None:
    """The worker loop: a setup line, then one answer line per request line."""
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    setup = orjson.loads(stdin.readline() or b"{}")
    source = ApiSource(str(setup["api"]), token=setup.get("token"))
    for line in stdin:
        try:
            request = orjson.loads(line)
        except orjson.JSONDecodeError:
            request = None
        if isinstance(request, dict):
            answer = _answer(setup, source, request)
        else:
            answer = orjson.dumps(
                {"error": {"error": "failed", "message": "unreadable request"}, "status": 500}
            )
        stdout.write(answer + b"\n")
        stdout.flush()


if __name__ == "__main__":
    main()
