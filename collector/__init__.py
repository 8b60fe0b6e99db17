"""errscope's write side: receive, classify, normalise, scrub, sample, store, forward.

The public surface is pinned by tests/test_exported_members.py; everything else is internal.
"""

from __future__ import annotations

__version__ = "0.1.0"

__all__ = ["__version__"]
