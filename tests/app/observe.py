"""What a test sees of a running app from outside: the waits it has subscribed and the control connections it holds.

The waits are `app/status`'s `waiting`. The connections are read from the kernel (Linux `/proc/net/unix`): every
socket the app accepted on its control socket is listed under that socket's path until the app closes it, whether
or not the client is still there; the listening socket itself is the one entry flagged `__SO_ACCEPTCON`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from tests.conftest import AppHandle

_SO_ACCEPTCON = 0x10000  # the flag of a listening socket in /proc/net/unix (include/uapi/linux/net.h)


def app_waiting(app: AppHandle) -> int:
    """The app's subscribed waits (`app/status`); the status call's own connection holds none."""
    return int(app.call("app/status")["waiting"])


def app_connections(app: AppHandle) -> int:
    """The control connections the app holds open now (accepted, not yet closed by the app)."""
    path = str(app.home.socket_path)
    count = 0
    with open("/proc/net/unix", encoding="utf-8") as table:
        next(table)  # the header
        for line in table:
            fields = line.split()
            if len(fields) >= 8 and fields[7] == path and not int(fields[3], 16) & _SO_ACCEPTCON:
                count += 1
    return count


def eventually(check: Callable[[], Any], what: str, timeout_s: float = 30) -> Any:
    """Poll `check` until it returns something true; fail after `timeout_s` (a bound, never a synchronisation)."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")
        time.sleep(0.02)


def app_is_idle(app: AppHandle) -> bool:
    """No wait subscribed and no control connection open (the status call's connection is closed first)."""
    waiting = app_waiting(app)
    return waiting == 0 and app_connections(app) == 0
