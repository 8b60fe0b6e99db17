"""The rule loader: built-in coverage, gitleaks-shaped user files, and typed refusals."""

from __future__ import annotations

from pathlib import Path

import pytest

from errscope.collector.errors import RulesError, RulesErrorKind
from errscope.collector.scrub import RuleSet, Scrubber, load_rules

# Groups the issue asks the built-in rules to cover, by a rule id each must contain.
REQUIRED_FAMILIES = [
    "aws-access-key-id",
    "aws-secret-access-key",
    "gcp-api-key",
    "azure-storage-account-key",
    "azure-sas-token",
    "github-pat",
    "github-fine-grained-pat",
    "gitlab-pat",
    "stripe-secret-key",
    "stripe-restricted-key",
    "stripe-webhook-secret",
    "slack-bot-token",
    "slack-webhook-url",
    "discord-bot-token",
    "telegram-bot-token",
    "openai-api-key",
    "anthropic-api-key",
    "huggingface-token",
    "npm-access-token",
    "pypi-upload-token",
    "vault-token",
    "doppler-token",
    "datadog-api-key",
    "jwt",
    "private-key",
    "openssh-private-key",
    "pgp-private-key",
    "postgres-uri-password",
    "mysql-uri-password",
    "mongodb-uri-password",
    "redis-uri-password",
    "amqp-uri-password",
    "url-credentials",
    "authorization-header",
    "cookie-header",
    "password-assignment",
    "secret-assignment",
]


def test_builtin_rules_cover_at_least_60_credential_formats(rules: RuleSet) -> None:
    """The built-in secret group has 60+ rules with unique ids and a description each."""
    assert len(rules) >= 60
    assert len(set(rules.ids)) == len(rules.ids)
    assert all(rule.description for rule in rules.rules)
    assert all(rule.group == "secret" for rule in rules.rules)


@pytest.mark.parametrize("rule_id", REQUIRED_FAMILIES)
def test_required_family_is_built_in(rules: RuleSet, rule_id: str) -> None:
    """Every credential family named in the issue has a built-in rule."""
    assert rule_id in rules.ids


def test_pii_rules_are_a_separate_group(rules: RuleSet, pii_rules: RuleSet) -> None:
    """PII rules load only when asked for."""
    pii_only = set(pii_rules.ids) - set(rules.ids)
    assert pii_only == {
        "email-address",
        "credit-card-number",
        "phone-number",
        "iban",
        "us-ssn",
        "ip-address",
    }


GITLEAKS_FILE = """
title = "gitleaks config"
minVersion = "v8.25.0"

[extend]
useDefault = true

[allowlist]
description = "global allowlist"
regexes = ['''EXAMPLE''']

[[rules]]
id = "acme-api-key"
description = "ACME key"
regex = '''acme_[a-z0-9]{16}'''
keywords = ["acme_"]
tags = ["api", "acme"]

[[rules]]
id = "acme-assigned"
regex = '''(?i)acme.{0,20}?secret\\s*=\\s*['"]([a-z0-9]{12})['"]'''
secretGroup = 1
entropy = 2.5
keywords = ["acme"]
[[rules.allowlists]]
condition = "AND"
stopwords = ["test"]
regexes = ['''^test''']
regexTarget = "secret"

[[rules]]
id = "pkcs12-file"
description = "path-only rule: matches file names"
path = '''(?i)\\.p12$'''
"""


def test_gitleaks_shaped_file_loads_beside_builtins(tmp_path: Path) -> None:
    """A gitleaks file (title, [extend], [allowlist], tags, allowlists, path-only) loads."""
    path = tmp_path / "gitleaks.toml"
    path.write_text(GITLEAKS_FILE)
    rule_set = load_rules([path])
    assert "acme-api-key" in rule_set.ids
    assert "github-pat" in rule_set.ids
    assert rule_set.ignored == ("pkcs12-file",)
    # The user rules alone, so the built-in generic rules do not name the findings first.
    scrubber = Scrubber(RuleSet(tuple(r for r in rule_set.rules if r.source == str(path))))
    masked = scrubber.scrub_secrets("key acme_0123456789abcdef and acme_EXAMPLEabcdefghi")
    assert masked.text == "key [REDACTED:acme-api-key] and acme_EXAMPLEabcdefghi"
    assigned = scrubber.scrub_secrets("acme client secret = 'k3y9x7q2w8e1'")
    assert assigned.text == "acme client secret = '[REDACTED:acme-assigned]'"
    # AND allowlist: both the stopword and the regex must hit to skip the finding.
    kept = scrubber.scrub_secrets("acme secret = 'testab12cd34'")
    assert kept.text == "acme secret = 'testab12cd34'"


def test_user_rule_replaces_builtin_with_same_id(tmp_path: Path) -> None:
    """A user rule whose id is a built-in id replaces it, keeping its place in the order."""
    path = tmp_path / "override.toml"
    path.write_text("[[rules]]\nid = 'github-pat'\nregex = '''ghp_[a-z]{4}'''\n")
    rule_set = load_rules([path])
    builtin = load_rules()
    assert rule_set.ids == builtin.ids
    assert Scrubber(rule_set).scrub_secrets("ghp_abcd").text == "[REDACTED:github-pat]"


BAD_FILES = [
    pytest.param(
        "[[rules]]\nid = 'lookahead'\nregex = '''(?=x)abc'''\n",
        RulesErrorKind.BAD_REGEX,
        "lookahead",
        "regex",
        id="lookaround-is-not-re2",
    ),
    pytest.param(
        "[[rules]]\nid = 'backref'\nregex = '''(a)\\1'''\n",
        RulesErrorKind.BAD_REGEX,
        "backref",
        "regex",
        id="backreference-is-not-re2",
    ),
    pytest.param(
        "[[rules]]\nid = 'unbalanced'\nregex = '''(abc'''\n",
        RulesErrorKind.BAD_REGEX,
        "unbalanced",
        "regex",
        id="unbalanced-paren",
    ),
    pytest.param(
        "[[rules]]\nid = 'allow'\nregex = 'abc'\n[rules.allowlist]\nregexes = ['(?<=a)b']\n",
        RulesErrorKind.BAD_REGEX,
        "allow",
        "allowlist.regexes",
        id="bad-allowlist-regex",
    ),
    pytest.param(
        "[[rules]]\nregex = 'abc'\n", RulesErrorKind.MISSING_FIELD, None, "id", id="no-id"
    ),
    pytest.param(
        "[[rules]]\nid = 'noregex'\n",
        RulesErrorKind.MISSING_FIELD,
        "noregex",
        "regex",
        id="no-regex-no-path",
    ),
    pytest.param(
        "[[rules]]\nid = 'x'\nregex = 'abc'\nsecretgroup = 1\n",
        RulesErrorKind.UNKNOWN_KEY,
        "x",
        "secretgroup",
        id="misspelt-key",
    ),
    pytest.param(
        "[[rules]]\nid = 'x'\nregex = 'abc'\nsecretGroup = 2\n",
        RulesErrorKind.BAD_VALUE,
        "x",
        "secretGroup",
        id="secret-group-out-of-range",
    ),
    pytest.param(
        "[[rules]]\nid = 'x'\nregex = 'abc'\nentropy = 'high'\n",
        RulesErrorKind.BAD_VALUE,
        "x",
        "entropy",
        id="entropy-not-a-number",
    ),
    pytest.param(
        "[[rules]]\nid = 'x'\nregex = 'abc'\nvalidate = 'md5'\n",
        RulesErrorKind.BAD_VALUE,
        "x",
        "validate",
        id="unknown-validator",
    ),
    pytest.param(
        "[[rules]]\nid = 'x'\nregex = 'abc'\nkeywords = 'abc'\n",
        RulesErrorKind.BAD_VALUE,
        "x",
        "keywords",
        id="keywords-not-a-list",
    ),
    pytest.param(
        "[[rules]]\nid = 'x'\nregex = 'a'\n[[rules]]\nid = 'x'\nregex = 'b'\n",
        RulesErrorKind.DUPLICATE_RULE,
        "x",
        "id",
        id="duplicate-id-in-file",
    ),
    pytest.param("[[rules]\nid = 'x'\n", RulesErrorKind.BAD_TOML, None, None, id="bad-toml"),
    pytest.param(
        "colour = 'red'\n", RulesErrorKind.UNKNOWN_KEY, None, "colour", id="unknown-top-level-key"
    ),
]


@pytest.mark.parametrize(("content", "kind", "entry", "field"), BAD_FILES)
def test_bad_rule_file_is_refused_with_kind_rule_and_field(
    tmp_path: Path, content: str, kind: RulesErrorKind, entry: str | None, field: str | None
) -> None:
    """A bad rule file stops loading with a typed error naming the rule and field."""
    path = tmp_path / "rules.toml"
    path.write_text(content)
    with pytest.raises(RulesError) as caught:
        load_rules([path])
    assert caught.value.kind == kind
    if entry is not None:
        assert caught.value.entry == entry
    else:
        assert caught.value.entry in (None, str(path))
    assert caught.value.field == field


def test_duplicate_id_across_user_files_is_refused(tmp_path: Path) -> None:
    """Two user files may not define the same rule id."""
    first, second = tmp_path / "a.toml", tmp_path / "b.toml"
    first.write_text("[[rules]]\nid = 'acme'\nregex = 'a'\n")
    second.write_text("[[rules]]\nid = 'acme'\nregex = 'b'\n")
    with pytest.raises(RulesError) as caught:
        load_rules([first, second])
    assert caught.value.kind == RulesErrorKind.DUPLICATE_RULE
    assert caught.value.entry == "acme"


def test_unreadable_rule_file(tmp_path: Path) -> None:
    """A missing file is UNREADABLE and names the path."""
    with pytest.raises(RulesError) as caught:
        load_rules([tmp_path / "missing.toml"])
    assert caught.value.kind == RulesErrorKind.UNREADABLE
    assert caught.value.entry == str(tmp_path / "missing.toml")


def test_error_message_never_carries_payload(tmp_path: Path) -> None:
    """The describe() line names rule and field; the regex's offending operator at most."""
    path = tmp_path / "rules.toml"
    path.write_text("[[rules]]\nid = 'acme'\nregex = '''(?=sk_live_SECRETVALUE)x'''\n")
    with pytest.raises(RulesError) as caught:
        load_rules([path])
    line = caught.value.describe()
    assert line.startswith("error[bad_regex] acme.regex: ")
    assert "SECRETVALUE" not in line
