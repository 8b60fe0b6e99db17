"""Listening addresses: whether one is loopback, and whether it is free before a server binds."""

from __future__ import annotations

import ipaddress
import socket

__all__ = ["bind_refusal", "is_loopback"]


def is_loopback(host: str) -> bool:
    """True for localhost and loopback addresses."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def bind_refusal(host: str, port: int) -> str | None:
    """Why `host:port` cannot be bound now (the OS's words), or None when it can.

    Binds as the servers do, with SO_REUSEADDR, so a port left in TIME_WAIT by a process
    just stopped counts as free.  A host that does not resolve is None: the server's own
    bind reports what is wrong with the address.
    """
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except OSError:
        return None
    family, kind, proto, _, address = infos[0]
    with socket.socket(family, kind, proto) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(address)
        except OSError as exc:
            return exc.strerror or type(exc).__name__
    return None
