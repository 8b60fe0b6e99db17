"""Uncaught custom exception three frames deep; the message carries a GitHub token."""

import os


class PaymentDeclined(Exception):
    pass


def charge_card(order_id: str, amount_cents: int) -> None:
    token = os.environ["GH_TOKEN"]
    raise PaymentDeclined(f"card declined for order {order_id} code=E1042 amount={amount_cents} token={token}")


def load_order(order_id: str) -> None:
    charge_card(order_id, 4200)


def handle_request() -> None:
    load_order("ORD-40917")


handle_request()
