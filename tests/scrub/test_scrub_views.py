"""Streamed deltas, sibling name/value pairs, free-text mentions, PII groups and public values."""

from __future__ import annotations

import base64
import itertools
import json
import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from errscope.collector.scrub import PII_GROUPS, Scrubber, default_scrubber, load_rules
from errscope.collector.scrub.samples import SAMPLES

_SECRETS = Scrubber(load_rules())
_KEY = "Zq4vT9rLm2XwB7nK3pDs8HyF"  # a made-up 24-character token


def _chunks(text: str, cuts: list[int]) -> str:
    points = [0, *sorted(c for c in set(cuts) if 0 < c < len(text)), len(text)]
    return json.dumps([text[a:b] for a, b in itertools.pairwise(points) if b > a])


@pytest.mark.parametrize(
    "text",
    [
        pytest.param(f"Saved ACME_API_KEY ({_KEY}) for you.", id="mention-parenthesis"),
        pytest.param(f"export ACME_TOKEN={_KEY}", id="assignment"),
        pytest.param(f"stripe sk_live_{_KEY}abc ok", id="prefixed"),
    ],
)
@pytest.mark.parametrize("step", [pytest.param(1, id="every-char"), pytest.param(5, id="every-5")])
def test_a_secret_streamed_across_deltas_is_masked_in_every_delta(text: str, step: int) -> None:
    """A JSON array of string deltas is read joined; each delta loses its part of the secret."""
    value = _chunks(text, list(range(3, len(text), step)))
    out = _SECRETS.scrub(value).text
    joined = "".join(json.loads(out))
    assert _KEY not in joined
    assert len(json.loads(out)) == len(json.loads(value))
    assert _SECRETS.scrub(out).text == out


def test_plain_string_arrays_are_left_alone() -> None:
    """An array of ordinary strings comes back byte-identical."""
    value = json.dumps(["Sure, ", "the build ", "passed in 42 s."])
    assert _SECRETS.scrub(value).text == value


@pytest.mark.parametrize(
    "text",
    [
        pytest.param('[{"name": "ACME_API_KEY", "value": "' + _KEY + '"}]', id="json-name-value"),
        pytest.param("env:\n- name: ACME_SECRET\n  value: " + _KEY + "\n", id="yaml-name-value"),
        pytest.param('<add key="AcmeWriteKey" value="' + _KEY + '" />', id="xml-add"),
        pytest.param(
            '<input type="password" name="acme_key" value="' + _KEY + '">', id="html-input"
        ),
        pytest.param("My ACME_API_KEY is:\n" + _KEY + "\nthanks", id="after-newline"),
        pytest.param("bad ACME_TOKEN '" + _KEY + "' (401)", id="exception-quotes"),
        pytest.param(
            "INSERT INTO s VALUES ('acme', 'ACME_API_KEY', '" + _KEY + "');", id="sql-tuple"
        ),
        pytest.param(
            "UPDATE s SET value = '" + _KEY + "' WHERE name = 'ACME_API_KEY';", id="sql-update"
        ),
        pytest.param(f"-e ACME_TOKEN='{_KEY}' --password {_KEY}", id="repeated-bare-after-named"),
    ],
)
def test_a_secret_named_apart_from_its_value_is_masked(text: str) -> None:
    """A secret's name and value in siblings, free text or SQL still masks the value."""
    assert _KEY not in _SECRETS.scrub(text).text


@pytest.mark.parametrize(
    "text",
    [
        pytest.param('{"name": "secret_version", "value": "7"}', id="metadata-suffix"),
        pytest.param("password_min_length=14", id="length"),
        pytest.param("password_policy: strict", id="policy-word"),
        pytest.param('secret_name: "prod/db-creds"', id="secret-name"),
        pytest.param("ACME_API_KEY=YOUR_ACME_API_KEY", id="placeholder-your"),
        pytest.param("api_key: ${ACME_API_KEY}", id="placeholder-env"),
        pytest.param("token: sk-...", id="placeholder-ellipsis"),
        pytest.param("idempotency_key: 4b0f6c9e-1f0e-4d3a-9b1e-2c7d8e9f0a1b", id="idem-key"),
        pytest.param("publishable_key=pk_live_" + _KEY, id="stripe-publishable"),
        pytest.param("posthog_key=phc_" + _KEY + "abcdefghij", id="posthog-project"),
        pytest.param(
            "resource=arn:aws:secretsmanager:eu-west-1:123456789012:secret:prod/db-creds-AbCdEf",
            id="secretsmanager-arn",
        ),
        pytest.param("the ACME_API_KEY is rotated every 90 days", id="prose"),
    ],
)
def test_ordinary_values_under_secret_like_names_survive(text: str) -> None:
    """Names, lengths, placeholders, ids and public-by-design keys are not masked."""
    assert _SECRETS.scrub(text).text == text


def _jwt(payload: dict[str, str]) -> str:
    def enc(obj: dict[str, str]) -> str:
        return base64.urlsafe_b64encode(json.dumps(obj).encode()).decode().rstrip("=")

    return f"{enc({'alg': 'HS256', 'typ': 'JWT'})}.{enc(payload)}.{_KEY}abcdefgh"


@pytest.mark.parametrize(
    ("payload", "masked"),
    [
        pytest.param({"role": "anon", "iss": "supabase"}, False, id="anon-role-public"),
        pytest.param({"role": "service_role", "iss": "supabase"}, True, id="service-role"),
        pytest.param({"sub": "user-17"}, True, id="user-token"),
    ],
)
def test_a_jwt_is_masked_unless_public_by_design(payload: dict[str, str], masked: bool) -> None:
    """An anon-role JWT is public by design (shipped in browsers); other JWTs are secrets."""
    text = f"SUPABASE_KEY={_jwt(payload)}"
    assert (_SECRETS.scrub(text).text != text) is masked


PII_CASES = [
    pytest.param("email", "write to ana.lopez@example.org", "ana.lopez@example.org", id="email"),
    pytest.param("phone", "call (212) 555-0147", "555-0147", id="phone-us-national"),
    pytest.param("phone", "ring 030 1234 5678 now", "1234 5678", id="phone-de-national"),
    pytest.param("card", "jcb 3530 1113 3330 0000", "3330 0000", id="card-jcb"),
    pytest.param("card", "unionpay 6212345678901265", "6212345678901265", id="card-unionpay"),
    pytest.param("iban", "to GB82 WEST 1234 5698 7654 32", "5698 7654", id="iban"),
    pytest.param("ssn", "ssn 123-45-6789 on file", "123-45-6789", id="ssn-dashed"),
    pytest.param("ssn", "her ssn: 123456789.", "123456789", id="ssn-plain-with-word"),
    pytest.param("ip", "from 81.2.69.142 via", "81.2.69.142", id="ipv4-public"),
    pytest.param("ip", "from 2a00:1450:4001:81b::200e via", "2a00:1450", id="ipv6-public"),
]


@pytest.mark.parametrize(("group", "text", "needle"), PII_CASES)
def test_pii_is_masked_by_default_and_each_group_can_be_turned_off(
    group: str, text: str, needle: str
) -> None:
    """default_scrubber masks every PII group; leaving one group out keeps that PII."""
    assert needle not in default_scrubber().scrub(text).text
    others = [g for g in PII_GROUPS if g != group]
    assert needle in Scrubber(load_rules(pii_groups=others)).scrub(text).text


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("from 10.0.4.17 via", id="private-10"),
        pytest.param("from 192.168.1.20 via", id="private-192"),
        pytest.param("from 127.0.0.1 via", id="loopback"),
        pytest.param("metadata at 169.254.169.254", id="link-local"),
        pytest.param("listen [::1]:8080", id="loopback-v6"),
        pytest.param("ssn 666-12-3456 is not issued", id="ssn-area-666"),
        pytest.param("at 12:30:45 the job ran", id="clock-time"),
        pytest.param("build 2024-01-15 passed", id="date"),
    ],
)
def test_non_pii_look_alikes_survive_the_default_scrubber(text: str) -> None:
    """Private, loopback and link-local addresses, unissued SSNs, times and dates stay."""
    assert default_scrubber().scrub(text).text == text


def test_an_unknown_pii_group_is_refused() -> None:
    """A misspelt group name fails loudly instead of silently masking less."""
    with pytest.raises(ValueError, match="unknown PII group"):
        load_rules(pii_groups=["phones"])


_ALL = Scrubber(load_rules(pii=True))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    rule_id=st.sampled_from(sorted(SAMPLES)),
    seed=st.integers(0, 2**32 - 1),
    cut=st.integers(0, 10_000),
)
def test_a_planted_secret_split_at_any_chunk_boundary_never_survives(
    rule_id: str, seed: int, cut: int
) -> None:
    """Every rule's example, streamed as two deltas cut anywhere, is masked in the deltas."""
    planted = SAMPLES[rule_id].make(random.Random(seed))
    text = f"Sure, here it is: {planted.text} (saved)."
    at = text.find(planted.core)
    point = at + cut % (len(planted.core) + 1)
    value = json.dumps([text[:point], text[point:]])
    out = _ALL.scrub(value).text
    assert planted.core not in "".join(json.loads(out))


@pytest.mark.parametrize(
    ("deltas", "masked"),
    [
        pytest.param(["peer_ip is ", "16", "9.254.169.254 now"], False, id="link-local-cut"),
        pytest.param(["peer_ip is 10.0.", "3.7 now"], False, id="private-cut"),
        pytest.param(["peer_ip is ", "8.8", ".8.8 now"], True, id="public-cut"),
        pytest.param(["peer_ip is 8.8.8.8", " now"], True, id="public-at-edge"),
        pytest.param(["card 4111 1111", " 1111 1111 ok"], True, id="card-cut"),
    ],
)
def test_pii_cut_at_a_delta_edge_is_judged_in_the_deltas_joined(
    deltas: list[str], masked: bool
) -> None:
    """A number or address touching a delta's edge is judged whole: the tail of a private
    address is not read as a public one, and a public one cut anywhere is still masked."""
    value = json.dumps(deltas)
    out = json.loads(default_scrubber().scrub(value).text)
    assert len(out) == len(deltas)
    assert ("[REDACTED:" in "".join(out)) is masked
