"""The checks a rule names in its `validate` field, and the entropy its floor is taken in.

`VALIDATORS` maps each name of the closed set in rules.py to a function of the secret's
bytes that says whether it is well formed (a GitHub token's CRC32, Luhn, IBAN mod-97, a JWT's
JSON header, Basic credentials, a token's mix of letters and digits, SSN ranges, a public
IP address);
`public_jwt` tells a JWT that is public by design. Pure functions on bounded input; none
raises on any bytes.
"""

from __future__ import annotations

import base64
import binascii
import ipaddress
import json
import math
import re
from collections import Counter
from collections.abc import Callable, Mapping
from typing import Any, Final

__all__ = ["VALIDATORS", "public_jwt", "shannon_entropy"]

_BASE62: Final = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"


def shannon_entropy(data: bytes) -> float:
    """Shannon entropy of `data` in bits per byte (gitleaks' `entropy` measure)."""
    if not data:
        return 0.0
    total = len(data)
    return -sum(n / total * math.log2(n / total) for n in Counter(data).values())


def _github_checksum(secret: bytes) -> bool:
    # GitHub (and npm) tokens: prefix_ + 30 random base62 + base62(CRC32(random)) in 6 chars.
    _, _, body = secret.partition(b"_")
    if len(body) != 36:
        return False
    value = binascii.crc32(body[:30])
    digits = []
    while value:
        value, rest = divmod(value, 62)
        digits.append(_BASE62[rest])
    return "".join(reversed(digits)).rjust(6, "0").encode() == body[30:]


def _luhn(secret: bytes) -> bool:
    digits = [c - 48 for c in secret if 48 <= c <= 57]
    if not 13 <= len(digits) <= 19:
        return False
    total = 0
    for index, digit in enumerate(reversed(digits)):
        doubled = digit * 2 if index % 2 else digit
        total += doubled - 9 if doubled > 9 else doubled
    return total % 10 == 0


# The length of each country's IBAN: SWIFT's IBAN registry, then the countries that issue
# IBANs outside it (national formats, mostly in Africa).  The mod-97 check alone passes one
# string in 97, so a ULID or a part number that happens to start with two letters and two
# digits was masked as an account number ("CB18GR62..."): no such country.
_IBAN_LENGTHS: Final = {
    **dict.fromkeys(("NO",), 15),
    **dict.fromkeys(("BE",), 16),
    **dict.fromkeys(("DK", "FI", "FK", "FO", "GL", "NL", "SD"), 18),
    **dict.fromkeys(("MK", "SI"), 19),
    **dict.fromkeys(("AT", "BA", "EE", "KZ", "LT", "LU", "MN", "XK"), 20),
    **dict.fromkeys(("CH", "HR", "LI", "LV"), 21),
    **dict.fromkeys(("BG", "BH", "CR", "DE", "GB", "GE", "IE", "ME", "RS", "VA"), 22),
    **dict.fromkeys(("AE", "GI", "IL", "IQ", "OM", "SO", "TL"), 23),
    **dict.fromkeys(("AD", "CZ", "ES", "MD", "PK", "RO", "SA", "SE", "SK", "TN", "VG"), 24),
    **dict.fromkeys(("LY", "PT", "ST", "AO", "CV", "GW", "MZ"), 25),
    **dict.fromkeys(("IS", "TR", "DZ", "IR"), 26),
    **dict.fromkeys(
        ("BI", "DJ", "FR", "GR", "IT", "MC", "MR", "SM", "CF", "CG", "CM", "GA", "GQ"), 27
    ),
    **dict.fromkeys(("KM", "MG", "TD"), 27),
    **dict.fromkeys(
        ("AL", "AZ", "BY", "CY", "DO", "GT", "HU", "LB", "NI", "PL", "SV", "BF", "BJ", "CI"), 28
    ),
    **dict.fromkeys(("HN", "MA", "ML", "NE", "SN", "TG"), 28),
    **dict.fromkeys(("BR", "EG", "PS", "QA", "UA"), 29),
    **dict.fromkeys(("JO", "KW", "MU", "YE"), 30),
    **dict.fromkeys(("MT", "SC"), 31),
    **dict.fromkeys(("LC",), 32),
    **dict.fromkeys(("RU",), 33),
}


def _iban(secret: bytes) -> bool:
    text = secret.replace(b" ", b"").decode("latin-1").upper()
    if _IBAN_LENGTHS.get(text[:2]) != len(text):
        return False
    rearranged = text[4:] + text[:4]
    number = "".join(str(int(ch, 36)) for ch in rearranged)
    return int(number) % 97 == 1


def _b64decode(part: bytes) -> bytes | None:
    try:
        return base64.urlsafe_b64decode(part + b"=" * (-len(part) % 4))
    except (binascii.Error, ValueError):
        return None


def _json_object(part: bytes) -> dict[str, Any] | None:
    raw = _b64decode(part[:4096])
    if raw is None:
        return None
    try:
        decoded = json.loads(raw)
    except ValueError:
        return None
    return decoded if isinstance(decoded, dict) else None


def _jwt(secret: bytes) -> bool:
    """A JWS/JWE whose header names its algorithm (RFC 7515: `alg` is required), and that is
    not public by design: a token whose payload grants the `anon` role (Supabase's anon key,
    shipped in every browser bundle) only identifies a project."""
    parts = secret.split(b".", 2)
    header = _json_object(parts[0])
    if header is None or "alg" not in header:
        return False
    payload = _json_object(parts[1]) if len(parts) > 1 else None
    return not (payload is not None and payload.get("role") == "anon")


def _basic_auth(secret: bytes) -> bool:
    try:
        decoded = base64.b64decode(secret[:4096], validate=True).decode("utf-8")
    except (binascii.Error, ValueError):
        return False
    return ":" in decoded and decoded.isprintable()


def public_jwt(secret: bytes) -> bool:
    """A JWT granting only the `anon` role: public by design, whichever rule found it."""
    parts = secret.split(b".", 2)
    payload = _json_object(parts[1]) if len(parts) == 3 else None
    return payload is not None and payload.get("role") == "anon"


_WORDISH: Final = re.compile(rb"[A-Za-z]{1,12}|[0-9]{1,12}")
_TOKEN_SPLIT: Final = re.compile(rb"[-_.:/]")


def _token(secret: bytes) -> bool:
    """A random-looking token: letters and digits mixed, and not words or numbers joined by
    separators (`user-profile-2024`, `prod.db.creds`), which read as names, not keys."""
    digits = sum(1 for c in secret if 48 <= c <= 57)
    upper = sum(1 for c in secret if 65 <= c <= 90)
    lower = sum(1 for c in secret if 97 <= c <= 122)
    # One digit is enough when upper and lower case are mixed in a long value (Airtable's
    # legacy keyXXXXXXXXXXXXXX, random base62 that happened to draw one digit).
    mixed = len(secret) >= 16 and upper >= 2 and lower >= 2
    if upper + lower < 4 or digits < (1 if mixed else 2):
        return False
    return not all(_WORDISH.fullmatch(part) for part in _TOKEN_SPLIT.split(secret) if part)


def _ssn(secret: bytes) -> bool:
    """A US SSN in an issued range: area 001-899 but not 666, group 01-99, serial 0001-9999."""
    digits = bytes(c for c in secret if 48 <= c <= 57)
    if len(digits) != 9:
        return False
    area, group, serial = int(digits[:3]), int(digits[3:5]), int(digits[5:])
    return 0 < area < 900 and area != 666 and group > 0 and serial > 0


def _public_ip(secret: bytes) -> bool:
    """An address that can name a subscriber: not private, loopback, link-local, reserved,
    multicast or documentation space (those identify a machine inside one network)."""
    try:
        address = ipaddress.ip_address(secret.decode("ascii"))
    except (ValueError, UnicodeDecodeError):
        return False
    return address.is_global and not address.is_multicast


VALIDATORS: Final[Mapping[str, Callable[[bytes], bool]]] = {
    "token": _token,
    "ssn": _ssn,
    "public-ip": _public_ip,
    "github-checksum": _github_checksum,
    "luhn": _luhn,
    "iban": _iban,
    "jwt": _jwt,
    "basic-auth": _basic_auth,
}
