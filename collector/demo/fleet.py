"""The demo fleet: three agent services, their tools, and the model's habits.

- `billing-agent` (errscope's tool kit, a `RetryBudget` in the loop, scrubbed in-process by
  errscope's exporter before it sends): `search_invoices`, `get_invoice`, `refund_invoice`,
  `send_reminder`.  Version 2.4.0 tightens `search_invoices`' `since` to ISO dates; the
  model keeps writing "last 30 days", so invalid_args on `since` jumps after the deploy.
- `support-agent` (the tool kit, but a naive loop with no retry cap, sent raw over OTLP as
  any language would): `search_orders`, `get_order`, `cancel_order`, `lookup_customer`.
  The model guesses order ids and calls `cancel_order` again after it was denied; during the
  orders-replica outage `get_order` misses most lookups (a not_found spike, no deploy);
  `lookup_customer` has a bug whose exception message carries a CRM key (tracebacks).
- `ops-agent` (a LangChain-style agent instrumented with OpenInference, sent raw over
  OTLP): `run_sql`, `fetch_logs`, `restart_service`, `page_oncall`, `http_get`.  Its spans
  carry the arguments as JSON in `input.value` — DSNs, bearer tokens, pasted keys — and
  `page_oncall` returns an error code the catalog does not know (`quota_exhausted`).

Every random choice comes from `World.rng`, so a seed replays the same story.  Span times
come from `World.clock` (see `errscope.collector.demo.clock`).  Not thread-safe: one fleet
per thread.
"""

from __future__ import annotations

import json
import math
import random
import re
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Annotated, Any, Final, Literal

from opentelemetry.trace import Span, Status, StatusCode, TracerProvider

from errscope.collector.demo.clock import SimClock
from errscope.collector.demo.secrets import PlantedSecret
from errscope.collector.toolkit import (
    Coerce,
    Denied,
    InvalidArgs,
    NotFound,
    PositiveInt,
    RateLimited,
    RetryBudget,
    Tool,
    tool,
)

__all__ = [
    "BILLING",
    "BILLING_NEW",
    "BILLING_OLD",
    "BROKEN_FIELD",
    "BROKEN_TOOL",
    "OPS",
    "OPS_VERSION",
    "SERVICES",
    "SPIKE_TOOL",
    "SUPPORT",
    "SUPPORT_VERSION",
    "Agent",
    "BillingAgent",
    "OpsAgent",
    "SupportAgent",
    "World",
    "coerce_iso_date",
]

BILLING: Final = "billing-agent"
BILLING_OLD: Final = "2.3.0"
BILLING_NEW: Final = "2.4.0"
BROKEN_TOOL: Final = "search_invoices"
BROKEN_FIELD: Final = "since"
SUPPORT: Final = "support-agent"
SUPPORT_VERSION: Final = "1.8.2"
SPIKE_TOOL: Final = "get_order"
OPS: Final = "ops-agent"
OPS_VERSION: Final = "0.9.1"
SERVICES: Final = (BILLING, SUPPORT, OPS)

TRACER_NAME: Final = "errscope.demo"
_ISO_DATE_RE: Final = re.compile(r"20[0-9]{2}-[01][0-9]-[0-3][0-9]")
_NATURAL_DATES: Final = ("last 30 days", "since October", "this quarter", "past week", "yesterday")
_ISO_DATES: Final = ("2026-10-01", "2026-11-01", "2026-11-15", "2026-09-30")


def coerce_iso_date(value: object, *, field: str) -> str:
    """An ISO calendar date ("2026-11-02"), trimmed; anything else is invalid_args."""
    if isinstance(value, str) and _ISO_DATE_RE.fullmatch(value.strip()):
        return value.strip()
    raise InvalidArgs(f"{field}: an ISO date such as 2026-11-02", field=field)


IsoDate = Annotated[str, Coerce(coerce_iso_date, shape="an ISO date such as 2026-11-02")]
InvoiceStatus = Literal["open", "paid", "overdue"]
Channel = Literal["email", "sms"]


@dataclass
class World:
    """What every tool and model of the fleet shares: the clock, the dice, the planted secrets.

    `orders_outage` is set by the story while the orders replica is behind (the spike).
    """

    clock: SimClock
    rng: random.Random
    planted: Mapping[str, tuple[PlantedSecret, ...]]
    orders_outage: bool = False

    def secret(self, rule: str) -> str:
        """One of the planted fake secrets of a rule, as it is leaked."""
        return self.rng.choice(self.planted[rule]).text

    def work(self, median_s: float) -> None:
        """A tool's latency: log-normal around `median_s`."""
        self.clock.sleep(self.rng.lognormvariate(math.log(median_s), 0.5))

    def think(self) -> None:
        """The model's time between two tool calls."""
        self.clock.sleep(self.rng.uniform(0.8, 4.0))

    def chance(self, p: float) -> bool:
        """True with probability p."""
        return self.rng.random() < p

    def call_id(self) -> str:
        """A tool-call id in the shape models send."""
        return f"call_{self.rng.getrandbits(64):016x}"


@dataclass
class _Loop:
    """One conversation's tool calls, through the kit, with or without a retry budget."""

    world: World
    tools: Mapping[str, Tool]
    budget: RetryBudget | None
    calls: int = 0
    stopped: bool = False
    last: dict[str, Any] = field(default_factory=dict)

    def call(self, name: str, arguments: dict[str, Any]) -> dict[str, Any] | None:
        """Make one call; None when the loop had already stopped or handed off."""
        if self.stopped:
            return None
        self.world.think()
        observation = dict(
            self.tools[name](arguments, call_id=self.world.call_id(), budget=self.budget)
        )
        self.calls += 1
        self.last = observation
        if self.budget is not None and self.budget.last_decision != "continue":
            self.stopped = True
        return observation


class Agent(ABC):
    """An agent service: `converse(version, conversation_id)` plays one conversation."""

    service: str = ""

    @abstractmethod
    def converse(self, version: str, conversation_id: str) -> int:
        """Play one conversation; returns the number of tool calls made."""


ProviderFor = Callable[[str], TracerProvider]


def _invoke_span_attributes(agent: str, conversation_id: str) -> dict[str, str]:
    return {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.agent.name": agent,
        "gen_ai.conversation.id": conversation_id,
    }


# ===================================================================== billing-agent


def _invoices(customer: str) -> list[int]:
    seed = sum(map(ord, customer))
    return [1000 + (seed * 7 + k * 13) % 400 for k in range(3)]


def _billing_tools(world: World, provider: TracerProvider, *, iso_since: bool) -> dict[str, Tool]:
    """The billing tools; `iso_since` is 2.4.0's stricter `search_invoices` schema."""

    def search(customer_id: str, status: str | None) -> list[int]:
        world.work(0.12)
        if not customer_id.startswith("cus_"):
            raise InvalidArgs("customer_id: a customer id such as cus_1042", field="customer_id")
        ids = _invoices(customer_id)
        return ids[:1] if status == "overdue" else ids

    if iso_since:

        @tool(BROKEN_TOOL, tracer_provider=provider)
        def search_invoices(
            customer_id: str, status: InvoiceStatus | None = None, since: IsoDate | None = None
        ) -> list[int]:
            """Invoice ids of a customer (2.4.0: `since` must be an ISO date)."""
            return search(customer_id, status)

    else:

        @tool(BROKEN_TOOL, tracer_provider=provider)
        def search_invoices(
            customer_id: str, status: InvoiceStatus | None = None, since: str | None = None
        ) -> list[int]:
            """Invoice ids of a customer (2.3.0: `since` is free text, read leniently)."""
            return search(customer_id, status)

    @tool(
        "get_invoice",
        not_found_hint="invoice ids look like 1042; search_invoices lists them",
        tracer_provider=provider,
    )
    def get_invoice(invoice_id: PositiveInt) -> dict[str, Any]:
        """One invoice."""
        world.work(0.05)
        if invoice_id % 97 == 0 or not 1000 <= invoice_id < 1400:
            raise NotFound
        return {"id": invoice_id, "amount_cents": 1000 + invoice_id % 50 * 700, "status": "open"}

    @tool("refund_invoice", tracer_provider=provider)
    def refund_invoice(invoice_id: PositiveInt, amount_cents: PositiveInt) -> dict[str, Any]:
        """Refund part of an invoice; large refunds need a human's approval."""
        world.work(0.3)
        if amount_cents > 50_000:
            raise Denied(hint="refunds over 500.00 need a finance approval; ask the user")
        return {"refund_id": f"re_{invoice_id}", "amount_cents": amount_cents}

    @tool("send_reminder", tracer_provider=provider)
    def send_reminder(invoice_id: PositiveInt, channel: Channel) -> dict[str, Any]:
        """Send a payment reminder."""
        world.work(0.2)
        if world.chance(0.04):
            raise RateLimited(hint="the mail provider is throttling", retry_after_s=30)
        return {"sent": True, "invoice_id": invoice_id, "channel": channel}

    return {t.name: t for t in (search_invoices, get_invoice, refund_invoice, send_reminder)}


class BillingAgent(Agent):
    """billing-agent: a careful loop (a `RetryBudget`), a model that writes dates loosely."""

    service = BILLING

    def __init__(self, world: World, provider_for: ProviderFor) -> None:
        self.world = world
        self.provider_for = provider_for
        self._tools: dict[str, dict[str, Tool]] = {}

    def tools(self, version: str) -> dict[str, Tool]:
        """The tools as `version` ships them."""
        if version not in self._tools:
            self._tools[version] = _billing_tools(
                self.world, self.provider_for(version), iso_since=version != BILLING_OLD
            )
        return self._tools[version]

    def converse(self, version: str, conversation_id: str) -> int:
        """A lookup, a refund or a reminder, as a customer-facing billing assistant does."""
        w = self.world
        loop = _Loop(w, self.tools(version), RetryBudget())
        tracer = self.provider_for(version).get_tracer(TRACER_NAME)
        with tracer.start_as_current_span(
            f"invoke_agent {self.service}",
            attributes=_invoke_span_attributes(self.service, conversation_id),
        ):
            customer = f"cus_{w.rng.randint(1000, 9999)}"
            kind = w.rng.choices(("lookup", "refund", "remind"), weights=(60, 15, 25))[0]
            if kind == "refund":
                invoice = self._get_invoice(loop, w.rng.choice(_invoices(customer)))
                if invoice is not None:
                    large = w.chance(0.25)
                    amount = w.rng.randint(60_000, 200_000) if large else w.rng.randint(500, 9_000)
                    loop.call("refund_invoice", {"invoice_id": invoice, "amount_cents": amount})
            else:
                status = "overdue" if kind == "remind" else None
                ids = self._search(loop, customer, status)
                if ids:
                    invoice_id = self._get_invoice(loop, ids[0])
                    if kind == "remind" and invoice_id is not None:
                        self._remind(loop, invoice_id)
            w.clock.sleep(0.5)
        return loop.calls

    def _search(self, loop: _Loop, customer: str, status: str | None) -> list[int]:
        w = self.world
        arguments: dict[str, Any] = {"customer_id": customer}
        if status is not None:
            arguments["status"] = status
        elif w.chance(0.5):
            # "unpaid" is not a status: the model's most common schema slip on this tool.
            arguments["status"] = "unpaid" if w.chance(0.2) else w.rng.choice(("open", "paid"))
        if w.chance(0.6):
            natural = w.chance(0.7)
            arguments["since"] = w.rng.choice(_NATURAL_DATES if natural else _ISO_DATES)
        for _ in range(3):
            observation = loop.call(BROKEN_TOOL, arguments)
            if observation is None:
                return []
            if "error" not in observation:
                result = observation.get("result")
                return [int(i) for i in result] if isinstance(result, list) else []
            bad = observation.get("field")
            if not w.chance(0.8):
                continue  # the model repeats itself; the budget hands off on the second miss
            if bad == "since":
                arguments["since"] = w.rng.choice(_ISO_DATES)
            elif bad == "status":
                arguments["status"] = "open"
        return []

    def _get_invoice(self, loop: _Loop, invoice_id: int) -> int | None:
        w = self.world
        value: object = invoice_id
        if w.chance(0.05):
            value = f"INV-{invoice_id}"  # the id as the invoice PDF prints it
        elif w.chance(0.04):
            value = w.rng.randint(1, 999)  # an invented id
        for _ in range(2):
            observation = loop.call("get_invoice", {"invoice_id": value})
            if observation is None:
                return None
            if "error" not in observation:
                return invoice_id
            value = invoice_id
        return None

    def _remind(self, loop: _Loop, invoice_id: int) -> None:
        w = self.world
        channel = "slack" if w.chance(0.04) else w.rng.choice(("email", "sms"))
        for _ in range(3):
            observation = loop.call("send_reminder", {"invoice_id": invoice_id, "channel": channel})
            if observation is None or "error" not in observation:
                return
            if observation["error"] == "rate_limited":
                w.clock.sleep(float(observation.get("retry_after", 30)))
            channel = "email"


# ===================================================================== support-agent


def _support_tools(world: World, provider: TracerProvider) -> dict[str, Tool]:
    @tool("search_orders", tracer_provider=provider)
    def search_orders(email: str) -> list[int]:
        """The ids of a customer's recent orders."""
        world.work(0.15)
        seed = sum(map(ord, email))
        return [50_000 + (seed * 31 + k * 7) % 5000 for k in range(world.rng.randint(1, 3))]

    @tool(
        SPIKE_TOOL,
        not_found_hint="order ids look like 51234; search_orders lists a customer's orders",
        tracer_provider=provider,
    )
    def get_order(order_id: PositiveInt) -> dict[str, Any]:
        """One order."""
        world.work(0.08)
        if not 50_000 <= order_id < 55_000:
            raise NotFound
        if world.orders_outage and world.chance(0.85):
            raise NotFound  # the replica serving reads is hours behind: recent orders are missing
        return {"id": order_id, "status": "shipped" if order_id % 2 else "processing"}

    @tool("cancel_order", tracer_provider=provider)
    def cancel_order(order_id: PositiveInt) -> dict[str, Any]:
        """Cancel an order that has not shipped."""
        world.work(0.2)
        if order_id % 2:
            raise Denied(hint="shipped orders cannot be cancelled; offer a return instead")
        return {"cancelled": order_id}

    @tool("lookup_customer", tracer_provider=provider)
    def lookup_customer(customer_id: str) -> dict[str, Any]:
        """A customer's profile from the CRM."""
        world.work(0.25)
        if world.chance(0.04):
            key = world.secret("stripe-secret-key")
            raise RuntimeError(  # the bug: the CRM client puts its request URL in the message
                f"CRM request failed: GET https://crm.internal/v2/customers/{customer_id}"
                f"?api_key={key} returned 502"
            )
        profile: dict[str, Any] = {"id": customer_id, "plan": "pro"}
        if world.chance(0.02):
            return {"id": customer_id, "tier": profile["loyalty_tier"]}  # KeyError: a bug
        return profile

    return {t.name: t for t in (search_orders, get_order, cancel_order, lookup_customer)}


class SupportAgent(Agent):
    """support-agent: no retry cap in the loop, so the model's guessing goes on."""

    service = SUPPORT

    def __init__(self, world: World, provider_for: ProviderFor) -> None:
        self.world = world
        self.provider_for = provider_for
        self._tools = _support_tools(world, provider_for(SUPPORT_VERSION))

    def converse(self, version: str, conversation_id: str) -> int:
        """Order status, guessed ids, a cancellation, or a profile lookup."""
        w = self.world
        loop = _Loop(w, self._tools, budget=None)
        tracer = self.provider_for(version).get_tracer(TRACER_NAME)
        attributes = _invoke_span_attributes(self.service, conversation_id)
        if w.chance(0.03):
            # Users paste credentials into chats; the prompt is on a non-tool span.
            prompt = f"my deploy key {w.secret('aws-access-key-id')} stopped working, order?"
            attributes["gen_ai.input.messages"] = json.dumps([{"role": "user", "content": prompt}])
        with tracer.start_as_current_span(f"invoke_agent {self.service}", attributes=attributes):
            kind = w.rng.choices(("status", "guess", "cancel", "profile"), weights=(55, 8, 15, 22))[
                0
            ]
            email = f"user{w.rng.randint(1, 5000)}@example.com"
            if kind == "status":
                observation = loop.call("search_orders", {"email": email})
                ids = observation.get("result") if observation else None
                if isinstance(ids, list) and ids:
                    order = loop.call(SPIKE_TOOL, {"order_id": ids[0]})
                    if order is not None and order.get("error") == "not_found" and w.chance(0.5):
                        loop.call(SPIKE_TOOL, {"order_id": ids[0]})  # "let me try that again"
            elif kind == "guess":
                # No search first: the model invents plausible ids, one after another.
                for _ in range(w.rng.randint(3, 4)):
                    loop.call(SPIKE_TOOL, {"order_id": w.rng.randint(10_000, 99_999)})
            elif kind == "cancel":
                order_id = 50_000 + w.rng.randint(0, 4999)
                loop.call(SPIKE_TOOL, {"order_id": order_id})
                observation = loop.call("cancel_order", {"order_id": order_id})
                denied = observation is not None and observation.get("error") == "denied"
                if denied and w.chance(0.4):
                    loop.call("cancel_order", {"order_id": order_id})  # retry after denied
            else:
                loop.call("lookup_customer", {"customer_id": f"cus_{w.rng.randint(1000, 9999)}"})
            w.clock.sleep(0.5)
        return loop.calls


# ===================================================================== ops-agent


class _UpstreamError(RuntimeError):
    """What ops-agent's HTTP helper raises; unmapped, so it is an internal_error."""


# Reported as the HTTP client library's own exception, the way a real traceback names it.
_UpstreamError.__module__ = "opskit.http"
_UpstreamError.__qualname__ = _UpstreamError.__name__ = "UpstreamError"


def _raised(exc: Exception) -> Exception:
    """`exc` with a real traceback, as if a library deep in the call had raised it."""

    def library_call() -> None:
        raise exc

    try:
        library_call()
    except Exception as caught:  # noqa: BLE001 - returned, to be recorded on the span
        return caught
    return exc


class OpsAgent(Agent):
    """ops-agent: OpenInference spans written by a framework, arguments and all."""

    service = OPS

    def __init__(self, world: World, provider_for: ProviderFor) -> None:
        self.world = world
        self.provider_for = provider_for

    def converse(self, version: str, conversation_id: str) -> int:
        """One or two ops requests: SQL, logs, a restart, a page, an HTTP fetch."""
        w = self.world
        tracer = self.provider_for(version).get_tracer("openinference.instrumentation.langchain")
        request = "why is checkout slow?"
        if w.chance(0.05):
            request += f" (use my key {w.secret('openai-api-key')} if you need to)"
        calls = 0
        with tracer.start_as_current_span(
            "AgentExecutor",
            attributes={
                "openinference.span.kind": "AGENT",
                "session.id": conversation_id,
                "input.value": request,
            },
        ):
            for _ in range(w.rng.randint(1, 2)):
                w.think()
                name = w.rng.choices(
                    ("run_sql", "fetch_logs", "restart_service", "page_oncall", "http_get"),
                    weights=(30, 30, 12, 14, 14),
                )[0]
                self._tool_span(tracer, name, conversation_id)
                calls += 1
        return calls

    def _tool_span(self, tracer: Any, name: str, conversation_id: str) -> None:
        w = self.world
        arguments, outcome = self._play(name)
        with tracer.start_as_current_span(
            name,
            attributes={
                "openinference.span.kind": "TOOL",
                "tool.name": name,
                "tool_call.id": w.call_id(),
                "session.id": conversation_id,
                "input.value": json.dumps(arguments),
                "input.mime_type": "application/json",
            },
            record_exception=False,
            set_status_on_exception=False,
        ) as span:
            w.work(0.4)
            self._finish(span, outcome)

    def _play(self, name: str) -> tuple[dict[str, Any], dict[str, Any] | Exception]:
        """The arguments the model sends to `name`, and what comes back."""
        w = self.world
        match name:
            case "run_sql":
                arguments: dict[str, Any] = {
                    "query": "select count(*) from orders where ts > now() - interval '1 hour'"
                }
                if w.chance(0.3):
                    arguments["dsn"] = w.secret("postgres-uri-password")
                if w.chance(0.06):
                    return arguments, _raised(
                        TimeoutError("canceling statement due to statement timeout")
                    )
                return arguments, {"rows": [[w.rng.randint(100, 900)]]}
            case "fetch_logs":
                arguments = {"service": "checkout", "since": "15m"}
                if w.chance(0.2):
                    arguments["headers"] = {"Authorization": w.secret("bearer-token")}
                if w.chance(0.1):
                    arguments["id_token"] = w.secret("jwt")
                return arguments, {"lines": 120, "errors": w.rng.randint(0, 9)}
            case "restart_service":
                arguments = {"name": "checkout-worker"}
                if w.chance(0.4):
                    return arguments, {
                        "error": "denied",
                        "hint": "restarts need an approved change ticket",
                    }
                return arguments, {"restarted": True}
            case "page_oncall":
                message = "checkout p99 above 2s for 10 minutes"
                if w.chance(0.1):
                    message += f"; bot token {w.secret('slack-bot-token')}"
                arguments = {"team": "payments", "message": message}
                if w.chance(0.12):
                    # Not a catalog code: the handler invented one (counted as unknown).
                    return arguments, {"error": "quota_exhausted", "hint": "paging quota used up"}
                return arguments, {"paged": True}
            case _:
                arguments = {"url": "https://status.internal/api/checkout"}
                if w.chance(0.08):
                    token = w.secret("github-pat")
                    return arguments, _raised(
                        _UpstreamError(f"fetching runbook failed: {token} (HTTP 401 from git)")
                    )
                return arguments, {"status": 200, "body_bytes": w.rng.randint(200, 4000)}

    @staticmethod
    def _finish(span: Span, outcome: dict[str, Any] | Exception) -> None:
        if isinstance(outcome, Exception):
            span.record_exception(outcome)
            # LangChain's tracer puts repr(exception) in the status description.
            span.set_status(Status(StatusCode.ERROR, repr(outcome)))
            return
        span.set_attribute("output.value", json.dumps(outcome))
        span.set_attribute("output.mime_type", "application/json")
