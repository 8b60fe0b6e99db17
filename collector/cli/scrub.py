"""`errscope scrub`: stdin to stdout through the scrubber; also how users test their rules.

    errscope scrub < log.txt                          plain text, scrubbed as a span value
    errscope scrub --jsonl < spans.jsonl              {"id": ..., "text": ...} per line, in order
    errscope scrub --jsonl --traceback < in.jsonl     the redacted human copy of each trace
    errscope scrub --rules extra.toml --no-pii ...    add rules (gitleaks-shaped); secrets only

A rule file that cannot be loaded prints one line, `error[<kind>] <rule id>.<field>: ...`, to
stderr and exits 2; a malformed JSONL line exits 2 naming the line number, never echoing it.
Redaction counts go to stderr with `--stats` (counts per rule id, never values).
"""

from __future__ import annotations

import json
import re
import sys
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, BinaryIO, NoReturn, TypeVar

import click
import orjson

from errscope.collector.cli._common import EXIT_USAGE
from errscope.collector.errors import RulesError
from errscope.collector.scrub import build_scrubber
from errscope.collector.scrub.engine import Scrubber
from errscope.collector.scrub.rules import PII_GROUPS
from errscope.collector.scrub.tracebacks import redact_traceback

__all__ = ["pii_groups", "scrub", "scrubber_options"]

F = TypeVar("F", bound=Callable[..., Any])


def _fail(message: str) -> NoReturn:
    click.echo(message, err=True)
    sys.exit(EXIT_USAGE)


def scrubber_options(func: F) -> F:
    """`--rules`, `--pii/--no-pii` and `--no-pii-group`: the switches `errscope scrub` and
    `errscope serve` share, so the two scrub with one set of defaults."""
    func = click.option(
        "--no-pii-group",
        "pii_off",
        multiple=True,
        type=click.Choice(PII_GROUPS),
        help="Leave one PII group unmasked (repeatable).",
    )(func)
    func = click.option(
        "--pii/--no-pii",
        default=True,
        show_default=True,
        help="Mask PII too (e-mails, phones, cards, IBANs, SSNs, public IPs).",
    )(func)
    return click.option(
        "--rules",
        "rule_files",
        multiple=True,
        type=click.Path(dir_okay=False, path_type=Path),
        help="Extra gitleaks-shaped rule file (TOML); may be repeated.",
    )(func)


def pii_groups(*, pii: bool, pii_off: Sequence[str]) -> tuple[str, ...]:
    """The PII groups the switches leave on (all of them by default)."""
    return tuple(g for g in PII_GROUPS if g not in pii_off) if pii else ()


@click.command("scrub")
@scrubber_options
@click.option("--jsonl", is_flag=True, help='Read and write lines of {"id": ..., "text": ...}.')
@click.option(
    "--traceback",
    "human_traceback",
    is_flag=True,
    help="With --jsonl: write the redacted human copy of each traceback instead.",
)
@click.option("--secrets-only", is_flag=True, help="Mask secrets but leave tracebacks in place.")
@click.option("--stats", is_flag=True, help="Print redaction counts per rule to stderr.")
def scrub(
    *,
    rule_files: tuple[Path, ...],
    jsonl: bool,
    human_traceback: bool,
    pii: bool,
    pii_off: tuple[str, ...],
    secrets_only: bool,
    stats: bool,
) -> None:
    """Scrub stdin to stdout: secrets and PII masked, traces reduced to their exception lines."""
    if human_traceback and not jsonl:
        _fail("error[usage]: --traceback needs --jsonl")
    try:
        scrubber = build_scrubber(rule_files, pii_groups=pii_groups(pii=pii, pii_off=pii_off))
    except RulesError as exc:
        _fail(exc.describe())
    for rule_id in scrubber.rules.ignored:
        click.echo(f"note: rule {rule_id} matches file paths only; not used on text", err=True)
    counts: Counter[str] = Counter()
    stdin = sys.stdin.buffer
    stdout = sys.stdout.buffer
    if jsonl:
        _run_jsonl(
            scrubber, stdin, stdout, counts, human=human_traceback, secrets_only=secrets_only
        )
    else:
        # Invalid UTF-8 is replaced rather than refused: scrubbing must never stop on bad bytes.
        text = stdin.read().decode("utf-8", "replace")
        result = scrubber.scrub_secrets(text) if secrets_only else scrubber.scrub(text)
        counts.update(result.counts)
        stdout.write(result.text.encode("utf-8", "replace"))
    stdout.flush()
    if stats:
        for rule_id, count in sorted(counts.items()):
            click.echo(f"{rule_id}\t{count}", err=True)


_LONG_NUMBER = re.compile(r"\d{19}")


def _run_jsonl(
    scrubber: Scrubber,
    stdin: BinaryIO,
    stdout: BinaryIO,
    counts: Counter[str],
    *,
    human: bool,
    secrets_only: bool,
) -> None:
    for number, raw in enumerate(stdin, start=1):
        if not raw.strip():
            continue
        record: Any
        # Invalid UTF-8 is replaced, never refused; the stdlib parser is the fallback because
        # it accepts lone surrogate escapes that orjson rejects.
        line = raw.decode("utf-8", "replace")
        try:
            # orjson reads an integer past 64 bits as a float: an id would come back changed.
            record = json.loads(line) if _LONG_NUMBER.search(line) else orjson.loads(line)
        except (orjson.JSONDecodeError, RecursionError):
            try:
                record = json.loads(line)
            except (ValueError, RecursionError):  # nested past Python's recursion limit
                _fail(f"error[bad_input] line {number}: not valid JSON")
        if not isinstance(record, dict) or not isinstance(record.get("text"), str):
            _fail(f'error[bad_input] line {number}: expected {{"id": ..., "text": "..."}}')
        text: str = record["text"]
        if human:
            redacted = redact_traceback(text, scrubber)
            record["text"] = redacted.text if redacted else ""
            record["exception_type"] = redacted.exception_type if redacted else None
            record["fingerprint"] = redacted.fingerprint if redacted else None
            record["language"] = redacted.language if redacted else None
        else:
            result = scrubber.scrub_secrets(text) if secrets_only else scrubber.scrub(text)
            counts.update(result.counts)
            record["text"] = result.text
        try:
            out = orjson.dumps(record)
        except TypeError:
            out = json.dumps(record).encode("ascii")  # escapes what orjson cannot encode
        stdout.write(out + b"\n")
