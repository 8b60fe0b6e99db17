"""Property tests: the scrubber's promises hold for generated secrets, wrappers and text."""

from __future__ import annotations

import itertools
import json
import random
import uuid
from collections.abc import Callable
from urllib.parse import quote

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from errscope.collector.scrub import Scrubber, default_scrubber, load_rules
from errscope.collector.scrub.samples import SAMPLES, benign_ids

_SCRUBBER: Scrubber = Scrubber(load_rules(pii=True))
_WRAPPERS: dict[str, Callable[[str, str], str]] = {
    "plain": lambda t, pad: f"{pad} {t} {pad}",
    "json": lambda t, pad: json.dumps({"note": pad, "args": t}),
    "json-in-json": lambda t, pad: json.dumps({"out": json.dumps({"args": t, "n": pad})}),
    "percent": lambda t, pad: f"/cb?x={quote(pad, safe='')}&state={quote(t, safe='')}",
    "repr": lambda t, pad: repr({"kwargs": t, "pad": pad}),
    "crlf-log": lambda t, pad: f"{pad}\r\nERROR {t}".replace("\n", "\r\n"),
    "yaml": lambda t, pad: "tool:\n  args: " + json.dumps(t) + f"\n  note: {json.dumps(pad)}",
}
# Padding text that cannot itself form a secret-like key name.
_PAD = st.text(alphabet=st.sampled_from(list("abcdefghij KLMNO 0123456789.,!?-")), max_size=40)
_SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@_SETTINGS
@given(
    rule_id=st.sampled_from(sorted(SAMPLES)),
    wrapper=st.sampled_from(sorted(_WRAPPERS)),
    seed=st.integers(0, 2**32 - 1),
    pad=_PAD,
)
def test_planted_secret_never_survives(rule_id: str, wrapper: str, seed: int, pad: str) -> None:
    """A secret of any rule, in any supported wrapper, is masked."""
    planted = SAMPLES[rule_id].make(random.Random(seed))
    out = _SCRUBBER.scrub(_WRAPPERS[wrapper](planted.text, pad)).text
    assert planted.core not in out
    assert quote(planted.core, safe="") not in out


def _deltas(text: str, cuts: list[int]) -> list[str]:
    """`text` cut into streamed deltas at the given offsets (any offset, inside the secret too)."""
    points = sorted({c % (len(text) + 1) for c in cuts} | {0, len(text)})
    return [text[a:b] for a, b in itertools.pairwise(points)]


@_SETTINGS
@given(
    rule_id=st.sampled_from(sorted(SAMPLES)),
    seed=st.integers(0, 2**32 - 1),
    cuts=st.lists(st.integers(0, 10**6), min_size=1, max_size=40),
    wrapper=st.sampled_from(["plain", "json"]),
)
def test_planted_secret_streamed_in_deltas_never_survives(
    rule_id: str, seed: int, cuts: list[int], wrapper: str
) -> None:
    """A secret of any rule, streamed as a JSON array of deltas cut at any offsets, is gone
    from the deltas joined again, and the array stays an array of as many strings."""
    planted = SAMPLES[rule_id].make(random.Random(seed))
    text = _WRAPPERS[wrapper](planted.text, "tool said")
    deltas = _deltas(text, cuts)
    out = json.loads(_SCRUBBER.scrub(json.dumps(deltas)).text)
    assert isinstance(out, list)
    assert len(out) == len(deltas)
    assert planted.core not in "".join(out)


@_SETTINGS
@given(
    seed=st.integers(0, 2**32 - 1),
    cuts=st.lists(st.integers(0, 10**6), max_size=20),
    pad=_PAD,
)
def test_benign_ids_survive_whole_and_streamed(seed: int, cuts: list[int], pad: str) -> None:
    """Every benign id family (trace and span ids, traceparent, UUIDs, ULIDs, git SHAs,
    digests, object and message ids, numbers) comes out unchanged, alone in text and
    streamed in deltas cut anywhere."""
    ids = benign_ids(random.Random(seed))
    text = f"{pad} " + " ".join(ids) + f" {pad}"
    assert _SCRUBBER.scrub(text).text == text
    deltas = _deltas(text, cuts)
    assert json.loads(_SCRUBBER.scrub(json.dumps(deltas)).text) == deltas


_HEX = "0123456789abcdef"


@_SETTINGS
@given(
    trace_id=st.text(alphabet=_HEX, min_size=32, max_size=32),
    span_id=st.text(alphabet=_HEX, min_size=16, max_size=16),
    call_uuid=st.uuids(),
    before=st.text(max_size=60),
    after=st.text(max_size=60),
)
def test_trace_ids_and_uuids_always_survive(
    trace_id: str, span_id: str, call_uuid: uuid.UUID, before: str, after: str
) -> None:
    """W3C trace/span ids and UUIDs come out unchanged, whatever text is around them."""
    text = f"{before} trace_id={trace_id} span_id={span_id} call={call_uuid} {after}"
    out = default_scrubber().scrub(text).text
    assert f"trace_id={trace_id}" in out
    assert f"span_id={span_id}" in out
    assert f"call={call_uuid}" in out


@_SETTINGS
@given(st.text(max_size=300))
def test_scrub_is_idempotent_and_total(text: str) -> None:
    """Any string scrubs without raising, and scrubbing twice equals scrubbing once."""
    once = _SCRUBBER.scrub(text).text
    assert _SCRUBBER.scrub(once).text == once


@_SETTINGS
@given(st.binary(max_size=300))
def test_arbitrary_bytes_decoded_with_replacement_scrub(data: bytes) -> None:
    """Invalid UTF-8 (decoded with replacement or surrogateescape) never makes scrub raise."""
    _SCRUBBER.scrub(data.decode("utf-8", "replace"))
    _SCRUBBER.scrub(data.decode("utf-8", "surrogateescape"))


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    rule_id=st.sampled_from(sorted(SAMPLES)),
    wrapper=st.sampled_from(sorted(_WRAPPERS)),
    seed=st.integers(0, 2**32 - 1),
    pad=_PAD,
    repeats=st.integers(1, 3),
)
def test_count_secrets_counts_what_scrub_masks(
    rule_id: str, wrapper: str, seed: int, pad: str, repeats: int
) -> None:
    """count_secrets() agrees with scrub_secrets().counts, and again on a second call."""
    planted = SAMPLES[rule_id].make(random.Random(seed))
    text = " | ".join([_WRAPPERS[wrapper](planted.text, pad)] * repeats)
    fresh = _SCRUBBER
    first = dict(fresh.count_secrets(text))
    assert first == dict(fresh.scrub_secrets(text).counts)
    assert dict(fresh.count_secrets(text)) == first
    assert sum(first.values()) >= repeats


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    rule_id=st.sampled_from(sorted(SAMPLES)),
    wrapper=st.sampled_from(sorted(_WRAPPERS)),
    seed=st.integers(0, 2**32 - 1),
    pads=st.lists(_PAD, min_size=1, max_size=4),
    at=st.integers(0, 4),
)
def test_count_secrets_each_counts_each_value_as_alone(
    rule_id: str, wrapper: str, seed: int, pads: list[str], at: int
) -> None:
    """One pass over several values gives each value the counts it gets alone."""
    planted = SAMPLES[rule_id].make(random.Random(seed))
    values = list(pads)
    values.insert(min(at, len(values)), _WRAPPERS[wrapper](planted.text, pads[0]))
    each = [dict(counts) for counts in _SCRUBBER.count_secrets_each(values)]
    assert each == [dict(_SCRUBBER.count_secrets(value)) for value in values]
    assert sum(each[min(at, len(pads))].values()) >= 1


def test_count_secrets_each_marks_the_values_a_cut_leaves_unread() -> None:
    """Past `max_value_bytes`, the value cut and every value after it count `truncated`."""
    scrubber = Scrubber(load_rules(), max_value_bytes=64)
    token = SAMPLES["github-pat"].make(random.Random(5)).text
    each = scrubber.count_secrets_each([token, "x" * 40, "y" * 40, "z"])
    assert each[0] == {"github-pat": 1}
    assert [dict(counts) for counts in each[1:]] == [{"truncated": 1}] * 3
    assert scrubber.count_secrets_each([]) == []
