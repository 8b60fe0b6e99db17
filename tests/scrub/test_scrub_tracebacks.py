"""Tracebacks: goldens from real runtimes (kept value and human copy), and the promises.

The kept value keeps each trace's exception types and messages (scrubbed) and the text
around it; frames, source lines, locals and error properties go. The human copy keeps
frames too, redacted.
"""

from __future__ import annotations

import base64
import json
import random
import re
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from errscope.collector.scrub import default_scrubber, redact_traceback, strip_traceback
from errscope.collector.scrub.samples import ALNUM, B64URL, SAMPLES, rand
from errscope.collector.scrub.tracebacks import HUMAN_MAX_BYTES, strip_traceback_count

GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "tracebacks"
CASES = sorted(p.name.removesuffix(".input.txt") for p in GOLDEN.glob("*.input.txt"))
# Exception type each golden must reduce to (pins the detector beside the golden text).
EXPECTED_TYPES = {
    "dotnet_async_after_log": "System.TimeoutException",
    "dotnet_unhandled": "System.InvalidOperationException",
    "go_goroutines": "panic",
    "go_panic": "panic",
    "java_after_log_crlf": "Main$ToolException",
    "java_caused_by": "Main$ToolException",
    "java_truncated": "Main$ToolException",
    "node_cause": "Error",
    "node_error_props": "Error",
    "node_in_json": "Error",
    "node_uncaught": "TypeError",
    "php_uncaught": "RuntimeException",
    "python_after_log": "RuntimeError",
    "python_chained": "RuntimeError",
    "python_crlf": "KeyError",
    "python_group": "ExceptionGroup",
    "python_in_json": "KeyError",
    "python_locals": "PermissionError",
    "python_multiline_message": "ValidationError",
    "python_simple": "KeyError",
    "python_truncated": "ConnectionError",
    "ruby_error": "ArgumentError",
    "rust_backtrace": "panic",
    "rust_in_json": "panic",
    "rust_panic": "panic",
}
# Pieces of the inputs that must never be kept: paths, user names, frames, source, secrets.
# (Messages are kept, ids in them included: "cannot read job INV-17".)
LEAKS = re.compile(
    r"/home/|alice|C:\\Users|\.py\"|\.java:|\.js:|\.go:|\.rs:|\.rb:|\.php|"
    r"File \"|\bat |hunter2pass|sk_live_|goroutine|Stack trace|\.\.\. \d+ more| \+0x"
)


def _read(path: Path) -> str:
    return path.read_bytes().decode("utf-8")


def test_every_runtime_has_goldens() -> None:
    """Goldens exist for Python, Node.js, Java, Rust, Go, Ruby, PHP and (hand-written) .NET."""
    prefixes = {case.split("_", 1)[0] for case in CASES}
    assert prefixes >= {"python", "node", "java", "rust", "go", "ruby", "php", "dotnet"}
    assert set(EXPECTED_TYPES) == set(CASES)


@pytest.mark.parametrize("case", CASES)
def test_golden_kept_value(case: str) -> None:
    """The kept value matches the golden: exception types and messages, no frame or secret."""
    text = _read(GOLDEN / f"{case}.input.txt")
    kept, exc = strip_traceback(text)
    assert kept == _read(GOLDEN / f"{case}.expected.kept.txt")
    assert exc == EXPECTED_TYPES[case]
    assert exc in kept
    # Log text around the trace survives; the trace's frames do not.
    assert not LEAKS.search(kept), LEAKS.search(kept)


@pytest.mark.parametrize("case", CASES)
def test_golden_human_copy(case: str) -> None:
    """The human copy matches the golden: types, functions, relative files, no user data."""
    text = _read(GOLDEN / f"{case}.input.txt")
    human = redact_traceback(text)
    assert human is not None
    assert human.text == _read(GOLDEN / f"{case}.expected.human.txt")
    assert human.exception_type == EXPECTED_TYPES[case]
    assert len(human.text.encode()) <= HUMAN_MAX_BYTES
    for leak in ("/home/", "alice", "hunter2pass", "C:\\Users", "sk_live_errscope"):
        assert leak not in human.text
    assert re.fullmatch(r"[0-9a-f]{32}", human.fingerprint)


def test_no_trace_gives_none_and_unchanged_text() -> None:
    """Text without a trace is returned as is; redact_traceback returns None."""
    text = "tool lookup_job failed: not_found (job INV-17)\n    at the moment"
    assert strip_traceback(text) == (text, None)
    assert redact_traceback(text) is None


PY_TRACE = (
    "Traceback (most recent call last):\n"
    '  File "/srv/app/tools.py", line {a}, in handle\n'
    "    return lookup(job_id)\n"
    '  File "/srv/app/db.py", line {b}, in {func}\n'
    "    raise KeyError(job_id)\n"
    "KeyError: 'INV-17'\n"
)


def test_fingerprint_ignores_line_numbers_and_paths() -> None:
    """The same failure after a deploy that moved lines has the same fingerprint."""
    before = redact_traceback(PY_TRACE.format(a=10, b=40, func="lookup"))
    after = redact_traceback(
        PY_TRACE.format(a=12, b=47, func="lookup").replace("/srv/", "/opt/release-2/")
    )
    other = redact_traceback(PY_TRACE.format(a=10, b=40, func="fetch_row"))
    assert before is not None
    assert after is not None
    assert other is not None
    assert before.fingerprint == after.fingerprint
    assert before.fingerprint != other.fingerprint


def test_human_copy_is_capped_at_8_kib() -> None:
    """A trace with thousands of frames is cut to 8 KiB with a note."""
    frames = "".join(
        f'  File "/srv/app/m{i}.py", line {i}, in f{i}\n    f{i + 1}()\n' for i in range(5000)
    )
    text = "Traceback (most recent call last):\n" + frames + "RecursionError: too deep\n"
    human = redact_traceback(text)
    assert human is not None
    assert len(human.text.encode()) <= HUMAN_MAX_BYTES
    assert human.text.endswith("lines truncated]")
    assert strip_traceback(text) == ("RecursionError: too deep\n", "RecursionError")


def test_secrets_in_messages_are_masked_in_human_copy() -> None:
    """Messages keep their words but not their secrets or absolute paths."""
    text = (
        "Traceback (most recent call last):\n"
        '  File "/home/bob/agent/tools.py", line 3, in connect\n'
        "ConnectionError: cannot reach postgres://svc:Pa55w0rdX@db:5432 from /home/bob/agent\n"
    )
    human = redact_traceback(text)
    assert human is not None
    assert "Pa55w0rdX" not in human.text
    assert "/home/bob" not in human.text
    assert "ConnectionError: cannot reach postgres://svc:[REDACTED:" in human.text


OPENAI_LIKE = "sk-proj-" + "zgEOzdmenCkhvMdgaKjIg8" + "Qm4bT7x2LpR9sVw1Yc6Nh3Jk5Df0Ga"
PG_URL = "postgresql://app:Pw8qZt3xLm9v@db.internal:5432/orders"


@pytest.mark.parametrize(
    ("exception_line", "secret"),
    [
        pytest.param(
            f"RuntimeError: cmd psql {PG_URL} failed: Traceback (most recent call last):",
            "Pw8qZt3xLm9v",
            id="header-inside-the-exception-line",
        ),
        pytest.param(
            "RuntimeError: " + "e" * 265 + " key=" + OPENAI_LIKE,
            OPENAI_LIKE[:16],
            id="token-across-the-300-character-cut",
        ),
    ],
)
def test_a_message_is_scrubbed_whole_before_it_is_cut(exception_line: str, secret: str) -> None:
    """No part of a secret survives a message's cut, nor a line that embeds the header."""
    text = (
        "Traceback (most recent call last):\n"
        '  File "/srv/app/tools.py", line 3, in run\n'
        "    subprocess.run(cmd)\n" + exception_line + "\n"
    )
    human = redact_traceback(text)
    assert human is not None
    assert secret not in human.text
    assert "RuntimeError" in human.text


TRUNCATED = [
    pytest.param(
        'Traceback (most recent call last):\n  File "/srv/app/tools.py", line 3, in ha',
        "[REDACTED:traceback]",
        id="python-cut-in-frame",
    ),
    pytest.param(
        "java.lang.IllegalStateException: boom\n\tat com.acme.Tool.run(Tool.ja",
        "java.lang.IllegalStateException: boom",
        id="java-cut-in-frame",
    ),
    pytest.param(
        "Error: boom\n    at lookup (/srv/app/tools.js:4:9)\n    at han",
        "Error: boom",
        id="node-cut-in-frame",
    ),
]


@pytest.mark.parametrize(("text", "kept"), TRUNCATED)
def test_trace_cut_off_by_length_limit(text: str, kept: str) -> None:
    """A trace cut mid-frame runs to the end of the value and is still removed."""
    assert strip_traceback(text)[0] == kept


def test_crlf_python_trace_keeps_crlf_outside() -> None:
    """CRLF line ends: the trace goes, the surrounding lines keep their CRLF."""
    trace = PY_TRACE.format(a=1, b=2, func="f").replace("\n", "\r\n")
    # Unindented lines right after the exception line may be its message (pydantic prints
    # several), so the trace ends at a blank line or a new log record.
    text = "before\r\n" + trace + "\r\nafter\r\n"
    assert strip_traceback(text)[0] == "before\r\nKeyError: 'INV-17'\r\n\r\nafter\r\n"


def test_windows_path_backslash_n_is_not_a_line_break() -> None:
    """A literal \\n in a Windows path is not mistaken for a JSON-escaped line break."""
    text = (
        "System.IO.IOException: disk full\n"
        "   at Agent.Store.Write() in C:\\new\\Store.cs:line 9\n"
        "done\n"
    )
    assert strip_traceback(text)[0] == "System.IO.IOException: disk full\ndone\n"


def test_huge_trace_input_is_linear_and_safe() -> None:
    """A multi-megabyte trace (many frames) is stripped without error."""
    frames = '  File "/srv/app/x.py", line 1, in f\n    f()\n' * 50_000
    text = "Traceback (most recent call last):\n" + frames + "RecursionError: deep\n"
    assert strip_traceback(text) == ("RecursionError: deep\n", "RecursionError")


def _aws_key_id(seed: int) -> str:
    """A fake AWS access key id: a secret a rule finds with no context around it."""
    return "AKIA" + SAMPLES["aws-access-key-id"].make(random.Random(seed)).core


FAKE_PW = "fake-" + rand(random.Random(7), ALNUM, 16)
GROUP_HEAD = (
    "  + Exception Group Traceback (most recent call last):\n"
    '  |   File "/app/agent.py", line 10, in main\n'
    "  |     async with anyio.create_task_group() as tg:\n"
    "  | ExceptionGroup: unhandled errors in a TaskGroup (1 sub-exception)\n"
    "  +-+---------------- 1 ----------------\n"
)
GROUP_MEMBER = (
    "    | Traceback (most recent call last):\n"
    '    |   File "/app/tools.py", line 5, in connect\n'
    "    |     raise RuntimeError(msg)\n"
)
GROUP_END = "    +------------------------------------\n"


@pytest.mark.parametrize(
    ("member", "secret"),
    [
        pytest.param(
            GROUP_MEMBER + "    | RuntimeError: could not connect with settings:\n"
            f"    | DB_PASSWORD: {FAKE_PW}\n",
            FAKE_PW,
            id="name-value-line-in-a-multi-line-message",
        ),
        pytest.param(
            GROUP_MEMBER + "    | ValueError: key rejected:\n"
            f"    | AWS_ACCESS_KEY_ID\n    | {_aws_key_id(1)}\n",
            _aws_key_id(1),
            id="bare-key-line-in-a-multi-line-message",
        ),
        # Where an exception line can appear, a line that only looks like one is still scrubbed.
        pytest.param(f"    | {_aws_key_id(2)}\n", _aws_key_id(2), id="key-in-the-exception-slot"),
    ],
)
def test_exception_group_message_lines_are_not_exceptions(member: str, secret: str) -> None:
    """In a group, only the line after the frames is an exception; all of it is scrubbed."""
    human = redact_traceback(GROUP_HEAD + member + GROUP_END)
    assert human is not None
    assert secret not in human.text
    assert human.exception_type == "ExceptionGroup"


def _long_jwt(rng: random.Random) -> str:
    """A fake JWT of about 1,800 characters: masked, it shrinks the line by as much."""

    def enc(obj: object) -> str:
        return base64.urlsafe_b64encode(json.dumps(obj).encode()).rstrip(b"=").decode()

    header = enc({"alg": "HS256", "typ": "JWT"})
    payload = enc({"sub": "fake", "blob": rand(rng, ALNUM, 1250)})
    return f"{header}.{payload}.{rand(rng, B64URL, 43)}"


@pytest.mark.parametrize(
    "template",
    [
        pytest.param(
            'Traceback (most recent call last):\n  File "/app/x.py", line 1, in <module>\n'
            "ValueError: {message}\n",
            id="python-exception-line",
        ),
        pytest.param("Error: {message}\n    at main (/app/main.js:3:1)\n", id="node-header-line"),
        pytest.param(
            "panic: {message}\n\ngoroutine 1 [running]:\nmain.main()\n\t/app/main.go:5 +0x1d\n",
            id="go-panic-line",
        ),
        pytest.param(
            "thread 'main' panicked at src/main.rs:1:5:\n{message}\n"
            "note: run with `RUST_BACKTRACE=1` environment variable to display a backtrace\n",
            id="rust-message-line",
        ),
        pytest.param(
            "PHP Fatal error:  Uncaught RuntimeException: {message} in /app/x.php:5\n"
            "Stack trace:\n#0 {{main}}\n  thrown in /app/x.php on line 5\n",
            id="php-uncaught-line",
        ),
    ],
)
def test_a_line_past_the_pattern_prefix_is_scrubbed_whole(template: str) -> None:
    """A key across the 2,048-character pattern prefix is masked whole, not cut and kept.

    A long JWT before it is masked to a few characters, so without that the key's cut-off
    start would land inside the 300 characters kept of the message.
    """
    planted = SAMPLES["anthropic-api-key"].make(random.Random(3))
    key = planted.text.split()[-1]
    head = f"token {_long_jwt(random.Random(4))} rejected; retry with "
    line_head = len(template[: template.index("{message}")].rsplit("\n", 1)[-1])
    padding = 2048 - 40 - line_head - len(head) - 1
    message = head + "x" * padding + " " + key
    # The cut keeps 40 of the key's characters: fewer than the rule's 53, more than the 13 of
    # its prefix plus the 10 of the core checked below. Masked, the JWT no longer pushes the
    # key past the 300 characters kept of a message.
    assert 0 < padding < 200
    human = redact_traceback(template.format(message=message))
    assert human is not None
    assert "[REDACTED:jwt]" in human.text
    assert planted.core[:10] not in human.text


@pytest.mark.parametrize(
    ("message", "secret"),
    [
        pytest.param(
            "failed to parse key:\n" + (pem := SAMPLES["private-key"].make(random.Random(5))).text,
            pem.core,
            id="pem-body-lines",
        ),
        # A pretty-printed (`{:#?}`) struct puts a field's value on the line after its name.
        pytest.param(
            f"called `Result::unwrap()` on an `Err` value: Config {{\n    password:\n"
            f'        "{FAKE_PW}",\n}}',
            FAKE_PW,
            id="debug-struct-value-under-its-key",
        ),
    ],
)
def test_multi_line_rust_panic_message_is_scrubbed_as_one_text(message: str, secret: str) -> None:
    """The lines of a Rust panic message are scrubbed together, so context spans lines."""
    text = (
        "thread 'main' panicked at src/main.rs:10:5:\n" + message + "\nstack backtrace:\n"
        "   0: main::main\n             at ./src/main.rs:6:60\n"
    )
    human = redact_traceback(text)
    assert human is not None
    assert secret not in human.text
    assert human.text.endswith("at src/main.rs:6:60")


@pytest.mark.parametrize(
    ("text", "secret"),
    [
        pytest.param(
            f"TypeError: fetch failed\n    at load (https://deploy:{FAKE_PW}@cdn.example/app.js:1:5)\n",
            FAKE_PW,
            id="node-frame-url-userinfo",
        ),
        pytest.param(
            f"TypeError: fetch failed\n    at load (https://cdn.example/app.js?sig={FAKE_PW}:1:5)\n",
            FAKE_PW,
            id="node-frame-url-query",
        ),
        # Go prints nothing after a goroutine header; a bare value there has no context.
        pytest.param(
            f"goroutine 1 [running]: {FAKE_PW}\nmain.main()\n\t/app/main.go:5 +0x1d\n",
            FAKE_PW,
            id="go-goroutine-header-tail",
        ),
        pytest.param(
            "System.InvalidOperationException: boom\n"
            f"   at App.Db.Open(String cs=Server=db;Password={FAKE_PW}) in /src/Db.cs:line 5\n",
            FAKE_PW,
            id="dotnet-frame-parameters",
        ),
        pytest.param(
            "java.lang.IllegalStateException: boom\n\tat com.acme.App.main(App.java:5)\n"
            f"Caused by: {_aws_key_id(6)}\n\t... 1 more\n",
            _aws_key_id(6),
            id="java-caused-by-name-slot",
        ),
        pytest.param(
            "PHP Fatal error:  Uncaught RuntimeException: boom in /app/x.php:5\nStack trace:\n"
            f"#0 {{main}}\nNext {_aws_key_id(8)}\n  thrown in /app/x.php on line 5\n",
            _aws_key_id(8),
            id="php-next-name-slot",
        ),
    ],
)
def test_frames_and_headers_keep_no_credentials(text: str, secret: str) -> None:
    """Frame paths lose URL userinfo and query; header and parameter text is scrubbed."""
    human = redact_traceback(text)
    assert human is not None
    assert secret not in human.text


# ── the kept-value rule, runtime by runtime (small hand-written traces) ────────────────────

FAKE_TOKEN = "tk" + rand(random.Random(11), ALNUM, 24) + "9"
KEPT_RULE = [
    pytest.param(
        "job 88 failed\nTraceback (most recent call last):\n"
        '  File "/home/carol/svc/jobs.py", line 9, in run_job\n    step(ctx)\n'
        "    ctx = {'k': 1}\n"
        "LookupError: job J-88 missing in /home/carol/svc/queue\n",
        "job 88 failed\nLookupError: job J-88 missing in svc/queue\n",
        ["run_job", "svc/jobs.py"],
        id="python",
    ),
    pytest.param(
        "Traceback (most recent call last):\n"
        '  File "/srv/a.py", line 2, in read\n'
        "OSError: disk gone\n\nThe above exception was the direct cause of the following "
        "exception:\n\nTraceback (most recent call last):\n"
        '  File "/srv/a.py", line 5, in load\n'
        f"RuntimeError: load L-3 failed session={FAKE_TOKEN}\n",
        "OSError: disk gone\nRuntimeError: load L-3 failed session=[REDACTED:keyword-value]\n",
        ["read", "load", "direct cause"],
        id="python-chained",
    ),
    pytest.param(
        "  + Exception Group Traceback (most recent call last):\n"
        '  |   File "/srv/g.py", line 4, in batch\n'
        "  | ExceptionGroup: 1 failed in B-2 (1 sub-exception)\n"
        "  +-+---------------- 1 ----------------\n"
        "    | Traceback (most recent call last):\n"
        '    |   File "/srv/g.py", line 2, in one\n'
        "    | ValueError: bad item I-9\n"
        "    +------------------------------------\n",
        "ExceptionGroup: 1 failed in B-2 (1 sub-exception)\nValueError: bad item I-9\n",
        ["batch", "one"],
        id="python-group",
    ),
    pytest.param(
        'Exception in thread "w-2" com.shop.CartException: cart C-7 locked\n'
        "\tat com.shop.Cart.add(Cart.java:12)\n"
        "Caused by: java.io.IOException: pipe P-1 closed\n"
        "\tat com.shop.Io.write(Io.java:3)\n\t... 1 more\n",
        'Exception in thread "w-2" com.shop.CartException: cart C-7 locked\n'
        "Caused by: java.io.IOException: pipe P-1 closed\n",
        ["com.shop.Cart.add", "Cart.java:12"],
        id="java",
    ),
    pytest.param(
        "/home/dan/web/s.js:3\n  throw new QuotaHit('q');\n  ^\n\n"
        "QuotaHit: quota Q-4 hit\n    at check (/home/dan/web/s.js:3:9)\n"
        "    at async main (/home/dan/web/s.js:8:3) {\n  limit: 5,\n"
        "  [cause]: Error: upstream U-1\n      at fetchIt (/home/dan/web/s.js:1:7)\n"
        "      ... 2 lines matching cause stack trace ...\n"
        "      at node:internal/main/run_main_module:28:49\n  }\n}\n\nNode.js v20.1.0\n",
        "QuotaHit: quota Q-4 hit\n[cause]: Error: upstream U-1\n",
        ["check", "main", "web/s.js:3:9"],
        id="node-cause",
    ),
    pytest.param(
        "Unhandled Exception:\nShop.OrderException: order O-5 rejected\n"
        "  at Shop.Orders.Place (System.String id) [0x0001e] in /home/erin/shop/Orders.cs:7 \n"
        "  at System.Threading.Tasks.Task.Run () [0x00000] in <0a1b2c3d4e5f>:0 \n",
        "Unhandled Exception:\nShop.OrderException: order O-5 rejected\n",
        ["Shop.Orders.Place", "shop/Orders.cs:7"],
        id="mono",
    ),
    pytest.param(
        "System.InvalidOperationException: sync S-2 failed ---> System.TimeoutException: slow\n"
        "   at Shop.Sync.Run(String id) in /src/Sync.cs:line 4\n"
        "   --- End of inner exception stack trace ---\n"
        "   at Shop.Sync.Main() in /src/Sync.cs:line 9\n",
        "System.InvalidOperationException: sync S-2 failed ---> System.TimeoutException: slow\n",
        ["Shop.Sync.Run", "End of inner exception"],
        id="dotnet",
    ),
    pytest.param(
        "panic: order O-9 not found\n\ngoroutine 1 [running]:\n"
        "main.find({0xc000010, 0x3})\n\t/home/fay/app/main.go:7 +0x1d\n"
        "main.main()\n\t/home/fay/app/main.go:11 +0x25\nexit status 2\n",
        "panic: order O-9 not found\n",
        ["main.find(...)", "app/main.go:7"],
        id="go",
    ),
    pytest.param(
        "thread 'worker' panicked at src/pay.rs:4:5:\npayment P-2 refused\n"
        "stack backtrace:\n   0: pay::charge\n             at ./src/pay.rs:4:5\n"
        "note: Some details are omitted, run with `RUST_BACKTRACE=full` for a verbose backtrace.\n",
        "thread 'worker' panicked:\npayment P-2 refused\n",
        ["pay::charge", "src/pay.rs:4:5"],
        id="rust",
    ),
    pytest.param(
        "/home/gus/app/pay.rb:4:in `charge': card K-3 declined (PayError)\n"
        "\tfrom /home/gus/app/pay.rb:9:in `<main>'\n",
        "card K-3 declined (PayError)\n",
        ["charge", "app/pay.rb:4"],
        id="ruby",
    ),
    pytest.param(
        "PHP Fatal error:  Uncaught LogicException: cart C-1 empty in /home/hal/app/c.php:5\n"
        "Stack trace:\n#0 /home/hal/app/c.php(9): checkout('C-1', 'pw-secret-1')\n"
        "#1 {main}\n  thrown in /home/hal/app/c.php on line 5\n",
        "PHP Fatal error:  Uncaught LogicException: cart C-1 empty\n",
        ["checkout(...)", "app/c.php(9)"],
        id="php-with-arguments",
    ),
]


@pytest.mark.parametrize(("text", "kept", "in_human"), KEPT_RULE)
def test_kept_value_keeps_exceptions_and_messages_only(
    text: str, kept: str, in_human: list[str]
) -> None:
    """Kept: types, messages and text around; human: frames too; neither: homes or users."""
    assert strip_traceback(text)[0] == kept
    human = redact_traceback(text)
    assert human is not None
    for piece in in_human:
        assert piece in human.text
    for leak in ("/home/", "carol", "dan", "erin", "fay", "gus", "hal", "pw-secret-1"):
        assert leak not in kept
        assert leak not in human.text


def _escaped(text: str, levels: int) -> str:
    for _ in range(levels):
        text = json.dumps({"request_id": "req_7", "error": text})
    return text


VARIANTS = [
    pytest.param(lambda t: _escaped(t, 1), id="json"),
    pytest.param(lambda t: _escaped(t, 2), id="json-double"),
    pytest.param(lambda t: _escaped(t, 3), id="json-triple"),
    pytest.param(lambda t: "<pre>" + t.replace('"', "&quot;") + "</pre>", id="html"),
    pytest.param(
        lambda t: "".join(f"\x1b[2m{line}\x1b[0m\n" for line in t.splitlines()), id="ansi"
    ),
    pytest.param(lambda t: t.replace("\n", "\r\n"), id="crlf"),
]
JAVA_TRACE = (
    'Exception in thread "main" com.shop.CartException: cart C-7 locked\n'
    "\tat com.shop.Cart.add(Cart.java:12)\n\tat com.shop.Cart.main(Cart.java:20)\n"
)


@pytest.mark.parametrize("wrap", VARIANTS)
def test_wrapped_trace_keeps_message_and_wrapper(wrap: Callable[[str], str]) -> None:
    """A trace inside JSON (1-3 levels), HTML, colour codes or CRLF loses only its frames."""
    value = wrap(JAVA_TRACE)
    kept, exc = strip_traceback(value)
    assert exc == "com.shop.CartException"
    assert "cart C-7 locked" in kept
    assert "Cart.java" not in kept
    assert "req_7" in kept or "json" not in value
    human = redact_traceback(value)
    assert human is not None
    assert "com.shop.Cart.add" in human.text


@pytest.mark.parametrize("levels", [1, 2, 3])
def test_escaped_kept_value_stays_valid_json(levels: int) -> None:
    """The kept value of a JSON-escaped trace is escaped back, so the record still parses."""
    kept, _ = strip_traceback(_escaped(JAVA_TRACE, levels))
    for _ in range(levels):
        record = json.loads(kept)
        assert record["request_id"] == "req_7"
        kept = record["error"]
    assert kept.startswith('Exception in thread "main" com.shop.CartException: cart C-7 locked')


@pytest.mark.parametrize(
    ("message", "masked", "kept"),
    [
        pytest.param("retry with session=s3ss10nV4lue", "s3ss10nV4lue", "session=", id="session"),
        pytest.param("rejected token Zq81mKp02LxT", "Zq81mKp02LxT", "token ", id="token-space"),
        pytest.param("oauth grant gR4nTc0d3abcd9", "gR4nTc0d3abcd9", "grant ", id="grant"),
        pytest.param("session close failed for S-4", None, "session close", id="plain-words"),
        pytest.param("the given key 'acme' was absent", None, "key 'acme'", id="quoted-key"),
    ],
)
def test_keyword_assigned_values_are_masked_in_both_outputs(
    message: str, masked: str | None, kept: str
) -> None:
    """A value given to a credential-like name is masked; ordinary words after one are not."""
    text = f"java.lang.IllegalStateException: {message}\n\tat a.B.c(B.java:1)\n"
    kept_value = strip_traceback(text)[0]
    human = redact_traceback(text)
    assert human is not None
    for out in (kept_value, human.text):
        assert kept in out
        if masked:
            assert masked not in out
            assert "[REDACTED:" in out


ADVERSARIAL = [
    pytest.param(lambda n: "\\\\n\\\\tat a.b(C.java:1)" * n, id="double-escaped-frames"),
    pytest.param(lambda n: "  at A.B (System.String s) [0x0001e] in <abc>:0 \n" * n, id="mono"),
    pytest.param(lambda n: "x.rb:1:in `a': " * n + "(E)\n", id="ruby-one-line"),
    pytest.param(lambda n: "token=" + "session=a" * n, id="keyword-values"),
    pytest.param(
        lambda n: "Error: x\n" + "    ... 1 lines matching cause stack trace ...\n" * n,
        id="node-elisions",
    ),
    pytest.param(lambda n: "&quot;\x1b[2m" * n + "\tat a.b(C.java:1)\n", id="entities-colours"),
    pytest.param(lambda n: "/home/u" * n + "\tat a.b(C.java:1)\n", id="home-paths"),
]


@pytest.mark.parametrize("make", ADVERSARIAL)
def test_new_recognisers_grow_linearly(make: Callable[[int], str]) -> None:
    """Eight times the input costs at most about eight times the time (no quadratic path)."""

    def cost(n: int) -> float:
        value = make(n)
        start = time.process_time()
        strip_traceback_count(value, default_scrubber())
        redact_traceback(value)
        return (time.process_time() - start) / len(value)

    small, big = cost(4_000), cost(32_000)
    # Per-byte cost may wobble with caches and a shared machine; quadratic would be 8x.
    assert big < max(small, 2e-8) * 3.5
