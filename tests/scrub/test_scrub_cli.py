"""`errscope scrub`: plain text and JSONL through CliRunner and as a real subprocess."""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from errscope.collector.cli.scrub import scrub
from errscope.collector.scrub.samples import github_style_token

REPO = Path(__file__).resolve().parents[2]
TRACE = (
    "Traceback (most recent call last):\n"
    '  File "/home/alice/app/tools.py", line 3, in lookup\n'
    "    raise KeyError(job_id)\n"
    "KeyError: 'INV-17'\n"
)


def _token() -> str:
    return github_style_token(random.Random(7), "ghp_")


def test_plain_text_mode() -> None:
    """Plain text in, scrubbed text out: secrets masked, trace reduced to its exception."""
    result = CliRunner().invoke(scrub, [], input=f"token {_token()}\n{TRACE}")
    assert result.exit_code == 0
    assert result.output == "token [REDACTED:github-pat]\nKeyError: 'INV-17'\n"


def test_jsonl_mode_keeps_order_and_ids() -> None:
    """--jsonl scrubs `text` as a span value and keeps every other field and the order."""
    lines = [
        {"id": 1, "text": f"auth failed for {_token()}"},
        {"id": "b", "text": TRACE},
        {"id": 3, "text": "job INV-17 not_found", "extra": True},
    ]
    stdin = "".join(json.dumps(line) + "\n" for line in lines)
    result = CliRunner().invoke(scrub, ["--jsonl"], input=stdin)
    assert result.exit_code == 0
    out = [json.loads(line) for line in result.output.splitlines()]
    assert out == [
        {"id": 1, "text": "auth failed for [REDACTED:github-pat]"},
        {"id": "b", "text": "KeyError: 'INV-17'\n"},
        {"id": 3, "text": "job INV-17 not_found", "extra": True},
    ]


def test_jsonl_traceback_mode_writes_human_copy() -> None:
    """--jsonl --traceback writes the redacted human copy and its fingerprint."""
    stdin = json.dumps({"id": 1, "text": TRACE}) + "\n" + json.dumps({"id": 2, "text": "ok"})
    result = CliRunner().invoke(scrub, ["--jsonl", "--traceback"], input=stdin + "\n")
    assert result.exit_code == 0
    first, second = (json.loads(line) for line in result.output.splitlines())
    assert first["text"] == (
        "Traceback (most recent call last):\n"
        '  File "app/tools.py", line 3, in lookup\n'
        "KeyError: 'INV-17'"
    )
    assert first["exception_type"] == "KeyError"
    assert first["language"] == "python"
    assert len(first["fingerprint"]) == 32
    assert second == {
        "id": 2,
        "text": "",
        "exception_type": None,
        "fingerprint": None,
        "language": None,
    }


def test_extra_rules_file_is_applied(tmp_path: Path) -> None:
    """--rules adds a gitleaks-shaped rule beside the built-ins."""
    rules = tmp_path / "acme.toml"
    rules.write_text("[[rules]]\nid = 'acme-key'\nregex = '''acme_[0-9a-f]{12}'''\n")
    result = CliRunner().invoke(scrub, ["--rules", str(rules)], input="key acme_0123456789ab")
    assert result.exit_code == 0
    assert result.output == "key [REDACTED:acme-key]"


BAD = [
    pytest.param(
        "[[rules]]\nid = 'lookbehind'\nregex = '''(?<=x)secret'''\n",
        "error[bad_regex] lookbehind.regex: ",
        id="bad-regex",
    ),
    pytest.param("[[rules]]\nid = 'x'\n", "error[missing_field] x.regex: ", id="no-regex"),
]


@pytest.mark.parametrize(("content", "prefix"), BAD)
def test_bad_rule_file_prints_one_line_and_exits_2(
    tmp_path: Path, content: str, prefix: str
) -> None:
    """A bad rule file: one `error[kind] rule.field: ...` line on stderr, exit 2."""
    rules = tmp_path / "bad.toml"
    rules.write_text(content)
    result = CliRunner().invoke(scrub, ["--rules", str(rules)], input="x")
    assert result.exit_code == 2
    assert result.stdout == ""
    assert result.stderr.startswith(prefix)
    assert len(result.stderr.strip().splitlines()) == 1


def test_malformed_jsonl_line_names_line_number_only() -> None:
    """A JSONL line that is not JSON exits 2 naming its number, never echoing it."""
    stdin = '{"id": 1, "text": "ok"}\nnot json password=hunter22\n'
    result = CliRunner().invoke(scrub, ["--jsonl"], input=stdin)
    assert result.exit_code == 2
    assert "line 2" in result.stderr
    assert "hunter22" not in result.stderr


def test_stats_prints_counts_to_stderr() -> None:
    """--stats writes counts per rule id to stderr, never values."""
    result = CliRunner().invoke(scrub, ["--stats"], input=f"{_token()} password=hunter22")
    assert result.exit_code == 0
    assert result.stderr == "github-pat\t1\npassword-assignment\t1\n"


def test_module_runs_as_subprocess(tmp_path: Path) -> None:
    """`errscope scrub` works as a real process, bytes in and out."""
    proc = subprocess.run(
        [sys.executable, "-m", "errscope.collector.cli", "scrub"],
        input=b"a " + _token().encode() + b" b\n\xff\x00",  # invalid UTF-8 and a NUL
        capture_output=True,
        cwd=REPO,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "a [REDACTED:github-pat] b\n\ufffd\x00".encode()
    rules = tmp_path / "bad.toml"
    rules.write_text("[[rules]]\nid = 'bad-one'\nregex = '''(a)\\1'''\n")
    proc = subprocess.run(
        [sys.executable, "-m", "errscope.collector.cli", "scrub", "--rules", str(rules)],
        input=b"x",
        capture_output=True,
        cwd=REPO,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 2
    assert proc.stderr.decode().startswith("error[bad_regex] bad-one.regex: ")
    assert b"Traceback" not in proc.stderr


@pytest.mark.parametrize(
    ("flags", "email_kept", "card_kept"),
    [
        pytest.param([], False, False, id="default-as-the-sidecar"),
        pytest.param(["--no-pii"], True, True, id="no-pii"),
        pytest.param(["--no-pii-group", "email"], True, False, id="one-group-off"),
    ],
)
def test_pii_is_masked_by_default_like_the_sidecar(
    flags: list[str], email_kept: bool, card_kept: bool
) -> None:
    """`errscope scrub` masks PII by default, as the sidecar does; --no-pii and a group switch turn it off."""
    email, card = "jane.doe@example.org", "4111 1111 1111 1111"
    result = CliRunner().invoke(scrub, flags, input=f"mail {email} card {card}\n")
    assert result.exit_code == 0, result.output
    assert (email in result.output) is email_kept
    assert (card in result.output) is card_kept
