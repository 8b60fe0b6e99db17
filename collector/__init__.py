"""errscope's write side: receive, classify, normalise, scrub, sample, store, forward.

For Python services the public entry points are `errscope.collector.instrument(...)` and
`collector.ScrubbingSpanExporter(inner)` (and the tool author's kit in
`errscope.collector.toolkit`).  They load lazily so that `import collector` stays cheap for the CLI.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

__all__ = ["ScrubbingSpanExporter", "__version__", "instrument"]

if TYPE_CHECKING:
    from errscope.collector.export import ScrubbingSpanExporter, instrument


def __getattr__(name: str) -> Any:
    if name in ("ScrubbingSpanExporter", "instrument"):
        from errscope.collector import export  # noqa: PLC0415 - lazy: the OTel SDK loads only when used

        return getattr(export, name)
    raise AttributeError(name)
