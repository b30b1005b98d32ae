"""The shared store's wait reader: the first look of a `mailbox/wait` as one read-only statement on the event loop.

Through the app's writer (`wardian.app.writer`) a wait's look is a batch on the worker thread: the pending check, the
pushed-context check and COMMIT, three round trips to the server, plus the hop to the thread and back. Most looks
find nothing (an agent polling with `timeout_ms: 0`, the arming of a long wait), and that answer needs no write: this
reader gives it from one statement (`sessions.WAIT_LOOK_SQL`) on a connection of its own (autocommit, read-only),
awaited on the loop. A lone read cannot hold the loop on the append lock (a write could; none is done here).

Invariants:
- It only reads, and answers only what the writer's look would answer without writing: nothing pending, or a record
  to receive. Pushed context waiting (the look takes it: a write) and every doubt (no connection yet, a broken one,
  an error, an answer slower than `LOOK_TIMEOUT_S`, the connection busy with another look) answer None, and the
  caller looks through the writer as before.
- A look waits at most `LOOK_CUT_S`, even when the network died under it: its connection is then ended on the spot
  (`liveness.shut`), not cancelled through the server (psycopg's cancel opens a connection to the server and waits
  for the statement again: 10 s more on a dead network). An idle connection whose network died is ended by its own
  settings (`liveness.TCP_LIVENESS`), so the next look finds it broken at once.
- The session is authenticated from that same statement, as the roster is committed when it runs (never a cache): a
  session revoked, or an agent removed, on any host before the look began is refused, with the writer's errors
  (`sessions.session_hit`, `sessions.session_caller`).
- `keep` owns the connection: it opens it, replaces it after it broke (0.1 s doubling to 5 s between attempts) until
  cancelled; the app runs it in its task group and `close`s the reader when it stops (`wardian.app.run`). Like the
  rest of the store it is plain asyncio (psycopg's), never anyio. No credential is in a log line (libpq never prints
  passwords; no token is logged).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from contextlib import suppress
from typing import Any

import psycopg

from wardian import errors
from wardian.store.api import WaitLook
from wardian.store.postgres.connection import BACKOFF_FIRST_S, BACKOFF_MAX_S, CONNECT_TIMEOUT_S
from wardian.store.postgres.db import q
from wardian.store.postgres.liveness import shut, with_liveness
from wardian.store.sessions import WAIT_LOOK_SESSION_COLS, WAIT_LOOK_SQL, session_caller, session_hit
from wardian.store.tokens import TokenDigests
from wardian.store.url import redact_url

log = logging.getLogger("wardian.store.postgres")

# A look slower than this is left to the writer: the server cancels the statement (`statement_timeout`), and a client
# that has heard nothing a second later (the server's answer may be on its way) ends the connection and replaces it.
LOOK_TIMEOUT_S = 2.0
LOOK_CUT_S = LOOK_TIMEOUT_S + 1.0
_LOOK = WAIT_LOOK_SQL.replace("?", "%s")  # no `%` or `?` in its literals


class PgWaitReader:
    """One read-only connection answering the first look of waits (implements `wardian.store.api.WaitReader`)."""

    def __init__(self, url: str, home_tag: str) -> None:
        self._url = url
        self._digests = TokenDigests(home_tag)
        self._conn: psycopg.AsyncConnection[Any] | None = None
        self._lost: asyncio.Event | None = None  # set when the connection must be replaced (made by `keep`)
        self._in_use = False
        self.answered = 0  # looks answered here (refusals included)
        self.passed = 0  # looks left to the writer

    @property
    def backend_pid(self) -> int | None:
        """The server process of the open connection (None: none is open)."""
        conn = self._conn
        return None if conn is None or conn.closed else conn.info.backend_pid

    async def keep(self, ready: Callable[[], None]) -> None:
        """Keep a connection open until cancelled; `ready()` once the first attempt ended, whatever its outcome (until
        a connection is open, every look is the writer's). The caller `close`s the reader afterwards."""
        self._lost = asyncio.Event()
        backoff = BACKOFF_FIRST_S
        first = True
        while True:
            conn = await self._connect()
            if first:
                ready()
                first = False
            if conn is None:
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, BACKOFF_MAX_S)
                continue
            backoff = BACKOFF_FIRST_S
            self._conn = conn
            await self._lost.wait()
            self._lost.clear()

    async def close(self) -> None:
        """Close the connection (no round trip: libpq's finish)."""
        conn, self._conn = self._conn, None
        if conn is not None:
            await _close(conn)

    async def _connect(self) -> psycopg.AsyncConnection[Any] | None:
        conn: psycopg.AsyncConnection[Any] | None = None
        try:
            async with asyncio.timeout(CONNECT_TIMEOUT_S + 1):  # libpq's connect_timeout bounds the connect itself
                conn = await psycopg.AsyncConnection.connect(
                    with_liveness(self._url), autocommit=True, connect_timeout=CONNECT_TIMEOUT_S,
                    application_name="wardian wait")
                await conn.execute("SET default_transaction_read_only TO on")
                await conn.execute(q(f"SET statement_timeout TO {int(LOOK_TIMEOUT_S * 1000)}"))
        except (psycopg.Error, TimeoutError) as exc:
            if conn is not None:
                await _close(conn)
            log.warning("the wait reader cannot connect to the shared store %s (%s); waits look through the writer",
                        redact_url(self._url), type(exc).__name__)
            return None
        except BaseException:
            if conn is not None:
                await _close(conn)
            raise
        return conn

    async def look(self, token: str) -> WaitLook | None:
        """The first look of a wait by session `token`: its caller and whether a record waits for it, or None when
        only the writer can answer (see the module docstring).

        Raises: what `roster.authenticate(store, token)` raises (UnknownSession, SessionHomeMismatch, Unauthenticated,
            StaleSession), as the roster is committed now."""
        conn = self._conn
        if conn is None or self._in_use or conn.broken:
            if conn is not None and not self._in_use:
                await self._replace(conn, "its connection broke")
            self.passed += 1
            return None
        try:
            session_id, digest = self._digests.of(token)
        except errors.WardianError:
            self.answered += 1  # refused here, as the writer would have
            raise
        except Exception:
            self.passed += 1  # a token nothing expected: whatever the writer makes of it is the answer
            return None
        read, row = await self._read(conn, session_id)
        if not read:
            self.passed += 1
            return None
        try:
            caller = session_caller(session_hit(session_id, row), digest)
        except errors.WardianError:
            self.answered += 1  # refused here, as the writer would have
            raise
        assert row is not None  # session_hit refused a missing session
        pending, context = bool(row[WAIT_LOOK_SESSION_COLS]), bool(row[WAIT_LOOK_SESSION_COLS + 1])
        if context and not pending:
            # The writer's look takes pushed context (it records that a wait saw it): a write, so it is the writer's.
            self.passed += 1
            return None
        self.answered += 1
        return WaitLook(caller, pending)

    async def _read(self, conn: psycopg.AsyncConnection[Any], session_id: int) -> tuple[bool, Any]:
        """Whether the look was read, and its row (None: no such session)."""
        self._in_use = True
        loop = asyncio.get_running_loop()
        cut = loop.call_later(LOOK_CUT_S, shut, conn)
        try:
            cur = await conn.execute(_LOOK, (session_id,), prepare=True)
            return True, await cur.fetchone()
        except psycopg.Error as exc:
            if conn.broken:
                late = loop.time() >= cut.when()
                await self._replace(conn, f"no answer in {LOOK_CUT_S:g} s" if late else
                                    f"its connection broke: {type(exc).__name__}")
            else:
                log.warning("the wait reader's look failed (%s); this wait looks through the writer",
                            type(exc).__name__)
            return False, None
        except Exception as exc:
            # Nothing a look should meet: this wait is the writer's, and the connection, in an unknown state, replaced.
            await self._replace(conn, f"a look failed: {type(exc).__name__}")
            return False, None
        except BaseException:
            # Cancelled half-way (the caller went): the connection's state is not known; another replaces it.
            await self._replace(conn, "a look was cancelled")
            raise
        finally:
            cut.cancel()
            self._in_use = False

    async def _replace(self, conn: psycopg.AsyncConnection[Any], why: str) -> None:
        """`conn` can no longer be trusted: close it and, if it is still the open one, have `keep` open another."""
        log.info("the wait reader replaces its connection (%s); waits look through the writer meanwhile", why)
        current = self._conn is conn
        if current:
            self._conn = None
        await _close(conn)
        if current and self._lost is not None:
            self._lost.set()


async def _close(conn: psycopg.AsyncConnection[Any]) -> None:
    with suppress(psycopg.Error, OSError):
        await conn.close()  # no round trip and no suspension (libpq's finish), so even a cancelled task completes it
