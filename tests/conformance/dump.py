"""Print a case's payload spans as one JSON line each (name, kind, status, attributes, events).

    .venv/bin/python tests/conformance/dump.py CASE [--transport grpc] [--cut 200]

A reading aid for writing truth.toml and docs/conventions.md: long strings are cut.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from google.protobuf.json_format import MessageToDict

from tests.conformance.harness import CASES, decode, load_case


def _value(v: dict[str, Any]) -> Any:
    for key, inner in v.items():
        if key == "arrayValue":
            return [_value(x) for x in inner.get("values", [])]
        if key == "kvlistValue":
            return {kv["key"]: _value(kv.get("value", {})) for kv in inner.get("values", [])}
        return inner
    return None


def _attrs(pairs: list[dict[str, Any]], cut: int) -> dict[str, Any]:
    out = {}
    for kv in pairs:
        value = _value(kv.get("value", {}))
        if isinstance(value, str) and len(value) > cut:
            value = value[:cut] + f"…(+{len(value) - cut})"
        out[kv["key"]] = value
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("case")
    parser.add_argument("--transport", default=None)
    parser.add_argument("--cut", type=int, default=200)
    args = parser.parse_args()
    case = load_case(CASES / args.case)
    transport = args.transport or case.transports[0]
    traces: list[str] = []
    for payload in case.bodies(transport):
        message = MessageToDict(decode(payload))
        for rs in message.get("resourceSpans", []):
            for ss in rs.get("scopeSpans", []):
                for span in ss.get("spans", []):
                    trace = span["traceId"]
                    if trace not in traces:
                        traces.append(trace)
                    status = span.get("status", {})
                    line = {
                        "trace": traces.index(trace) + 1,
                        "name": span["name"],
                        "kind": span.get("kind", "").replace("SPAN_KIND_", ""),
                        "status": status.get("code", "STATUS_CODE_UNSET")[12:],
                        "status_desc": (status.get("message") or "")[: args.cut] or None,
                        "scope": ss.get("scope", {}).get("name"),
                        "attributes": _attrs(span.get("attributes", []), args.cut),
                        "events": [
                            {"name": e["name"], **_attrs(e.get("attributes", []), args.cut)}
                            for e in span.get("events", [])
                        ],
                    }
                    print(json.dumps({k: v for k, v in line.items() if v not in (None, [])}))


if __name__ == "__main__":
    main()
