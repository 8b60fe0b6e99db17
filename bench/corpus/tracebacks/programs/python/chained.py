"""Explicit chaining (raise ... from): a connection error carrying a DSN password, caused by a timeout."""

import os


class DatabaseUnavailable(Exception):
    pass


def open_connection(dsn: str) -> None:
    raise TimeoutError(f"connect timed out after 5.0s (attempt 3, request req_8f3a2c)")


def fetch_invoices(tenant: str) -> None:
    dsn = os.environ["DB_DSN"]
    try:
        open_connection(dsn)
    except TimeoutError as exc:
        raise DatabaseUnavailable(f"could not reach {dsn} for tenant {tenant} (E2203)") from exc


fetch_invoices("acme-corp")
