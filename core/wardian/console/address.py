"""Where the web console listens: loopback only (docs/guide/console.md).

The console serves the home's owner on this machine. A non-loopback address is refused before the app changes
anything; a person elsewhere reaches the console through an SSH tunnel to the loopback port.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

from wardian import errors

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8765
ALLOWED = ("127.0.0.1:PORT, localhost:PORT, [::1]:PORT or PORT alone (PORT 0..65535, 0 picks a free one); "
           f"default {DEFAULT_HOST}:{DEFAULT_PORT}")


@dataclass(frozen=True, slots=True)
class ConsoleAddress:
    host: str  # a loopback IP literal
    port: int  # 0: the kernel picks one when the app binds

    def url(self, port: int | None = None) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port if port is None else port}"


def parse_console_address(text: str) -> ConsoleAddress:
    """`HOST:PORT`, `[V6]:PORT`, `HOST` or `PORT`; empty means the default.

    Raises:
        InvalidArguments: not a loopback address, or not an address at all (field `console`).
    """
    value = text.strip()
    if not value:
        return ConsoleAddress(DEFAULT_HOST, DEFAULT_PORT)
    host, port_text = value, ""
    if value.startswith("["):
        host, sep, rest = value[1:].partition("]")
        if not sep or (rest and not rest.startswith(":")):
            raise _invalid(text, "an IPv6 address goes in brackets, as [::1]:8765")
        port_text = rest[1:]
    elif value.isdigit():
        host, port_text = DEFAULT_HOST, value
    elif value.count(":") == 1:
        host, port_text = value.split(":")
    elif ":" in value:
        raise _invalid(text, "an IPv6 address goes in brackets, as [::1]:8765")
    port = DEFAULT_PORT
    if port_text:
        if not port_text.isdigit() or int(port_text) > 65535:
            raise _invalid(text, f"the port {port_text!r} is not a number 0..65535")
        port = int(port_text)
    if host.lower() == "localhost":
        host = DEFAULT_HOST  # never resolved: /etc/hosts could point it elsewhere
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        raise _not_loopback(text) from None
    if not ip.is_loopback:
        raise _not_loopback(text)
    return ConsoleAddress(str(ip), port)


def _invalid(text: str, why: str) -> errors.InvalidArguments:
    return errors.InvalidArguments(f"console address {text[:80]!r} is not valid: {why}", field="console",
                                   allowed=ALLOWED)


def _not_loopback(text: str) -> errors.InvalidArguments:
    return errors.InvalidArguments(
        f"console address {text[:80]!r} is not a loopback address; the console serves only this machine (from "
        f"elsewhere, tunnel to it: ssh -L {DEFAULT_PORT}:{DEFAULT_HOST}:{DEFAULT_PORT} THIS_HOST)", field="console",
        allowed=ALLOWED)
