"""The `errscope` command line: one module per command family, imported when it runs.

`main` is the console script.  Every command turns an `ErrscopeError` into one line on
stderr (`error[kind] entry.field: message — hint`) and exit status 2; an unexpected failure
prints one line with the exception's type only and exits 70; Ctrl-C exits 130 and SIGTERM
143 (`_common.handle_errors`).  Nothing outside this package imports it.
"""

from __future__ import annotations

from errscope.collector.cli.group import main

__all__ = ["main"]
