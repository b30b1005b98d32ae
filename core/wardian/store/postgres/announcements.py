"""What other apps commit to a shared store, as it is committed: LISTEN/NOTIFY on the store's channel."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator, Callable

import psycopg

from wardian.store.events import InterruptAnnounced, RecordAnnounced, Resynced, StoreEvent
from wardian.store.postgres.connection import BACKOFF_FIRST_S, BACKOFF_MAX_S, CONNECT_TIMEOUT_S
from wardian.store.postgres.db import q
from wardian.store.postgres.liveness import with_liveness
from wardian.store.postgres.schema import CHANNEL
from wardian.store.url import redact_url

log = logging.getLogger("wardian.store.postgres")


class Announcements:
    """What other apps commit, as it is committed: LISTEN on the store's channel from a connection of its own.

    `events()` yields `Resynced` on every (re)connection (announcements before it may be lost: re-read durable
    state), then each `RecordAnnounced` / `InterruptAnnounced`, skipping those sent by `own_pids()` (this app's
    writer connections: the app acted on its own commits already). A broken connection is replaced after a bounded
    backoff (0.1 s doubling to 5 s); a quiet one is probed every `probe_s` so a dead server is noticed. A dead network
    ends the connection within `liveness.DEAD_LINK_S` of the first packet it left unanswered (keepalives while it
    listens, `tcp_user_timeout` while a probe is in flight), and its replacement begins with `Resynced`.
    """

    def __init__(self, url: str, own_pids: Callable[[], set[int]], *, probe_s: float = 10.0) -> None:
        self._url = url
        self._own = own_pids
        self._probe_s = probe_s

    async def events(self) -> AsyncIterator[StoreEvent]:
        backoff = BACKOFF_FIRST_S
        while True:
            try:
                conn = await psycopg.AsyncConnection.connect(
                    with_liveness(self._url), autocommit=True, connect_timeout=CONNECT_TIMEOUT_S,
                    application_name="wardian listen")
            except psycopg.Error as exc:
                log.warning(
                    "cannot listen to the shared store %s (%s); retrying in %.1f s",
                    redact_url(self._url),
                    type(exc).__name__,
                    backoff,
                )
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, BACKOFF_MAX_S)
                continue
            backoff = BACKOFF_FIRST_S
            try:
                async with conn:
                    await conn.execute(q(f"LISTEN {CHANNEL}"))
                    yield Resynced()
                    while True:
                        async for note in conn.notifies(timeout=self._probe_s):
                            if note.pid in self._own():
                                continue
                            for event in announced(note.payload):
                                yield event
                        await conn.execute("SELECT 1")  # quiet for a while: is the server still there?
            except psycopg.Error as exc:
                log.warning("the shared store's announcements stopped (%s); listening again", type(exc).__name__)
                await asyncio.sleep(BACKOFF_FIRST_S)


def announced(payload: str) -> list[StoreEvent]:
    """The events of one notification (a `records` one names up to 100 records of one recipient)."""
    try:
        data = json.loads(payload)
        if data["e"] == "records":
            to, host = str(data["to"]), data.get("host")
            return [RecordAnnounced(to, host, str(i), str(k)) for i, k in zip(data["ids"], data["k"], strict=True)]
        if data["e"] == "record":
            return [RecordAnnounced(str(data["to"]), data.get("host"), str(data["id"]), str(data["k"]))]
        if data["e"] == "interrupt":
            return [InterruptAnnounced(str(data["to"]), data.get("host"), int(data["id"]), str(data["turn"]))]
    except (ValueError, KeyError, TypeError):
        pass
    log.warning("an announcement of the shared store could not be read: %.200s", payload)
    return []
