"""The Rust engine (errscope.collector.scrub._engine) against the Python engine, value by value.

Every corpus (tests/scrub/engine_corpora.py) and hypothesis-generated strings go through
both; the spans found, the first span found (`contains_secret`), the masked text and the
counts must be identical, with the built-in rules, with PII on, and with an HMAC key.

The Python reference runs with Hyperscan's regex prefilter off, every rule a candidate when
its keywords occur: the prefilter is meant to be an over-approximation, and it drops some
matches RE2 confirms (`--password s.llCOD…` under `cli-secret-flag`), which the Rust engine
finds. The reference is the Python engine's documented meaning, without that loss.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from errscope.collector.scrub import Scrubber, load_rules
from errscope.collector.scrub.engine import _decode, compile_engine
from tests.scrub.engine_corpora import corpora

_KEY = b"differential-test-key"


def _reference(scrubber: Scrubber) -> Scrubber:
    n = len(scrubber._compiled)
    scrubber._always_rules = frozenset(range(n))  # type: ignore[misc]
    scrubber._always = frozenset(range(n + 100_000))  # type: ignore[misc]
    return scrubber


@pytest.fixture(scope="module", params=["secrets", "pii", "hmac"])
def engines(request: pytest.FixtureRequest) -> tuple[Scrubber, object]:
    rules = load_rules(pii=request.param != "secrets")
    key = _KEY if request.param == "hmac" else None
    return _reference(Scrubber(rules, hmac_key=key)), compile_engine(rules, key)


def _differences(python: Scrubber, rust: object, value: str) -> list[str]:
    data = value.encode("utf-8", "surrogatepass")
    wrong = []
    if [tuple(s) for s in python._find(data, first_only=False)] != rust.find(data, False):  # type: ignore[attr-defined]
        wrong.append("spans")
    if [tuple(s) for s in python._find(data, first_only=True)][:1] != rust.find(data, True):  # type: ignore[attr-defined]
        wrong.append("first")
    expected = python.scrub_secrets(value)
    masked = rust.mask(data)  # type: ignore[attr-defined]
    text = value if masked is None else _decode(masked[0])
    counts: dict[str, int] = {}
    for index in masked[1] if masked else []:
        rule_id = python.rules.rules[index].id
        counts[rule_id] = counts.get(rule_id, 0) + 1
    if text != expected.text or counts != dict(expected.counts):
        wrong.append("mask")
    return wrong


@pytest.mark.parametrize("corpus", ["independent", "samples", "tracebacks", "fuzz"])
def test_rust_engine_matches_python_on_corpus(
    engines: tuple[Scrubber, object], corpus: str
) -> None:
    """Every value of the corpus: same spans, same first span, same masked text and counts."""
    python, rust = engines
    values = corpora()[corpus]
    assert len(values) > 100
    bad = [(value[:120], wrong) for value in values if (wrong := _differences(python, rust, value))]
    assert not bad, f"{len(bad)} of {len(values)} differ, first: {bad[:3]}"


_TRIGGERS = st.sampled_from(
    [
        "[REDACTED:x]",
        "\\",
        '\\"',
        "%2F",
        "+",
        "&amp;",
        "\x1b[1m",
        "\u200b",
        '["',
        '", "',
        '"]',
        "password=",
        "token: ",
        "ghp_",
        "sk-",
        "eyJ",
        "::",
        "D::>",
        "8.8.8.8",
        " ",
        "\n",
        "=",
    ]
)
_TEXT = st.lists(st.one_of(_TRIGGERS, st.text(max_size=40)), max_size=12).map("".join)


@settings(
    max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(value=_TEXT)
def test_rust_engine_matches_python_on_generated_strings(value: str) -> None:
    """Hypothesis strings mixing the engine's trigger bytes with any text agree too."""
    python, rust = _SHARED
    assert _differences(python, rust, value) == []


_RULES = load_rules(pii=True)
_SHARED = (_reference(Scrubber(_RULES)), compile_engine(_RULES))
