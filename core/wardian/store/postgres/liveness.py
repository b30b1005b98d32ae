"""How long the app waits for a shared store whose network went silent, on each of its three connections.

A dead network (a cable pulled, a partition, a firewall or NAT that forgot the flow) drops packets without a word: no
reset, no error. Left to the kernel, a connection with a statement in flight waits until TCP's retransmissions give up
(`net.ipv4.tcp_retries2` = 15: about 15 minutes on Linux), holding the app's one writer and every operation queued
behind it, and an idle connection notices nothing until it sends. So every connection the app opens carries libpq's
own liveness settings (https://www.postgresql.org/docs/current/libpq-connect.html#LIBPQ-KEEPALIVES), `TCP_LIVENESS`:

- `tcp_user_timeout` (`TCP_USER_TIMEOUT_MS`): data sent and not acknowledged for that long ends the connection;
- `keepalives` on, `keepalives_idle` (`KEEPALIVES_IDLE_S`), `keepalives_interval`, `keepalives_count`: a connection
  that received nothing for 4 s is probed every 2 s; with `tcp_user_timeout` set, Linux ends it at the first probe
  10 s after the last packet it received (tcp(7)), and where that option is missing, 3 unanswered probes end it at
  the same 10 s.

So a dead network is noticed about `DEAD_LINK_S` after the first packet that goes unanswered, whether a statement was
in flight or the connection was idle. The probes also keep a firewall's or NAT's idea of the flow alive. A URL that
names any of these keeps its own value (`with_liveness`); libpq ignores them all on a Unix socket (no network there).

A wait's look must not wait even that long: the wait reader ends its connection after its own bound
(`wardian.store.postgres.wait_reader`) with `shut`, a `shutdown()` of the socket: libpq then reads end-of-file, the
look fails at once, and the connection is replaced. Nothing is sent to the server to cancel anything: the network that
would carry it may be the dead one.
"""

from __future__ import annotations

import os
import socket
from contextlib import suppress
from typing import Any

import psycopg
from psycopg.conninfo import conninfo_to_dict, make_conninfo

TCP_USER_TIMEOUT_MS = 10_000
KEEPALIVES_IDLE_S = 4
KEEPALIVES_INTERVAL_S = 2
KEEPALIVES_COUNT = 3
DEAD_LINK_S = 10  # what the settings above add up to (see the module docstring)
TCP_LIVENESS: dict[str, str] = {
    "keepalives": "1",
    "keepalives_idle": str(KEEPALIVES_IDLE_S),
    "keepalives_interval": str(KEEPALIVES_INTERVAL_S),
    "keepalives_count": str(KEEPALIVES_COUNT),
    "tcp_user_timeout": str(TCP_USER_TIMEOUT_MS),
}


def with_liveness(url: str) -> str:
    """`url` as a libpq connection string with the settings of `TCP_LIVENESS` it does not name itself.

    Raises: psycopg.ProgrammingError (a URL libpq cannot read)."""
    named = conninfo_to_dict(url)
    return make_conninfo(url, **{key: value for key, value in TCP_LIVENESS.items() if key not in named})


def shut(conn: psycopg.Connection[Any] | psycopg.AsyncConnection[Any]) -> None:
    """End `conn`'s socket now, from the loop that runs `conn` (while a statement waits on it): no round trip, and the
    descriptor stays libpq's to close. Nothing happens to a connection that is closed already."""
    with suppress(psycopg.Error, OSError), socket.socket(fileno=os.dup(conn.pgconn.socket)) as sock:
        sock.shutdown(socket.SHUT_RDWR)
