"""`errscope demo`: a realistic agent fleet sending through the real path, with a story.

Three agent services (see `errscope.collector.demo.fleet`) send tool-call spans through the
OpenTelemetry SDK and the OTLP exporter to a running sidecar.  `Demo.backfill()` writes
hours of history in seconds (span times in the past); `Demo.live()` keeps traffic flowing.
The story (`demo.story`): a deploy that breaks one tool's schema, a not_found spike
with no deploy, a model guessing ids, a retry after denied, a handler returning an unknown
code, fake secrets planted in arguments and exception messages (`Demo.planted`), and
tracebacks to sample.
"""

from __future__ import annotations

from errscope.collector.demo.runner import DEFAULT_RATE, BackfillReport, Demo, DemoOptions
from errscope.collector.demo.secrets import PlantedSecret
from errscope.collector.demo.send import Target
from errscope.collector.demo.story import Timeline

__all__ = [
    "DEFAULT_RATE",
    "BackfillReport",
    "Demo",
    "DemoOptions",
    "PlantedSecret",
    "Target",
    "Timeline",
]
