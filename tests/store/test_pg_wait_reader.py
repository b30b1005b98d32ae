"""The shared store's wait reader (`wardian.store.postgres.wait_reader`): the first look of a `mailbox/wait`, read on
the event loop from a read-only connection of its own. It answers alone only what the writer's look answers without
writing, refuses a session exactly as the writer does (as the roster is committed now), and leaves everything else
to the writer: pushed context to take, a broken or missing connection, an error. Against the private PostgreSQL
server of the test process, and once through an app."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import psycopg
import pytest

from tests.conftest import app_on_a_fresh_home
from tests.store.conftest import Backend, pg
from wardian import errors
from wardian.app.service.mailbox import receive_page
from wardian.app.writer import StoreWriter
from wardian.model import InteractionKind, ReceivePage
from wardian.store import Store, mailbox, open_sqlite, roster
from wardian.store.api import WaitLook
from wardian.store.postgres import PgWaitReader, PostgresBackend, wait_reader
from wardian_harness.hosts.postgres import PrivateCluster


@asynccontextmanager
async def kept(store: Store) -> AsyncIterator[PgWaitReader]:
    """The store's wait reader with its connection kept open (as the app keeps it), closed after."""
    reader = pg(store).wait_reader()
    async with anyio.create_task_group() as tg:
        await tg.start(lambda task_status: reader.keep(task_status.started))
        try:
            yield reader
        finally:
            tg.cancel_scope.cancel()
            await reader.close()


def writer_look(store: Store, token: str) -> tuple[str, Any]:
    """What the writer's look answers (the mailbox wait handler's `_authenticate_and_look`), as comparable values: the
    caller's agent and whether a record waits, or the error's code. It may take pushed context (a write)."""
    try:
        caller = roster.authenticate(store, token)
    except errors.WardianError as exc:
        return "refused", exc.code
    me = caller.agent.id
    return caller.agent.uuid, mailbox.has_unacked(store, me) or (
        "context" if mailbox.take_unseen_context(store, me) else False)


async def reader_look(reader: PgWaitReader, token: str) -> tuple[str, Any] | None:
    try:
        looked = await reader.look(token)
    except errors.WardianError as exc:
        return "refused", exc.code
    return None if looked is None else (looked.caller.agent.uuid, looked.pending)


def run(pg_cluster: PrivateCluster, tmp_path: Path, body: Callable[[Store, PgWaitReader],
                                                                   Awaitable[None]]) -> None:
    backend = Backend("postgresql", tmp_path, pg_cluster)
    store = backend.open()
    assert isinstance(store.backend, PostgresBackend)

    async def main() -> None:
        async with kept(store) as reader:
            await body(store, reader)

    try:
        anyio.run(main)
    finally:
        backend.close_all()


def test_an_empty_wait_is_answered_by_the_reader_alone(pg_cluster: PrivateCluster, tmp_path: Path) -> None:
    async def body(store: Store, reader: PgWaitReader) -> None:
        agent = roster.add_agent(store, "a", "codex", None)
        token = roster.create_session(store, agent.id)
        looked = await reader.look(token)
        assert looked == WaitLook(roster.authenticate(store, token), False)
        assert (reader.answered, reader.passed) == (1, 0)
        assert writer_look(store, token) == (agent.uuid, False)  # the same answer

    run(pg_cluster, tmp_path, body)


def test_a_pending_record_is_reported_and_still_received_through_the_writer(
        pg_cluster: PrivateCluster, tmp_path: Path) -> None:
    """A record waiting wakes the wait (read only: the writer's look writes nothing either); receiving it is the
    writer's, and returns it."""
    async def body(store: Store, reader: PgWaitReader) -> None:
        me = roster.authenticate(store, roster.create_session(store, roster.add_agent(store, "me", "codex", None).id))
        agent = roster.add_agent(store, "a", "codex", None)
        token = roster.create_session(store, agent.id)
        receipt = mailbox.admit(store, me, agent, InteractionKind.INFORMATION, "hello")
        assert await reader_look(reader, token) == writer_look(store, token) == (agent.uuid, True)
        writer = StoreWriter(store)
        pages: list[ReceivePage] = []
        async with anyio.create_task_group() as tg:
            await tg.start(writer.run)
            pages.append(await writer.call(receive_page, token, None, None, 10))
            writer.close()
        assert [r.interaction.id for r in pages[0].records] == [receipt.interaction_id]
        mailbox.receive(store, roster.authenticate(store, token), cursor=None, ack_cursor=pages[0].cursor, limit=10)
        assert await reader_look(reader, token) == writer_look(store, token) == (agent.uuid, False)

    run(pg_cluster, tmp_path, body)


def test_a_revoked_session_or_removed_agent_is_refused_by_the_reader(pg_cluster: PrivateCluster,
                                                                     tmp_path: Path) -> None:
    """Read as the roster is committed now: a session the reader just answered is refused once revoked (here, or by
    another app of the store: another connection), with the writer's error; so are forgeries and another home's."""
    async def body(store: Store, reader: PgWaitReader) -> None:
        agent = roster.add_agent(store, "a", "codex", None)
        token = roster.create_session(store, agent.id)
        assert await reader_look(reader, token) == (agent.uuid, False)
        forged = token[:-4] + ("AAAA" if not token.endswith("AAAA") else "BBBB")
        prefix, tag, session_id, secret = token.split("_", 3)
        for bad in (forged, "wsn1_nope", "_".join((prefix, "x" * len(tag), session_id, secret)),
                    "_".join((prefix, tag, str(int(session_id) + 1000), secret))):
            refused = await reader_look(reader, bad)
            assert refused == writer_look(store, bad)
            assert refused is not None
            assert refused[0] == "refused"
        with psycopg.connect(pg(store).url, autocommit=True) as other_app:
            other_app.execute("UPDATE sessions SET revoked_at = 1 WHERE id = %s", (int(session_id),))
        assert await reader_look(reader, token) == ("refused", "unknown_session") == writer_look(store, token)
        second = roster.add_agent(store, "b", "codex", None)
        token = roster.create_session(store, second.id)
        assert await reader_look(reader, token) == (second.uuid, False)
        roster.remove_agent(store, second.id)
        assert await reader_look(reader, token) == ("refused", "unknown_session") == writer_look(store, token)
        assert reader.passed == 0

    run(pg_cluster, tmp_path, body)


def test_pushed_context_is_left_to_the_writer_which_takes_it(pg_cluster: PrivateCluster, tmp_path: Path) -> None:
    async def body(store: Store, reader: PgWaitReader) -> None:
        me = roster.authenticate(store, roster.create_session(store, roster.add_agent(store, "me", "codex", None).id))
        agent = roster.add_agent(store, "a", "codex", None)
        token = roster.create_session(store, agent.id)
        pushed = mailbox.admit(store, me, agent, InteractionKind.INFORMATION, "into the conversation", push=True)
        mailbox.push_done(store, pushed.interaction_id)
        assert await reader.look(token) is None
        assert reader.passed == 1
        assert writer_look(store, token) == (agent.uuid, "context")  # taken: a write
        assert await reader_look(reader, token) == writer_look(store, token) == (agent.uuid, False)

    run(pg_cluster, tmp_path, body)


async def reconnected(reader: PgWaitReader) -> None:
    """Until the reader has a connection again, for at most about 10 s (`keep` retries from 0.1 s)."""
    for _ in range(1000):
        if reader.backend_pid is not None:
            return
        await anyio.sleep(0.01)


def test_a_terminated_reader_connection_falls_back_then_is_replaced(pg_cluster: PrivateCluster,
                                                                    tmp_path: Path) -> None:
    async def body(store: Store, reader: PgWaitReader) -> None:
        agent = roster.add_agent(store, "a", "codex", None)
        token = roster.create_session(store, agent.id)
        assert await reader_look(reader, token) == (agent.uuid, False)
        killed = reader.backend_pid
        assert killed is not None
        with psycopg.connect(pg(store).url, autocommit=True) as admin:
            admin.execute("SELECT pg_terminate_backend(%s)", (killed,))
        assert await reader.look(token) is None  # the broken connection is noticed: this wait is the writer's
        assert writer_look(store, token) == (agent.uuid, False)
        await reconnected(reader)  # `keep` connects again, after its first backoff (0.1 s)
        assert reader.backend_pid != killed
        assert await reader_look(reader, token) == (agent.uuid, False)
        assert (reader.answered, reader.passed) == (2, 1)

    run(pg_cluster, tmp_path, body)


def test_a_slow_look_is_left_to_the_writer(pg_cluster: PrivateCluster, tmp_path: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """A look held up (here by a lock another connection holds on `sessions`) past its bound answers nothing; once the
    lock is gone the reader answers again."""
    monkeypatch.setattr(wait_reader, "LOOK_TIMEOUT_S", 0.3)

    async def body(store: Store, reader: PgWaitReader) -> None:
        agent = roster.add_agent(store, "a", "codex", None)
        token = roster.create_session(store, agent.id)
        with psycopg.connect(pg(store).url) as other:
            other.execute("LOCK TABLE sessions IN ACCESS EXCLUSIVE MODE")
            with anyio.fail_after(15):
                assert await reader.look(token) is None
            other.rollback()
        assert reader.passed == 1
        await reconnected(reader)  # if the client gave up first, `keep` connects again
        assert await reader_look(reader, token) == (agent.uuid, False)

    run(pg_cluster, tmp_path, body)


def test_a_look_while_another_holds_the_connection_is_the_writers(pg_cluster: PrivateCluster,
                                                                   tmp_path: Path) -> None:
    async def body(store: Store, reader: PgWaitReader) -> None:
        agent = roster.add_agent(store, "a", "codex", None)
        token = roster.create_session(store, agent.id)
        found: list[tuple[str, Any] | None] = []

        async def one() -> None:
            found.append(await reader_look(reader, token))

        async with anyio.create_task_group() as tg:
            tg.start_soon(one)
            tg.start_soon(one)
        assert sorted(found, key=repr) == sorted([(agent.uuid, False), None], key=repr)
        assert (reader.answered, reader.passed) == (1, 1)

    run(pg_cluster, tmp_path, body)


def test_a_reader_without_a_connection_leaves_every_look_to_the_writer(pg_cluster: PrivateCluster,
                                                                        tmp_path: Path) -> None:
    """Not kept (no connection yet, or the app stopping); the embedded store has no reader."""
    backend = Backend("postgresql", tmp_path, pg_cluster)
    store = backend.open()
    assert isinstance(store.backend, PostgresBackend)
    token = roster.create_session(store, roster.add_agent(store, "a", "codex", None).id)
    try:
        assert anyio.run(pg(store).wait_reader().look, token) is None
        assert pg(store).wait_reader() is pg(store).wait_reader()
    finally:
        backend.close_all()
    sqlite = open_sqlite(tmp_path / "wardian.db")
    try:
        assert sqlite.backend.wait_reader() is None
    finally:
        sqlite.close()


def test_an_app_waits_through_its_reader_and_survives_its_loss(pg_cluster: PrivateCluster) -> None:
    """The app keeps one reader connection (`wardian wait`); its waits answer as before while it is terminated and
    replaced, and a revoked session is refused."""
    store_url = pg_cluster.database()
    with app_on_a_fresh_home(store_url=store_url) as app, psycopg.connect(store_url, autocommit=True) as admin:
        def readers() -> list[int]:
            return [r[0] for r in admin.execute(
                "SELECT pid FROM pg_stat_activity WHERE application_name = 'wardian wait' AND datname = "
                "current_database()").fetchall()]

        _, lead_token = app.add_agent()
        worker, token = app.add_agent()
        empty = {"woke": False, "timed_out": True, "wake_reason": None}
        assert app.call("mailbox/wait", {"session": token, "timeout_ms": 0}) == empty
        first = readers()
        assert len(first) == 1
        app.call("message/send", {"session": lead_token, "target": worker["uuid"], "message": "hi"})
        woke = {"woke": True, "timed_out": False, "wake_reason": "mailbox_activity"}
        assert app.call("mailbox/wait", {"session": token, "timeout_ms": 0}) == woke
        admin.execute("SELECT pg_terminate_backend(%s)", (first[0],))
        for _ in range(3):
            assert app.call("mailbox/wait", {"session": token, "timeout_ms": 0}) == woke
        for _ in range(500):
            if readers() and readers() != first:
                break
            time.sleep(0.02)
        assert len(readers()) == 1
        assert readers() != first
        assert app.call("mailbox/wait", {"session": lead_token, "timeout_ms": 0}) == empty
        app.call("agent/revoke", {"agent": worker["uuid"]})
        with pytest.raises(errors.UnknownSession):
            app.call("mailbox/wait", {"session": token, "timeout_ms": 0})
