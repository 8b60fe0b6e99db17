"""Stack traces: find them in any string, keep their exceptions, redact them for humans.

Recognised: Python (chained "direct cause" / "during handling", exception groups, captured
locals), Java and Kotlin ("Caused by", "Suppressed", "... N more"), Node.js (uncaught source
excerpt, error properties, `{ cause }`, "Node.js vN"), .NET and Mono (" ---> " inner
exceptions, `[0x...] in <mvid>:0`), Go (panics, fatal errors, goroutine dumps), Rust (panics,
with or without a backtrace), Ruby and PHP. A trace is found after a log message on the same
line, with CRLF line ends, inside a JSON string (escaped `\\n` line breaks, up to three
levels deep), HTML-escaped, with terminal colour codes, and when cut off mid-frame by an
attribute length limit (it then runs to the end of the value).

Two outputs:

* `strip_traceback(text)` is the value that is kept on a span: frames, locals, source lines,
  error properties and the locations headers repeat go; each exception's type and message
  stay (keyword-assigned values masked, paths trimmed, home user names hidden; secrets are
  masked by the scrubber over the whole value), and so does the text around the trace. The
  output is re-escaped the way the trace was (JSON levels, HTML), so a record still parses.
* `redact_traceback(text)` is the copy for humans: exception types, frame function names,
  relative file names and line numbers; no absolute path prefixes, URL userinfo or queries,
  home directories, user names, source lines, local variables, argument values or
  error-property values, and messages scrubbed. A message is scrubbed whole (its full
  lines, a multi-line Rust panic message as one text, an exception's name with it) and only
  then cut. At most 8 KiB, with a fingerprint of language, exception type and frame
  functions that groups the same failure across line-number changes.

The package's modules, in the order a value meets them: `lines` (reading lines: ANSI,
HTML entities, JSON escapes), `runtimes` (each runtime's frame and exception forms),
`kept` (the kept-value rule), `messages` (keyword values, paths, user names) and `redact`
(the copy for humans).

Cost is linear in the input: a value is first checked for marker literals (most values stop
there); otherwise each line is classified once with anchored patterns that only ever see a
line prefix of at most `LINE_PREFIX_CHARS` characters and contain no nested or overlapping
quantifiers, so no line costs more than a constant; the scrubber, linear itself, sees each
kept line once. Nothing here raises on any string.
"""

from errscope.collector.scrub.tracebacks.kept import strip_traceback, strip_traceback_count
from errscope.collector.scrub.tracebacks.messages import SecretScrubber
from errscope.collector.scrub.tracebacks.redact import (
    HUMAN_MAX_BYTES,
    RedactedTraceback,
    redact_traceback,
)

__all__ = [
    "HUMAN_MAX_BYTES",
    "RedactedTraceback",
    "SecretScrubber",
    "redact_traceback",
    "strip_traceback",
    "strip_traceback_count",
]
