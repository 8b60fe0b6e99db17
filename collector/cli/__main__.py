"""`python -m errscope.collector.cli`: the `errscope` console script, without a PATH lookup."""

from __future__ import annotations

from errscope.collector.cli import main

if __name__ == "__main__":
    main()
