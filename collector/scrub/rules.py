"""Scrub rules: the gitleaks-shaped TOML loader and the validated, immutable `RuleSet`.

A rule file is a list of `[[rules]]` tables (id, description, regex, keywords, entropy,
secretGroup, allowlist) exactly as gitleaks writes them, plus two optional errscope keys
(`validate`, `group`); docs/scrub.md describes the format. The built-in rules ship in
`rules.toml` beside this module. User files are loaded after it: a user rule whose id equals a
built-in one replaces it (so an existing gitleaks file loads unchanged), and an id repeated
within or across user files is refused.

Every regex is compiled here with RE2, the engine that confirms matches at scan time, so a
rule that cannot run stops loading with a `RulesError` naming the rule id and field; nothing
is skipped silently. The only rules left out are gitleaks' path-only rules (they match file
names, which spans do not have); they are listed in `RuleSet.ignored`.

Loading is pure and has no global state; the result is immutable and safe to share.
"""

from __future__ import annotations

import tomllib
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any, Final, Literal

import re2

from errscope.collector.errors import RulesError, RulesErrorKind

__all__ = [
    "PII_GROUPS",
    "VALIDATORS",
    "AllowList",
    "Rule",
    "RuleSet",
    "compile_regex",
    "load_rules",
]

BUILTIN_RULES_FILE: Final = "rules.toml"
# The closed set of errscope's secret checks (see validators.py).
VALIDATORS: Final = frozenset(
    {"github-checksum", "luhn", "iban", "jwt", "basic-auth", "token", "ssn", "public-ip"}
)
_GROUPS: Final = frozenset({"secret", "pii"})
# The PII groups one can switch off one by one, and the built-in PII rules in each (a user
# PII rule belongs to no group: it runs whenever any PII group does).
PII_GROUPS: Final = ("email", "phone", "card", "iban", "ssn", "ip")
_PII_GROUP_RULES: Final = {
    "email-address": "email",
    "phone-number": "phone",
    "credit-card-number": "card",
    "iban": "iban",
    "us-ssn": "ssn",
    "ip-address": "ip",
}
_RULE_KEYS: Final = frozenset(
    {
        "id",
        "description",
        "regex",
        "keywords",
        "entropy",
        "secretGroup",
        "allowlist",
        "allowlists",
        "validate",
        "group",
        # gitleaks keys that have no meaning for span values; accepted so gitleaks files load
        "tags",
        "path",
        "required",
        "skipReport",
    }
)
_ALLOWLIST_KEYS: Final = frozenset(
    {"description", "regexes", "stopwords", "regexTarget", "condition", "paths", "commits"}
)
_TOP_KEYS: Final = frozenset({"title", "description", "minVersion", "extend", "rules"})
_TOP_ALLOWLIST_KEYS: Final = frozenset({"allowlist", "allowlists"})
# RE2's default 8 MiB program budget is too small for gitleaks rules with long counted repeats.
_RE2_MAX_MEM: Final = 64 << 20


def compile_regex(pattern: str) -> Any:
    """Compile `pattern` with RE2 for byte-level matching (Latin-1 mode: the engine reads bytes).

    Raises `re2.error` when RE2 cannot compile it. A rule file is validated with RE2 (its
    syntax); the engine translates each pattern to the same byte meaning.
    """
    options = re2.Options()
    options.encoding = re2.Options.Encoding.LATIN1
    options.max_mem = _RE2_MAX_MEM
    options.log_errors = False
    return re2.compile(pattern.encode("utf-8"), options)


@dataclass(frozen=True, slots=True)
class AllowList:
    """One gitleaks allowlist of a rule: a finding that meets it is not masked."""

    regexes: tuple[str, ...] = ()
    stopwords: tuple[str, ...] = ()
    target: Literal["secret", "match", "line"] = "secret"
    condition: Literal["OR", "AND"] = "OR"


@dataclass(frozen=True, slots=True)
class Rule:
    """One validated scrub rule. `secret_group` 0 means first non-empty group or the match."""

    id: str
    regex: str
    description: str = ""
    keywords: tuple[str, ...] = ()
    entropy: float | None = None
    secret_group: int = 0
    validate: str | None = None
    group: Literal["secret", "pii"] = "secret"
    allowlists: tuple[AllowList, ...] = ()
    source: str = "<builtin>"


@dataclass(frozen=True, slots=True)
class RuleSet:
    """An ordered, immutable set of rules; earlier rules name overlapping findings."""

    rules: tuple[Rule, ...]
    ignored: tuple[str, ...] = field(default=())

    @property
    def ids(self) -> tuple[str, ...]:
        """Rule ids in order."""
        return tuple(rule.id for rule in self.rules)

    def __len__(self) -> int:
        return len(self.rules)


def load_rules(
    extra: Sequence[Path] = (), *, pii: bool = False, pii_groups: Collection[str] | None = None
) -> RuleSet:
    """Load the built-in rules plus the gitleaks-shaped TOML files in `extra`, in order.

    PII rules (group "pii") are loaded for the PII groups named in `pii_groups` (a subset of
    `PII_GROUPS`: email, phone, card, iban, ssn, ip); `pii=True` alone means all of them, and
    neither means none. Raises `RulesError` (kind and the offending rule id and field; never
    a payload value) for any file that cannot be used, and `ValueError` for an unknown group.
    """
    if pii_groups is None:
        groups = frozenset(PII_GROUPS) if pii else frozenset()
    else:
        groups = frozenset(pii_groups)
        unknown = groups - set(PII_GROUPS)
        if unknown:
            raise ValueError(f"unknown PII group {sorted(unknown)[0]!r} (known: {PII_GROUPS})")
    builtin_text = resources.files(__package__).joinpath(BUILTIN_RULES_FILE).read_text("utf-8")
    rules, ignored = _parse(builtin_text, source="<builtin>")
    by_id: dict[str, Rule] = {rule.id: rule for rule in rules}
    user_ids: set[str] = set()
    for path in extra:
        try:
            text = Path(path).read_text("utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise RulesError(
                RulesErrorKind.UNREADABLE,
                f"cannot read rule file ({type(exc).__name__})",
                entry=str(path),
            ) from exc
        file_rules, file_ignored = _parse(text, source=str(path))
        ignored.extend(file_ignored)
        for rule in file_rules:
            if rule.id in user_ids:
                raise RulesError(
                    RulesErrorKind.DUPLICATE_RULE,
                    f"rule id defined twice (again in {path})",
                    entry=rule.id,
                    field="id",
                )
            user_ids.add(rule.id)
            # Replacing in place keeps a built-in's precedence; new rules go last.
            by_id[rule.id] = rule
    selected = tuple(rule for rule in by_id.values() if _wanted(rule, groups))
    return RuleSet(rules=selected, ignored=tuple(ignored))


def _wanted(rule: Rule, groups: frozenset[str]) -> bool:
    if rule.group != "pii":
        return True
    if rule.source == "<builtin>" and rule.id in _PII_GROUP_RULES:
        return _PII_GROUP_RULES[rule.id] in groups
    return bool(groups)


def _parse(text: str, *, source: str) -> tuple[list[Rule], list[str]]:
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise RulesError(RulesErrorKind.BAD_TOML, f"not valid TOML: {exc}", entry=source) from exc
    unknown = set(doc) - _TOP_KEYS - _TOP_ALLOWLIST_KEYS
    if unknown:
        raise RulesError(
            RulesErrorKind.UNKNOWN_KEY,
            f"unknown top-level key {sorted(unknown)[0]!r}",
            entry=source,
            field=sorted(unknown)[0],
        )
    file_allow = _allowlists(doc, entry=source)
    raw_rules = doc.get("rules", [])
    if not isinstance(raw_rules, list):
        raise RulesError(
            RulesErrorKind.BAD_VALUE, "`rules` must be an array of tables", entry=source
        )
    rules: list[Rule] = []
    ignored: list[str] = []
    seen: set[str] = set()
    for index, raw in enumerate(raw_rules):
        if not isinstance(raw, dict):
            raise RulesError(
                RulesErrorKind.BAD_VALUE, f"rules[{index}] is not a table", entry=source
            )
        rule = _rule(raw, index=index, source=source, file_allow=file_allow)
        if rule is None:
            ignored.append(str(raw.get("id", f"rules[{index}]")))
            continue
        if rule.id in seen:
            raise RulesError(
                RulesErrorKind.DUPLICATE_RULE,
                f"rule id defined twice in {source}",
                entry=rule.id,
                field="id",
            )
        seen.add(rule.id)
        rules.append(rule)
    return rules, ignored


def _rule(
    raw: Mapping[str, Any], *, index: int, source: str, file_allow: tuple[AllowList, ...]
) -> Rule | None:
    rule_id = raw.get("id")
    if not isinstance(rule_id, str) or not rule_id.strip():
        raise RulesError(
            RulesErrorKind.MISSING_FIELD,
            f"rules[{index}] has no id",
            entry=source,
            field="id",
        )
    unknown = set(raw) - _RULE_KEYS
    if unknown:
        key = sorted(unknown)[0]
        raise RulesError(
            RulesErrorKind.UNKNOWN_KEY, f"unknown rule key {key!r}", entry=rule_id, field=key
        )
    regex = raw.get("regex")
    if regex is None:
        if "path" in raw:
            return None  # gitleaks path-only rule: file names only, nothing to match in a span
        raise RulesError(
            RulesErrorKind.MISSING_FIELD, "rule has no regex", entry=rule_id, field="regex"
        )
    if not isinstance(regex, str) or not regex:
        raise RulesError(
            RulesErrorKind.BAD_VALUE,
            "regex must be a non-empty string",
            entry=rule_id,
            field="regex",
        )
    try:
        compiled = compile_regex(regex)
    except re2.error as exc:
        raise RulesError(
            RulesErrorKind.BAD_REGEX,
            f"RE2 cannot compile this regex ({_re2_reason(exc)})",
            entry=rule_id,
            field="regex",
            hint="rules use RE2 syntax: no lookaround, no backreferences",
        ) from exc
    keywords = _str_list(raw, "keywords", rule_id)
    entropy = raw.get("entropy")
    if entropy is not None and (
        isinstance(entropy, bool) or not isinstance(entropy, int | float) or entropy < 0
    ):
        raise RulesError(
            RulesErrorKind.BAD_VALUE,
            "entropy must be a number >= 0",
            entry=rule_id,
            field="entropy",
        )
    group_no = raw.get("secretGroup", 0)
    if isinstance(group_no, bool) or not isinstance(group_no, int) or group_no < 0:
        raise RulesError(
            RulesErrorKind.BAD_VALUE,
            "secretGroup must be an integer >= 0",
            entry=rule_id,
            field="secretGroup",
        )
    if group_no > compiled.groups:
        raise RulesError(
            RulesErrorKind.BAD_VALUE,
            f"secretGroup {group_no} but the regex has {compiled.groups} groups",
            entry=rule_id,
            field="secretGroup",
        )
    validate = raw.get("validate")
    if validate is not None and validate not in VALIDATORS:
        raise RulesError(
            RulesErrorKind.BAD_VALUE,
            f"unknown validator (known: {', '.join(sorted(VALIDATORS))})",
            entry=rule_id,
            field="validate",
        )
    group = raw.get("group", "secret")
    if group not in _GROUPS:
        raise RulesError(
            RulesErrorKind.BAD_VALUE,
            "group must be 'secret' or 'pii'",
            entry=rule_id,
            field="group",
        )
    description = raw.get("description", "")
    if not isinstance(description, str):
        raise RulesError(
            RulesErrorKind.BAD_VALUE,
            "description must be a string",
            entry=rule_id,
            field="description",
        )
    return Rule(
        id=rule_id,
        regex=regex,
        description=description,
        keywords=tuple(k.lower() for k in keywords if k),
        entropy=float(entropy) if entropy is not None else None,
        secret_group=group_no,
        validate=validate,
        group=group,
        allowlists=_allowlists(raw, entry=rule_id) + file_allow,
        source=source,
    )


def _allowlists(table: Mapping[str, Any], *, entry: str) -> tuple[AllowList, ...]:
    raws: list[Any] = []
    if "allowlist" in table:
        raws.append(table["allowlist"])
    if "allowlists" in table:
        many = table["allowlists"]
        if not isinstance(many, list):
            raise RulesError(
                RulesErrorKind.BAD_VALUE,
                "allowlists must be an array of tables",
                entry=entry,
                field="allowlists",
            )
        raws.extend(many)
    result: list[AllowList] = []
    for raw in raws:
        if not isinstance(raw, dict):
            raise RulesError(
                RulesErrorKind.BAD_VALUE,
                "allowlist must be a table",
                entry=entry,
                field="allowlist",
            )
        unknown = set(raw) - _ALLOWLIST_KEYS
        if unknown:
            key = sorted(unknown)[0]
            raise RulesError(
                RulesErrorKind.UNKNOWN_KEY,
                f"unknown allowlist key {key!r}",
                entry=entry,
                field=f"allowlist.{key}",
            )
        regexes = _str_list(raw, "regexes", entry)
        for pattern in regexes:
            try:
                compile_regex(pattern)
            except re2.error as exc:
                raise RulesError(
                    RulesErrorKind.BAD_REGEX,
                    f"RE2 cannot compile an allowlist regex ({_re2_reason(exc)})",
                    entry=entry,
                    field="allowlist.regexes",
                ) from exc
        target = raw.get("regexTarget", "secret")
        if target not in ("secret", "match", "line"):
            raise RulesError(
                RulesErrorKind.BAD_VALUE,
                "regexTarget must be secret, match or line",
                entry=entry,
                field="allowlist.regexTarget",
            )
        condition = str(raw.get("condition", "OR")).upper()
        if condition not in ("OR", "AND"):
            raise RulesError(
                RulesErrorKind.BAD_VALUE,
                "condition must be OR or AND",
                entry=entry,
                field="allowlist.condition",
            )
        stopwords = tuple(s.lower() for s in _str_list(raw, "stopwords", entry))
        if regexes or stopwords:
            result.append(
                AllowList(
                    regexes=tuple(regexes),
                    stopwords=stopwords,
                    target=target,
                    condition="AND" if condition == "AND" else "OR",
                )
            )
    return tuple(result)


def _str_list(table: Mapping[str, Any], key: str, entry: str) -> list[str]:
    value = table.get(key, [])
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise RulesError(
            RulesErrorKind.BAD_VALUE, f"{key} must be a list of strings", entry=entry, field=key
        )
    return list(value)


def _re2_reason(exc: Exception) -> str:
    """RE2's own reason, which quotes only the offending regex operator, never data."""
    reason = exc.args[0] if exc.args else exc
    if isinstance(reason, bytes):
        reason = reason.decode("utf-8", "replace")
    return str(reason)
