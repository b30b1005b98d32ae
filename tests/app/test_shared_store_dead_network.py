"""An app whose shared store's network dies silently, then comes back (H7, docs/guide/several-machines.md, "When the
network dies"). A real `wardian app run` serving host alpha reaches PostgreSQL through a link that can drop every packet
(`wardian_harness.hosts.netns.DeadLink`: a veth pair into a network namespace, a blackhole qdisc on both ends); the app
of host beta reaches the same database over the server's own socket. While the link is dead alpha's calls fail
`storage_unavailable` (nothing admitted) instead of waiting out TCP's retransmissions; once it is back alpha reconnects
its three connections and serves: a send is admitted, and a wait on alpha is woken by a send on beta (alpha listens
again)."""

from __future__ import annotations

import os
import shutil
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.app.observe import app_waiting, eventually
from tests.conftest import AppHandle, short_home, start_app, stop_app, unavailable
from tests.store.test_pg_dead_network import until_served
from wardian import errors
from wardian.client import AppClient
from wardian.home import Home
from wardian.store.postgres import connection, liveness
from wardian_harness.hosts import netns
from wardian_harness.hosts.postgres import SUPERUSER, PrivateCluster

# A call made while the network is dead may wait for the batch in flight to notice (`DEAD_LINK_S`) and then for one
# attempt to connect (`CONNECT_TIMEOUT_S`) before it is refused. The client waits three times that: a liveness bound,
# not a speed figure; without the bound, the call outlasts it and the client reports `uncertain`.
CALL_LIMIT_S = 3 * (liveness.DEAD_LINK_S + connection.CONNECT_TIMEOUT_S)


class Apps:
    """Apps on homes of their own, stopped and removed at the end."""

    def __init__(self) -> None:
        self.apps: list[AppHandle] = []
        self.roots: list[Path] = []

    def start(self, url: str, host: str) -> AppHandle:
        root = short_home(f"w{host[:2]}")
        self.roots.append(root)
        app = AppHandle(Home(root), start_app(root, store_url=url, host_name=host), AppClient(Home(root)))
        self.apps.append(app)
        return app

    def close(self) -> None:
        for app in self.apps:
            app.client.close()
            stop_app(app.proc)
        for root in self.roots:
            shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def link(pg_cluster: PrivateCluster) -> Iterator[netns.DeadLink]:
    if (why := netns.unavailable()) is not None:
        unavailable(why)
    with netns.DeadLink(os.path.join(pg_cluster.socket_dir, f".s.PGSQL.{pg_cluster.port}")) as made:
        yield made


def test_an_app_cut_off_from_its_store_refuses_calls_then_serves_again(pg_cluster: PrivateCluster,
                                                                        link: netns.DeadLink) -> None:
    direct = pg_cluster.database()
    dbname = direct.split("///", 1)[1].split("?", 1)[0]
    apps = Apps()
    try:
        alpha, beta = apps.start(link.url(dbname, SUPERUSER), "alpha"), apps.start(direct, "beta")
        _, lead = alpha.add_agent("lead")
        _, worker = alpha.add_agent("worker")
        _, far = beta.add_agent("far")
        alpha.call("message/send", {"session": lead, "target": "far", "message": "before"})
        assert alpha.call("mailbox/wait", {"session": worker, "timeout_ms": 0})["woke"] is False

        link.cut()
        with pytest.raises(errors.StorageUnavailable):
            alpha.call("message/send", {"session": lead, "target": "far", "message": "into the void"},
                       timeout_s=CALL_LIMIT_S)
        with pytest.raises(errors.StorageUnavailable):
            alpha.call("mailbox/wait", {"session": worker, "timeout_ms": 0}, timeout_s=CALL_LIMIT_S)

        link.heal()
        sent = until_served(lambda: alpha.call("message/send", {"session": lead, "target": "far", "message": "after"}))
        assert sent["delivery"] == "admitted"
        woke: list[dict[str, Any]] = []
        waiter = threading.Thread(target=lambda: woke.append(
            alpha.call("mailbox/wait", {"session": worker, "timeout_ms": 60_000}, timeout_s=90)))
        waiter.start()
        eventually(lambda: app_waiting(alpha) == 1, what="the wait on alpha subscribed")
        beta.call("message/send", {"session": far, "target": "worker", "message": "wake up"})
        waiter.join(90)
        assert woke
        assert woke[0]["woke"] is True
        page = beta.call("mailbox/receive", {"session": far})
        assert [r["text"] for r in page["records"]] == ["before", "after"]
    finally:
        apps.close()
