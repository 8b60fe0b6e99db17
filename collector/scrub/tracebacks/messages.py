"""What an exception message keeps: keyword values masked, paths trimmed, users hidden.

`SecretScrubber` is what the traceback modules need of a scrubber (engine.Scrubber is one);
it is passed in, so the engine, which strips tracebacks with this package, is not imported
back. `kept_message` readies a message for the kept value (cut at a space; secrets left for
the caller's counted pass), `clean_message` one for the human copy (scrubbed whole, then
cut to 300 characters); `relpath`, `home_users` and `hide_users` remove absolute prefixes,
URL userinfo and queries, home directories and user names. Bounded patterns; nothing raises.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Final, Protocol


class _Masked(Protocol):
    @property
    def text(self) -> str: ...


class SecretScrubber(Protocol):
    """What the traceback modules need of a scrubber (engine.Scrubber is one): passed in,
    so the engine, which strips tracebacks with this package, is not imported back here."""

    def scrub_secrets(self, value: str) -> _Masked: ...

    def contains_secret(self, value: str) -> bool: ...


_MESSAGE_MAX_CHARS: Final = 300
_KEPT_MESSAGE_MAX_CHARS: Final = 2048

_ABS_PATH = re.compile(
    r"(?:file://)?(?:[A-Za-z]:[\\/]|/|~[/\\])(?:[^\s\\/:\"'()<>]+[\\/])+[^\s\\/:\"'()<>]*"
)
# A URL's userinfo ("user:pw@"), query and fragment are where credentials ride in a frame path.
_URL = re.compile(r"([A-Za-z][\w+.-]{0,30}://)(?:[^/?#\s]*@)?([^?#]*)")
_VENDOR_DIRS: Final = ("site-packages", "dist-packages", "node_modules", "vendor", "gems")


def relpath(path: str) -> str:
    """A path without its absolute prefix: vendor-relative, or its last two components.

    A URL loses its userinfo, query and fragment first (Deno and browser bundles load code
    from `https://user:pw@host/app.js?token=...`); a home directory (`/home/<user>/`,
    `/Users/<user>/`, `C:\\Users\\<user>\\`, `~/`) goes with the user name in it.
    """
    url = _URL.match(path)
    if url:
        path = url.group(1) + url.group(2)
    path = path.removeprefix("file://")
    if path.startswith(("node:", "<")) or not path:
        return path
    home = _HOME_PREFIX.match(path)
    absolute = home is not None or path.startswith(("/", "\\")) or _DRIVE.match(path) is not None
    parts = [p for p in re.split(r"[\\/]", path[home.end() :] if home else path) if p]
    for index, part in enumerate(parts):
        if part in _VENDOR_DIRS and index + 1 < len(parts):
            return "/".join(parts[index:])
    if absolute or len(parts) > 2:
        return "/".join(parts[-2:])
    return "/".join(parts)


_HOME_PREFIX = re.compile(
    r"(?:[A-Za-z]:)?[\\/]+(?:home|Users|users)[\\/]+[^\\/]{1,100}[\\/]*|~[\\/]*"
)
_DRIVE = re.compile(r"[A-Za-z]:[\\/]")
# A user name as it appears in a home directory; JSON-escaped backslashes are allowed.
_HOME_USER = re.compile(r"(?:/home/|/Users/|\\Users\\{1,4})([A-Za-z0-9][\w.-]{1,63})")
_USER_PLACEHOLDER: Final = "<user>"
_MAX_USERS: Final = 8


def home_users(text: str) -> tuple[str, ...]:
    """The user names of the home directories in `text` (a few, longest first)."""
    names: set[str] = set()
    for match in _HOME_USER.finditer(text):
        names.add(match.group(1))
        if len(names) >= _MAX_USERS:
            break
    return tuple(sorted(names, key=len, reverse=True))


def hide_users(text: str, users: tuple[str, ...]) -> str:
    # A user name also shows outside paths (`alice-python/app.py`, `User alice not found`).
    for name in users:
        text = text.replace(name, _USER_PLACEHOLDER)
    return text


# A value given to a credential-like name: `token=<v>`, `session: <v>`, `api-key <v>`,
# `grant <v>`. With `=` or `:` any value of 4+ characters is masked; after a space only a
# credential-shaped one (12+ characters with letters and digits), so `session close failed`
# and `key 'acme' not found` stay readable. Bounded pieces, no nested quantifiers.
_KEYWORD_VALUE = re.compile(
    r"(?i)(?<![a-z0-9])((?:[a-z0-9]{1,20}[_.-]){0,2}"
    r"(?:token|secret|password|passwd|pwd|pass|passphrase|session|sess|sid|auth|authorization"
    r"|bearer|api[_-]?key|apikey|key|grant|credentials?|cookie|signature|sig|jwt)"
    r"(?:[_.-][a-z0-9]{1,20}){0,2})(\s{0,3}[=:]\s{0,3}['\"]?|\s{1,3})([^\s'\",;&)\]}>]{4,})"
)
_KEYWORD_MASK: Final = "[REDACTED:keyword-value]"
_NOT_VALUES: Final = frozenset(
    {"bearer", "basic", "digest", "token", "none", "null", "true", "false"}
)


def _mask_keyword_values(message: str, is_secret: Callable[[str], bool] | None) -> str:
    def mask(match: re.Match[str]) -> str:
        value = match.group(3)
        if value.startswith("[") or value.lower() in _NOT_VALUES:
            return match.group()
        if not match.group(2).strip() and not (
            len(value) >= 12 and re.search(r"\d", value) and re.search(r"[A-Za-z]", value)
        ):
            return match.group()
        if is_secret is not None and is_secret(value):
            return match.group()  # a rule masks it later, under its own id and count
        return match.group(1) + match.group(2) + _KEYWORD_MASK

    return _KEYWORD_VALUE.sub(mask, message)


def _tidy(
    message: str, users: tuple[str, ...], is_secret: Callable[[str], bool] | None = None
) -> str:
    """Keyword-assigned values masked, paths trimmed, user names hidden."""
    message = _mask_keyword_values(message, is_secret)
    message = _ABS_PATH.sub(lambda m: relpath(m.group()), message)
    return hide_users(message, users)


def clean_message(
    message: str, scrubber: SecretScrubber | None, users: tuple[str, ...] = ()
) -> str:
    # Scrub, then cut: cut first, a token across the cut keeps a prefix too short for its
    # rule (an OpenAI key's first 30 characters were stored).
    if scrubber is not None:
        message = scrubber.scrub_secrets(message).text
    return _tidy(message[:_MESSAGE_MAX_CHARS], users)


def _safe_cut(message: str, limit: int) -> str:
    """`message` cut to `limit` characters at a space, so no token is left half-kept."""
    if len(message) <= limit:
        return message
    space = message.rfind(" ", 0, limit)
    return (message[:space] if space > 0 else "") + " …[cut]"


def kept_message(message: str, is_secret: Callable[[str], bool], users: tuple[str, ...]) -> str:
    # Secrets are masked afterwards in the whole kept value (`Scrubber.scrub`), so each is
    # counted under its rule; a cut at a space leaves every token whole for that pass.
    return _tidy(_safe_cut(message, _KEPT_MESSAGE_MAX_CHARS), users, is_secret)
