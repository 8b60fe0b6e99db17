"""The fake secrets the demo plants in arguments and exception messages, and how to find them.

Every value is generated from a built-in scrub rule's published format by
`errscope.collector.scrub.samples` with a seeded generator: nothing here is a real credential.  The
demo leaks them the way agent services really do (a DSN in a tool's arguments, a token in a
request URL inside an exception message, a key pasted into a prompt), so the exposure page
has counts; the end-to-end test then proves that no `core` — the random part of a secret —
is anywhere in the store.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Final

from errscope.collector.scrub.samples import SAMPLES

__all__ = ["PLANTED_RULES", "PlantedSecret", "plant_secrets"]

#: The scrub rules whose formats the demo plants, with where each one leaks.
PLANTED_RULES: Final = (
    "postgres-uri-password",  # ops-agent: a DSN in run_sql's arguments
    "bearer-token",  # ops-agent: an Authorization header in fetch_logs' arguments
    "openai-api-key",  # ops-agent: pasted into a page_oncall message
    "stripe-secret-key",  # support-agent: in a CRM request URL inside an exception message
    "github-pat",  # ops-agent: in an exception message of http_get
    "slack-bot-token",  # ops-agent: in the arguments of page_oncall
    "aws-access-key-id",  # support-agent: in a prompt (a non-tool span)
    "jwt",  # ops-agent: in fetch_logs' arguments
)


@dataclass(frozen=True, slots=True)
class PlantedSecret:
    """One fake credential: the text as it is planted, and the core that must never be stored."""

    rule: str
    text: str
    core: str


def plant_secrets(seed: int, *, per_rule: int = 2) -> dict[str, tuple[PlantedSecret, ...]]:
    """`per_rule` fake secrets for each rule of `PLANTED_RULES`, the same for the same seed."""
    rng = random.Random(f"errscope-demo-secrets-{seed}")  # noqa: S311 - fake values, not keys
    planted: dict[str, tuple[PlantedSecret, ...]] = {}
    for rule in PLANTED_RULES:
        values = []
        for _ in range(per_rule):
            sample = SAMPLES[rule].make(rng)
            values.append(PlantedSecret(rule=rule, text=sample.text, core=sample.core))
        planted[rule] = tuple(values)
    return planted
