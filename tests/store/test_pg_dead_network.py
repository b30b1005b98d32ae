"""A shared store whose network dies silently, or whose server stops answering (H7, docs/guide/several-machines.md,
"When the network dies"): each connection notices within its bound instead of waiting for TCP's retransmissions to
give up (about 15 minutes). A statement in flight fails `storage_unavailable` (nothing was admitted), a COMMIT in
flight `uncertain` (never a receipt), a wait's look is left to the writer and its connection replaced, and once the
network is back the store reconnects and serves.

The network is real: the store reaches the private server over TCP through a veth pair into a network namespace, where a
blackhole qdisc drops every packet (`wardian_harness.hosts.netns.DeadLink`). The limits asserted are liveness bounds, a
few times the figure each connection promises (`wardian.store.postgres.liveness`), never speed figures: what fails here
without the bound is a call that waits for minutes."""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from typing import TypeVar

import anyio
import pytest

from tests.conftest import unavailable
from tests.store.conftest import pg
from tests.store.test_pg_wait_reader import kept
from wardian import errors
from wardian.model import Caller, InteractionKind, Receipt
from wardian.store import Store, mailbox, roster
from wardian.store import testing as store_testing
from wardian.store.postgres import PostgresBackend, connection, liveness, open_postgres, wait_reader
from wardian_harness.hosts import netns
from wardian_harness.hosts.postgres import SUPERUSER, PrivateCluster

T = TypeVar("T")
DEAD_LINK_LIMIT_S = 3 * liveness.DEAD_LINK_S
LOOK_LIMIT_S = 3 * wait_reader.LOOK_CUT_S
STALL_LIMIT_S = 1.0  # the writer's watchdog, made short for these tests
RECOVERY_S = 60.0  # a reconnection after the network is back: a deadline to poll against, not a figure


class Link:
    """A store on a database of the private server, reached through a link that can be cut; `direct` is the same
    database over the server's own socket."""

    def __init__(self, cluster: PrivateCluster, link: netns.DeadLink) -> None:
        self.link = link
        self.direct = cluster.database()
        dbname = self.direct.split("///", 1)[1].split("?", 1)[0]
        self.store = open_postgres(link.url(dbname, SUPERUSER))


@pytest.fixture
def through(pg_cluster: PrivateCluster) -> Iterator[Link]:
    if (why := netns.unavailable()) is not None:
        unavailable(why)
    with netns.DeadLink(os.path.join(pg_cluster.socket_dir, f".s.PGSQL.{pg_cluster.port}")) as link:
        made = Link(pg_cluster, link)
        try:
            yield made
        finally:
            link.heal()  # so a call left hanging by a failure ends, and the store closes
            made.store.close()


def within(limit_s: float, call: Callable[[], T]) -> T:
    """`call()`'s value or error, failing the test when it is still waiting after `limit_s` (it is left running, on a
    daemon thread: this is the failure being reported)."""
    outcome: list[tuple[T | None, BaseException | None]] = []

    def run() -> None:
        try:
            outcome.append((call(), None))
        except BaseException as exc:  # handed to the test's thread
            outcome.append((None, exc))

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(limit_s)
    if not outcome:
        pytest.fail(f"still waiting for the server after {limit_s:g} s")
    value, error = outcome[0]
    if error is not None:
        raise error
    return value  # type: ignore[return-value]  # set when no error was


def until_served(call: Callable[[], T]) -> T:
    """`call()` once the store reconnected: `storage_unavailable` (nothing admitted, so a retry is safe) until then."""
    deadline = time.monotonic() + RECOVERY_S
    while True:
        try:
            return call()
        except errors.StorageUnavailable:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def caller(store: Store, name: str) -> Caller:
    return roster.authenticate(store, roster.create_session(store, roster.add_agent(store, name, "codex", None).id))


def stored(url: str, text: str) -> int:
    store = open_postgres(url)
    try:
        return int(store_testing.execute(store, "SELECT count(*) FROM interactions WHERE body = ?", (text,))[0][0])
    finally:
        store.close()


def test_a_statement_into_a_dead_network_is_unavailable_within_the_bound_and_the_store_reconnects(
        through: Link, monkeypatch: pytest.MonkeyPatch) -> None:
    """Then each attempt to connect fails after `CONNECT_TIMEOUT_S`, and the calls right after a failed one are refused
    at once (the backoff runs from the failure): the writer is not held by one attempt after another."""
    store = through.store
    a, b = caller(store, "a"), caller(store, "b")
    monkeypatch.setattr(pg(store).link, "_backoff", 5.0)  # the first pause, long enough on a loaded machine
    through.link.cut()
    def send(text: str) -> Receipt:
        return mailbox.admit(store, a, b.agent, InteractionKind.INFORMATION, text)

    with pytest.raises(errors.StorageUnavailable):
        within(DEAD_LINK_LIMIT_S, lambda: send("into the void"))
    with pytest.raises(errors.StorageUnavailable):
        within(3 * connection.CONNECT_TIMEOUT_S, lambda: send("again"))
    with pytest.raises(errors.StorageUnavailable):
        within(connection.CONNECT_TIMEOUT_S / 2, lambda: send("again"))
    through.link.heal()
    receipt = until_served(lambda: mailbox.admit(store, a, b.agent, InteractionKind.INFORMATION, "after"))
    assert receipt.recipient.uuid == b.agent.uuid
    assert stored(through.direct, "into the void") == 0
    assert stored(through.direct, "after") == 1


def test_a_commit_into_a_dead_network_is_uncertain_within_the_bound(through: Link) -> None:
    """The COMMIT left and its answer never came: it may or may not have committed (here its packets were dropped, so
    it did not), and the caller is told exactly that, never given a receipt."""
    store = through.store
    a, b = caller(store, "a"), caller(store, "b")

    def commit_into_the_void() -> None:
        with store.atomic():
            mailbox.admit(store, a, b.agent, InteractionKind.INFORMATION, "lost commit")
            through.link.cut()

    with pytest.raises(errors.DeliveryUncertain):
        within(DEAD_LINK_LIMIT_S, commit_into_the_void)
    through.link.heal()
    until_served(lambda: mailbox.admit(store, a, b.agent, InteractionKind.INFORMATION, "after"))
    assert stored(through.direct, "lost commit") == 0
    assert stored(through.direct, "after") == 1


def test_a_look_into_a_dead_network_is_left_to_the_writer_and_its_connection_replaced(through: Link) -> None:
    store = through.store
    agent = roster.add_agent(store, "a", "codex", None)
    token = roster.create_session(store, agent.id)

    async def body() -> None:
        async with kept(store) as reader:
            assert await reader.look(token) is not None
            first = reader.backend_pid
            through.link.cut()
            with anyio.fail_after(LOOK_LIMIT_S):
                assert await reader.look(token) is None  # this wait is the writer's
            assert reader.backend_pid is None  # dropped: `keep` connects again, in vain while the network is dead
            through.link.heal()
            for _ in range(int(RECOVERY_S / 0.05)):  # `keep` connects again once the network is back
                if reader.backend_pid is not None:
                    break
                await anyio.sleep(0.05)
            assert reader.backend_pid not in (None, first)
            assert await reader.look(token) is not None
            assert (reader.answered, reader.passed) == (2, 1)

    anyio.run(body)


@pytest.fixture
def stopped_server(pg_cluster: PrivateCluster, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Store, str]]:
    """A store whose writer's watchdog allows `STALL_LIMIT_S`, over the server's own socket."""
    monkeypatch.setattr(liveness, "STALL_LIMIT_S", STALL_LIMIT_S)
    url = pg_cluster.database()
    store = open_postgres(url)
    try:
        yield store, url
    finally:
        store.close()


def stop_backend(store: Store) -> int:
    """SIGSTOP the server process of the store's connection: its kernel still acknowledges every packet and answers
    every keepalive, so only a bound on the call itself notices that nothing answers."""
    (pid,) = pg(store).link.backend_pids
    os.kill(pid, signal.SIGSTOP)
    return pid


def test_a_server_that_never_answers_cannot_hold_the_writer(stopped_server: tuple[Store, str]) -> None:
    store, url = stopped_server
    assert isinstance(store.backend, PostgresBackend)
    a, b = caller(store, "a"), caller(store, "b")
    pid = stop_backend(store)
    try:
        results = within(10 * STALL_LIMIT_S, lambda: store.run_batch(
            [(mailbox.admit, (a, b.agent, InteractionKind.INFORMATION, "unanswered"))]))
    finally:
        os.kill(pid, signal.SIGCONT)
    assert isinstance(results[0].error, errors.StorageUnavailable)
    receipt = until_served(lambda: mailbox.admit(store, a, b.agent, InteractionKind.INFORMATION, "after"))
    assert receipt.recipient.uuid == b.agent.uuid
    assert len(pg(store).link.backend_pids) == 2  # on a new connection
    assert stored(url, "unanswered") == 0


def test_a_commit_the_server_never_answers_is_uncertain_and_may_have_committed(
        stopped_server: tuple[Store, str]) -> None:
    """The COMMIT reached the stopped server's socket; the watchdog ends the connection, and the caller hears
    `uncertain`. When the server runs again it reads that COMMIT and commits: uncertain was the truth, a receipt or a
    refusal would not have been."""
    store, url = stopped_server
    assert isinstance(store.backend, PostgresBackend)
    a, b = caller(store, "a"), caller(store, "b")
    stopped: list[int] = []

    def commit_unanswered() -> None:
        with store.atomic():
            mailbox.admit(store, a, b.agent, InteractionKind.INFORMATION, "committed unanswered")
            stopped.append(stop_backend(store))

    try:
        with pytest.raises(errors.DeliveryUncertain):
            within(10 * STALL_LIMIT_S, commit_unanswered)
    finally:
        for pid in stopped:
            os.kill(pid, signal.SIGCONT)
    deadline = time.monotonic() + RECOVERY_S
    while stored(url, "committed unanswered") == 0 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert stored(url, "committed unanswered") == 1


def in_use(store: Store) -> dict[str, str]:
    """The connection options libpq uses for the store's writer connection (PQconninfo)."""
    options = pg(store).link.conn.pgconn.info
    return {o.keyword.decode(): (o.val or b"").decode() for o in options}


def test_every_connection_carries_the_liveness_settings_and_a_url_keeps_its_own(pg_cluster: PrivateCluster) -> None:
    """wardian adds libpq's keepalive and `tcp_user_timeout` settings where the URL names none of its own; the URL's
    own values win (docs/guide/several-machines.md)."""
    url = pg_cluster.database()
    store = open_postgres(url)
    mine = open_postgres(url + "&keepalives_idle=30&tcp_user_timeout=0")
    try:
        assert {k: in_use(store)[k] for k in liveness.TCP_LIVENESS} == liveness.TCP_LIVENESS
        assert {k: in_use(mine)[k] for k in liveness.TCP_LIVENESS} == {
            **liveness.TCP_LIVENESS, "keepalives_idle": "30", "tcp_user_timeout": "0"}
    finally:
        store.close()
        mine.close()
