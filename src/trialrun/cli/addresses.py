"""``HOST:PORT`` options, parsed the same way by every command that serves on a socket."""

from __future__ import annotations

import click


def parse_host_port(value: str, option: str) -> tuple[str, int]:
    """``(host, port)`` from ``HOST:PORT`` (``[::1]:0`` too; port 0 picks a free port)."""
    host, sep, port_text = value.rpartition(":")
    host = host.strip("[]")
    if not sep or not host or not port_text.isdigit() or int(port_text) > 65535:
        raise click.BadParameter(
            f"expected HOST:PORT (PORT 0-65535, 0 picks a free port), found {value!r}",
            param_hint=f"'{option}'",
        )
    return host, int(port_text)
