"""Fake credentials generated from each built-in rule's published format, for tests and bench.

Nothing here is a real key: every value is drawn from a seeded `random.Random` at call time,
shaped like the provider's format (prefix, alphabet, length, checksum where the format has
one). `SAMPLES[rule_id]` gives, per built-in rule:

  make(rng) -> Planted   a text that must be masked, and `core`, a random part of the secret
                         that must not survive scrubbing in any form
  near_misses(rng)       texts that look alike but are not that credential; the full default
                         scrubber must leave them unchanged

Users testing their own rules can use the same helpers (`rand`, `github_style_token`).

Over 600 lines on purpose: `_build` is one table with a row per built-in rule, read beside
the few generators its rows call; cut by provider, the one place that shows every rule has
samples would be scattered over files that each restate the same helpers.
"""

from __future__ import annotations

import base64
import binascii
import json
import random
import string
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Final

__all__ = [
    "BENIGN_IDS",
    "SAMPLES",
    "Planted",
    "RuleSamples",
    "benign_ids",
    "github_style_token",
    "rand",
]

UPPER: Final = string.ascii_uppercase
LOWER: Final = string.ascii_lowercase
DIGITS: Final = string.digits
ALNUM: Final = string.ascii_letters + string.digits
HEX: Final = "0123456789abcdef"
B64: Final = ALNUM + "+/"
B64URL: Final = ALNUM + "-_"
_BASE62: Final = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
_BECH32: Final = "QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L"


@dataclass(frozen=True, slots=True)
class Planted:
    """A text containing one fake credential, and the random core that must be masked."""

    text: str
    core: str


@dataclass(frozen=True, slots=True)
class RuleSamples:
    """Generators of positives and near misses for one rule."""

    make: Callable[[random.Random], Planted]
    near_misses: Callable[[random.Random], list[str]]


def rand(rng: random.Random, alphabet: str, n: int) -> str:
    """`n` characters drawn from `alphabet`."""
    return "".join(rng.choice(alphabet) for _ in range(n))


def _base62(value: int) -> str:
    digits = []
    while value:
        value, rest = divmod(value, 62)
        digits.append(_BASE62[rest])
    return "".join(reversed(digits)).rjust(6, "0")


def github_style_token(rng: random.Random, prefix: str, *, valid: bool = True) -> str:
    """A GitHub/npm-style token: prefix + 30 base62 + base62 CRC32 of those 30."""
    body = rand(rng, ALNUM, 30)
    checksum = _base62(binascii.crc32(body.encode()))
    if not valid:
        checksum = checksum[:-1] + ("0" if checksum[-1] != "0" else "1")
    return prefix + body + checksum


def _luhn_digit(digits: str) -> str:
    total = 0
    for index, ch in enumerate(reversed(digits)):
        digit = int(ch)
        if index % 2 == 0:
            digit *= 2
            if digit > 9:
                digit -= 9
        total += digit
    return str((10 - total % 10) % 10)


def _card(rng: random.Random, *, valid: bool = True) -> str:
    body = "4" + rand(rng, DIGITS, 14)
    check = _luhn_digit(body)
    if not valid:
        check = str((int(check) + 1) % 10)
    digits = body + check
    return " ".join(digits[i : i + 4] for i in range(0, 16, 4))


def _iban(rng: random.Random, *, valid: bool = True) -> str:
    bban = rand(rng, DIGITS, 18)
    numeric = "".join(str(int(ch, 36)) for ch in bban + "DE00")
    check = 98 - int(numeric) % 97
    if not valid:
        check = check % 97 + 1 if check != 97 else 2
    return f"DE{check:02d}{bban}"


def _jwt(rng: random.Random) -> str:
    def enc(obj: object) -> str:
        return base64.urlsafe_b64encode(json.dumps(obj).encode()).rstrip(b"=").decode()

    header = enc({"alg": "HS256", "typ": "JWT"})
    payload = enc({"sub": rand(rng, ALNUM, 12), "iat": rng.randrange(10**9, 2 * 10**9)})
    return f"{header}.{payload}.{rand(rng, B64URL, 43)}"


def _pem(rng: random.Random, label: str) -> Planted:
    lines = [rand(rng, B64, 64) for _ in range(6)]
    body = "\n".join(lines)
    return Planted(f"-----BEGIN {label}-----\n{body}\n-----END {label}-----", lines[2])


def _token(prefix: str, alphabet: str, n: int, context: str = "{}") -> RuleSamples:
    """A rule whose secret is a fixed prefix plus `n` random characters."""

    def make(rng: random.Random) -> Planted:
        core = rand(rng, alphabet, n)
        return Planted(context.format(prefix + core), core)

    def near(rng: random.Random) -> list[str]:
        # Too short to be the credential, and not behind a secret-like key name.
        return [f"see {prefix}{rand(rng, alphabet, min(8, n // 3))} for details"]

    return RuleSamples(make, near)


def _plain(
    make_secret: Callable[[random.Random], tuple[str, str]],
    context: str,
    near: Callable[[random.Random], list[str]],
) -> RuleSamples:
    def make(rng: random.Random) -> Planted:
        secret, core = make_secret(rng)
        return Planted(context.format(secret), core)

    return RuleSamples(make, near)


def _same(alphabet: str, n: int) -> Callable[[random.Random], tuple[str, str]]:
    def make(rng: random.Random) -> tuple[str, str]:
        value = rand(rng, alphabet, n)
        return value, value

    return make


def _gh(prefix: str) -> RuleSamples:
    def make(rng: random.Random) -> Planted:
        token = github_style_token(rng, prefix)
        return Planted(f"git push failed with {token}", token[len(prefix) :])

    def near(rng: random.Random) -> list[str]:
        return [
            f"git push failed with {github_style_token(rng, prefix, valid=False)}",  # bad CRC
            f"prefix {prefix}{rand(rng, ALNUM, 20)} only",
        ]

    return RuleSamples(make, near)


def _uri(scheme: str, user: str = "app_user", host: str = "db.internal:5432/app") -> RuleSamples:
    def make(rng: random.Random) -> Planted:
        password = rand(rng, ALNUM, 14) + "!*"
        return Planted(f"connect {scheme}://{user}:{password}@{host} failed", password[:14])

    def near(rng: random.Random) -> list[str]:
        return [f"connect {scheme}://{host} failed", f"{scheme} pool size 17"]

    return RuleSamples(make, near)


def _uuid(rng: random.Random) -> str:
    return str(uuid.UUID(int=rng.getrandbits(128), version=4))


def _ssn(rng: random.Random) -> str:
    area, group, serial = rng.randrange(1, 666), rng.randrange(1, 100), rng.randrange(1, 10000)
    return f"{area:03d}-{group:02d}-{serial:04d}"


def _public_ipv4(rng: random.Random) -> str:
    return "81." + ".".join(str(rng.randrange(1, 255)) for _ in range(3))


def _no_near(_rng: random.Random) -> list[str]:
    return []


def _build() -> dict[str, RuleSamples]:  # noqa: PLR0915 - one table row per rule
    s: dict[str, RuleSamples] = {}
    s["aws-access-key-id"] = RuleSamples(
        lambda r: Planted(f"key {(c := 'AKIA' + rand(r, UPPER + '234567', 16))} used", c[4:]),
        lambda r: [
            "key AKIAIOSFODNN7EXAMPLE from the AWS docs",  # documentation example
            f"key AKIA{rand(r, UPPER, 12)} used",  # too short
        ],
    )
    s["aws-secret-access-key"] = _plain(
        _same(B64, 40),
        "aws_secret_access_key = {}",
        lambda r: ["aws_region = us-east-1", f"aws_secret_access_key = {'x' * 40}"],
    )
    s["aws-session-token"] = _token("IQoJb3JpZ2luX2Vj", B64, 300)
    s["gcp-api-key"] = _token("AIza", B64URL, 35)
    s["gcp-private-key-id"] = _plain(
        _same(HEX, 40),
        '{{"type": "service_account", "private_key_id": "{}"}}',
        lambda r: ['{"type": "service_account", "project_id": "demo-17"}'],
    )
    s["gcp-oauth-client-secret"] = _token("GOCSPX-", B64URL, 28)
    s["google-oauth-access-token"] = _token("ya29.", B64URL, 120)
    s["azure-storage-account-key"] = _plain(
        lambda r: ((k := rand(r, B64, 86)) + "==", k),
        "DefaultEndpointsProtocol=https;AccountName=acct1;AccountKey={};"
        "EndpointSuffix=core.windows.net",
        lambda r: ["DefaultEndpointsProtocol=https;AccountName=acct1;EndpointSuffix=core"],
    )
    s["azure-shared-access-key"] = _plain(
        lambda r: ((k := rand(r, B64, 43)) + "=", k),
        "Endpoint=sb://ns1.servicebus.windows.net/;SharedAccessKeyName=Root;SharedAccessKey={}",
        lambda r: ["Endpoint=sb://ns1.servicebus.windows.net/;SharedAccessKeyName=Root"],
    )
    s["azure-sas-token"] = _plain(
        lambda r: ((k := rand(r, ALNUM, 43)) + "%3D", k),
        "https://acct1.blob.core.windows.net/c1/b.txt?sv=2022-11-02&ss=b&sp=r"
        "&se=2026-01-01T00:00:00Z&sig={}",
        lambda r: ["https://acct1.blob.core.windows.net/c1/b.txt?sv=2022-11-02&sp=r"],
    )
    s["azure-ad-client-secret"] = _plain(
        lambda r: (
            (k := rand(r, ALNUM, 3) + rand(r, DIGITS, 1) + "Q~" + rand(r, ALNUM + "_~.-", 34)),
            k[6:],
        ),
        "client credential {} rejected",
        lambda r: ["the Q~ sign", "abc1Q~short"],
    )
    s["digitalocean-token"] = _token("dop_v1_", HEX, 64)
    s["alibaba-access-key-id"] = _token("LTAI", ALNUM, 20)
    s["github-pat"] = _gh("ghp_")
    s["github-oauth-token"] = _gh("gho_")
    s["github-app-token"] = _gh("ghs_")
    s["github-refresh-token"] = _gh("ghr_")
    s["github-fine-grained-pat"] = RuleSamples(
        lambda r: Planted(f"token github_pat_{rand(r, ALNUM, 22)}_{(c := rand(r, ALNUM, 59))}", c),
        lambda r: [f"github_pat_{rand(r, ALNUM, 10)} is too short"],
    )
    s["gitlab-pat"] = _token("glpat-", B64URL, 20)
    s["gitlab-ci-token"] = _token("glptt-", HEX, 40)
    s["bitbucket-app-password"] = _token("ATBB", ALNUM, 32)
    s["atlassian-api-token"] = _token("ATATT3", ALNUM, 186)
    s["stripe-secret-key"] = _token("sk_live_", ALNUM, 99)
    s["stripe-restricted-key"] = _token("rk_test_", ALNUM, 99)
    s["stripe-webhook-secret"] = _token("whsec_", ALNUM, 32)
    s["square-token"] = _token("sq0atp-", B64URL, 22)
    s["braintree-access-token"] = RuleSamples(
        lambda r: Planted(
            f"access_token$production${rand(r, LOWER + DIGITS, 16)}${(c := rand(r, HEX, 32))}",
            c,
        ),
        lambda r: ["access_token$sandbox$short"],
    )
    s["shopify-token"] = _token("shpat_", HEX, 32)
    s["slack-bot-token"] = RuleSamples(
        lambda r: Planted(
            f"xoxb-{rand(r, DIGITS, 11)}-{rand(r, DIGITS, 13)}-{(c := rand(r, ALNUM, 24))}", c
        ),
        lambda r: ["xoxb-17 is not a token"],
    )
    s["slack-user-token"] = RuleSamples(
        lambda r: Planted(
            f"xoxp-{rand(r, DIGITS, 11)}-{rand(r, DIGITS, 11)}-{rand(r, DIGITS, 12)}-"
            f"{(c := rand(r, HEX, 32))}",
            c,
        ),
        lambda r: ["xoxp-17-x"],
    )
    s["slack-app-token"] = RuleSamples(
        lambda r: Planted(
            f"xapp-1-A{rand(r, UPPER + DIGITS, 10)}-{rand(r, DIGITS, 13)}-"
            f"{(c := rand(r, HEX, 64))}",
            c,
        ),
        lambda r: ["xapp-1-A17"],
    )
    s["slack-config-token"] = _token("xoxe.xoxp-1-", ALNUM, 160)
    s["slack-webhook-url"] = RuleSamples(
        lambda r: Planted(
            f"POST https://hooks.slack.com/services/T{rand(r, UPPER + DIGITS, 8)}/"
            f"B{rand(r, UPPER + DIGITS, 10)}/{(c := rand(r, ALNUM, 24))}",
            c,
        ),
        lambda r: ["see https://api.slack.com/messaging/webhooks"],
    )
    s["discord-bot-token"] = RuleSamples(
        lambda r: Planted(
            f"bot M{rand(r, ALNUM, 23)}.{rand(r, ALNUM, 6)}.{(c := rand(r, ALNUM, 38))}", c
        ),
        lambda r: ["version M1.2.3 of the bot"],
    )
    s["discord-webhook-url"] = RuleSamples(
        lambda r: Planted(
            f"https://discord.com/api/webhooks/{rand(r, DIGITS, 18)}/{(c := rand(r, B64URL, 68))}",
            c,
        ),
        lambda r: ["https://discord.com/developers/docs/resources/webhook"],
    )
    s["telegram-bot-token"] = RuleSamples(
        lambda r: Planted(f"bot{rand(r, DIGITS, 10)}:AA{(c := rand(r, B64URL, 33))}/getMe", c),
        lambda r: ["at 12:AA17 the job ran"],
    )
    s["teams-webhook-url"] = RuleSamples(
        lambda r: Planted(
            f"https://contoso.webhook.office.com/webhookb2/{_uuid(r)}@{_uuid(r)}/"
            f"IncomingWebhook/{(c := rand(r, HEX, 32))}/{_uuid(r)}",
            c,
        ),
        lambda r: ["https://learn.microsoft.com/microsoftteams/platform/webhooks"],
    )
    s["twilio-api-key"] = _token("SK", HEX, 32)
    s["sendgrid-api-key"] = RuleSamples(
        lambda r: Planted(f"SG.{rand(r, B64URL, 22)}.{(c := rand(r, ALNUM, 43))}", c),
        lambda r: ["SG.17 is a region"],
    )
    s["mailgun-api-key"] = _token("key-", HEX, 32)
    s["mailchimp-api-key"] = RuleSamples(
        lambda r: Planted(f"apikey {(c := rand(r, HEX, 32))}-us14", c),
        lambda r: ["region -us14"],
    )
    s["openai-api-key"] = _token("sk-proj-", B64URL, 156)
    s["anthropic-api-key"] = RuleSamples(
        lambda r: Planted(f"x-api-key sk-ant-api03-{(c := rand(r, B64URL, 93))}AA", c),
        lambda r: ["model sk-ant-api03-short"],
    )
    s["huggingface-token"] = _token("hf_", string.ascii_letters, 34)
    s["groq-api-key"] = _token("gsk_", ALNUM, 52)
    s["replicate-api-token"] = _token("r8_", ALNUM, 37)
    s["perplexity-api-key"] = _token("pplx-", ALNUM, 48)
    s["xai-api-key"] = _token("xai-", ALNUM, 80)
    s["openrouter-api-key"] = _token("sk-or-v1-", HEX, 64)
    s["langsmith-api-key"] = RuleSamples(
        lambda r: Planted(f"lsv2_pt_{(c := rand(r, HEX, 32))}_{rand(r, HEX, 10)}", c),
        lambda r: ["lsv2_pt_17"],
    )
    s["langfuse-secret-key"] = RuleSamples(
        lambda r: Planted(f"LANGFUSE key sk-lf-{(c := _uuid(r))}", c),
        lambda r: [f"public key pk-lf-{_uuid(r)}"],  # the public key is not a secret
    )
    s["tavily-api-key"] = _token("tvly-dev-", ALNUM, 32)
    s["logfire-token"] = _token("pylf_v1_us_", ALNUM, 48)
    s["npm-access-token"] = _gh("npm_")
    s["pypi-upload-token"] = _token("pypi-AgEIcHlwaS5vcmc", B64URL, 120)
    s["rubygems-api-key"] = _token("rubygems_", HEX, 48)
    s["docker-hub-token"] = _token("dckr_pat_", B64URL, 27)
    s["nuget-api-key"] = _token("oy2", LOWER + DIGITS, 43)
    s["vercel-token"] = _token("vcp_", ALNUM, 56)
    s["linear-api-key"] = _token("lin_api_", ALNUM, 40)
    s["notion-token"] = _token("ntn_", ALNUM, 46)
    s["databricks-token"] = _token("dapi", HEX, 32)
    s["cloudflare-api-token"] = _plain(
        _same(B64URL, 40), "CLOUDFLARE_API_TOKEN={}", lambda r: ["CLOUDFLARE_ZONE=example.com"]
    )
    s["vault-token"] = _token("hvs.", B64URL, 90)
    s["doppler-token"] = _token("dp.st.prd.", ALNUM, 40)
    s["onepassword-service-account-token"] = _token("ops_eyJ", B64, 200)
    s["age-secret-key"] = _token("AGE-SECRET-KEY-1", _BECH32, 58)
    s["datadog-api-key"] = _plain(
        _same(HEX, 32), "DD_API_KEY={}", lambda r: ["DD_SITE=datadoghq.eu", "DD_ENV=prod"]
    )
    s["newrelic-key"] = _token("NRAK-", UPPER + DIGITS, 27)
    s["sentry-token"] = _token("sntryu_", HEX, 64)
    s["sentry-dsn"] = _plain(
        _same(HEX, 32),
        "dsn=https://" + "ab12" * 8 + ":{}@o450000.ingest.sentry.io/4504000000000000",
        lambda r: [
            "see https://docs.sentry.io/platforms/python/ for setup",
            # the public key alone is public by design
            f"dsn=https://{rand(r, HEX, 32)}@o450000.ingest.sentry.io/4504000000000000",
        ],
    )
    s["grafana-token"] = RuleSamples(
        lambda r: Planted(f"glsa_{(c := rand(r, ALNUM, 32))}_{rand(r, HEX, 8)}", c),
        lambda r: ["glsa_17"],
    )
    s["dynatrace-token"] = RuleSamples(
        lambda r: Planted(
            f"Api-Token dt0c01.{rand(r, UPPER + DIGITS, 24)}.{(c := rand(r, UPPER + DIGITS, 64))}",
            c,
        ),
        lambda r: ["dt0c01.17"],
    )
    s["honeycomb-api-key"] = _plain(
        _same(ALNUM, 32), "x-honeycomb-team: {}", lambda r: ["x-honeycomb-dataset: agent-tools"]
    )
    s["posthog-personal-api-key"] = _token("phx_", ALNUM, 43)
    s["jwt"] = RuleSamples(
        lambda r: Planted(f"id_token {(t := _jwt(r))}", t.rsplit(".", 1)[1]),
        lambda r: [f"eyJ{rand(r, LOWER, 10)}.eyJ{rand(r, LOWER, 10)}.x"],  # header is not JSON
    )
    s["private-key"] = RuleSamples(
        lambda r: _pem(r, "PRIVATE KEY"),
        lambda r: [_pem(r, "PUBLIC KEY").text, _pem(r, "CERTIFICATE").text],
    )
    s["openssh-private-key"] = RuleSamples(
        lambda r: _pem(r, "OPENSSH PRIVATE KEY"), lambda r: [f"ssh-ed25519 {rand(r, B64, 68)}"]
    )
    s["pgp-private-key"] = RuleSamples(
        lambda r: _pem(r, "PGP PRIVATE KEY BLOCK"), lambda r: [_pem(r, "PGP PUBLIC KEY BLOCK").text]
    )
    s["putty-private-key"] = RuleSamples(
        lambda r: Planted(
            "PuTTY-User-Key-File-3: ssh-ed25519\nEncryption: none\nComment: k\n"
            f"Public-Lines: 1\n{rand(r, B64, 60)}\nPrivate-Lines: 1\n{(c := rand(r, B64, 60))}\n"
            f"Private-MAC: {rand(r, HEX, 64)}",
            c,
        ),
        lambda r: ["PuTTY 0.81 release notes"],
    )
    s["postgres-uri-password"] = _uri("postgresql")
    s["mysql-uri-password"] = _uri("mysql+pymysql")
    s["mongodb-uri-password"] = _uri("mongodb+srv", host="cluster0.example.mongodb.net/app")
    s["redis-uri-password"] = _uri("rediss", user="", host="cache.internal:6380/0")
    s["amqp-uri-password"] = _uri("amqps", user="worker", host="mq.internal:5671/vhost")
    s["url-credentials"] = _uri("https", user="deploy", host="git.example.com/org/repo.git")
    s["authorization-header"] = _plain(
        _same(B64URL, 40),
        "Authorization: Bearer {}",
        lambda r: ["authorized=true", "the authorization server"],
    )
    s["bearer-token"] = _plain(
        _same(B64URL, 40), "sent 'Bearer {}' upstream", lambda r: ["bearer of bad news"]
    )
    s["basic-auth-credentials"] = _plain(
        lambda r: (
            base64.b64encode(f"svc:{(p := rand(r, ALNUM, 18))}".encode()).decode(),
            base64.b64encode(f"svc:{p}".encode()).decode()[4:20],
        ),
        "curl -H 'X-Auth: Basic {}'",
        lambda r: ["basic information about the customer", "Basic auth is disabled"],
    )
    s["cookie-header"] = _plain(
        _same(ALNUM, 32),
        "Cookie: sessionid={}; theme=dark",
        lambda r: ["cookie_consent=true", "cookies disabled"],
    )
    s["password-assignment"] = _plain(
        _same(ALNUM, 12),
        '{{"user": "bob", "password": "{}"}}',
        lambda r: [
            '{"password_required": false}',
            "DB_PASSWORD=${DB_PASSWORD}",
            "password: <redacted>",
        ],
    )
    s["secret-assignment"] = _plain(
        _same(ALNUM, 32),
        "client_secret={}&grant_type=client_credentials",
        lambda r: [
            "max_tokens=4096",
            '{"token_type": "Bearer", "expires_in": 3600}',
            '{"token_count": 12345678}',
            '{"idempotency_key": "INV-17"}',
            '{"next_page_token": "CiAKGjBpNDd2Nmp4ZHJ5aGFvbzEyMzQ1Ng"}',  # a cursor
        ],
    )
    s["query-key-parameter"] = _plain(
        _same(ALNUM, 39),
        "GET https://maps.example.com/geocode/json?address=Main+St&key={} failed: 403",
        lambda r: [
            "GET /v1/items?sort=key&api=v2 failed",
            "GET /v1/items?key=12345678901234 failed",  # a number, not a credential
            "GET /v1/items?key=${MAPS_KEY} failed",
        ],
    )
    s["short-password-name"] = _plain(
        _same(ALNUM, 12),
        '{{"user": "bob", "pass": "{}"}}',
        lambda r: ['{"pass": true, "fail": 0}', '{"pass": 17}', "tests pass=12 fail=0"],
    )
    s["signed-url-signature"] = _plain(
        _same(ALNUM, 40),
        "GET https://b.s3.amazonaws.com/r.pdf?X-Amz-Expires=900&X-Amz-Signature={}&x=1 -> 403",
        lambda r: ["the request signature we calculated does not match", "?signature=short"],
    )
    s["sql-password"] = _plain(
        _same(ALNUM, 14),
        "psycopg.errors: ALTER ROLE app WITH LOGIN PASSWORD '{}' failed",
        lambda r: ["password must be at least 8 characters", "the password 'is' wrong"],
    )
    s["redis-auth-command"] = _plain(
        _same(ALNUM, 20),
        "redis> AUTH default {}",
        lambda r: ["auth failed for user bob", "AUTH required before SET"],
    )
    s["netrc-password"] = _plain(
        _same(ALNUM, 16),
        "machine api.example.com login deploy password {}",
        lambda r: ["machine learning login page", "the machine has no password set"],
    )
    s["credential-pair"] = _plain(
        _same(ALNUM, 18),
        'env: [{{"name": "DB_PASSWORD", "value": "{}"}}, {{"name": "PORT", "value": "8080"}}]',
        lambda r: ['{"name": "PORT", "value": "8080"}', "auth=('bob', None)"],
    )
    s["cli-secret-flag"] = _plain(
        _same(ALNUM, 16),
        "deploy --api-key {} --region eu-west-1",
        lambda r: [
            "use --tokens 4096 for long answers",
            "deploy --password $DB_PASSWORD",
            "login --password-file /run/secrets/db",
        ],
    )
    s["cli-password-option"] = _plain(
        _same(ALNUM, 14),
        "mysql -h db -u root -p{} orders",
        lambda r: ["mysql -u root -p orders", "docker login --password-stdin registry"],
    )
    s["curl-user-password"] = _plain(
        _same(ALNUM, 14),
        "curl -sS -u deploy:{} https://api.internal/v1/jobs",
        lambda r: ["curl -u deploy https://api.internal/", "curl --user-agent x/1.0 https://x"],
    )
    s["xml-secret-element"] = _plain(
        _same(ALNUM, 18),
        "<config><user>bob</user><apiKey>{}</apiKey></config>",
        lambda r: ["<token>${TOKEN}</token>", "<password>***</password>", "<tokens>42</tokens>"],
    )
    s["aws-secret-after-key-id"] = RuleSamples(
        lambda r: Planted(
            "Access key ID,Secret access key\n"
            f"AKIA{rand(r, UPPER + '234567', 16)},{(c := rand(r, B64, 40))}\n",
            c,
        ),
        lambda r: [f"AKIA key and then {rand(r, LOWER, 12)} words"],
    )
    s["ai-platform-key"] = _token("pcsk_", ALNUM, 60)
    s["aws-bedrock-api-key"] = _token("ABSK", B64, 120)
    s["azure-signature-key"] = RuleSamples(
        lambda r: Planted(f"pat {(c := rand(r, ALNUM, 52))}AZDO{rand(r, ALNUM, 28)} expired", c),
        lambda r: [f"pat {rand(r, ALNUM, 52)}AZDX{rand(r, ALNUM, 28)} expired"],
    )
    s["azure-function-key"] = _plain(
        _same(B64URL, 54),
        "POST https://billing.azurewebsites.net/api/Charge?code={}== failed",
        lambda r: ["https://billing.azurewebsites.net/api/Charge failed with 401"],
    )
    s["devops-platform-token"] = _token("rnd_", ALNUM, 32)
    s["terraform-cloud-token"] = _token(".atlasv1.", B64URL, 64, "TFE_TOKEN=Xy7Qk2mNp8Rt4a{}")
    s["pulumi-token"] = _token("pul-", HEX, 40)
    s["infracost-token"] = _token("ico-", ALNUM, 32)
    s["octopus-api-key"] = _token("API-", UPPER + DIGITS, 30)
    s["harness-pat"] = _token(
        "pat.", B64URL, 22, "x-api-key: {}.Ab3dEf6hIj9kLm2nOp5qRs8t.Uv1wXy4zAb7cDe0fGh3i"
    )
    s["flyio-token"] = _token("fm2_", B64, 120)
    s["onepassword-secret-key"] = _token("A3-", UPPER + DIGITS, 6, "{}-Q7RT2-K9PLM-X4VB8-ZN3WD")
    s["gitlab-other-token"] = _token("glft-", B64URL, 20)
    s["atlassian-bitbucket-access-token"] = _token("ATCTT3", B64URL, 190)
    s["saas-api-token"] = _token("figd_", B64URL, 40)
    s["airtable-pat"] = _token("patAb3dEf6hIj9kLm.", HEX, 64)
    s["airtable-legacy-key"] = _token("key", ALNUM, 14, "airtable.connect(api_key='{}')")
    s["airtable-oauth-token"] = _token(
        "Ab3dEf6hIj9kLm2nO.v1.", B64URL, 60, "{}.0123456789abcdef0123456789abcdef"
    )
    s["hubspot-pat"] = _token("pat-na1-", HEX, 8, "{}-1a2b-3c4d-5e6f-0123456789ab")
    s["salesforce-access-token"] = _token("00D5g000004Xy7Q!", ALNUM, 96)
    s["dropbox-access-token"] = _token("sl.", B64URL, 140)
    s["plaid-access-token"] = _token("access-sandbox-", HEX, 8, "{}-1a2b-3c4d-5e6f-0123456789ab")
    s["launchdarkly-key"] = _token("sdk-", HEX, 8, "{}-1a2b-3c4d-5e6f-0123456789ab")
    s["facebook-access-token"] = _token("EAA", ALNUM, 120)
    s["maxmind-license-key"] = RuleSamples(
        lambda r: Planted(f"{rand(r, ALNUM, 6)}_{(c := rand(r, ALNUM, 29))}_mmk", c),
        lambda r: ["geo_lite_mmk"],
    )
    s["flyio-macaroon"] = _token("FlyV1 fm2_", B64, 120)
    s["session-cookie"] = _plain(
        _same(LOWER + DIGITS, 32),
        "GET /cart with PHPSESSID={} from the browser",
        lambda r: ["session=closed", "sessionid=17"],
    )
    s["secret-mention"] = RuleSamples(
        lambda r: Planted(f"Here is the ACME_API_KEY:\n{(c := rand(r, ALNUM, 30))}7\nthanks", c),
        lambda r: [
            "the ACME_API_KEY is rotated every 90 days",
            "ACME_API_KEY (YOUR_ACME_API_KEY) goes here",
            "ACME_API_KEY user-profile-2024 is a name",
        ],
    )
    s["us-ssn"] = RuleSamples(
        lambda r: Planted(f"ssn on file: {(c := _ssn(r))}", c),
        lambda r: ["ssn on file: 666-12-3456", "ssn on file: 000-12-3456", "ref 123-00-4567"],
    )
    s["ip-address"] = RuleSamples(
        lambda r: Planted(f"login from {(c := _public_ipv4(r))}", c),
        lambda r: ["login from 10.1.2.3", "login from 127.0.0.1", "bind ::1", "at 12:30:45"],
    )
    s["email-address"] = RuleSamples(
        lambda r: Planted(f"mail {(c := rand(r, LOWER, 10))}@example.com bounced", c),
        lambda r: ["user@localhost", "@channel"],
    )
    s["credit-card-number"] = RuleSamples(
        lambda r: Planted(f"card {(c := _card(r))} declined", c),
        lambda r: [f"card {_card(r, valid=False)} declined"],  # fails Luhn
    )
    s["phone-number"] = RuleSamples(
        lambda r: Planted(f"call +44 20 7946 {(c := rand(r, DIGITS, 4))}", "7946 " + c),
        lambda r: ["retry 17 of 20"],
    )
    s["iban"] = RuleSamples(
        lambda r: Planted(f"pay to {(c := _iban(r))}", c),
        lambda r: [f"pay to {_iban(r, valid=False)}"],  # fails mod 97
    )
    return s


SAMPLES: Final[Mapping[str, RuleSamples]] = _build()


def benign_ids(rng: random.Random) -> list[str]:
    """Correlation ids and other benign values that must survive scrubbing untouched."""
    ulid_alphabet = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
    return [
        rand(rng, HEX, 32),  # W3C trace id
        rand(rng, HEX, 16),  # W3C span id
        f"00-{rand(rng, HEX, 32)}-{rand(rng, HEX, 16)}-01",  # traceparent
        _uuid(rng),
        _uuid(rng).upper(),
        rand(rng, ulid_alphabet, 26),  # ULID
        rand(rng, HEX, 40),  # git SHA
        f"sha256:{rand(rng, HEX, 64)}",  # content digest
        f"cus_{rand(rng, ALNUM, 14)}",
        f"usr_{rand(rng, ALNUM, 16)}",
        f"call_{rand(rng, ALNUM, 24)}",
        f"toolu_01{rand(rng, ALNUM, 22)}",
        f"chatcmpl-{rand(rng, ALNUM, 29)}",
        f"msg_{rand(rng, ALNUM, 24)}",
        f"req_{rand(rng, ALNUM, 24)}",
        f"sess_{rand(rng, ALNUM, 20)}",
        str(rng.randrange(1, 10**6)),
        f"INV-{rng.randrange(1, 10**5)}",
        f"job-{rng.randrange(1, 10**4)}",
    ]


BENIGN_IDS: Final = tuple(benign_ids(random.Random(17)))  # noqa: S311 - fake data, not keys
