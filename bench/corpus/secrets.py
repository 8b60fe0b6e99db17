# ruff: noqa: E501 -- the corpus templates are literal text; they read best unbroken
"""Seeded generator of the scrubber evaluation corpus: credentials, PII and benign near-misses.

Written independently of errscope's scrubber: every format below was built from its public,
documented structure (prefix, length, alphabet, checksum, framing) as listed by gitleaks
(config/gitleaks.toml), trufflehog (pkg/detectors), GitHub secret scanning and the providers'
docs; the ``source`` column names where each fact came from. All values are random and fake.

    python bench/corpus/secrets.py --seed 1 --out bench/out/corpus/secrets.jsonl [--scale 2 | --count 20000]

Each line is one JSON record::

    {"id", "kind": "credential"|"pii"|"benign", "family", "embedding", "value",
     "needles": [...], "prefixes": [...], "reassemble": null|"json-array-concat", "note"}

``needles`` are the exact substrings of ``value`` that must not survive scrubbing (for chunked
values they are substrings of the reassembled chunks); ``prefixes[i]`` is the public part at the
start of ``needles[i]`` (``sk-ant-api03-``, a JWT header) that may survive. Benign records have
no needles: their value must come back byte-identical. Stdlib only; the same seed gives the
same bytes.
"""

from __future__ import annotations

import argparse
import base64
import binascii
import html
import json
import math
import random
import string
import struct
import sys
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

AN = string.ascii_letters + string.digits
B62 = string.digits + string.ascii_uppercase + string.ascii_lowercase  # GitHub/npm (GMP) order
LA = string.ascii_lowercase + string.digits
UA = string.ascii_uppercase + string.digits
HX = "0123456789abcdef"
HU = "0123456789ABCDEF"
B64 = string.ascii_letters + string.digits + "+/"
URL = string.ascii_letters + string.digits + "_-"
LO = string.ascii_lowercase
DG = string.digits
B32U = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"
BECH32 = "QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L"


class G:
    """Random helpers bound to one seeded ``random.Random``."""

    def __init__(self, rng: random.Random) -> None:
        self.r = rng

    def s(self, alpha: str, n: int) -> str:
        return "".join(self.r.choice(alpha) for _ in range(n))

    def n(self, lo: int, hi: int) -> int:
        return self.r.randint(lo, hi)

    def pick(self, seq):  # type: ignore[no-untyped-def]
        return self.r.choice(seq)

    def bytes(self, n: int) -> bytes:
        return bytes(self.r.getrandbits(8) for _ in range(n))

    def uuid(self) -> str:
        h = self.s(HX, 32)
        h = h[:12] + "4" + h[13:16] + self.pick("89ab") + h[17:]
        return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"

    def b64url(self, n: int) -> str:
        return base64.urlsafe_b64encode(self.bytes(n)).decode().rstrip("=")

    def b64(self, n: int) -> str:
        return base64.b64encode(self.bytes(n)).decode()

    def password(self) -> str:
        core = self.s(AN, self.n(10, 14)) + self.pick("!#%*-_.~") + self.s(AN, self.n(3, 6))
        return core

    def word(self) -> str:
        return self.pick(
            ["app", "svc", "deploy", "billing", "etl", "agent", "ops", "web", "ci", "api"]
        )


def b64u_json(obj: object) -> str:
    raw = json.dumps(obj, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def jwt(g: G, payload: dict, alg: str = "HS256", extra_header: dict | None = None) -> str:
    header = {"alg": alg, "typ": "JWT", **(extra_header or {})}
    sig_len = 256 if alg.startswith("RS") else 32
    return f"{b64u_json(header)}.{b64u_json(payload)}.{g.b64url(sig_len)}"


def b62_checksum_token(g: G, prefix: str) -> str:
    """GitHub/npm format: 30 base62 chars of entropy + CRC32 of them as 6 base62 (GMP order)."""
    entropy = g.s(B62, 30)
    crc = binascii.crc32(entropy.encode()) & 0xFFFFFFFF
    out = ""
    while crc:
        crc, d = divmod(crc, 62)
        out = B62[d] + out
    return prefix + entropy + out.rjust(6, "0")


def crc24(data: bytes) -> int:
    crc = 0xB704CE
    for byte in data:
        crc ^= byte << 16
        for _ in range(8):
            crc <<= 1
            if crc & 0x1000000:
                crc ^= 0x1864CFB
    return crc & 0xFFFFFF


def wrap(s: str, width: int) -> list[str]:
    return [s[i : i + width] for i in range(0, len(s), width)]


@dataclass
class Cred:
    """One generated credential: the text to embed and the (needle, public prefix) pairs in it."""

    text: str
    needles: list[tuple[str, str]]


def pem(label: str, der: bytes, width: int = 64) -> Cred:
    lines = wrap(base64.b64encode(der).decode(), width)
    text = f"-----BEGIN {label}-----\n" + "\n".join(lines) + f"\n-----END {label}-----"
    # the first line carries public ASN.1 framing; the last may be short: the lines between
    # are key material, each one a needle
    body = lines[1:-1]
    return Cred(text, [(ln, "") for ln in body])


def rsa_pkcs1(g: G) -> Cred:
    der = bytes.fromhex("308204a40201000282010100") + g.bytes(1180)
    return pem("RSA PRIVATE KEY", der)


def pkcs8(g: G) -> Cred:
    der = bytes.fromhex(
        "308204be020100300d06092a864886f70d0101010500048204a8308204a40201000282010100"
    )
    return pem("PRIVATE KEY", der + g.bytes(1160))


def ec_key(g: G) -> Cred:
    der = (
        bytes.fromhex("30770201010420")
        + g.bytes(32)
        + bytes.fromhex("a00a06082a8648ce3d030107a144034200")
        + b"\x04"
        + g.bytes(64)
    )
    return pem("EC PRIVATE KEY", der)


def enc_pkcs8(g: G) -> Cred:
    der = bytes.fromhex("308205") + g.bytes(1300)
    return pem("ENCRYPTED PRIVATE KEY", der)


def ssh_string(b: bytes) -> bytes:
    return struct.pack(">I", len(b)) + b


def openssh_key(g: G) -> Cred:
    pub = g.bytes(32)
    pubblob = ssh_string(b"ssh-ed25519") + ssh_string(pub)
    check = g.bytes(4)
    priv = (
        check
        + check
        + ssh_string(b"ssh-ed25519")
        + ssh_string(pub)
        + ssh_string(g.bytes(32) + pub)
        + ssh_string(b"agent@build-7")
    )
    priv += bytes(range(1, 1 + (-len(priv)) % 8))
    blob = (
        b"openssh-key-v1\x00"
        + ssh_string(b"none")
        + ssh_string(b"none")
        + ssh_string(b"")
        + struct.pack(">I", 1)
        + ssh_string(pubblob)
        + ssh_string(priv)
    )
    lines = wrap(base64.b64encode(blob).decode(), 70)
    text = (
        "-----BEGIN OPENSSH PRIVATE KEY-----\n"
        + "\n".join(lines)
        + "\n-----END OPENSSH PRIVATE KEY-----"
    )
    # line 0 and most of line 1 are the fixed header and public key; the private part follows
    return Cred(text, [(ln, "") for ln in lines[2:-1]])


def pgp_key(g: G) -> Cred:
    body = (
        b"\xc5\x58\x04"
        + g.bytes(4)
        + b"\x16\x09\x2b\x06\x01\x04\x01\xda\x47\x0f\x01"
        + g.bytes(420)
    )
    lines = wrap(base64.b64encode(body).decode(), 64)
    crc = base64.b64encode(crc24(body).to_bytes(3, "big")).decode()
    text = (
        "-----BEGIN PGP PRIVATE KEY BLOCK-----\n\n"
        + "\n".join(lines)
        + f"\n={crc}\n-----END PGP PRIVATE KEY BLOCK-----"
    )
    return Cred(text, [(ln, "") for ln in lines[1:-1]])


def putty_key(g: G) -> Cred:
    pub = wrap(base64.b64encode(ssh_string(b"ssh-ed25519") + ssh_string(g.bytes(32))).decode(), 64)
    priv = wrap(base64.b64encode(ssh_string(g.bytes(32))).decode(), 64)
    mac = g.s(HX, 64)
    text = (
        "PuTTY-User-Key-File-3: ssh-ed25519\nEncryption: none\nComment: deploy@ci\n"
        f"Public-Lines: {len(pub)}\n"
        + "\n".join(pub)
        + f"\nPrivate-Lines: {len(priv)}\n"
        + "\n".join(priv)
        + f"\nPrivate-MAC: {mac}"
    )
    return Cred(text, [(priv[0], ""), (mac, "")])


def gcp_sa_json(g: G) -> Cred:
    key = pkcs8(g)
    kid = g.s(HX, 40)
    obj = {
        "type": "service_account",
        "project_id": f"{g.word()}-prod-{g.n(100, 999)}",
        "private_key_id": kid,
        "private_key": key.text + "\n",
        "client_email": f"runner@{g.word()}-prod.iam.gserviceaccount.com",
        "client_id": g.s(DG, 21),
        "token_uri": "https://oauth2.googleapis.com/token",
    }
    text = json.dumps(obj, indent=2)
    needles = [(json.dumps(ln)[1:-1], "") for ln, _ in key.needles[:4]] + [(kid, "")]
    return Cred(text, needles)


def uri(scheme: str, host: str, tail: str = "") -> Callable[[G], Cred]:
    def make(g: G) -> Cred:
        pw = g.password()
        user = g.pick(["app", "admin", "svc_etl", "deploy", "readonly"])
        text = f"{scheme}://{user}:{urllib.parse.quote(pw, safe='')}@{host}{tail}"
        return Cred(text, [(urllib.parse.quote(pw, safe=""), "")])

    return make


def kv_in(template: str, secret: Callable[[G], str], prefix: str = "") -> Callable[[G], Cred]:
    """A credential that lives inside a fixed framing (a connection string, a cookie)."""

    def make(g: G) -> Cred:
        s = secret(g)
        return Cred(template.format(s=s, w=g.word(), n=g.n(10, 99), u=g.uuid()), [(s, prefix)])

    return make


@dataclass
class Fmt:
    """One credential format of the census."""

    name: str
    source: str
    key: str  # the variable name it is usually assigned to: gives context embeddings
    ctx: bool  # True: no distinctive prefix, only recognisable beside its key name
    gen: Callable[[G], str | Cred]
    shape: str = "token"  # token | composite | blob
    prefix: str = ""  # public prefix of the token
    note: str = ""


def tok(prefix: str, *parts: tuple[str, int] | str) -> Callable[[G], str]:
    def make(g: G) -> str:
        out = prefix
        for p in parts:
            out += p if isinstance(p, str) else g.s(p[0], p[1])
        return out

    return make


GL = "gitleaks:"
TH = "trufflehog:"
GH = "github-secret-scanning"


def census() -> list[Fmt]:
    f = Fmt
    return [
        # --- AI / LLM providers
        f(
            "openai-project-key",
            GL + "openai-api-key",
            "OPENAI_API_KEY",
            False,
            tok("sk-proj-", (URL, 74), "T3BlbkFJ", (URL, 74)),
            prefix="sk-proj-",
        ),
        f(
            "openai-service-account-key",
            GL + "openai-api-key",
            "OPENAI_API_KEY",
            False,
            tok("sk-svcacct-", (URL, 74), "T3BlbkFJ", (URL, 74)),
            prefix="sk-svcacct-",
        ),
        f(
            "openai-admin-key",
            TH + "openaiadmin",
            "OPENAI_ADMIN_KEY",
            False,
            tok("sk-admin-", (URL, 58), "T3BlbkFJ", (URL, 58)),
            prefix="sk-admin-",
        ),
        f(
            "openai-legacy-key",
            GL + "openai-api-key",
            "OPENAI_API_KEY",
            False,
            tok("sk-", (AN, 20), "T3BlbkFJ", (AN, 20)),
            prefix="sk-",
        ),
        f(
            "anthropic-api-key",
            GL + "anthropic-api-key",
            "ANTHROPIC_API_KEY",
            False,
            tok("sk-ant-api03-", (URL, 93), "AA"),
            prefix="sk-ant-api03-",
        ),
        f(
            "anthropic-admin-key",
            GL + "anthropic-admin-api-key",
            "ANTHROPIC_ADMIN_KEY",
            False,
            tok("sk-ant-admin01-", (URL, 93), "AA"),
            prefix="sk-ant-admin01-",
        ),
        f("groq-api-key", TH + "groq", "GROQ_API_KEY", False, tok("gsk_", (AN, 52)), prefix="gsk_"),
        f("xai-api-key", TH + "xai", "XAI_API_KEY", False, tok("xai-", (AN, 80)), prefix="xai-"),
        f(
            "deepseek-api-key",
            TH + "deepseek",
            "DEEPSEEK_API_KEY",
            True,
            tok("sk-", (LA, 32)),
            prefix="sk-",
        ),
        f(
            "replicate-api-token",
            TH + "replicate",
            "REPLICATE_API_TOKEN",
            False,
            tok("r8_", (URL, 37)),
            prefix="r8_",
        ),
        f(
            "openrouter-api-key",
            TH + "openrouter",
            "OPENROUTER_API_KEY",
            False,
            tok("sk-or-v1-", (HX, 64)),
            prefix="sk-or-v1-",
        ),
        f(
            "huggingface-token",
            GL + "huggingface-access-token",
            "HF_TOKEN",
            False,
            tok("hf_", (string.ascii_letters, 34)),
            prefix="hf_",
        ),
        f(
            "huggingface-org-token",
            GL + "huggingface-organization-api-token",
            "HF_ORG_TOKEN",
            False,
            tok("api_org_", (string.ascii_letters, 34)),
            prefix="api_org_",
        ),
        f(
            "perplexity-api-key",
            GL + "perplexity-api-key",
            "PERPLEXITY_API_KEY",
            False,
            tok("pplx-", (AN, 48)),
            prefix="pplx-",
        ),
        f("cohere-api-key", GL + "cohere-api-token", "CO_API_KEY", True, tok("", (AN, 40))),
        f(
            "gemini-api-key",
            TH + "googlegemini",
            "GEMINI_API_KEY",
            False,
            tok("AIzaSy", (URL, 33)),
            prefix="AIza",
        ),
        f(
            "langsmith-personal-token",
            TH + "langsmith",
            "LANGSMITH_API_KEY",
            False,
            tok("lsv2_pt_", (HX, 32), "_", (HX, 10)),
            prefix="lsv2_pt_",
        ),
        f(
            "langsmith-service-key",
            TH + "langsmith",
            "LANGCHAIN_API_KEY",
            False,
            tok("lsv2_sk_", (HX, 32), "_", (HX, 10)),
            prefix="lsv2_sk_",
        ),
        f(
            "langfuse-secret-key",
            TH + "langfuse",
            "LANGFUSE_SECRET_KEY",
            True,
            lambda g: "sk-lf-" + g.uuid(),
            prefix="sk-lf-",
        ),
        f(
            "elevenlabs-api-key",
            TH + "elevenlabs (v2)",
            "ELEVENLABS_API_KEY",
            False,
            tok("sk_", (HX, 48)),
            prefix="sk_",
        ),
        f(
            "nvidia-api-key",
            TH + "nvapi",
            "NVIDIA_API_KEY",
            False,
            tok("nvapi-", (URL, 64)),
            prefix="nvapi-",
        ),
        f("assemblyai-api-key", TH + "assemblyai", "ASSEMBLYAI_API_KEY", True, tok("", (HX, 32))),
        f("deepgram-api-key", TH + "deepgram", "DEEPGRAM_API_KEY", True, tok("", (HX, 40))),
        f(
            "pinecone-api-key",
            TH + "pinecone",
            "PINECONE_API_KEY",
            False,
            tok("pcsk_", (AN, 6), "_", (AN, 63)),
            prefix="pcsk_",
        ),
        f(
            "weaviate-api-key",
            "docs:weaviate.io (cloud API keys, no prefix)",
            "WEAVIATE_API_KEY",
            True,
            tok("", (AN, 40)),
        ),
        f(
            "qdrant-api-key",
            "docs:qdrant.tech (cloud API keys, no prefix)",
            "QDRANT_API_KEY",
            True,
            lambda g: g.uuid() + "|" + g.s(URL, 43),
        ),
        f("wandb-api-key", TH + "weightsandbiases", "WANDB_API_KEY", True, tok("", (HX, 40))),
        f(
            "sourcegraph-cody-token",
            TH + "sourcegraphcody",
            "SRC_ACCESS_TOKEN",
            False,
            tok("slk_", (HX, 64)),
            prefix="slk_",
        ),
        f(
            "sourcegraph-access-token",
            GL + "sourcegraph-access-token",
            "SRC_ACCESS_TOKEN",
            False,
            tok("sgp_", (HX, 16), "_", (HX, 40)),
            prefix="sgp_",
        ),
        f("azure-openai-key", TH + "azure_openai", "AZURE_OPENAI_API_KEY", True, tok("", (HX, 32))),
        f(
            "saladcloud-api-key",
            TH + "saladcloudapikey",
            "SALAD_API_KEY",
            False,
            tok("salad_cloud_", (AN, 6), "_", (AN, 60)),
            prefix="salad_cloud_",
        ),
        # --- cloud platforms
        f(
            "aws-access-key-id",
            GL + "aws-access-token; " + GH,
            "AWS_ACCESS_KEY_ID",
            False,
            tok("AKIA", ("ABCDEFGHIJKLMNOPQRSTUVWXYZ234567", 16)),
            prefix="AKIA",
        ),
        f(
            "aws-temporary-access-key-id",
            GL + "aws-access-token",
            "AWS_ACCESS_KEY_ID",
            False,
            tok("ASIA", ("ABCDEFGHIJKLMNOPQRSTUVWXYZ234567", 16)),
            prefix="ASIA",
        ),
        f(
            "aws-secret-access-key",
            GH + "; docs:aws",
            "AWS_SECRET_ACCESS_KEY",
            True,
            tok("", (B64, 40)),
        ),
        f(
            "aws-session-token",
            "docs:aws sts (IQoJb3JpZ2luX2Vj...)",
            "AWS_SESSION_TOKEN",
            False,
            lambda g: "IQoJb3JpZ2luX2VjE" + g.b64(300).rstrip("="),
            prefix="IQoJb3JpZ2luX2Vj",
        ),
        f(
            "aws-bedrock-api-key",
            GL + "aws-amazon-bedrock-api-key-long-lived",
            "AWS_BEARER_TOKEN_BEDROCK",
            False,
            lambda g: (
                "ABSK"
                + base64.b64encode(
                    b"BedrockAPIKey-"
                    + g.s(AN, 8).encode()
                    + b"-at-"
                    + g.s(DG, 12).encode()
                    + b":"
                    + g.s(B64, 60).encode()
                ).decode()
            ),
            prefix="ABSK",
        ),
        f(
            "gcp-service-account-json",
            GL + "gcp service account; " + GH,
            "GOOGLE_APPLICATION_CREDENTIALS_JSON",
            False,
            gcp_sa_json,
            shape="blob",
        ),
        f(
            "gcp-oauth-client-secret",
            GH + "; docs:google (GOCSPX-)",
            "GOOGLE_CLIENT_SECRET",
            False,
            tok("GOCSPX-", (URL, 28)),
            prefix="GOCSPX-",
        ),
        f(
            "google-oauth-access-token",
            GH + "; docs:google (ya29.)",
            "GOOGLE_ACCESS_TOKEN",
            False,
            tok("ya29.a0", (URL, 160)),
            prefix="ya29.",
        ),
        f(
            "google-oauth-refresh-token",
            "docs:google (1//0...)",
            "GOOGLE_REFRESH_TOKEN",
            True,
            tok("1//0", (URL, 99)),
            prefix="1//0",
        ),
        f(
            "gcp-api-key",
            GL + "gcp-api-key",
            "GOOGLE_API_KEY",
            False,
            tok("AIzaSy", (URL, 33)),
            prefix="AIza",
        ),
        f(
            "azure-storage-connection-string",
            TH + "azure_storage",
            "AZURE_STORAGE_CONNECTION_STRING",
            False,
            kv_in(
                "DefaultEndpointsProtocol=https;AccountName={w}store{n};AccountKey={s};EndpointSuffix=core.windows.net",
                lambda g: g.b64(64),
            ),
            shape="composite",
        ),
        f(
            "azure-entra-client-secret",
            GL + "azure-ad-client-secret",
            "AZURE_CLIENT_SECRET",
            False,
            lambda g: g.s(AN, 3) + g.pick("78") + "Q~" + g.s(AN + "_~.-", 34),
        ),
        f(
            "azure-sas-url",
            TH + "azuresastoken",
            "AZURE_SAS_URL",
            False,
            kv_in(
                "https://{w}store{n}.blob.core.windows.net/backups?sv=2022-11-02&ss=b&srt=co&sp=rl&se=2026-01-01T00:00:00Z&sig={s}",
                lambda g: urllib.parse.quote(g.b64(32), safe=""),
            ),
            shape="composite",
        ),
        f(
            "azure-service-bus-connection",
            TH + "azure servicebus",
            "SERVICEBUS_CONNECTION",
            False,
            kv_in(
                "Endpoint=sb://{w}-bus.servicebus.windows.net/;SharedAccessKeyName=RootManageSharedAccessKey;SharedAccessKey={s}",
                lambda g: g.b64(32),
            ),
            shape="composite",
        ),
        f(
            "azure-cosmosdb-connection",
            TH + "azure_cosmosdb",
            "COSMOS_CONNECTION",
            False,
            kv_in(
                "AccountEndpoint=https://{w}-db.documents.azure.com:443/;AccountKey={s};",
                lambda g: g.s(AN, 86) + "==",
            ),
            shape="composite",
        ),
        f(
            "azure-container-registry-password",
            TH + "azurecontainerregistry",
            "ACR_PASSWORD",
            False,
            tok("", (B64, 42), "+ACR", (AN, 6)),
        ),
        f(
            "azure-devops-pat",
            TH + "azuredevopspersonalaccesstoken",
            "AZURE_DEVOPS_PAT",
            True,
            tok("", (LA, 52)),
        ),
        f(
            "azure-devops-pat-v2",
            "docs:microsoft (84-char PAT with AZDO signature)",
            "AZURE_DEVOPS_EXT_PAT",
            False,
            tok("", (AN, 52), "AZDO", (AN, 28)),
        ),
        f(
            "azure-function-key-url",
            TH + "azurefunctionkey",
            "FUNCTION_URL",
            False,
            kv_in(
                "https://{w}-fn.azurewebsites.net/api/HttpTrigger{n}?code={s}",
                lambda g: g.s(URL, 54) + "==",
            ),
            shape="composite",
        ),
        f(
            "azure-search-admin-key",
            TH + "azuresearchadminkey",
            "AZURE_SEARCH_ADMIN_KEY",
            True,
            tok("", (AN, 52)),
        ),
        f(
            "azure-app-config-connection",
            TH + "azureappconfigconnectionstring",
            "APPCONFIG_CONNECTION_STRING",
            False,
            kv_in(
                "Endpoint=https://{w}-cfg.azconfig.io;Id=" + "ab12-l0-s0:{n}xyz" + ";Secret={s}",
                lambda g: g.b64(32),
            ),
            shape="composite",
        ),
        f(
            "azure-apim-subscription-key",
            TH + "azureapimanagementsubscriptionkey",
            "Ocp-Apim-Subscription-Key",
            True,
            tok("", (HX, 32)),
        ),
        f(
            "alibaba-access-key-id",
            GL + "alibaba-access-key-id",
            "ALIBABA_CLOUD_ACCESS_KEY_ID",
            False,
            tok("LTAI", (AN, 20)),
            prefix="LTAI",
        ),
        f(
            "alibaba-secret-key",
            GL + "alibaba-secret-key",
            "ALIBABA_CLOUD_ACCESS_KEY_SECRET",
            True,
            tok("", (AN, 30)),
        ),
        f(
            "digitalocean-pat",
            GL + "digitalocean-pat",
            "DIGITALOCEAN_TOKEN",
            False,
            tok("dop_v1_", (HX, 64)),
            prefix="dop_v1_",
        ),
        f(
            "digitalocean-oauth-token",
            GL + "digitalocean-access-token",
            "DIGITALOCEAN_ACCESS_TOKEN",
            False,
            tok("doo_v1_", (HX, 64)),
            prefix="doo_v1_",
        ),
        f(
            "digitalocean-refresh-token",
            GL + "digitalocean-refresh-token",
            "DO_REFRESH_TOKEN",
            False,
            tok("dor_v1_", (HX, 64)),
            prefix="dor_v1_",
        ),
        f(
            "ibm-cloud-api-key",
            TH + "ibmclouduserkey",
            "IBMCLOUD_API_KEY",
            True,
            tok("", (URL, 44)),
        ),
        f("vultr-api-key", TH + "vultrapikey", "VULTR_API_KEY", True, tok("", (UA, 36))),
        f("scaleway-secret-key", TH + "scalewaykey", "SCW_SECRET_KEY", True, lambda g: g.uuid()),
        f(
            "yandex-api-key",
            GL + "yandex-api-key",
            "YANDEX_API_KEY",
            True,
            tok("AQVN", (URL, 36)),
            prefix="AQVN",
        ),
        f(
            "yandex-static-access-key",
            GL + "yandex-aws-access-token",
            "YANDEX_ACCESS_KEY",
            True,
            tok("YC", (URL, 38)),
            prefix="YC",
        ),
        f(
            "cloudflare-api-token",
            GL + "cloudflare-api-key",
            "CLOUDFLARE_API_TOKEN",
            True,
            tok("", (URL, 40)),
        ),
        f(
            "cloudflare-global-api-key",
            GL + "cloudflare-global-api-key",
            "CLOUDFLARE_API_KEY",
            True,
            tok("", (HX, 37)),
        ),
        f(
            "cloudflare-origin-ca-key",
            GL + "cloudflare-origin-ca-key",
            "CF_ORIGIN_CA_KEY",
            False,
            tok("v1.0-", (HX, 24), "-", (HX, 146)),
            prefix="v1.0-",
        ),
        f(
            "databricks-token",
            GL + "databricks-api-token",
            "DATABRICKS_TOKEN",
            False,
            tok("dapi", (HX, 32)),
            prefix="dapi",
        ),
        f(
            "clickhouse-cloud-secret",
            GL + "clickhouse-cloud-api-secret-key",
            "CLICKHOUSE_KEY_SECRET",
            False,
            tok("4b1d", (AN, 38)),
            prefix="4b1d",
        ),
        f(
            "terraform-cloud-token",
            GL + "hashicorp-tf-api-token",
            "TFE_TOKEN",
            False,
            tok("", (AN, 14), ".atlasv1.", (URL, 67)),
        ),
        f(
            "vault-service-token",
            GL + "vault-service-token",
            "VAULT_TOKEN",
            False,
            tok("hvs.", (URL, 95)),
            prefix="hvs.",
        ),
        f(
            "vault-batch-token",
            GL + "vault-batch-token",
            "VAULT_TOKEN",
            False,
            tok("hvb.", (URL, 150)),
            prefix="hvb.",
        ),
        f(
            "vault-legacy-token",
            GL + "vault-service-token",
            "VAULT_TOKEN",
            True,
            tok("s.", (AN, 24)),
            prefix="s.",
        ),
        f(
            "doppler-personal-token",
            GL + "doppler-api-token",
            "DOPPLER_TOKEN",
            False,
            tok("dp.pt.", (AN, 43)),
            prefix="dp.pt.",
        ),
        f(
            "doppler-service-token",
            TH + "doppler",
            "DOPPLER_TOKEN",
            False,
            tok("dp.st.prd.", (AN, 40)),
            prefix="dp.st.",
        ),
        f(
            "pulumi-access-token",
            GL + "pulumi-api-token",
            "PULUMI_ACCESS_TOKEN",
            False,
            tok("pul-", (HX, 40)),
            prefix="pul-",
        ),
        f(
            "infracost-api-key",
            GL + "infracost-api-token",
            "INFRACOST_API_KEY",
            False,
            tok("ico-", (AN, 32)),
            prefix="ico-",
        ),
        f(
            "octopus-deploy-api-key",
            GL + "octopus-deploy-api-key",
            "OCTOPUS_API_KEY",
            False,
            tok("API-", (UA, 26)),
            prefix="API-",
        ),
        f(
            "harness-pat",
            GL + "harness-api-key",
            "HARNESS_API_KEY",
            False,
            tok("pat.", (URL, 22), ".", (AN, 24), ".", (AN, 20)),
            prefix="pat.",
        ),
        f(
            "age-secret-key",
            GL + "age-secret-key",
            "SOPS_AGE_KEY",
            False,
            tok("AGE-SECRET-KEY-1", (BECH32, 58)),
            prefix="AGE-SECRET-KEY-1",
        ),
        f(
            "1password-secret-key",
            GL + "1password-secret-key",
            "OP_SECRET_KEY",
            False,
            tok(
                "A3-", (UA, 6), "-", (UA, 6), "-", (UA, 5), "-", (UA, 5), "-", (UA, 5), "-", (UA, 5)
            ),
            prefix="A3-",
        ),
        f(
            "1password-service-account-token",
            GL + "1password-service-account-token",
            "OP_SERVICE_ACCOUNT_TOKEN",
            False,
            lambda g: (
                "ops_"
                + base64.b64encode(
                    json.dumps(
                        {
                            "signInAddress": "my.1password.com",
                            "userAuth": {
                                "method": "SRPg-4096",
                                "alg": "PBES2g-HS256",
                                "iterations": 650000,
                                "salt": g.b64url(16),
                            },
                            "email": g.s(LO, 12) + "@1passwordserviceaccounts.com",
                            "srpX": g.s(HX, 64),
                            "muk": {
                                "alg": "A256GCM",
                                "ext": True,
                                "k": g.b64url(32),
                                "key_ops": ["encrypt", "decrypt"],
                                "kty": "oct",
                                "kid": "mp",
                            },
                            "secretKey": "A3-" + g.s(UA, 31),
                            "deviceUuid": g.s(LA, 26),
                        }
                    ).encode()
                ).decode()
            ),
            prefix="ops_eyJ",
        ),
        # --- source hosting, CI/CD, package and artifact registries
        f(
            "github-classic-pat",
            GL + "github-pat; " + GH,
            "GITHUB_TOKEN",
            False,
            lambda g: b62_checksum_token(g, "ghp_"),
            prefix="ghp_",
        ),
        f(
            "github-oauth-token",
            GL + "github-oauth; " + GH,
            "GITHUB_TOKEN",
            False,
            lambda g: b62_checksum_token(g, "gho_"),
            prefix="gho_",
        ),
        f(
            "github-user-to-server-token",
            GL + "github-app-token; " + GH,
            "GH_TOKEN",
            False,
            lambda g: b62_checksum_token(g, "ghu_"),
            prefix="ghu_",
        ),
        f(
            "github-installation-token",
            GL + "github-app-token; " + GH,
            "GITHUB_TOKEN",
            False,
            lambda g: b62_checksum_token(g, "ghs_"),
            prefix="ghs_",
        ),
        f(
            "github-refresh-token",
            GL + "github-refresh-token; " + GH,
            "GITHUB_REFRESH_TOKEN",
            False,
            lambda g: b62_checksum_token(g, "ghr_"),
            prefix="ghr_",
        ),
        f(
            "github-fine-grained-pat",
            GL + "github-fine-grained-pat; " + GH,
            "GITHUB_TOKEN",
            False,
            tok("github_pat_11", (UA, 20), "_", (AN, 59)),
            prefix="github_pat_",
        ),
        f(
            "gitlab-pat",
            GL + "gitlab-pat",
            "GITLAB_TOKEN",
            False,
            tok("glpat-", (URL, 20)),
            prefix="glpat-",
        ),
        f(
            "gitlab-pat-routable",
            GL + "gitlab-pat-routable",
            "GITLAB_TOKEN",
            False,
            tok("glpat-", (URL, 36), ".01.", (LA, 9)),
            prefix="glpat-",
        ),
        f(
            "gitlab-deploy-token",
            GL + "gitlab-deploy-token",
            "CI_DEPLOY_PASSWORD",
            False,
            tok("gldt-", (URL, 20)),
            prefix="gldt-",
        ),
        f(
            "gitlab-runner-token",
            GL + "gitlab-runner-authentication-token",
            "RUNNER_TOKEN",
            False,
            tok("glrt-", (URL, 20)),
            prefix="glrt-",
        ),
        f(
            "gitlab-pipeline-trigger-token",
            GL + "gitlab-ptt",
            "TRIGGER_TOKEN",
            False,
            tok("glptt-", (HX, 40)),
            prefix="glptt-",
        ),
        f(
            "gitlab-ci-job-token",
            GL + "gitlab-cicd-job-token",
            "CI_JOB_TOKEN",
            False,
            tok("glcbt-", (AN, 3), "_", (URL, 20)),
            prefix="glcbt-",
        ),
        f(
            "gitlab-feed-token",
            GL + "gitlab-feed-token",
            "GITLAB_FEED_TOKEN",
            False,
            tok("glft-", (URL, 20)),
            prefix="glft-",
        ),
        f(
            "gitlab-incoming-mail-token",
            GL + "gitlab-incoming-mail-token",
            "INCOMING_EMAIL_TOKEN",
            False,
            tok("glimt-", (URL, 25)),
            prefix="glimt-",
        ),
        f(
            "gitlab-agent-token",
            GL + "gitlab-kubernetes-agent-token",
            "GITLAB_AGENT_TOKEN",
            False,
            tok("glagent-", (URL, 50)),
            prefix="glagent-",
        ),
        f(
            "gitlab-oauth-app-secret",
            GL + "gitlab-oauth-app-secret",
            "GITLAB_APP_SECRET",
            False,
            tok("gloas-", (URL, 64)),
            prefix="gloas-",
        ),
        f(
            "gitlab-scim-token",
            GL + "gitlab-scim-token",
            "GITLAB_SCIM_TOKEN",
            False,
            tok("glsoat-", (URL, 20)),
            prefix="glsoat-",
        ),
        f(
            "gitlab-feature-flag-token",
            GL + "gitlab-feature-flag-client-token",
            "UNLEASH_INSTANCE_ID",
            False,
            tok("glffct-", (URL, 20)),
            prefix="glffct-",
        ),
        f(
            "gitlab-runner-registration-token",
            GL + "gitlab-rrt",
            "REGISTRATION_TOKEN",
            False,
            tok("GR1348941", (URL, 20)),
            prefix="GR1348941",
        ),
        f(
            "gitlab-session-cookie",
            GL + "gitlab-session-cookie",
            "Cookie",
            False,
            kv_in("_gitlab_session={s}", lambda g: g.s(LA, 32)),
            shape="composite",
        ),
        f(
            "atlassian-api-token",
            TH + "atlassian v2; docs:atlassian (ATATT)",
            "JIRA_API_TOKEN",
            False,
            lambda g: "ATATT3xFfGF0" + g.s(URL, 170) + "=" + g.s(HU, 8),
            prefix="ATATT3xFfGF0",
        ),
        f(
            "bitbucket-access-token",
            TH + "atlassian v2 (ATCTT)",
            "BITBUCKET_TOKEN",
            False,
            lambda g: "ATCTT3xFfGN0" + g.s(URL, 170) + "=" + g.s(HU, 8),
            prefix="ATCTT3xFfG",
        ),
        f(
            "jira-legacy-api-token",
            GL + "atlassian-api-token",
            "JIRA_API_TOKEN",
            True,
            tok("", (LA, 24)),
        ),
        f(
            "bitbucket-client-secret",
            GL + "bitbucket-client-secret",
            "BITBUCKET_CLIENT_SECRET",
            True,
            tok("", (URL, 64)),
        ),
        f(
            "circleci-pat",
            TH + "circleci v2",
            "CIRCLECI_TOKEN",
            False,
            tok("CCIPAT_", (AN, 22), "_", (HX, 40)),
            prefix="CCIPAT_",
        ),
        f("circleci-legacy-token", TH + "circleci v1", "CIRCLECI_TOKEN", True, tok("", (HX, 40))),
        f(
            "buildkite-api-token",
            TH + "buildkite v2",
            "BUILDKITE_API_TOKEN",
            False,
            tok("bkua_", (LA, 40)),
            prefix="bkua_",
        ),
        f(
            "buildkite-legacy-token",
            TH + "buildkite v1",
            "BUILDKITE_API_TOKEN",
            True,
            tok("", (LA, 40)),
        ),
        f("travisci-token", GL + "travisci-access-token", "TRAVIS_TOKEN", True, tok("", (LA, 22))),
        f("droneci-token", GL + "droneci-access-token", "DRONE_TOKEN", True, tok("", (LA, 32))),
        f("codecov-token", GL + "codecov-access-token", "CODECOV_TOKEN", True, lambda g: g.uuid()),
        f(
            "sonarqube-user-token",
            GL + "sonar-api-token",
            "SONAR_TOKEN",
            False,
            tok("squ_", (HX, 40)),
            prefix="squ_",
        ),
        f(
            "sonarqube-project-token",
            GL + "sonar-api-token",
            "SONAR_TOKEN",
            False,
            tok("sqp_", (HX, 40)),
            prefix="sqp_",
        ),
        f(
            "sonarcloud-token",
            TH + "sonarcloud v2",
            "SONAR_TOKEN",
            False,
            tok("sqco_", (AN, 59)),
            prefix="sqco_",
        ),
        f("snyk-token", GL + "snyk-api-token", "SNYK_TOKEN", True, lambda g: g.uuid()),
        f(
            "npm-token",
            GL + "npm-access-token; " + GH,
            "NPM_TOKEN",
            False,
            lambda g: b62_checksum_token(g, "npm_"),
            prefix="npm_",
        ),
        f(
            "pypi-upload-token",
            GL + "pypi-upload-token; " + GH,
            "TWINE_PASSWORD",
            False,
            lambda g: "pypi-AgEIcHlwaS5vcmcCJ" + g.s(URL, 154),
            prefix="pypi-AgEIcHlwaS5vcmc",
        ),
        f(
            "rubygems-api-key",
            GL + "rubygems-api-token",
            "GEM_HOST_API_KEY",
            False,
            tok("rubygems_", (HX, 48)),
            prefix="rubygems_",
        ),
        f("nuget-api-key", TH + "nugetapikey", "NUGET_API_KEY", True, tok("oy2", (LA, 43))),
        f(
            "dockerhub-pat",
            TH + "dockerhub v2",
            "DOCKERHUB_TOKEN",
            False,
            tok("dckr_pat_", (URL, 27)),
            prefix="dckr_pat_",
        ),
        f(
            "dockerhub-org-token",
            TH + "dockerhub v2",
            "DOCKER_PASSWORD",
            False,
            tok("dckr_oat_", (URL, 32)),
            prefix="dckr_oat_",
        ),
        f(
            "artifactory-api-key",
            GL + "artifactory-api-key",
            "ARTIFACTORY_API_KEY",
            False,
            tok("AKCp", (AN, 69)),
            prefix="AKCp",
        ),
        f(
            "artifactory-reference-token",
            GL + "artifactory-reference-token",
            "JFROG_ACCESS_TOKEN",
            False,
            lambda g: "cmVmdGtuOjAxOjE3" + g.s(AN, 48),
            prefix="cmVmd",
        ),
        f(
            "jfrog-access-token",
            "docs:jfrog (access tokens are JWTs, kid/ver header)",
            "JFROG_ACCESS_TOKEN",
            False,
            lambda g: jwt(
                g,
                {
                    "ext": "{}",
                    "sub": f"jfac@{g.s(LA, 26)}/users/ci",
                    "scp": "applied-permissions/user",
                    "aud": "*@*",
                    "iss": f"jfac@{g.s(LA, 26)}",
                    "exp": 1790000000,
                    "iat": 1720000000,
                    "jti": g.uuid(),
                },
                "RS256",
                {"ver": "2", "kid": g.s(URL, 43)},
            ),
        ),
        f(
            "jfrog-identity-token",
            GL + "jfrog-identity-token",
            "JFROG_IDENTITY_TOKEN",
            True,
            tok("", (LA, 64)),
        ),
        f("cloudsmith-api-key", TH + "cloudsmith", "CLOUDSMITH_API_KEY", True, tok("", (HX, 40))),
        f("packagecloud-token", TH + "packagecloud", "PACKAGECLOUD_TOKEN", True, tok("", (HX, 48))),
        f(
            "clojars-token",
            GL + "clojars-api-token",
            "CLOJARS_PASSWORD",
            False,
            tok("CLOJARS_", (LA, 60)),
            prefix="CLOJARS_",
        ),
        f(
            "readme-api-key",
            GL + "readme-api-token",
            "README_API_KEY",
            False,
            tok("rdme_", (LA, 70)),
            prefix="rdme_",
        ),
        f(
            "prefect-api-key",
            GL + "prefect-api-token",
            "PREFECT_API_KEY",
            False,
            tok("pnu_", (AN, 36)),
            prefix="pnu_",
        ),
        f(
            "postman-api-key",
            GL + "postman-api-token",
            "POSTMAN_API_KEY",
            False,
            tok("PMAK-", (HX, 24), "-", (HX, 34)),
            prefix="PMAK-",
        ),
        # --- deploy platforms, PaaS, databases
        f("vercel-token", TH + "vercel", "VERCEL_TOKEN", True, tok("", (AN, 24))),
        f(
            "netlify-pat",
            TH + "netlify v2",
            "NETLIFY_AUTH_TOKEN",
            False,
            tok("nfp_", (AN, 36)),
            prefix="nfp_",
        ),
        f(
            "netlify-legacy-token",
            TH + "netlify v1",
            "NETLIFY_AUTH_TOKEN",
            True,
            tok("", (URL, 43)),
        ),
        f("heroku-api-key", GL + "heroku-api-key", "HEROKU_API_KEY", True, lambda g: g.uuid()),
        f(
            "heroku-api-key-v2",
            GL + "heroku-api-key-v2",
            "HEROKU_API_KEY",
            False,
            tok("HRKU-AA", (URL, 58)),
            prefix="HRKU-AA",
        ),
        f(
            "render-api-key",
            "docs:render.com (rnd_ API keys)",
            "RENDER_API_KEY",
            False,
            tok("rnd_", (AN, 32)),
            prefix="rnd_",
        ),
        f(
            "flyio-token",
            GL + "flyio-access-token",
            "FLY_API_TOKEN",
            False,
            tok("fo1_", (URL, 43)),
            prefix="fo1_",
        ),
        f(
            "flyio-macaroon",
            TH + "flyio",
            "FLY_API_TOKEN",
            False,
            lambda g: "FlyV1 fm2_" + g.b64(420).rstrip("="),
            prefix="FlyV1 fm2_",
        ),
        f("railway-token", TH + "railwayapp", "RAILWAY_TOKEN", True, lambda g: g.uuid()),
        f(
            "supabase-pat",
            TH + "supabasetoken",
            "SUPABASE_ACCESS_TOKEN",
            False,
            tok("sbp_", (LA, 40)),
            prefix="sbp_",
        ),
        f(
            "supabase-service-role-key",
            "docs:supabase (service_role JWT, secret)",
            "SUPABASE_SERVICE_ROLE_KEY",
            False,
            lambda g: jwt(
                g,
                {
                    "iss": "supabase",
                    "ref": g.s(LO, 20),
                    "role": "service_role",
                    "iat": 1700000000,
                    "exp": 2015000000,
                },
            ),
        ),
        f(
            "planetscale-token",
            GL + "planetscale-api-token",
            "PLANETSCALE_TOKEN",
            False,
            tok("pscale_tkn_", (URL, 43)),
            prefix="pscale_tkn_",
        ),
        f(
            "planetscale-password",
            GL + "planetscale-password",
            "DATABASE_PASSWORD",
            False,
            tok("pscale_pw_", (URL, 43)),
            prefix="pscale_pw_",
        ),
        f(
            "planetscale-oauth-token",
            GL + "planetscale-oauth-token",
            "PLANETSCALE_OAUTH",
            False,
            tok("pscale_oauth_", (URL, 43)),
            prefix="pscale_oauth_",
        ),
        f(
            "scalingo-token",
            GL + "scalingo-api-token",
            "SCALINGO_API_TOKEN",
            False,
            tok("tk-us-", (URL, 48)),
            prefix="tk-us-",
        ),
        f(
            "hasura-admin-secret",
            TH + "hasura",
            "HASURA_GRAPHQL_ADMIN_SECRET",
            True,
            tok("", (AN, 64)),
        ),
        f(
            "mongodb-uri",
            TH + "mongodb",
            "MONGODB_URI",
            False,
            uri("mongodb+srv", "cluster0.ab1cd.mongodb.net", "/prod?retryWrites=true&w=majority"),
            shape="composite",
        ),
        f(
            "postgres-uri",
            TH + "postgres",
            "DATABASE_URL",
            False,
            uri("postgresql", "db.internal:5432", "/app?sslmode=require"),
            shape="composite",
        ),
        f(
            "mysql-uri",
            "docs:mysql connection URI",
            "DATABASE_URL",
            False,
            uri("mysql", "mysql.internal:3306", "/shop"),
            shape="composite",
        ),
        f(
            "redis-uri",
            TH + "redis",
            "REDIS_URL",
            False,
            uri("rediss", "cache.internal:6380", "/0"),
            shape="composite",
        ),
        f(
            "amqp-uri",
            TH + "rabbitmq",
            "CELERY_BROKER_URL",
            False,
            uri("amqps", "mq.internal:5671", "/vhost"),
            shape="composite",
        ),
        f(
            "ftp-uri",
            TH + "ftp",
            "FTP_URL",
            False,
            uri("ftp", "files.internal:21", "/upload"),
            shape="composite",
        ),
        f(
            "smtp-uri",
            "docs:smtp URI (userinfo password)",
            "EMAIL_URL",
            False,
            uri("smtp", "smtp.mailhost.net:587"),
            shape="composite",
        ),
        f(
            "https-basic-auth-url",
            TH + "uri",
            "WEBHOOK_URL",
            False,
            uri("https", "hooks.partner.example", "/v1/ingest"),
            shape="composite",
        ),
        f(
            "jdbc-password",
            TH + "jdbc",
            "SPRING_DATASOURCE_URL",
            False,
            kv_in(
                "jdbc:postgresql://db.internal:5432/app?user=app&password={s}&ssl=true",
                lambda g: g.password(),
            ),
            shape="composite",
        ),
        f(
            "mssql-connection-string",
            TH + "sqlserver",
            "ConnectionStrings__Default",
            False,
            kv_in(
                "Server=tcp:{w}-sql.database.windows.net,1433;Initial Catalog=app;User ID=sa;Password={s};Encrypt=True;",
                lambda g: g.password(),
            ),
            shape="composite",
        ),
        f(
            "azure-redis-connection",
            TH + "redis (azure)",
            "REDIS_CONNECTION",
            False,
            kv_in(
                "{w}.redis.cache.windows.net:6380,password={s},ssl=True,abortConnect=False",
                lambda g: g.s(AN, 43) + "=",
            ),
            shape="composite",
        ),
        f(
            "snowflake-password",
            TH + "snowflake",
            "SNOWFLAKE_PASSWORD",
            True,
            lambda g: g.password(),
        ),
        # --- productivity, low-code, CRM
        f(
            "airtable-pat",
            GL + "airtable-personnal-access-token",
            "AIRTABLE_API_KEY",
            False,
            tok("pat", (AN, 14), ".", (HX, 64)),
            prefix="pat",
        ),
        f(
            "airtable-legacy-key",
            GL + "airtable-api-key",
            "AIRTABLE_API_KEY",
            True,
            tok("key", (AN, 14)),
            prefix="key",
        ),
        f(
            "airtable-oauth-token",
            TH + "airtableoauth",
            "AIRTABLE_OAUTH_TOKEN",
            False,
            tok("", (AN, 17), ".v1.", (URL, 60), ".", (HX, 32)),
        ),
        f(
            "notion-token",
            GL + "notion-api-token",
            "NOTION_TOKEN",
            False,
            tok("ntn_", (DG, 11), (AN, 35)),
            prefix="ntn_",
        ),
        f(
            "notion-legacy-secret",
            TH + "notion",
            "NOTION_API_KEY",
            False,
            tok("secret_", (AN, 43)),
            prefix="secret_",
        ),
        f(
            "linear-api-key",
            GL + "linear-api-key",
            "LINEAR_API_KEY",
            False,
            tok("lin_api_", (AN, 40)),
            prefix="lin_api_",
        ),
        f(
            "asana-pat",
            TH + "asanapersonalaccesstoken",
            "ASANA_ACCESS_TOKEN",
            True,
            tok("2/12", (DG, 14), "/12", (DG, 14), ":", (HX, 32)),
        ),
        f(
            "figma-pat",
            TH + "figmapersonalaccesstoken v2",
            "FIGMA_TOKEN",
            False,
            tok("figd_", (URL, 40)),
            prefix="figd_",
        ),
        f(
            "clickup-token",
            TH + "clickuppersonaltoken",
            "CLICKUP_API_TOKEN",
            True,
            tok("pk_", (DG, 8), "_", (UA, 32)),
            prefix="pk_",
        ),
        f("todoist-token", TH + "todoist", "TODOIST_API_TOKEN", True, tok("", (HX, 40))),
        f(
            "hubspot-private-app-token",
            "docs:hubspot (pat-<region>-<uuid>)",
            "HUBSPOT_ACCESS_TOKEN",
            False,
            lambda g: "pat-na1-" + g.uuid(),
            prefix="pat-na1-",
        ),
        f(
            "hubspot-legacy-api-key",
            GL + "hubspot-api-key",
            "HUBSPOT_API_KEY",
            True,
            lambda g: g.uuid().upper(),
        ),
        f(
            "salesforce-access-token",
            TH + "salesforce",
            "SF_ACCESS_TOKEN",
            False,
            tok("00D", (AN, 12), "!", (AN + ".", 96)),
            prefix="00D",
        ),
        f(
            "salesforce-refresh-token",
            TH + "salesforcerefreshtoken",
            "SF_REFRESH_TOKEN",
            False,
            tok("5AEP861", (AN + ".", 80)),
            prefix="5AEP861",
        ),
        f(
            "typeform-token",
            GL + "typeform-api-token",
            "TYPEFORM_TOKEN",
            False,
            tok("tfp_", (URL, 59)),
            prefix="tfp_",
        ),
        f(
            "zendesk-api-token",
            GL + "zendesk-secret-key",
            "ZENDESK_API_TOKEN",
            True,
            tok("", (AN, 40)),
        ),
        f("freshdesk-api-key", TH + "freshdesk", "FRESHDESK_API_KEY", True, tok("", (AN, 20))),
        f("box-developer-token", TH + "box", "BOX_DEVELOPER_TOKEN", True, tok("", (AN, 32))),
        f(
            "dropbox-token",
            GL + "dropbox-short-lived-api-token",
            "DROPBOX_ACCESS_TOKEN",
            False,
            tok("sl.u.", (URL, 140)),
            prefix="sl.",
        ),
        f(
            "contentful-pat",
            TH + "contentfulpersonalaccesstoken",
            "CONTENTFUL_MANAGEMENT_TOKEN",
            False,
            tok("CFPAT-", (URL, 43)),
            prefix="CFPAT-",
        ),
        f(
            "mapbox-secret-token",
            TH + "mapbox",
            "MAPBOX_SECRET_TOKEN",
            False,
            lambda g: "sk." + b64u_json({"u": g.s(LO, 8), "a": g.s(LA, 25)}) + "." + g.s(URL, 22),
            prefix="sk.eyJ",
        ),
        f(
            "frameio-token",
            GL + "frameio-api-token",
            "FRAMEIO_TOKEN",
            False,
            tok("fio-u-", (URL, 64)),
            prefix="fio-u-",
        ),
        f(
            "maxmind-license-key",
            GL + "maxmind-license-key",
            "MAXMIND_LICENSE_KEY",
            False,
            tok("", (AN, 6), "_", (AN, 29), "_mmk"),
        ),
        f(
            "rootly-api-key",
            TH + "rootly",
            "ROOTLY_API_TOKEN",
            False,
            tok("rootly_", (HX, 64)),
            prefix="rootly_",
        ),
        # --- messaging, e-mail, push
        f(
            "slack-bot-token",
            GL + "slack-bot-token; " + GH,
            "SLACK_BOT_TOKEN",
            False,
            tok("xoxb-", (DG, 12), "-", (DG, 13), "-", (AN, 24)),
            prefix="xoxb-",
        ),
        f(
            "slack-user-token",
            GL + "slack-user-token; " + GH,
            "SLACK_USER_TOKEN",
            False,
            tok("xoxp-", (DG, 12), "-", (DG, 13), "-", (DG, 13), "-", (HX, 32)),
            prefix="xoxp-",
        ),
        f(
            "slack-app-token",
            GL + "slack-app-token",
            "SLACK_APP_TOKEN",
            False,
            tok("xapp-1-A", (UA, 10), "-", (DG, 13), "-", (HX, 64)),
            prefix="xapp-",
        ),
        f(
            "slack-config-refresh-token",
            GL + "slack-config-refresh-token",
            "SLACK_CONFIG_REFRESH",
            False,
            tok("xoxe-1-", (AN, 146)),
            prefix="xoxe-",
        ),
        f(
            "slack-webhook-url",
            GL + "slack-webhook-url; " + GH,
            "SLACK_WEBHOOK_URL",
            False,
            kv_in(
                "https://hooks.slack.com/services/T{s}",
                lambda g: g.s(UA, 10) + "/B" + g.s(UA, 10) + "/" + g.s(AN, 24),
            ),
            shape="composite",
        ),
        f(
            "discord-bot-token",
            TH + "discordbottoken",
            "DISCORD_BOT_TOKEN",
            True,
            lambda g: (
                base64.b64encode(g.s(DG, 18).encode()).decode().rstrip("=")
                + "."
                + g.s(URL, 6)
                + "."
                + g.s(URL, 38)
            ),
        ),
        f(
            "discord-webhook-url",
            TH + "discordwebhook",
            "DISCORD_WEBHOOK",
            False,
            kv_in(
                "https://discord.com/api/webhooks/{s}", lambda g: g.s(DG, 19) + "/" + g.s(URL, 68)
            ),
            shape="composite",
        ),
        f(
            "telegram-bot-token",
            GL + "telegram-bot-api-token",
            "TELEGRAM_BOT_TOKEN",
            True,
            tok("", (DG, 10), ":AA", (URL, 33)),
        ),
        f(
            "teams-webhook-url",
            GL + "microsoft-teams-webhook",
            "TEAMS_WEBHOOK_URL",
            False,
            kv_in(
                "https://contoso.webhook.office.com/webhookb2/{u}@{s}",
                lambda g: g.uuid() + "/IncomingWebhook/" + g.s(HX, 32) + "/" + g.uuid(),
            ),
            shape="composite",
        ),
        f(
            "twilio-api-key",
            GL + "twilio-api-key",
            "TWILIO_API_KEY",
            False,
            tok("SK", (HX, 32)),
            prefix="SK",
        ),
        f("twilio-auth-token", TH + "twilio", "TWILIO_AUTH_TOKEN", True, tok("", (HX, 32))),
        f(
            "sendgrid-api-key",
            GL + "sendgrid-api-token; " + GH,
            "SENDGRID_API_KEY",
            False,
            tok("SG.", (URL, 22), ".", (URL, 43)),
            prefix="SG.",
        ),
        f(
            "mailgun-api-key",
            GL + "mailgun-private-api-token",
            "MAILGUN_API_KEY",
            False,
            tok("key-", (HX, 32)),
            prefix="key-",
        ),
        f(
            "mailgun-signing-key",
            GL + "mailgun-signing-key",
            "MAILGUN_WEBHOOK_SIGNING_KEY",
            True,
            tok("", (HX, 32), "-", (HX, 8), "-", (HX, 8)),
        ),
        f(
            "mailchimp-api-key",
            GL + "mailchimp-api-key",
            "MAILCHIMP_API_KEY",
            True,
            lambda g: g.s(HX, 32) + f"-us{g.n(10, 21)}",
        ),
        f(
            "brevo-api-key",
            GL + "sendinblue-api-token",
            "BREVO_API_KEY",
            False,
            tok("xkeysib-", (HX, 64), "-", (AN, 16)),
            prefix="xkeysib-",
        ),
        f(
            "postmark-server-token",
            TH + "postmark",
            "X-Postmark-Server-Token",
            True,
            lambda g: g.uuid(),
        ),
        f(
            "resend-api-key",
            "docs:resend.com (re_ keys)",
            "RESEND_API_KEY",
            True,
            tok("re_", (AN, 8), "_", (AN, 24)),
            prefix="re_",
        ),
        f(
            "fcm-legacy-server-key",
            "docs:firebase (AAAA...:APA91b server key)",
            "FCM_SERVER_KEY",
            False,
            tok("AAAA", (URL, 7), ":APA91b", (URL, 134)),
            prefix="AAAA",
        ),
        f(
            "onesignal-rest-api-key",
            "docs:onesignal (os_v2_app_ keys, 2024 format)",
            "ONESIGNAL_REST_API_KEY",
            False,
            tok("os_v2_app_", (LO + "234567", 110)),
            prefix="os_v2_app_",
        ),
        f("onesignal-legacy-key", TH + "onesignal", "ONESIGNAL_API_KEY", True, lambda g: g.uuid()),
        f("pusher-secret", TH + "pusherchannelkey", "PUSHER_APP_SECRET", True, tok("", (HX, 20))),
        f(
            "expo-access-token",
            "docs:expo (EXPO_TOKEN, no prefix)",
            "EXPO_TOKEN",
            True,
            tok("", (URL, 40)),
        ),
        f(
            "apns-auth-key-p8",
            "docs:apple (AuthKey_*.p8 is a PKCS#8 EC key)",
            "APNS_KEY",
            False,
            lambda g: pem(
                "PRIVATE KEY",
                bytes.fromhex(
                    "308193020100301306072a8648ce3d020106082a8648ce3d030107047930770201010420"
                )
                + g.bytes(32)
                + bytes.fromhex("a00a06082a8648ce3d030107a144034200")
                + b"\x04"
                + g.bytes(64),
            ),
            shape="blob",
        ),
        # --- payments, commerce
        f(
            "stripe-secret-key",
            GL + "stripe-access-token; " + GH,
            "STRIPE_SECRET_KEY",
            False,
            tok("sk_live_51", (AN, 97)),
            prefix="sk_live_",
        ),
        f(
            "stripe-restricted-key",
            GL + "stripe-access-token",
            "STRIPE_API_KEY",
            False,
            tok("rk_live_51", (AN, 97)),
            prefix="rk_live_",
        ),
        f(
            "stripe-test-secret-key",
            GL + "stripe-access-token",
            "STRIPE_SECRET_KEY",
            False,
            tok("sk_test_51", (AN, 97)),
            prefix="sk_test_",
        ),
        f(
            "stripe-webhook-secret",
            "docs:stripe (whsec_)",
            "STRIPE_WEBHOOK_SECRET",
            False,
            tok("whsec_", (AN, 32)),
            prefix="whsec_",
        ),
        f(
            "square-access-token",
            GL + "square-access-token",
            "SQUARE_ACCESS_TOKEN",
            False,
            tok("EAAA", (URL, 60)),
            prefix="EAAA",
        ),
        f(
            "square-oauth-secret",
            GH + "; docs:square (sq0csp-)",
            "SQUARE_APP_SECRET",
            False,
            tok("sq0csp-", (URL, 43)),
            prefix="sq0csp-",
        ),
        f(
            "braintree-access-token",
            GH + " (access_token$production$)",
            "BRAINTREE_ACCESS_TOKEN",
            False,
            tok("access_token$production$", (LA, 16), "$", (HX, 32)),
            prefix="access_token$production$",
        ),
        f(
            "braintree-private-key",
            TH + "braintreepayments",
            "BRAINTREE_PRIVATE_KEY",
            True,
            tok("", (HX, 32)),
        ),
        f(
            "shopify-access-token",
            GL + "shopify-access-token",
            "SHOPIFY_ACCESS_TOKEN",
            False,
            tok("shpat_", (HX, 32)),
            prefix="shpat_",
        ),
        f(
            "shopify-shared-secret",
            GL + "shopify-shared-secret",
            "SHOPIFY_API_SECRET",
            False,
            tok("shpss_", (HX, 32)),
            prefix="shpss_",
        ),
        f(
            "shopify-custom-app-token",
            GL + "shopify-custom-access-token",
            "SHOPIFY_TOKEN",
            False,
            tok("shpca_", (HX, 32)),
            prefix="shpca_",
        ),
        f(
            "shopify-private-app-token",
            GL + "shopify-private-app-access-token",
            "SHOPIFY_PASSWORD",
            False,
            tok("shppa_", (HX, 32)),
            prefix="shppa_",
        ),
        f("razorpay-key-secret", TH + "razorpay", "RAZORPAY_KEY_SECRET", True, tok("", (AN, 24))),
        f(
            "paystack-secret-key",
            TH + "paystack",
            "PAYSTACK_SECRET_KEY",
            False,
            tok("sk_live_", (HX, 40)),
            prefix="sk_live_",
        ),
        f(
            "flutterwave-secret-key",
            GL + "flutterwave-secret-key",
            "FLW_SECRET_KEY",
            False,
            tok("FLWSECK_TEST-", (HX, 32), "-X"),
            prefix="FLWSECK_TEST-",
        ),
        f("plaid-secret", GL + "plaid-secret-key", "PLAID_SECRET", True, tok("", (LA, 30))),
        f(
            "plaid-access-token",
            GL + "plaid-api-token",
            "PLAID_ACCESS_TOKEN",
            False,
            lambda g: "access-production-" + g.uuid(),
            prefix="access-production-",
        ),
        f(
            "gocardless-token",
            GL + "gocardless-api-token",
            "GOCARDLESS_ACCESS_TOKEN",
            True,
            tok("live_", (URL, 40)),
            prefix="live_",
        ),
        f(
            "shippo-token",
            GL + "shippo-api-token",
            "SHIPPO_API_KEY",
            False,
            tok("shippo_live_", (HX, 40)),
            prefix="shippo_live_",
        ),
        f(
            "easypost-api-key",
            GL + "easypost-api-token",
            "EASYPOST_API_KEY",
            False,
            tok("EZAK", (AN, 54)),
            prefix="EZAK",
        ),
        f(
            "duffel-token",
            GL + "duffel-api-token",
            "DUFFEL_ACCESS_TOKEN",
            False,
            tok("duffel_live_", (URL, 43)),
            prefix="duffel_live_",
        ),
        f(
            "coinbase-api-secret",
            GL + "coinbase-access-token",
            "COINBASE_API_SECRET",
            True,
            tok("", (URL, 64)),
        ),
        # --- observability, analytics, feature flags
        f("datadog-api-key", TH + "datadogapikey", "DD_API_KEY", True, tok("", (HX, 32))),
        f("datadog-app-key", TH + "datadogtoken", "DD_APP_KEY", True, tok("", (HX, 40))),
        f(
            "newrelic-user-key",
            GL + "new-relic-user-api-key",
            "NEW_RELIC_API_KEY",
            False,
            tok("NRAK-", (UA, 27)),
            prefix="NRAK-",
        ),
        f(
            "newrelic-license-key",
            TH + "newreliclicensekey",
            "NEW_RELIC_LICENSE_KEY",
            True,
            tok("", (HX, 36), "NRAL"),
        ),
        f(
            "newrelic-insert-key",
            GL + "new-relic-insert-key",
            "NEW_RELIC_INSERT_KEY",
            False,
            tok("NRII-", (URL, 32)),
            prefix="NRII-",
        ),
        f(
            "sentry-user-token",
            GL + "sentry-user-token",
            "SENTRY_AUTH_TOKEN",
            False,
            tok("sntryu_", (HX, 64)),
            prefix="sntryu_",
        ),
        f(
            "sentry-org-token",
            GL + "sentry-org-token",
            "SENTRY_AUTH_TOKEN",
            False,
            lambda g: (
                "sntrys_"
                + base64.b64encode(
                    json.dumps(
                        {
                            "iat": 1720000000.5,
                            "url": "https://sentry.io",
                            "region_url": "https://us.sentry.io",
                            "org": g.word(),
                        },
                        separators=(",", ":"),
                    ).encode()
                )
                .decode()
                .rstrip("=")
                + "_"
                + g.s(B64, 43)
            ),
            prefix="sntrys_eyJ",
        ),
        f(
            "grafana-cloud-token",
            GL + "grafana-cloud-api-token",
            "GRAFANA_CLOUD_TOKEN",
            False,
            lambda g: (
                "glc_"
                + base64.b64encode(
                    json.dumps(
                        {
                            "o": g.s(DG, 6),
                            "n": "stack-" + g.s(DG, 6) + "-hm-read",
                            "k": g.s(AN, 24),
                            "m": {"r": "prod-us-east-0"},
                        },
                        separators=(",", ":"),
                    ).encode()
                ).decode()
            ),
            prefix="glc_eyJ",
        ),
        f(
            "grafana-service-account-token",
            GL + "grafana-service-account-token",
            "GRAFANA_TOKEN",
            False,
            tok("glsa_", (AN, 32), "_", (HX, 8)),
            prefix="glsa_",
        ),
        f(
            "grafana-api-key",
            GL + "grafana-api-key",
            "GRAFANA_API_KEY",
            False,
            lambda g: base64.b64encode(
                json.dumps(
                    {"k": g.s(AN, 32), "n": "ci", "id": g.n(1, 99)}, separators=(",", ":")
                ).encode()
            ).decode(),
            prefix="eyJrIjoi",
        ),
        f(
            "dynatrace-token",
            GL + "dynatrace-api-token",
            "DT_API_TOKEN",
            False,
            tok("dt0c01.", (UA, 24), ".", (UA, 64)),
            prefix="dt0c01.",
        ),
        f("honeycomb-api-key", TH + "honeycomb", "HONEYCOMB_API_KEY", True, tok("", (AN, 22))),
        f(
            "pagerduty-api-key",
            TH + "pagerdutyapikey",
            "PAGERDUTY_TOKEN",
            True,
            tok("u+", (URL, 18)),
            prefix="u+",
        ),
        f("opsgenie-api-key", TH + "opsgenie", "OPSGENIE_API_KEY", True, lambda g: g.uuid()),
        f(
            "launchdarkly-api-token",
            TH + "launchdarkly",
            "LD_API_KEY",
            False,
            lambda g: "api-" + g.uuid(),
            prefix="api-",
        ),
        f(
            "launchdarkly-sdk-key",
            TH + "launchdarkly",
            "LD_SDK_KEY",
            False,
            lambda g: "sdk-" + g.uuid(),
            prefix="sdk-",
        ),
        f(
            "posthog-personal-key",
            TH + "posthog",
            "POSTHOG_PERSONAL_API_KEY",
            False,
            tok("phx_", (AN, 43)),
            prefix="phx_",
        ),
        f("segment-write-key", TH + "segmentapikey", "SEGMENT_WRITE_KEY", True, tok("", (AN, 32))),
        f("mixpanel-api-secret", TH + "mixpanel", "MIXPANEL_API_SECRET", True, tok("", (LA, 32))),
        f(
            "amplitude-secret-key",
            TH + "amplitudeapikey",
            "AMPLITUDE_SECRET_KEY",
            True,
            tok("", (HX, 32)),
        ),
        f(
            "algolia-admin-key",
            GL + "algolia-api-key",
            "ALGOLIA_ADMIN_KEY",
            True,
            tok("", (LA, 32)),
        ),
        f(
            "sumologic-access-key",
            GL + "sumologic-access-token",
            "SUMO_ACCESS_KEY",
            True,
            tok("", (AN, 64)),
        ),
        # --- identity providers, auth, sessions
        f("okta-api-token", TH + "okta", "OKTA_API_TOKEN", True, tok("00", (URL, 40)), prefix="00"),
        f(
            "auth0-client-secret",
            TH + "auth0oauth",
            "AUTH0_CLIENT_SECRET",
            True,
            tok("", (URL, 64)),
        ),
        f(
            "auth0-management-token",
            TH + "auth0managementapitoken",
            "AUTH0_MANAGEMENT_TOKEN",
            False,
            lambda g: jwt(
                g,
                {
                    "iss": f"https://{g.word()}.eu.auth0.com/",
                    "sub": g.s(AN, 32) + "@clients",
                    "aud": "https://tenant.eu.auth0.com/api/v2/",
                    "iat": 1720000000,
                    "exp": 1720086400,
                    "scope": "read:users update:users",
                    "gty": "client-credentials",
                },
                "RS256",
                {"kid": g.s(URL, 22)},
            ),
        ),
        f(
            "clerk-secret-key",
            "docs:clerk (sk_live_)",
            "CLERK_SECRET_KEY",
            False,
            tok("sk_live_", (AN, 42)),
            prefix="sk_live_",
        ),
        f(
            "stytch-secret",
            TH + "stytch",
            "STYTCH_SECRET",
            True,
            tok("secret-live-", (URL, 36), "="),
            prefix="secret-live-",
        ),
        f(
            "tailscale-auth-key",
            TH + "tailscale",
            "TS_AUTHKEY",
            False,
            tok("tskey-auth-k", (AN, 10), "CNTRL-", (AN, 33)),
            prefix="tskey-auth-",
        ),
        f(
            "tailscale-api-key",
            TH + "tailscale",
            "TAILSCALE_API_KEY",
            False,
            tok("tskey-api-k", (AN, 10), "CNTRL-", (AN, 33)),
            prefix="tskey-api-",
        ),
        f(
            "ngrok-authtoken",
            TH + "ngrok",
            "NGROK_AUTHTOKEN",
            True,
            tok("2", (AN, 26), "_", (DG, 1), (AN, 20)),
        ),
        f(
            "twitter-bearer-token",
            GL + "twitter-bearer-token",
            "TWITTER_BEARER_TOKEN",
            True,
            tok("AAAAAAAAAAAAAAAAAAAAA", (AN, 60), "%3D", (AN, 30)),
            prefix="AAAAAAAAAAAAAAAAAAAAA",
        ),
        f(
            "facebook-access-token",
            GL + "facebook-page-access-token",
            "FB_ACCESS_TOKEN",
            False,
            tok("EAAC", (AN, 160)),
            prefix="EAAC",
        ),
        f(
            "facebook-app-secret",
            GL + "facebook-secret",
            "FACEBOOK_APP_SECRET",
            True,
            tok("", (HX, 32)),
        ),
        f(
            "jwt-bearer-hs256",
            GL + "jwt",
            "ACCESS_TOKEN",
            False,
            lambda g: jwt(
                g,
                {
                    "sub": g.s(DG, 8),
                    "name": "svc",
                    "iat": 1720000000,
                    "exp": 1720003600,
                    "scope": "tools:write",
                },
            ),
            note="HS256 JWT; public prefix = header",
        ),
        f(
            "kubernetes-sa-token",
            "docs:kubernetes (service-account JWT)",
            "K8S_TOKEN",
            False,
            lambda g: jwt(
                g,
                {
                    "aud": ["https://kubernetes.default.svc"],
                    "exp": 1790000000,
                    "iat": 1720000000,
                    "iss": "https://kubernetes.default.svc.cluster.local",
                    "kubernetes.io": {
                        "namespace": "prod",
                        "serviceaccount": {"name": "agent", "uid": g.uuid()},
                    },
                    "sub": "system:serviceaccount:prod:agent",
                },
                "RS256",
                {"kid": g.s(URL, 43)},
            ),
        ),
        f(
            "http-basic-auth-header",
            GL + "curl-auth-header",
            "Authorization",
            False,
            lambda g: Cred(
                "Basic "
                + (
                    b := base64.b64encode(
                        f"{g.pick(['admin', 'deploy', 'ci'])}:{g.password()}".encode()
                    ).decode()
                ),
                [(b, "")],
            ),
            shape="composite",
        ),
        f(
            "docker-config-auth",
            "docs:docker (config.json auths.auth = base64 user:pass)",
            "DOCKER_AUTH_CONFIG",
            False,
            lambda g: Cred(
                json.dumps(
                    {
                        "auths": {
                            "registry.example.io": {
                                "auth": (
                                    b := base64.b64encode(f"ci:{g.password()}".encode()).decode()
                                )
                            }
                        }
                    }
                ),
                [(b, "")],
            ),
            shape="composite",
        ),
        f(
            "django-session-cookie",
            "docs:django (sessionid cookie)",
            "Cookie",
            False,
            kv_in("sessionid={s}; csrftoken=Zx9", lambda g: g.s(LA, 32)),
            shape="composite",
        ),
        f(
            "express-session-cookie",
            "docs:express-session (connect.sid s%3A...)",
            "Cookie",
            False,
            kv_in(
                "connect.sid={s}",
                lambda g: (
                    "s%3A" + g.s(URL, 32) + "." + urllib.parse.quote(g.b64(32).rstrip("="), safe="")
                ),
            ),
            shape="composite",
        ),
        f(
            "rails-session-cookie",
            "docs:rails (_app_session cookie, base64--hmac)",
            "Cookie",
            False,
            kv_in("_shop_session={s}", lambda g: g.b64(120).rstrip("=") + "--" + g.s(HX, 40)),
            shape="composite",
        ),
        f(
            "java-session-cookie",
            "docs:servlet (JSESSIONID)",
            "Cookie",
            False,
            kv_in("JSESSIONID={s}; Path=/; HttpOnly", lambda g: g.s(HU, 32)),
            shape="composite",
        ),
        f(
            "php-session-cookie",
            "docs:php (PHPSESSID)",
            "Cookie",
            False,
            kv_in("PHPSESSID={s}", lambda g: g.s(LA, 26)),
            shape="composite",
        ),
        f(
            "flask-session-cookie",
            "docs:flask/itsdangerous (session=eyJ...)",
            "Cookie",
            False,
            kv_in(
                "session={s}",
                lambda g: (
                    b64u_json({"user_id": g.n(1, 9999), "csrf": g.s(HX, 40)})
                    + "."
                    + g.s(URL, 6)
                    + "."
                    + g.s(URL, 27)
                ),
            ),
            shape="composite",
        ),
        f(
            "aspnet-auth-cookie",
            "docs:asp.net (.AspNetCore.Cookies)",
            "Cookie",
            False,
            kv_in(".AspNetCore.Cookies={s}", lambda g: "CfDJ8" + g.s(URL, 300)),
            shape="composite",
        ),
        f(
            "gcp-iap-cookie",
            "docs:google IAP (GCP_IAP_UID / __Host-GCP_IAP_AUTH_TOKEN)",
            "Cookie",
            False,
            kv_in("__Host-GCP_IAP_AUTH_TOKEN_{n}={s}", lambda g: g.s(URL, 200)),
            shape="composite",
        ),
        # --- private keys
        f("rsa-private-key", GL + "private-key", "TLS_KEY", False, rsa_pkcs1, shape="blob"),
        f("pkcs8-private-key", GL + "private-key", "PRIVATE_KEY", False, pkcs8, shape="blob"),
        f("ec-private-key", GL + "private-key", "EC_KEY", False, ec_key, shape="blob"),
        f(
            "encrypted-pkcs8-private-key",
            GL + "private-key",
            "SIGNING_KEY",
            False,
            enc_pkcs8,
            shape="blob",
        ),
        f(
            "openssh-private-key",
            GL + "private-key",
            "SSH_PRIVATE_KEY",
            False,
            openssh_key,
            shape="blob",
        ),
        f("pgp-private-key", GL + "private-key", "GPG_PRIVATE_KEY", False, pgp_key, shape="blob"),
        f("putty-private-key", TH + "privatekey (PuTTY)", "PPK", False, putty_key, shape="blob"),
        # --- generic secrets under secret-looking names (no format at all)
        f("generic-api-key", GL + "generic-api-key", "api_key", True, tok("", (AN, 32))),
        f(
            "generic-client-secret",
            GL + "generic-api-key",
            "client_secret",
            True,
            tok("", (URL, 40)),
        ),
        f(
            "generic-auth-token-header",
            GL + "generic-api-key",
            "X-Auth-Token",
            True,
            tok("", (HX, 48)),
        ),
        f(
            "generic-password",
            GL + "hashicorp-tf-password; generic",
            "password",
            True,
            lambda g: g.password(),
        ),
        f("generic-access-token", GL + "generic-api-key", "access_token", True, tok("", (URL, 43))),
        f(
            "generic-private-token",
            GL + "generic-api-key",
            "PRIVATE-TOKEN",
            True,
            tok("", (AN, 20)),
        ),
        f("generic-secret-key", GL + "generic-api-key", "SECRET_KEY", True, tok("", (B64, 50))),
        f(
            "generic-db-password",
            GL + "generic-api-key",
            "DB_PASSWORD",
            True,
            lambda g: g.password(),
        ),
        f(
            "generic-signing-secret",
            GL + "generic-api-key",
            "webhook_signing_secret",
            True,
            tok("", (HX, 64)),
        ),
        f(
            "generic-encryption-key",
            GL + "generic-api-key",
            "ENCRYPTION_KEY",
            True,
            lambda g: g.b64(32),
        ),
    ]


# ----------------------------------------------------------------------------- embeddings


def js(s: str) -> str:
    return json.dumps(s)[1:-1]


def pct(s: str) -> str:
    return urllib.parse.quote(s, safe="")


def b64_core(plain: str, needle: str, urlsafe: bool = False) -> list[str]:
    """The base64 characters that encode only bytes of ``needle`` inside ``plain``."""
    raw = plain.encode()
    enc = (base64.urlsafe_b64encode if urlsafe else base64.b64encode)(raw).decode()
    out = []
    start = 0
    nb = needle.encode()
    while (i := raw.find(nb, start)) >= 0:
        a, b = i * 8, (i + len(nb)) * 8
        out.append(enc[math.ceil(a / 6) : b // 6])
        start = i + 1
    return out


@dataclass
class Ctx:
    """What an embedding works with: the credential text and the name it goes by."""

    text: str
    key: str  # e.g. OPENAI_API_KEY
    label: str  # e.g. openai
    g: G
    multiline: bool
    benign: bool = False  # benign values go under their own ordinary names, never a secret's

    @property
    def snake(self) -> str:
        return self.key.lower().replace("-", "_")

    @property
    def dash(self) -> str:
        return self.key.lower().replace("_", "-")


Emb = Callable[[Ctx], tuple[str, Callable[[str], list[str]]]]
ID: Callable[[str], list[str]] = lambda n: [n]  # noqa: E731


def e_plain(c: Ctx):
    return c.text, ID


def e_json_args(c: Ctx):
    v = json.dumps(
        {
            "tool": "configure_integration",
            "arguments": {"provider": c.label, c.snake: c.text, "region": "eu-west-1"},
        }
    )
    return v, lambda n: [js(n)]


def e_chat_openai(c: Ctx):
    args = json.dumps({"name": c.key, "value": c.text})
    msgs = [
        {"role": "system", "content": "You are a deployment assistant."},
        {
            "role": "user",
            "content": f"Here is my {c.key}: {c.text} — please set it on the staging service.",
        },
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_" + c.g.s(AN, 24),
                    "type": "function",
                    "function": {
                        "name": "update_setting" if c.benign else "set_secret",
                        "arguments": args,
                    },
                }
            ],
        },
    ]
    return json.dumps(msgs), lambda n: [js(n), js(js(n))]


def e_chat_anthropic(c: Ctx):
    body = {
        "model": "claude-sonnet-4-5",
        "max_tokens": 1024,
        "messages": [
            {
                "role": "user",
                "content": [{"type": "text", "text": f"My {c.key} is:\n{c.text}\nstore it"}],
            },
            {
                "role": "assistant",
                "content": [
                    {
                        "type": "tool_use",
                        "id": "toolu_" + c.g.s(AN, 24),
                        "name": "store_secret",
                        "input": {"key": c.key, "secret": c.text},
                    }
                ],
            },
        ],
    }
    return json.dumps(body), lambda n: [js(n)]


def e_xml(c: Ctx):
    esc = html.escape(c.text, quote=False)
    v = f'<?xml version="1.0"?>\n<settings>\n  <add key="{c.key}" value="{html.escape(c.text)}" />\n  <{c.label}><credential>{esc}</credential></{c.label}>\n</settings>'
    return v, lambda n: [html.escape(n), html.escape(n, quote=False)]


def e_html(c: Ctx):
    v = f'<form action="/settings" method="post"><label>{c.label}</label><input type="password" name="{c.snake}" value="{html.escape(c.text)}"></form>'
    return v, lambda n: [html.escape(n)]


def e_cli(c: Ctx):
    q = c.text
    style = c.g.n(0, 3)
    if style == 0:
        v = f"$ {c.label}-cli login --{c.dash} '{q}' --non-interactive"
    elif style == 1:
        v = f"curl -sS -H 'Authorization: Bearer {q}' https://api.{c.label}.example/v1/projects"
    elif style == 2:
        v = f"curl -u deploy:{q} https://api.{c.label}.example/v2/upload -F file=@dist.tgz"
    else:
        v = f"docker run -e {c.key}='{q}' --password {q} registry.example.io/{c.label}/worker:1.4"
    return v, ID


def e_env(c: Ctx):
    val = f'"{c.text}"' if c.multiline else c.text
    v = f"PATH=/usr/local/bin:/usr/bin\nHOME=/home/app\nLANG=C.UTF-8\n{c.key}={val}\nPYTHONUNBUFFERED=1\nPORT=8080"
    return v, ID


def e_http_headers(c: Ctx):
    if c.benign:
        line = f"X-{c.key.replace('_', '-').title()}: {c.text}"
    elif c.key[0].isupper() and "-" in c.key:
        line = f"{c.key}: {c.text}"
    else:
        line = c.g.pick(
            [
                f"Authorization: Bearer {c.text}",
                f"X-Api-Key: {c.text}",
                f"X-{c.label.title()}-Token: {c.text}",
            ]
        )
    v = f"POST /v1/sync HTTP/1.1\r\nHost: api.{c.label}.example\r\nUser-Agent: agent/2.3\r\n{line}\r\nContent-Type: application/json\r\nContent-Length: 42\r\n"
    return v, ID


def e_url_query(c: Ctx):
    v = f"https://api.{c.label}.example/v1/export?{c.snake}={pct(c.text)}&page=2&format=csv"
    return v, lambda n: [pct(n)]


def e_url_userinfo(c: Ctx):
    v = f"https://{c.label}-bot:{pct(c.text)}@api.{c.label}.example/v3/repos/sync"
    return v, lambda n: [pct(n)]


def e_yaml(c: Ctx):
    if c.multiline:
        body = "\n".join("      " + ln for ln in c.text.split("\n"))
        v = f"{c.label}:\n  enabled: true\n  credentials:\n    {c.snake}: |\n{body}\n  timeout_s: 30\n"
        return v, ID
    v = f'{c.label}:\n  enabled: true\n  {c.snake}: "{c.text}"\n  timeout_s: 30\n'
    return v, lambda n: [n, js(n)]


def e_toml(c: Ctx):
    if c.multiline:
        v = f'[{c.label}]\nenabled = true\n{c.snake} = """\n{c.text}\n"""\n'
        return v, ID
    return f'[{c.label}]\nenabled = true\n{c.snake} = "{js(c.text)}"\nretries = 3\n', lambda n: [
        js(n)
    ]


def e_log(c: Ctx):
    v = f"2025-03-14T09:26:53.589Z INFO  [worker-3] {c.label}.client: authenticating with {c.key}={c.text} request_id=req_{c.g.s(AN, 12)}"
    return v, ID


def e_exception(c: Ctx):
    v = c.g.pick(
        [
            f"requests.exceptions.HTTPError: 401 Client Error: Unauthorized for url: https://api.{c.label}.example/v1/me?{c.snake}={pct(c.text)}",
            f"{c.label}.errors.AuthenticationError: invalid {c.key} '{c.text}' (status=401)",
        ]
    )
    return v, lambda n: [n, pct(n)]


def e_percent(c: Ctx):
    v = "payload=" + pct(json.dumps({c.snake: c.text, "provider": c.label}))
    return v, lambda n: [pct(js(n))]


def e_base64(c: Ctx):
    plain = f"# {c.label}\n{c.key}={c.text}\nDEBUG=false\n"
    v = base64.b64encode(plain.encode()).decode()
    return v, lambda n: b64_core(plain, n)


def e_base64_glued(c: Ctx):
    plain = json.dumps({"k": c.key, "v": c.text, "t": 1720000000})
    enc = base64.urlsafe_b64encode(plain.encode()).decode().rstrip("=")
    v = f"https://hooks.{c.label}.example/v1/callback/{enc}?ok=1"
    return v, lambda n: b64_core(plain, js(n), urlsafe=True)


def e_py_repr(c: Ctx):
    d = {c.snake: c.text, "timeout": 30, "retries": 3}
    v = c.g.pick([repr(d), f"Settings({c.snake}={c.text!r}, timeout=30)"])
    return v, lambda n: [n, repr(n)[1:-1]]


def e_markdown(c: Ctx):
    v = f"To reproduce, run:\n\n```bash\nexport {c.key}='{c.text}'\npython -m {c.label}_sync --dry-run\n```\n"
    return v, ID


def e_sql(c: Ctx):
    v = c.g.pick(
        [
            f"INSERT INTO integrations (provider, name, secret) VALUES ('{c.label}', '{c.key}', '{c.text}');",  # noqa: S608 -- corpus text, never executed
            f"UPDATE settings SET value = '{c.text}' WHERE name = '{c.key}';",  # noqa: S608 -- corpus text, never executed
        ]
    )
    return v, ID


def e_k8s(c: Ctx):
    if c.multiline:
        body = "\n".join("          " + ln for ln in c.text.split("\n"))
        v = f"apiVersion: apps/v1\nkind: Deployment\nspec:\n  template:\n    spec:\n      containers:\n      - name: app\n        env:\n        - name: {c.key}\n          value: |\n{body}\n"
        return v, ID
    v = c.g.pick(
        [
            f'apiVersion: apps/v1\nkind: Deployment\nspec:\n  template:\n    spec:\n      containers:\n      - name: app\n        image: app:1.2\n        env:\n        - name: {c.key}\n          value: "{c.text}"\n',
            f"services:\n  worker:\n    image: {c.label}/worker:latest\n    environment:\n      - {c.key}={c.text}\n",
        ]
    )
    return v, ID


def e_split_attrs(c: Ctx):
    v = json.dumps([{"name": "region", "value": "eu-west-1"}, {"name": c.snake, "value": c.text}])
    return v, lambda n: [js(n)]


def e_stream(c: Ctx):
    return "", ID  # built by stream_chunks(): needs the needles' offsets


EMBEDDINGS: dict[str, Emb] = {
    "plain": e_plain,
    "json-tool-args": e_json_args,
    "chat-openai": e_chat_openai,
    "chat-anthropic": e_chat_anthropic,
    "stream-chunks": e_stream,
    "xml": e_xml,
    "html": e_html,
    "cli": e_cli,
    "env-dump": e_env,
    "http-headers": e_http_headers,
    "url-query": e_url_query,
    "url-userinfo": e_url_userinfo,
    "yaml": e_yaml,
    "toml": e_toml,
    "log-line": e_log,
    "exception": e_exception,
    "percent-encoded": e_percent,
    "base64": e_base64,
    "base64-glued-url": e_base64_glued,
    "python-repr": e_py_repr,
    "markdown-code": e_markdown,
    "sql": e_sql,
    "k8s-compose": e_k8s,
    "split-attributes": e_split_attrs,
}
SKIP = {
    "composite": {"url-userinfo", "cli"},
    "blob": {
        "url-userinfo",
        "url-query",
        "cli",
        "http-headers",
        "html",
        "sql",
        "log-line",
        "exception",
    },
}
SPLITS = [
    "in-prefix",
    "middle",
    "one-before-end",
    "at-start",
    "at-end",
    "every-3",
    "every-1",
    "random-small",
]


def stream_chunks(text: str, needles: list[str], g: G, how: str) -> list[str]:
    """Split ``text`` the way a streaming LLM response would, cutting the first needle at ``how``."""
    n0 = needles[0]
    i = text.find(n0)
    j = i + len(n0)
    cuts: set[int] = set()
    if how == "in-prefix":
        cuts = {i + min(3, len(n0) - 1), i + min(9, len(n0) - 2)}
    elif how == "middle":
        cuts = {i + len(n0) // 2}
    elif how == "one-before-end":
        cuts = {j - 1}
    elif how == "at-start":
        cuts = {i, i + g.n(1, 4)}
    elif how == "at-end":
        cuts = {j, j - g.n(2, 6)}
    elif how == "every-3":
        cuts = set(range(i, j, 3))
    elif how == "every-1":
        cuts = set(range(max(0, i - 2), min(len(text), j + 2)))
    else:
        k = 0
        while k < len(text):
            k += g.n(1, 7)
            cuts.add(k)
    # the rest of the text in word-sized chunks, as tokenizers emit it
    k = 0
    while k < len(text):
        k += g.n(3, 12)
        if not (i - 2 <= k <= j + 2):
            cuts.add(k)
    pts = sorted(x for x in cuts if 0 < x < len(text))
    out, prev = [], 0
    for p in pts:
        out.append(text[prev:p])
        prev = p
    out.append(text[prev:])
    return [x for x in out if x]


# ----------------------------------------------------------------------------- PII


def luhn_complete(prefix: str, length: int, g: G) -> str:
    body = prefix + g.s(DG, length - len(prefix) - 1)
    total = 0
    for idx, ch in enumerate(reversed(body)):
        d = int(ch)
        if idx % 2 == 0:
            d *= 2
            if d > 9:
                d -= 9
        total += d
    return body + str((10 - total % 10) % 10)


CARD_BRANDS = [
    ("visa", ["4"], 16),
    ("mastercard", ["51", "52", "53", "54", "55", "2221", "2720"], 16),
    ("amex", ["34", "37"], 15),
    ("discover", ["6011", "65"], 16),
    ("jcb", ["3528", "3589"], 16),
    ("diners", ["36"], 14),
    ("unionpay", ["62"], 16),
    ("visa-19", ["4"], 19),
    ("maestro", ["6759"], 16),
]


def card(g: G) -> tuple[str, str]:
    brand, prefixes, length = g.pick(CARD_BRANDS)
    num = luhn_complete(g.pick(prefixes), length, g)
    sep = g.pick([" ", "-", ""])
    if brand in ("amex", "diners"):
        printed = sep.join([num[:4], num[4:10], num[10:]])  # printed 4-6-5 / 4-6-4
    else:
        printed = sep.join(wrap(num, 4))
    return brand, printed


IBAN_SPEC = {
    "DE": "8n10n",
    "GB": "4a14n",
    "FR": "10n11c2n",
    "ES": "20n",
    "IT": "1a10n12c",
    "NL": "4a10n",
    "CH": "5n12c",
    "BE": "12n",
    "PL": "24n",
    "SE": "20n",
}


def iban(g: G) -> tuple[str, str]:
    cc = g.pick(list(IBAN_SPEC))
    spec = IBAN_SPEC[cc]
    bban, num = "", ""
    for ch in spec:
        if ch.isdigit():
            num += ch
            continue
        k = int(num)
        num = ""
        bban += g.s({"n": DG, "a": string.ascii_uppercase, "c": UA}[ch], k)
    rearranged = bban + cc + "00"
    digits = "".join(str(int(ch, 36)) for ch in rearranged)
    check = 98 - int(digits) % 97
    electronic = f"{cc}{check:02d}{bban}"
    return cc, electronic


def ssn(g: G) -> str:
    while True:
        area = g.n(1, 899)
        if area != 666:
            break
    return f"{area:03d}-{g.n(1, 99):02d}-{g.n(1, 9999):04d}"


def public_ipv4(g: G) -> str:
    while True:
        a = g.n(1, 223)
        b = g.n(0, 255)
        if (
            a in (10, 127, 0)
            or (a == 172 and 16 <= b <= 31)
            or (a == 192 and b == 168)
            or (a == 169 and b == 254)
            or (a == 100 and 64 <= b <= 127)
        ):
            continue
        if (a, b) in ((192, 0), (198, 51), (203, 0), (198, 18), (198, 19)):
            continue
        return f"{a}.{b}.{g.n(0, 255)}.{g.n(1, 254)}"


def public_ipv6(g: G) -> str:
    first = g.pick(["2a01", "2a02", "2600", "2604", "2a00", "2c0f", "2406", "2800"])
    groups = [first] + [format(g.n(0, 0xFFFF), "x") for _ in range(7)]
    if g.n(0, 1):
        return ":".join(groups)
    return ":".join(groups[:4]) + "::" + groups[7]  # compressed form


NAMES = [
    "olivia.martin",
    "j.okafor",
    "wei.zhang",
    "m.garcia",
    "priya_nair",
    "lars.berg",
    "amelie.dubois",
    "kenji.sato",
    "fatima.ali",
    "tom.h",
]
DOMAINS = [
    "gmail.com",
    "outlook.com",
    "acme-corp.io",
    "fastmail.fm",
    "uni-hamburg.de",
    "example-shop.co.uk",
    "proton.me",
    "yahoo.co.jp",
]


def pii_values(g: G) -> list[tuple[str, str, str]]:
    """(family, key name, printed value) for one round of PII."""
    out = []
    out.append(("email", "email", f"{g.pick(NAMES)}{g.n(1, 99)}@{g.pick(DOMAINS)}"))
    out.append(
        (
            "phone-international",
            "phone",
            g.pick(
                [
                    f"+44 20 7946 0{g.n(100, 999)}",
                    f"+1-415-555-01{g.n(10, 99)}",
                    f"+49 30 {g.n(1000000, 9999999)}",
                    f"+33 1 42 {g.n(10, 99)} {g.n(10, 99)} {g.n(10, 99)}",
                    f"+81 3-{g.n(1000, 9999)}-{g.n(1000, 9999)}",
                    f"+61 2 9{g.n(100, 999)} {g.n(1000, 9999)}",
                    f"+91 98{g.n(100, 999)} {g.n(10000, 99999)}",
                    f"+1 (212) 555-01{g.n(10, 99)}",
                ]
            ),
        )
    )
    out.append(
        (
            "phone-national",
            "phone",
            g.pick(
                [
                    f"(415) 555-01{g.n(10, 99)}",
                    f"020 7946 0{g.n(100, 999)}",
                    f"415.555.01{g.n(10, 99)}",
                    f"030 {g.n(1000000, 9999999)}",
                    f"01 42 {g.n(10, 99)} {g.n(10, 99)} {g.n(10, 99)}",
                    f"07700 900{g.n(100, 999)}",
                ]
            ),
        )
    )
    out.append(
        (
            "phone-e164",
            "phone",
            g.pick(
                [
                    f"+1415555{g.n(1000, 9999)}",
                    f"+4420794{g.n(60000, 69999)}",
                    f"+4915{g.n(100000000, 999999999)}",
                ]
            ),
        )
    )
    brand, printed = card(g)
    out.append((f"card-{brand}", "card_number", printed))
    cc, electronic = iban(g)
    out.append((f"iban-{cc}-electronic", "iban", electronic))
    out.append((f"iban-{cc}-printed", "iban", " ".join(wrap(electronic, 4))))
    s = ssn(g)
    out.append(("ssn-dashed", "ssn", s))
    out.append(("ssn-plain", "ssn", s.replace("-", "")))
    out.append(("ipv4-public", "client_ip", public_ipv4(g)))
    out.append(("ipv6-public", "client_ip", public_ipv6(g)))
    return out


PII_EMB = [
    "plain",
    "json-tool-args",
    "chat-openai",
    "stream-chunks",
    "xml",
    "html",
    "yaml",
    "log-line",
    "python-repr",
    "markdown-code",
    "split-attributes",
    "url-query",
    "sql",
    "free-text",
]


# ----------------------------------------------------------------------------- benign


def benign_values(g: G) -> list[tuple[str, str, str]]:
    """(family, key name, value) near-misses that a scrubber must leave byte-identical."""
    acct = g.s(DG, 12)
    u = g.uuid()
    sha = g.s(HX, 40)
    digest = g.s(HX, 64)
    out = [
        (
            "aws-arn",
            "resource",
            g.pick(
                [
                    f"arn:aws:iam::{acct}:role/deploy-{g.word()}",
                    f"arn:aws:secretsmanager:eu-west-1:{acct}:secret:prod/db-creds-{g.s(AN, 6)}",
                    f"arn:aws:lambda:us-east-1:{acct}:function:{g.word()}-handler",
                    f"arn:aws:kms:us-east-1:{acct}:key/{g.uuid()}",
                ]
            ),
        ),
        (
            "gcp-resource-name",
            "resource",
            g.pick(
                [
                    f"projects/{g.word()}-prod/secrets/api-token/versions/{g.n(1, 20)}",
                    f"//compute.googleapis.com/projects/{g.word()}-prod/zones/us-central1-a/instances/vm-{g.n(1, 99)}",
                    f"projects/{g.word()}-prod/locations/global/keyRings/ring/cryptoKeys/token-key",
                ]
            ),
        ),
        (
            "azure-resource-id",
            "resource",
            f"/subscriptions/{g.uuid()}/resourceGroups/rg-{g.word()}/providers/Microsoft.KeyVault/vaults/kv-{g.word()}/secrets/api-key",
        ),
        (
            "keyword-field-number",
            g.pick(
                [
                    "token_count",
                    "max_tokens",
                    "prompt_tokens",
                    "password_min_length",
                    "secret_version",
                    "api_key_id",
                    "access_token_ttl",
                ]
            ),
            str(g.n(1, 99999)),
        ),
        (
            "keyword-field-word",
            g.pick(
                [
                    "password_policy",
                    "secret_name",
                    "token_type",
                    "auth_method",
                    "key_algorithm",
                    "credential_source",
                ]
            ),
            g.pick(
                [
                    "strict",
                    "db-creds",
                    "Bearer",
                    "oauth2",
                    "RS256",
                    "environment",
                    "aws-sm",
                    "vault",
                ]
            ),
        ),
        (
            "placeholder",
            g.pick(
                ["api_key", "OPENAI_API_KEY", "password", "token", "client_secret", "Authorization"]
            ),
            g.pick(
                [
                    "YOUR_API_KEY",
                    "<token>",
                    "${SECRET}",
                    "xxxx",
                    "changeme",
                    "sk-...",
                    "********",
                    "<your-api-key-here>",
                    "{{ secrets.GITHUB_TOKEN }}",
                    "$(cat /run/secrets/token)",
                    "REDACTED",
                    "Bearer <token>",
                    "sk-xxxxxxxxxxxxxxxxxxxxxxxx",
                    "ghp_xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx",
                    "%ENV_TOKEN%",
                    "null",
                    "TODO",
                ]
            ),
        ),
        ("traceparent", "traceparent", f"00-{g.s(HX, 32)}-{g.s(HX, 16)}-01"),
        ("trace-id", "trace_id", g.s(HX, 32)),
        ("span-id", "span_id", g.s(HX, 16)),
        ("uuid", g.pick(["request_id", "idempotency_key", "session_uuid", "user_id"]), u),
        ("ulid", "event_id", "01" + g.s("0123456789ABCDEFGHJKMNPQRSTVWXYZ", 24)),
        ("ksuid", "ksuid", g.s(AN, 27)),
        ("git-sha", "commit", sha),
        ("git-short-sha", "revision", sha[: g.pick([7, 8, 12])]),
        ("sha256-digest", "image", f"ghcr.io/acme/{g.word()}@sha256:{digest}"),
        ("sri-hash", "integrity", "sha384-" + g.b64(48)),
        ("mongo-objectid", "_id", g.s(HX, 24)),
        (
            "request-id",
            g.pick(["x-request-id", "id", "run_id"]),
            g.pick(
                [
                    "req_011C" + g.s(AN, 18),
                    "chatcmpl-" + g.s(AN, 29),
                    "msg_01" + g.s(AN, 22),
                    "call_" + g.s(AN, 24),
                    "toolu_01" + g.s(AN, 22),
                    "run_" + g.s(AN, 24),
                ]
            ),
        ),
        (
            "build-number",
            "build",
            g.pick(
                [
                    f"build {g.n(1000, 99999)}",
                    f"v{g.n(0, 9)}.{g.n(0, 40)}.{g.n(0, 20)}+build.{g.n(1, 999)}",
                    f"#{g.n(100, 99999)}",
                    f"2025.{g.n(1, 12):02d}.{g.n(1, 28):02d}.{g.n(1, 9999)}",
                ]
            ),
        ),
        (
            "file-path",
            "path",
            g.pick(
                [
                    "/home/app/.aws/credentials",
                    "/var/run/secrets/kubernetes.io/serviceaccount/token",
                    "/etc/ssl/private/server.key",
                    "C:\\Users\\build\\AppData\\Roaming\\gcloud\\application_default_credentials.json",
                    "~/.config/gh/hosts.yml",
                    "/app/config/secrets.example.yaml",
                ]
            ),
        ),
        (
            "base64-text",
            "payload",
            base64.b64encode(
                g.pick(
                    [
                        "Hello, world! This is an ordinary status message.",
                        '{"page": 2, "per_page": 50, "sort": "created_at"}',
                        "The quick brown fox jumps over the lazy dog again.",
                    ]
                ).encode()
            ).decode(),
        ),
        (
            "hash-in-url",
            "url",
            g.pick(
                [
                    f"https://cdn.example.com/assets/app.{g.s(HX, 12)}.js",
                    f"https://github.com/acme/{g.word()}/commit/{sha}",
                    f"https://registry.example.io/v2/acme/app/blobs/sha256:{digest}",
                    f"https://ipfs.io/ipfs/Qm{g.s('123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz', 44)}",
                ]
            ),
        ),
        (
            "page-token",
            g.pick(["next_page_token", "cursor", "etag"]),
            g.pick(
                [
                    base64.urlsafe_b64encode(
                        json.dumps({"offset": g.n(1, 9999), "id": g.n(1, 99999)}).encode()
                    ).decode(),
                    f'W/"{g.s(HX, 32)}"',
                ]
            ),
        ),
        ("pem-public-key", "public_key", pem_public(g)),
        ("pem-certificate", "certificate", pem_cert(g)),
        (
            "ssh-public-key",
            "authorized_key",
            g.pick(
                [
                    "ssh-ed25519 "
                    + base64.b64encode(
                        ssh_string(b"ssh-ed25519") + ssh_string(g.bytes(32))
                    ).decode()
                    + " ci@build",
                    "ssh-rsa "
                    + base64.b64encode(
                        ssh_string(b"ssh-rsa")
                        + ssh_string(b"\x01\x00\x01")
                        + ssh_string(b"\x00" + g.bytes(256))
                    ).decode()
                    + " ops@bastion",
                ]
            ),
        ),
        (
            "public-by-design",
            g.pick(
                [
                    "publishable_key",
                    "NEXT_PUBLIC_SUPABASE_ANON_KEY",
                    "POSTHOG_KEY",
                    "sentry_dsn",
                    "MAPBOX_PUBLIC_TOKEN",
                ]
            ),
            g.pick(
                [
                    "pk_live_51" + g.s(AN, 97),
                    jwt(
                        g,
                        {
                            "iss": "supabase",
                            "ref": g.s(LO, 20),
                            "role": "anon",
                            "iat": 1700000000,
                            "exp": 2015000000,
                        },
                    ),
                    "phc_" + g.s(AN, 43),
                    f"https://{g.s(HX, 32)}@o{g.n(100000, 999999)}.ingest.sentry.io/{g.n(1000000, 9999999)}",
                    "pk." + b64u_json({"u": g.s(LO, 8), "a": g.s(LA, 25)}) + "." + g.s(URL, 22),
                ]
            ),
        ),
        (
            "private-ip",
            "peer_ip",
            g.pick(
                [
                    f"10.{g.n(0, 255)}.{g.n(0, 255)}.{g.n(1, 254)}",
                    f"192.168.{g.n(0, 255)}.{g.n(1, 254)}",
                    f"172.{g.n(16, 31)}.{g.n(0, 255)}.{g.n(1, 254)}",
                    "127.0.0.1",
                    "::1",
                    f"fd{g.s(HX, 2)}:{g.s(HX, 4)}::{g.n(1, 99)}",
                    "169.254.169.254",
                ]
            ),
        ),
        (
            "number-like",
            g.pick(["order_id", "timestamp_ms", "account_number_masked", "version"]),
            g.pick(
                [
                    str(g.n(10**12, 10**13)),
                    f"ORD-{g.n(100000, 999999)}",
                    f"****{g.n(1000, 9999)}",
                    f"{g.n(1, 3)}.{g.n(0, 99)}.{g.n(0, 999)}",
                ]
            ),
        ),
    ]
    return out


def pem_public(g: G) -> str:
    der = (
        bytes.fromhex("30820122300d06092a864886f70d01010105000382010f003082010a0282010100")
        + g.bytes(256)
        + bytes.fromhex("0203010001")
    )
    return (
        "-----BEGIN PUBLIC KEY-----\n"
        + "\n".join(wrap(base64.b64encode(der).decode(), 64))
        + "\n-----END PUBLIC KEY-----"
    )


def pem_cert(g: G) -> str:
    der = bytes.fromhex("3082030d308201f5a0030201020214") + g.bytes(700)
    return (
        "-----BEGIN CERTIFICATE-----\n"
        + "\n".join(wrap(base64.b64encode(der).decode(), 64))
        + "\n-----END CERTIFICATE-----"
    )


BENIGN_EMB = [
    "plain",
    "json-tool-args",
    "chat-openai",
    "yaml",
    "log-line",
    "python-repr",
    "env-dump",
    "http-headers",
    "split-attributes",
    "markdown-code",
    "stream-chunks",
]


# ----------------------------------------------------------------------------- assembly


@dataclass
class Writer:
    """Collects records and checks each needle really occurs in its value."""

    records: list[dict] = field(default_factory=list)

    def add(
        self,
        kind: str,
        family: str,
        emb: str,
        value: str,
        *,
        needles: list[tuple[str, str]],
        note: str,
        chunks: bool,
    ) -> None:
        if kind != "benign":
            hay = "".join(json.loads(value)) if chunks else value
            for n, _ in needles:
                if n not in hay:
                    raise AssertionError(f"{family}/{emb}: needle not in value")
        seq = len(self.records)
        self.records.append(
            {
                "id": f"{kind[0]}{seq:06d}",
                "kind": kind,
                "family": family,
                "embedding": emb,
                "value": value,
                "needles": [n for n, _ in needles],
                "prefixes": [p for _, p in needles],
                "reassemble": "json-array-concat" if chunks else None,
                "note": note,
            }
        )


def embed(  # noqa: PLR0917 -- one call site per kind
    w: Writer,
    g: G,
    kind: str,
    family: str,
    emb: str,
    text: str,
    key: str,
    label: str,
    *,
    needles: list[tuple[str, str]],
    note: str,
    split_kind: str,
) -> None:
    multiline = "\n" in text
    if emb == "stream-chunks":
        sentence = (
            f"Sure — I saved your {key} ({text}) to the vault."
            if not multiline
            else f"Here is the {key}:\n{text}\nDone."
        )
        if kind == "benign":
            sentence = f"The {key} is {text} for this run."
            chunks = stream_chunks(sentence, [text], g, split_kind)
        else:
            chunks = stream_chunks(sentence, [n for n, _ in needles], g, split_kind)
        w.add(
            kind,
            family,
            emb,
            json.dumps(chunks),
            needles=needles,
            note=f"{note} split={split_kind}".strip(),
            chunks=True,
        )
        return
    if emb == "free-text":
        value = f"Customer wrote: please update my details, {key} is {text}, thanks."
        w.add(kind, family, emb, value, needles=needles, note=note, chunks=False)
        return
    value, tf = EMBEDDINGS[emb](Ctx(text, key, label, g, multiline, kind == "benign"))
    out: list[tuple[str, str]] = []
    for n, p in needles:
        forms = [f for f in dict.fromkeys(tf(n)) if f and f in value]
        if not forms:
            raise AssertionError(f"{family}/{emb}: no encoded needle found")
        # keep the public prefix only where the form still starts with it
        out += [(f, p if f.startswith(p) else "") for f in forms]
    w.add(kind, family, emb, value, needles=out, note=note, chunks=False)


def label_of(key: str, name: str) -> str:
    return name.split("-", maxsplit=1)[0]


def build(seed: int, scale: int) -> list[dict]:
    rng = random.Random(seed)
    g = G(rng)
    w = Writer()
    fmts = census()
    for rep in range(scale):
        for f in fmts:
            for ei, emb in enumerate(EMBEDDINGS):
                if emb in SKIP.get(f.shape, set()) or (emb == "plain" and f.ctx):
                    continue
                made = f.gen(g)
                cred = made if isinstance(made, Cred) else Cred(made, [(made, f.prefix)])
                if f.name.startswith("jwt") or f.name in (
                    "auth0-management-token",
                    "jfrog-access-token",
                    "supabase-service-role-key",
                    "kubernetes-sa-token",
                ):
                    cred = Cred(cred.text, [(cred.text, cred.text.split(".")[0] + ".")])
                key = f.key
                split = SPLITS[(ei + rep + len(f.name)) % len(SPLITS)]
                embed(
                    w,
                    g,
                    "credential",
                    f.name,
                    emb,
                    cred.text,
                    key,
                    label_of(key, f.name),
                    needles=cred.needles,
                    note=f"source={f.source}"
                    + ("; no distinctive prefix: key name gives the context" if f.ctx else ""),
                    split_kind=split,
                )
        for r in range(5):
            for ei, emb in enumerate(PII_EMB):
                for fam, key, val in pii_values(g):
                    # nine bare digits are an SSN only beside a word saying so
                    emb_used = "free-text" if fam == "ssn-plain" and emb == "plain" else emb
                    embed(
                        w,
                        g,
                        "pii",
                        fam,
                        emb_used,
                        val,
                        key,
                        "crm",
                        needles=[(val, "")],
                        note="",
                        split_kind=SPLITS[(r + ei) % len(SPLITS)],
                    )
        for r in range(5):
            for emb in BENIGN_EMB:
                for fam, key, val in benign_values(g):
                    if "\n" in val and emb in ("http-headers", "log-line"):
                        continue
                    embed(
                        w,
                        g,
                        "benign",
                        fam,
                        emb,
                        val,
                        key,
                        "svc",
                        needles=[],
                        note="",
                        split_kind=SPLITS[r % len(SPLITS)],
                    )
    return w.records


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--out", type=Path, default=Path("bench/out/corpus/secrets.jsonl"))
    ap.add_argument(
        "--scale",
        type=int,
        default=1,
        help="repeat every (format, embedding) pair N times with fresh values",
    )
    ap.add_argument(
        "--count",
        type=int,
        default=0,
        help="exactly this many records (scales up, then samples evenly)",
    )
    ap.add_argument("--list-formats", action="store_true", help="print the census as TSV and exit")
    a = ap.parse_args(argv)
    if a.list_formats:
        for f in census():
            print(f"{f.name}\t{f.source}\t{'context' if f.ctx else 'prefix'}\t{f.shape}")
        return 0
    scale = a.scale
    if a.count:
        base = len(build(a.seed, 1))
        scale = max(1, math.ceil(a.count / base))
    records = build(a.seed, scale)
    if a.count and len(records) > a.count:
        keep = sorted(random.Random(a.seed).sample(range(len(records)), a.count))
        records = [records[i] for i in keep]
    a.out.parent.mkdir(parents=True, exist_ok=True)
    with a.out.open("w", encoding="utf-8") as fh:
        for rec in records:
            fh.write(json.dumps(rec, ensure_ascii=False) + "\n")
    kinds: dict[str, int] = {}
    for rec in records:
        kinds[rec["kind"]] = kinds.get(rec["kind"], 0) + 1
    print(
        f"{len(records)} records ({', '.join(f'{k} {v}' for k, v in sorted(kinds.items()))}), "
        f"{len(census())} credential formats -> {a.out}",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
