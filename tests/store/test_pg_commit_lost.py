"""A COMMIT whose answer is lost (H4, H5): on the shared store, a write whose COMMIT reached the server but whose answer
never came back is `uncertain` (it may be committed: here it is), never a receipt and never retried; a connection
lost just before its COMMIT is uncertain too (here nothing was committed). The store reconnects and serves on. The
fault comes from `pg_fault_proxy.CommitCutter`, a relay on PostgreSQL's wire protocol in front of the real server."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from typing import Literal

import pytest

from tests.conftest import AppHandle, short_home, start_app, stop_app, wardian_cmd
from tests.store.pg_fault_proxy import CommitCutter
from wardian import errors
from wardian.client import AppClient
from wardian.home import Home
from wardian.model import Caller, InteractionKind
from wardian.store import Store, mailbox, roster
from wardian.store import testing as store_testing
from wardian_harness.hosts.postgres import SUPERUSER, PrivateCluster


@pytest.fixture
def cut(pg_cluster: PrivateCluster) -> Iterator[tuple[CommitCutter, str, str]]:
    """The proxy, a fresh database's URL through it, and the same database's direct URL."""
    direct = pg_cluster.database()
    dbname = direct.split("///", 1)[1].split("?", 1)[0]
    proxy = CommitCutter(os.path.join(pg_cluster.socket_dir, f".s.PGSQL.{pg_cluster.port}"))
    try:
        yield proxy, proxy.url(dbname, SUPERUSER), direct
    finally:
        proxy.close()
        shutil.rmtree(proxy.dir, ignore_errors=True)


def _caller(store: Store, name: str) -> Caller:
    agent = roster.add_agent(store, name, "codex", None)
    return roster.authenticate(store, roster.create_session(store, agent.id))


def _stored(url: str, text: str) -> int:
    from wardian.store.postgres import open_postgres

    store = open_postgres(url)
    try:
        return int(store_testing.execute(store, "SELECT count(*) FROM interactions WHERE body = ?", (text,))[0][0])
    finally:
        store.close()


@pytest.mark.parametrize(("mode", "committed"), [("after", 1), ("before", 0)])
def test_a_lost_commit_answer_is_uncertain_and_the_store_serves_on(
        cut: tuple[CommitCutter, str, str], mode: Literal["after", "before"], committed: int) -> None:
    from wardian.store.postgres import open_postgres

    proxy, through, direct = cut
    store = open_postgres(through)
    try:
        a, b = _caller(store, "a"), _caller(store, "b")
        probe = f"probe-{mode}"
        proxy.arm(probe, mode)
        with pytest.raises(errors.DeliveryUncertain) as lost:
            mailbox.admit(store, a, b.agent, InteractionKind.INFORMATION, probe)
        assert proxy.fired.is_set()
        assert "not retried" in lost.value.message
        assert _stored(direct, probe) == committed  # what the server did; the caller was told it cannot know
        receipt = mailbox.admit(store, a, b.agent, InteractionKind.INFORMATION, "after the fault")  # reconnected
        assert _stored(direct, "after the fault") == 1
        assert receipt.recipient.uuid == b.agent.uuid
    finally:
        store.close()


def test_the_cli_exits_5_and_never_resends(cut: tuple[CommitCutter, str, str]) -> None:
    """Through the app: `message send` whose COMMIT answer was lost exits 5 (`uncertain`, "do not resend"); the
    record is there exactly once (nobody retried it); the app reconnects and the next send gets its receipt."""
    proxy, through, direct = cut
    root = short_home("wcut")
    proc = start_app(root, store_url=through, host_name="alpha")
    app = AppHandle(Home(root), proc, AppClient(Home(root)))
    try:
        app.add_agent("b")
        _, a_token = app.add_agent("a")
        proxy.arm("probe-cli", "after")
        r = subprocess.run([*wardian_cmd(), "message", "send", "--to", "b", "probe-cli"], env=app.env(a_token),
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 5, r.stderr
        assert "uncertain" in r.stderr
        assert proxy.fired.is_set()
        ok = subprocess.run([*wardian_cmd(), "message", "send", "--to", "b", "next"], env=app.env(a_token),
                            capture_output=True, text=True, timeout=60)
        assert ok.returncode == 0, ok.stderr
        assert _stored(direct, "probe-cli") == 1
        assert _stored(direct, "next") == 1
    finally:
        app.client.close()
        stop_app(app.proc)
        shutil.rmtree(root, ignore_errors=True)


def test_a_stalled_writer_cannot_hold_the_store(pg_cluster: PrivateCluster) -> None:
    """An app stalled inside a write transaction (stopped, partitioned) holds the append lock every host needs; the
    server ends its session once it idled IDLE_IN_TRANSACTION_MS inside it, so the others go on, and the stalled
    one's COMMIT, when it comes, is uncertain (here: nothing of it was committed)."""
    from wardian.store.postgres import open_postgres

    url = pg_cluster.database()
    stalled, other = open_postgres(url), open_postgres(url)
    try:
        a, b = _caller(stalled, "a"), _caller(stalled, "b")
        a_elsewhere = roster.authenticate(other, roster.create_session(other, a.agent.id))

        def stall() -> None:
            with stalled.atomic():
                # The first holds the append lock and idles; the second waits for it, then gets it.
                mailbox.admit(stalled, a, b.agent, InteractionKind.INFORMATION, "stalled")
                mailbox.admit(other, a_elsewhere, b.agent, InteractionKind.INFORMATION, "goes on")

        with pytest.raises(errors.DeliveryUncertain):
            stall()
        assert _stored(url, "goes on") == 1
        assert _stored(url, "stalled") == 0
        mailbox.admit(stalled, a, b.agent, InteractionKind.INFORMATION, "back")  # the stalled store reconnects
        assert _stored(url, "back") == 1
    finally:
        stalled.close()
        other.close()
