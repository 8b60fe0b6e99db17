"""The scrub engine: every built-in rule masks its format and spares its near misses; ids
survive; wrappers are decoded; bad input never raises."""

from __future__ import annotations

import html
import json
import random
import threading
from base64 import b64decode, b64encode, urlsafe_b64encode
from collections.abc import Callable
from urllib.parse import quote

import pytest

from errscope.collector.errors import RulesError
from errscope.collector.scrub import RuleSet, Scrubber, load_rules
from errscope.collector.scrub._engine import shannon_entropy
from errscope.collector.scrub.engine import TRUNCATED_MARKER
from errscope.collector.scrub.rules import Rule
from errscope.collector.scrub.samples import BENIGN_IDS, SAMPLES, github_style_token

ALL_RULE_IDS = sorted(SAMPLES)


def _gone(core: str, text: str) -> bool:
    return core not in text and quote(core, safe="") not in text


def test_every_builtin_rule_has_samples(pii_rules: RuleSet) -> None:
    """Each built-in rule, PII included, has generated examples and near misses."""
    assert set(pii_rules.ids) == set(SAMPLES)


@pytest.mark.parametrize("rule_id", ALL_RULE_IDS)
def test_rule_masks_examples_generated_from_its_format(
    pii_rules: RuleSet, pii_scrubber: Scrubber, rule_id: str
) -> None:
    """The rule alone masks its examples, and so does the full scrubber."""
    rule = next(r for r in pii_rules.rules if r.id == rule_id)
    alone = Scrubber(RuleSet((rule,)))
    for seed in range(4):
        planted = SAMPLES[rule_id].make(random.Random(seed))
        by_rule = alone.scrub_secrets(planted.text)
        assert _gone(planted.core, by_rule.text), planted.text
        assert by_rule.counts.get(rule_id, 0) >= 1
        assert _gone(planted.core, pii_scrubber.scrub_secrets(planted.text).text)


@pytest.mark.parametrize("rule_id", ALL_RULE_IDS)
def test_near_misses_survive_every_rule(pii_scrubber: Scrubber, rule_id: str) -> None:
    """Look-alikes of the rule's format (bad checksum, too short, placeholders) stay as they are."""
    for seed in range(3):
        for text in SAMPLES[rule_id].near_misses(random.Random(seed)):
            assert pii_scrubber.scrub_secrets(text).text == text


ID_CONTEXTS = [
    pytest.param("{}", id="bare"),
    pytest.param("trace_id={}", id="key-value"),
    pytest.param('{{"id": "{}", "status": "not_found"}}', id="json"),
    pytest.param("job {} failed after 17 retries", id="message"),
    pytest.param("GET /v1/items/{}?cursor={}&limit=17", id="url"),
    pytest.param("traceparent: 00-{}-01", id="header"),
    pytest.param('"{{\\"call_id\\": \\"{}\\"}}"', id="json-escaped"),
]


@pytest.mark.parametrize("context", ID_CONTEXTS)
def test_benign_ids_survive(pii_scrubber: Scrubber, context: str) -> None:
    """Trace/span ids, UUIDs, ULIDs, SHAs, digests, object ids and job ids are never masked."""
    for value in BENIGN_IDS:
        text = context.format(value, value)
        assert pii_scrubber.scrub(text).text == text


WRAPPERS = [
    pytest.param(lambda t: f"tool lookup_job failed: {t}", id="plain"),
    pytest.param(lambda t: json.dumps({"args": t, "call_id": "call_17"}), id="json"),
    pytest.param(lambda t: json.dumps({"output": json.dumps({"args": t})}), id="json-in-json"),
    pytest.param(lambda t: "https://api.example.com/cb?state=" + quote(t, safe=""), id="percent"),
    pytest.param(lambda t: "ERROR failed\r\n" + t.replace("\n", "\r\n") + "\r\n", id="crlf"),
    pytest.param(lambda t: repr({"kwargs": t}), id="python-repr"),
    pytest.param(lambda t: f"<pre>{html.escape(t)}</pre>", id="html-escaped"),
]


@pytest.mark.parametrize("wrap", WRAPPERS)
@pytest.mark.parametrize("rule_id", ALL_RULE_IDS)
def test_planted_secret_in_wrapper_is_masked(
    pii_scrubber: Scrubber, rule_id: str, wrap: Callable[[str], str]
) -> None:
    """A secret JSON-escaped (once or twice), percent-encoded or in a repr is still masked."""
    planted = SAMPLES[rule_id].make(random.Random(17))
    out = pii_scrubber.scrub(wrap(planted.text)).text
    assert _gone(planted.core, out)


@pytest.mark.parametrize("encode", [b64encode, urlsafe_b64encode], ids=["std", "urlsafe"])
@pytest.mark.parametrize("rule_id", ALL_RULE_IDS)
def test_a_secret_in_base64_text_masks_the_whole_run(
    pii_scrubber: Scrubber, rule_id: str, encode: Callable[[bytes], bytes]
) -> None:
    """A config pasted as base64 (a Kubernetes Secret's data) is read: the run is masked."""
    planted = SAMPLES[rule_id].make(random.Random(17))
    run = encode(f"config:\n{planted.text}\n".encode()).decode()
    out = pii_scrubber.scrub(f"data:\n  env: {run}\nkind: Secret").text
    assert run not in out
    assert out.startswith("data:\n  env: [REDACTED:")
    assert out.endswith("]\nkind: Secret")


GLUE = [
    pytest.param("GET https://api.example.com/v1/callback/", id="url-path"),
    pytest.param("/state/", id="path"),
    pytest.param("x", id="one-char"),
    pytest.param("Authorization", id="word"),
    pytest.param("key_", id="underscore"),
    pytest.param("state-", id="hyphen"),
]


@pytest.mark.parametrize("encode", [b64encode, urlsafe_b64encode], ids=["std", "urlsafe"])
@pytest.mark.parametrize("glue", GLUE)
@pytest.mark.parametrize("rule_id", ALL_RULE_IDS)
def test_a_secret_in_base64_glued_to_a_word_is_masked(
    pii_scrubber: Scrubber, rule_id: str, glue: str, encode: Callable[[bytes], bytes]
) -> None:
    """Base64 right after a URL path or a word reads, as a run of base64 characters, with
    the glue in front ("/" is one, "-" and "_" are base64url ones), misaligned: decoded
    at each alignment, its secret is found and masked, and the glue is kept."""
    planted = SAMPLES[rule_id].make(random.Random(17))
    payloads = [f"config:\n{planted.text}\n"]
    if len(planted.text) >= 24:  # shorter is not read as base64 (32 characters at least)
        payloads.append(planted.text)
    for payload in payloads:
        run = encode(payload.encode()).decode()
        out = pii_scrubber.scrub(f"{glue}{run} end").text
        assert run not in out
        assert out.startswith(glue)
        assert "[REDACTED:" in out


@pytest.mark.parametrize("glue", ["GET /v1/callback/", "state-", "x"])
def test_a_glued_run_is_masked_from_its_earliest_secret(pii_scrubber: Scrubber, glue: str) -> None:
    """Two secrets in one glued run: the mask starts at the earlier in the text, not at the
    one whose rule happens to be checked first (the Slack URL stayed in clear)."""
    rng = random.Random(11)
    slack = SAMPLES["slack-webhook-url"].make(rng)
    github = SAMPLES["github-pat"].make(rng)
    payload = f"config:\nPOST {slack.text}\ngit push failed with {github.text}\n"
    run = b64encode(payload.encode()).decode()
    out = pii_scrubber.scrub(f"{glue}{run} end").text
    clear = out[len(glue) : out.index("[REDACTED:")]
    left = b64decode(clear + "=" * (-len(clear) % 4)).decode("utf-8", "replace")
    assert slack.core not in left
    assert github.core not in left


@pytest.mark.parametrize("pad", [1, 2, 3])
@pytest.mark.parametrize("glue", ["/v1/", "/v1/s/", "/v1/st/", "/v1/sta/"])
def test_two_glued_payloads_are_both_masked(pii_scrubber: Scrubber, glue: str, pad: int) -> None:
    """`/<glue>/<base64>/<base64>` is one run whose two payloads decode at different
    alignments: the earlier one is masked too, not only the alignment tried first."""
    rng = random.Random(1)
    first = SAMPLES["github-pat"].make(rng).text
    second = SAMPLES["openai-api-key"].make(rng).text
    a = urlsafe_b64encode(("token" + " " * pad + first + "\n").encode()).rstrip(b"=").decode()
    b = urlsafe_b64encode(("token " + second + "\n").encode()).rstrip(b"=").decode()
    out = pii_scrubber.scrub(f"GET {glue}{a}/{b} HTTP/1.1").text
    assert a[12:] not in out
    assert b[12:] not in out


def test_base64_of_plain_text_or_binary_is_left_alone(scrubber: Scrubber) -> None:
    """Ordinary text, hex ids and random bytes in base64 are not masked."""
    rng = random.Random(4)
    for raw in (
        b"hello world, this is an ordinary sentence about orders",
        bytes(rng.randrange(256) for _ in range(48)),
        b"4bf92f3577b34da6a3ce929d0e0e4736",
    ):
        for glue in ("", "/v1/callback/", "key_", "Authorization"):
            text = f"blob {glue}{b64encode(raw).decode()} end"
            assert scrubber.scrub(text).text == text


_INVISIBLE = ("\u200b", "\u200c", "\u200d", "\u2060", "\ufeff", "\u00ad")


@pytest.mark.parametrize("char", _INVISIBLE)
@pytest.mark.parametrize("rule_id", ["github-pat", "openai-api-key", "secret-assignment"])
def test_invisible_character_inside_a_secret_does_not_hide_it(
    scrubber: Scrubber, rule_id: str, char: str
) -> None:
    """A zero-width character or soft hyphen pasted into a token still leaves it masked."""
    planted = SAMPLES[rule_id].make(random.Random(5))
    cut = planted.text.index(planted.core) + len(planted.core) // 2
    out = scrubber.scrub(planted.text[:cut] + char + planted.text[cut:]).text
    assert _gone(planted.core, out.replace(char, ""))
    assert "[REDACTED:" in out


@pytest.mark.parametrize("prefix", ["ghp_", "gho_", "ghu_", "ghs_", "ghr_", "npm_"])
def test_checksummed_token_glued_to_a_word_is_masked(scrubber: Scrubber, prefix: str) -> None:
    """A CRC-carrying token inside an identifier (cache_ghp_…, …Xyz) is still found."""
    token = github_style_token(random.Random(9), prefix)
    for text in (f"cache_{token}.json", f"key{token}abc", f"id_{token}_v2"):
        out = scrubber.scrub(text).text
        assert token not in out, text
        assert "[REDACTED:" in out
    bad = github_style_token(random.Random(9), prefix, valid=False)
    assert scrubber.scrub(f"cache_{bad}.json").text == f"cache_{bad}.json"


def test_html_entities_inside_a_secret_are_decoded_and_masked_in_place(
    scrubber: Scrubber,
) -> None:
    """`&#65;` or `&quot;` in a token or around a key name is read as the character."""
    out = scrubber.scrub("<p>{&quot;api_key&quot;: &quot;Zx81kPq2&#76;mN0vB7rT5yWq&quot;}</p>").text
    assert out == "<p>{&quot;api_key&quot;: &quot;[REDACTED:secret-assignment]&quot;}</p>"
    assert scrubber.scrub("Tom &amp; Jerry &#8212; fine").text == "Tom &amp; Jerry &#8212; fine"


def test_json_escaped_key_value_is_masked_in_place(scrubber: Scrubber) -> None:
    """The mask replaces only the secret; the JSON-escaped structure stays valid."""
    value = '"{\\"api_key\\": \\"Zx81kPq2LmN0vB7rT5yWq\\", \\"job\\": \\"INV-17\\"}"'
    out = scrubber.scrub(value).text
    assert out == '"{\\"api_key\\": \\"[REDACTED:secret-assignment]\\", \\"job\\": \\"INV-17\\"}"'
    assert json.loads(json.loads(out))["job"] == "INV-17"


def test_percent_encoded_secret_is_masked_in_place(scrubber: Scrubber) -> None:
    """`?token=...%2F...` masks the whole encoded value and keeps the other parameters."""
    out = scrubber.scrub("GET /cb?token=Zx81kPq2%2FLmN0vB7rT5yW&page=2").text
    assert out == "GET /cb?token=[REDACTED:secret-assignment]&page=2"


def test_percent_encoded_url_with_credentials(scrubber: Scrubber) -> None:
    """A URL passed percent-encoded as a parameter loses its password, mapped back in place."""
    inner = quote("postgres://app:s3cr3tPassw0rd@db:5432/app", safe="")
    out = scrubber.scrub(f"/connect?dsn={inner}").text
    assert "s3cr3tPassw0rd" not in out
    assert out.startswith("/connect?dsn=postgres%3A%2F%2Fapp%3A[REDACTED:postgres-uri-password]")


def test_counts_are_per_rule_and_never_values(scrubber: Scrubber) -> None:
    """Scrubbed.counts maps rule ids to counts."""
    token = github_style_token(random.Random(1), "ghp_")
    out = scrubber.scrub(f"{token} and {token} and password=hunter22")
    assert dict(out.counts) == {"github-pat": 2, "password-assignment": 1}
    assert out.redactions == 3


def test_hmac_fingerprint_is_stable_per_key_and_secret() -> None:
    """With an HMAC key the same secret gets the same fingerprint; another key another one."""
    token = github_style_token(random.Random(2), "ghp_")
    first = Scrubber(load_rules(), hmac_key=b"k1").scrub(f"a {token} b {token}").text
    other = Scrubber(load_rules(), hmac_key=b"k2").scrub(f"a {token}").text
    marks = first.split()
    assert marks[1] == marks[3]
    assert marks[1].startswith("[REDACTED:github-pat:hmac=")
    assert other.split()[1] != marks[1]
    assert token not in first


def test_scrub_is_idempotent(scrubber: Scrubber) -> None:
    """Scrubbing a scrubbed value changes nothing more."""
    for rule_id in ALL_RULE_IDS:
        once = scrubber.scrub(SAMPLES[rule_id].make(random.Random(5)).text).text
        assert scrubber.scrub(once).text == once


def test_a_key_dressed_as_a_marker_is_masked(scrubber: Scrubber) -> None:
    """`[REDACTED:<key>]` is not a mask: the key inside is masked; a real marker is kept."""
    token = github_style_token(random.Random(8), "ghp_")
    out = scrubber.scrub(f"a [REDACTED:{token}] and token=[REDACTED:github-pat]")
    assert token not in out.text
    assert out.counts == {"github-pat": 1}
    assert out.text.endswith("token=[REDACTED:github-pat]")


def test_contains_secret(scrubber: Scrubber) -> None:
    """contains_secret is true for a secret and false for ids."""
    assert scrubber.contains_secret(github_style_token(random.Random(3), "ghp_"))
    assert not any(scrubber.contains_secret(value) for value in BENIGN_IDS)


def test_scrub_strips_traceback_before_masking(scrubber: Scrubber) -> None:
    """scrub() keeps a trace's exception and message, not its frames; scrub_secrets() leaves it."""
    trace = (
        "Traceback (most recent call last):\n"
        '  File "/home/alice/app/tools.py", line 3, in lookup\n'
        "    raise KeyError(job_id)\n"
        "KeyError: 'INV-17'\n"
    )
    out = scrubber.scrub("lookup failed: " + trace)
    assert out.text == "lookup failed: KeyError: 'INV-17'\n"
    assert out.counts["traceback"] == 1
    assert scrubber.scrub_secrets(trace).text == trace


BAD_INPUTS = [
    pytest.param("a" * (10 << 20), id="10MiB-one-char"),
    pytest.param("token=" * 200_000, id="keyword-repeated"),
    pytest.param("[" * 100_000 + "]" * 100_000, id="deep-json"),
    pytest.param('{"a":' * 50_000 + "1" + "}" * 50_000, id="deep-json-object"),
    pytest.param("\ud800 lone surrogate \udfff password=\udc80x", id="invalid-utf8-surrogates"),
    pytest.param("nul\x00bytes\x00password=\x00hunter22", id="nul-bytes"),
    pytest.param("\\" * 100_001 + "n", id="backslash-run"),
    pytest.param("%" * 50_000 + "%41" * 50_000, id="percent-run"),
    pytest.param("&#65;" * 100_000 + "\u200b" * 100_000, id="entity-and-invisible-run"),
    pytest.param("\n" * 100_000 + "Traceback (most recent call last):", id="many-lines-and-marker"),
    pytest.param("    at x\n" * 20_000, id="many-at-lines"),
    pytest.param("", id="empty"),
]


@pytest.mark.parametrize("value", BAD_INPUTS)
def test_bad_input_never_raises(scrubber: Scrubber, value: str) -> None:
    """Huge, repetitive, nested, invalid-UTF-8 and NUL-laden values are scrubbed, not raised."""
    out = scrubber.scrub(value)
    assert isinstance(out.text, str)


def test_oversized_value_is_truncated_and_counted() -> None:
    """A value over max_value_bytes is cut at a character boundary and marked."""
    scrubber = Scrubber(load_rules(), max_value_bytes=1000)
    out = scrubber.scrub("é" * 1000)
    assert out.text.endswith(TRUNCATED_MARKER)
    assert out.text.startswith("é" * 500)
    assert out.counts["truncated"] == 1


def test_invalid_utf8_replacement_characters_are_kept(scrubber: Scrubber) -> None:
    """Bytes decoded with errors='replace' upstream are ordinary text here."""
    value = b"\xff\xfeghp_ password=hunter22 \xc3".decode("utf-8", "replace")
    assert scrubber.scrub(value).text.endswith("password=[REDACTED:password-assignment] \ufffd")


def test_rule_that_can_match_empty_is_still_applied() -> None:
    """A regex that can match the empty string runs behind its keywords; empty matches mask nothing."""
    rule = Rule(id="maybe-empty", regex=r"(?:zz_[0-9]{4})?", keywords=("zz_",))
    scrubber = Scrubber(RuleSet((rule,)))
    assert scrubber.scrub_secrets("id zz_1234 here").text == "id [REDACTED:maybe-empty] here"
    assert scrubber.scrub_secrets("nothing").text == "nothing"


def test_scrubber_is_thread_safe(scrubber: Scrubber) -> None:
    """Concurrent scrubs give the same results as sequential ones."""
    values = [SAMPLES[r].make(random.Random(i)).text for i, r in enumerate(ALL_RULE_IDS)] * 4
    expected = [scrubber.scrub(v).text for v in values]
    results: dict[int, list[str]] = {}

    def work(slot: int) -> None:
        results[slot] = [scrubber.scrub(v).text for v in values]

    threads = [threading.Thread(target=work, args=(slot,)) for slot in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert all(result == expected for result in results.values())


ENTROPY = [
    pytest.param(b"", 0.0, id="empty"),
    pytest.param(b"aaaa", 0.0, id="one-symbol"),
    pytest.param(b"abcd", 2.0, id="four-symbols"),
]


@pytest.mark.parametrize(("data", "bits"), ENTROPY)
def test_shannon_entropy(data: bytes, bits: float) -> None:
    """Entropy is gitleaks' Shannon measure in bits per byte."""
    assert shannon_entropy(data) == pytest.approx(bits)


WINDOW = 64 << 10
STRADDLE = [
    pytest.param(WINDOW - 20, "github-pat", id="token-across-first-window-end"),
    pytest.param(3 * WINDOW - 5, "github-pat", id="token-across-later-window-end"),
    pytest.param(WINDOW - 300, "private-key", id="pem-block-across-window-end"),
    pytest.param(WINDOW + 100, "jwt", id="jwt-in-overlap"),
]


@pytest.mark.parametrize(("offset", "rule_id"), STRADDLE)
def test_secret_across_scan_window_boundary_is_masked(
    scrubber: Scrubber, offset: int, rule_id: str
) -> None:
    """Large values are scanned in windows; a secret on a window edge is still masked."""
    planted = SAMPLES[rule_id].make(random.Random(offset))
    filler = "lorem ipsum dolor sit amet " * (offset // 27 + 1)
    value = filler[:offset] + " " + planted.text + " " + filler
    out = scrubber.scrub(value)
    assert _gone(planted.core, out.text)
    assert out.counts[rule_id] == 1


def test_unbounded_match_spanning_many_windows_is_masked_whole(scrubber: Scrubber) -> None:
    """A 300 KiB cookie header (one match over several windows) is masked to its end."""
    cookie = "Cookie: " + "; ".join(f"c{i}=v{i:06d}" for i in range(30_000))
    out = scrubber.scrub("before\n" + cookie + "\nafter")
    assert out.text == "before\nCookie: [REDACTED:cookie-header]\nafter"


def test_hand_built_rule_with_bad_regex_is_refused_by_name() -> None:
    """A Rule built in code (not loaded) is checked at Scrubber construction too."""
    with pytest.raises(RulesError) as caught:
        Scrubber(RuleSet((Rule(id="mine", regex="(?=x)y"),)))
    assert caught.value.entry == "mine"
    assert caught.value.field == "regex"


def test_form_encoded_secrets_are_found(scrubber: Scrubber) -> None:
    """HTML-form encoding writes a space as "+" (urlencode's default): a private key or a
    bearer token sent that way is masked like its percent-encoded form."""
    from urllib.parse import urlencode

    body = "MIIEowIBAAKCAQEAx7v+Zk3Jq9Lm2Pn4Rs6Tu8Vw0Xy2Za4Bc6De8Fg0Hi2Jk4Lm6No8Pq0Rs2Tu4"
    pem = f"-----BEGIN RSA PRIVATE KEY-----\n{body}\n-----END RSA PRIVATE KEY-----"
    encoded = urlencode({"key": pem, "note": "a+b stays"})
    masked = scrubber.scrub_secrets(encoded)
    assert "Jq9Lm2Pn4Rs6" not in masked.text
    assert masked.counts.get("private-key") == 1
    assert masked.text.endswith("note=a%2Bb+stays")  # the rest is left as it was


def _rand(seed: int, alphabet: str, n: int) -> str:
    rng = random.Random(seed)
    return "".join(rng.choice(alphabet) for _ in range(n))


_AN = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
_URLSAFE = _AN + "-_"
_SECRET = _rand(1, _AN, 22)  # the value planted where the text has one secret
_JWE_HEADER = "eyJhbGciOiJkaXIiLCJlbmMiOiJBMjU2R0NNIn0"  # {"alg":"dir","enc":"A256GCM"}

# Each text hides `_SECRET` (or the token named after it) in a form a review found leaking.
EVASIONS = [
    pytest.param(f"\x1b[32msk_live_{_SECRET}Ab\x1b[0m", id="ansi-before-token"),
    pytest.param(f"api_key\x1b[0m=\x1b[31m{_SECRET}\x1b[0m", id="ansi-inside-assignment"),
    pytest.param(f"q=Bearer+{_SECRET}&page=2", id="form-plus-without-percent"),
    pytest.param(f"xsk_live_{_SECRET}Ab", id="stripe-glued"),
    pytest.param(f"PRIVATE_KEY={_SECRET}{_rand(2, _AN, 1600)}", id="long-assignment-value"),
    pytest.param(f"<privateKey>{_SECRET}{_rand(3, _AN, 1600)}</privateKey>", id="long-xml-value"),
    pytest.param(f"refresh failed: sk-ant-ort01-{_SECRET}{_rand(4, _URLSAFE, 71)}AA", id="ant-ort"),
    pytest.param(f"claude.ai: sk-ant-sid01-{_SECRET}{_rand(5, _URLSAFE, 64)}AA", id="ant-sid"),
    pytest.param(
        f"401 for glpat-{_SECRET}{_rand(6, _URLSAFE, 9)}.01.abc123xyz", id="glpat-routable"
    ),
    pytest.param(
        f"key: sk-None-{_SECRET}{_rand(7, _AN, 52)}T3BlbkFJ{_rand(8, _AN, 74)}", id="sk-none"
    ),
    pytest.param(
        f"upload: pypi-AgENdGVzdC5weXBpLm9yZw{_SECRET}{_rand(9, _URLSAFE, 60)}", id="testpypi"
    ),
    pytest.param(
        f"session {_JWE_HEADER}..{_SECRET}.{_rand(10, _URLSAFE, 90)}.{_rand(11, _URLSAFE, 22)}",
        id="jwe",
    ),
    pytest.param(f"slack: xoxb-12345678901-{_SECRET}Ab", id="slack-legacy-bot"),
    pytest.param(f"AKIAIOSFODNN7ABCDEFG\n{_SECRET}{_rand(12, _AN, 18)}", id="aws-secret-next-line"),
    pytest.param(f"SET PASSWORD FOR 'bob'@'%' = '{_SECRET}'", id="sql-set-password"),
    pytest.param(f"deploy --db-password {_SECRET} --region eu", id="cli-prefixed-flag"),
    pytest.param(f"{{'password': b'{_SECRET}'}}", id="bytes-repr"),
    pytest.param(f'{{"password": ["{_SECRET}"]}}', id="list-value"),
    pytest.param(f'{{"auths": {{"r.io": {{"auth": "{_SECRET}"}}}}}}', id="docker-auth"),
    pytest.param(f"Ocp-Apim-Subscription-Key: {_SECRET}", id="azure-apim-header"),
    pytest.param(f"pass: {_SECRET}", id="yaml-pass"),
    pytest.param(f"postgres://app:{_SECRET}/x#y@db:5432/app", id="db-uri-slash-in-password"),
    pytest.param(f"https://u:{_SECRET}@ab@example.com/x", id="url-at-in-password"),
]


@pytest.mark.parametrize("text", EVASIONS)
def test_review_evasions_are_masked(scrubber: Scrubber, text: str) -> None:
    """Forms a red-team review found leaking: colour codes, form encoding, long values,
    newer token formats, key names the rules lacked."""
    out = scrubber.scrub(text).text
    assert _SECRET not in out, out
    assert "[REDACTED:" in out


def test_form_space_view_leaves_timestamps_and_plain_text_alone(scrubber: Scrubber) -> None:
    """ "+00:00" and "C++" build no view; plain form text is unchanged."""
    for text in ("at 2026-11-30T10:00:00+00:00 ok", "C++ build", "q=red+shoes&page=2"):
        assert scrubber.scrub(text).text == text


@pytest.mark.parametrize(
    ("text", "masked"),
    [
        pytest.param("GB82 WEST 1234 5698 7654 32", True, id="gb-printed"),
        pytest.param("GB82WEST12345698765432", True, id="gb-electronic"),
        # A ULID that passes mod 97, of a "country" CB that issues no IBANs.
        pytest.param("CB18GR629BZMG2TB15MMP6F8MT", False, id="ulid-no-such-country"),
        # A real country with the wrong length for it (Germany's are 22).
        pytest.param("DE89370400440532013000123", False, id="de-wrong-length"),
    ],
)
def test_an_iban_needs_its_countrys_length(pii_scrubber: Scrubber, text: str, masked: bool) -> None:
    """Only a string of an IBAN country's own length counts as an IBAN: the mod-97 check alone
    passes one string in 97, and masked ULIDs in a benign-id property run."""
    assert (pii_scrubber.scrub(text).text != text) is masked


IDEMPOTENT = [
    pytest.param('[%"D::>D::>', id="addresses-sharing-a-delimiter"),
    pytest.param("hosts 8.8.8.8 1.1.1.1 9.9.9.9", id="addresses-space-separated"),
]


@pytest.mark.parametrize("value", IDEMPOTENT)
def test_scrubbing_twice_changes_nothing(pii_scrubber: Scrubber, value: str) -> None:
    """Two findings sharing one delimiter (one match's trailing context, the next's leading
    one) are both masked in the first pass, so a second scrub masks nothing more."""
    once = pii_scrubber.scrub(value).text
    assert pii_scrubber.scrub(once).text == once
    assert "D::>" not in once
    assert "8.8.8.8" not in once
