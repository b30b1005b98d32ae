"""Several hosts, one store (docs/guide/several-machines.md): two apps (`alpha`, `beta`), each on its own home, serving
one PostgreSQL database of the test process's private server. The contract across hosts is the contract on one: targets,
receipts, claims, replies, sessions and wake-ups; a host is served by one live app; a host that went away shows offline
and its tasks wait for it; a restarted server costs no false receipt."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.app.observe import eventually
from tests.conftest import AppHandle, short_home, start_app, stop_app, wardian_cmd
from tests.console.conftest import ConsoleApp
from wardian import errors
from wardian.client import AppClient
from wardian.home import Home
from wardian_harness.hosts.postgres import PrivateCluster

HOST_LEASE_S = 10  # wardian.app.run.HOST_LEASE_MS


class Hosts:
    """Apps on one shared store, each on a home of its own; stopped and removed at the end."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.apps: dict[str, AppHandle] = {}
        self.roots: list[Path] = []

    def start(self, host: str, root: Path | None = None, extra_args: tuple[str, ...] = ()) -> AppHandle:
        if root is None:
            root = short_home(f"w{host[:2]}")
            self.roots.append(root)
        proc = start_app(root, store_url=self.url, host_name=host, extra_args=extra_args)
        handle = AppHandle(Home(root), proc, AppClient(Home(root)))
        self.apps[host] = handle
        return handle

    def kill9(self, host: str) -> Path:
        handle = self.apps.pop(host)
        handle.proc.send_signal(signal.SIGKILL)
        handle.proc.wait(timeout=10)
        stop_app(handle.proc)
        handle.client.close()
        return handle.home.root

    def close(self) -> None:
        for handle in self.apps.values():
            handle.client.close()
            stop_app(handle.proc)
        for root in self.roots:
            shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def hosts(pg_cluster: PrivateCluster) -> Iterator[Hosts]:
    world = Hosts(pg_cluster.database())
    try:
        yield world
    finally:
        world.close()


def texts_of(page: dict[str, Any]) -> list[str]:
    return [r["text"] for r in page["records"]]


def test_a_task_crosses_hosts_and_its_reply_comes_back(hosts: Hosts) -> None:
    """Admitted by alpha's app, received on beta, replied on beta, read on alpha; the waiter on beta is woken by
    alpha's commit (LISTEN/NOTIFY), and a session minted on one host authenticates on the other."""
    alpha, beta = hosts.start("alpha"), hosts.start("beta")
    _, lead_token = alpha.add_agent("lead")
    worker, worker_token = beta.add_agent("worker")
    listed = alpha.call("agent/list")
    assert {a["name"]: a["host"] for a in listed["agents"]} == {"lead": "alpha", "worker": "beta"}
    assert {h: v["live"] for h, v in listed["hosts"].items()} == {"alpha": True, "beta": True}

    woke: list[dict[str, Any]] = []
    waiter = threading.Thread(target=lambda: woke.append(
        beta.call("mailbox/wait", {"session": worker_token, "timeout_ms": 30_000}, timeout_s=60)))
    waiter.start()
    time.sleep(0.5)  # the wait is armed (a wait that starts later answers at once anyway)
    sent = alpha.call("task/followup", {"session": lead_token, "target": "worker", "message": "do X"})
    waiter.join(60)
    assert woke
    assert woke[0]["woke"] is True
    assert woke[0]["wake_reason"] == "mailbox_activity"
    assert sent["delivery"] == "admitted"
    assert sent["target"]["uuid"] == worker["uuid"]

    page = beta.call("mailbox/receive", {"session": worker_token})
    assert [(r["kind"], r["text"], r["new_work"]) for r in page["records"]] == [("task", "do X", True)]
    again = alpha.call("mailbox/receive", {"session": worker_token})  # the same session, on the other host
    assert [r["new_work"] for r in again["records"]] == [False]  # already claimed: exposed once
    beta.call("task/reply", {"session": worker_token, "request_id": sent["request_id"], "status": "done",
                             "message": "X done"})
    back = alpha.call("mailbox/receive", {"session": lead_token})
    assert [(r["kind"], r["text"], r["sender"]["uuid"]) for r in back["records"]] == [
        ("reply", "X done", worker["uuid"])]
    with pytest.raises(errors.WardianError) as twice:
        alpha.call("task/reply", {"session": worker_token, "request_id": sent["request_id"], "status": "done",
                                  "message": "again"})
    assert twice.value.code == "already_completed"
    story = alpha.call("request/show", {"id": sent["request_id"]})
    assert story["task"]["facts"]["claimed_by"] == "receive"


def test_information_to_a_host_crosses_and_an_agent_is_started_only_by_its_host(hosts: Hosts) -> None:
    alpha, beta = hosts.start("alpha"), hosts.start("beta")
    _, lead_token = alpha.add_agent("lead")
    _, worker_token = beta.add_agent("worker")
    alpha.call("message/send", {"session": lead_token, "target": "worker", "message": "fyi"})
    assert texts_of(beta.call("mailbox/receive", {"session": worker_token})) == ["fyi"]
    with pytest.raises(errors.WardianError) as foreign:
        alpha.call("agent/start", {"agent": "worker"})
    assert foreign.value.code == "unsupported"
    assert "beta" in foreign.value.message


def test_a_host_name_is_served_by_one_live_app(hosts: Hosts) -> None:
    """A second app for a live host from another home is refused (`already_running`); the same home may take its
    host back at once after a kill -9 (its lease has not expired, but it is the same place)."""
    alpha = hosts.start("alpha")
    intruder = short_home("wint")
    hosts.roots.append(intruder)
    r = subprocess.run([*wardian_cmd(), "app", "start", "--store", hosts.url, "--host-name", "alpha"],
                       env={**{k: v for k, v in os.environ.items() if not k.startswith("WARDIAN_")},
                            "WARDIAN_HOME": str(intruder)}, capture_output=True, text=True, timeout=120)
    assert r.returncode != 0
    assert "already_running" in r.stderr
    assert "alpha" in r.stderr
    root = hosts.kill9("alpha")
    back = hosts.start("alpha", root)
    assert back.call("agent/list")["hosts"]["alpha"]["live"] is True
    assert alpha.pid != back.pid


def test_a_killed_host_goes_offline_and_its_tasks_wait_for_it(hosts: Hosts) -> None:
    """Host beta killed: once its lease lapsed its agents show offline (status off, HOST column marks it) on alpha;
    tasks for them are admitted and stay pending; beta back → they are exposed once."""
    alpha, beta = hosts.start("alpha"), hosts.start("beta")
    _, lead_token = alpha.add_agent("lead")
    worker, worker_token = beta.add_agent("worker")
    beta_root = hosts.kill9("beta")
    listed = eventually(lambda: (r := alpha.call("agent/list"))["hosts"]["beta"]["live"] is False and r,
                        timeout_s=HOST_LEASE_S + 10, what="beta offline")
    assert {a["name"]: a["status"] for a in listed["agents"]}["worker"] == "off"
    table = alpha.cli("agent", "list").stdout.decode()
    assert "beta (offline)" in table
    assert "alpha (offline)" not in table

    sent = [alpha.call("task/followup", {"session": lead_token, "target": "worker", "message": f"t{i}"})
            for i in range(3)]
    assert {s["delivery"] for s in sent} == {"admitted"}
    for s in sent:
        assert alpha.call("request/show", {"id": s["request_id"]})["task"]["facts"]["state"] == "pending"

    beta = hosts.start("beta", beta_root)
    assert beta.call("agent/list")["hosts"]["beta"]["live"] is True
    page = beta.call("mailbox/receive", {"session": worker_token})
    assert [(r["text"], r["new_work"]) for r in page["records"]] == [("t0", True), ("t1", True), ("t2", True)]
    again = alpha.call("mailbox/receive", {"session": worker_token})
    assert [r["new_work"] for r in again["records"]] == [False, False, False]
    assert worker["host"] == "beta"


def test_the_console_shows_each_agents_host_and_acts_only_on_its_own(hosts: Hosts) -> None:
    """The agents page of alpha's console: a host column; beta's agent has no start/stop there (only beta's app can),
    and once beta is gone it shows offline."""
    alpha = hosts.start("alpha", extra_args=("--console", "127.0.0.1:0"))
    beta = hosts.start("beta")
    alpha.add_agent("lead")
    beta.add_agent("worker")
    console = ConsoleApp(alpha)
    cookie = console.login_cookie()

    def rows() -> dict[str, str]:
        status, _, body = console.http("GET", "/agents", {"Cookie": cookie})
        assert status == 200
        named = (re.search(r'data-name="([^"]+)"', row) for row in body.decode().split("<tr")[1:])
        return {m[1]: m.string for m in named if m is not None}

    shown = rows()
    assert ">alpha<" in shown["lead"]
    assert 'action="/act/start"' in shown["lead"]
    assert ">beta" in shown["worker"]
    assert "on beta" in shown["worker"]
    assert 'action="/act/start"' not in shown["worker"]
    hosts.kill9("beta")
    offline = eventually(lambda: "offline" in (r := rows())["worker"] and r, timeout_s=HOST_LEASE_S + 10,
                         what="beta offline on the console")
    assert "offline" not in offline["lead"]


def test_claims_raced_from_two_hosts_are_won_once(hosts: Hosts) -> None:
    """The same agent's session receiving on both hosts at once: every task is exposed as new work exactly once."""
    alpha, beta = hosts.start("alpha"), hosts.start("beta")
    _, lead_token = alpha.add_agent("lead")
    _, worker_token = beta.add_agent("worker")
    n = 60
    for i in range(n):
        alpha.call("task/followup", {"session": lead_token, "target": "worker", "message": f"t{i}"})
    exposed: list[str] = []
    lock = threading.Lock()

    def drain(app: AppHandle) -> None:
        cursor = None
        with AppClient(app.home) as client:
            for _ in range(40):  # each reader pages through all of them (unacknowledged), racing the others
                page = client.call("mailbox/receive", {"session": worker_token, "limit": 3, "cursor": cursor})
                with lock:
                    exposed.extend(r["request_id"] for r in page["records"] if r["new_work"])
                if not page["records"]:
                    return
                cursor = page["cursor"]

    threads = [threading.Thread(target=drain, args=(app,)) for app in (alpha, beta, alpha, beta)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert len(exposed) == n
    assert len(set(exposed)) == n


def test_two_apps_starting_at_once_migrate_once(pg_cluster: PrivateCluster) -> None:
    """The schema is created under an advisory lock: two apps starting together on an empty database both come up."""
    world = Hosts(pg_cluster.database())
    try:
        started: dict[str, AppHandle] = {}
        failures: list[BaseException] = []

        def one(host: str) -> None:
            try:
                started[host] = world.start(host)
            except BaseException as exc:  # reported below
                failures.append(exc)

        threads = [threading.Thread(target=one, args=(h,)) for h in ("alpha", "beta")]
        for t in threads:
            t.start()
        for t in threads:
            t.join(180)
        assert not failures
        assert set(started) == {"alpha", "beta"}
        versions = pg_cluster.sql("SELECT count(*) = max(version) FROM wardian_schema",
                                  world.url.split("///", 1)[1].split("?", 1)[0])
        assert versions == "True"  # each version applied once
    finally:
        world.close()


def test_store_migrate_and_a_newer_schema_is_refused(pg_cluster: PrivateCluster) -> None:
    url = pg_cluster.database()
    env = {k: v for k, v in os.environ.items() if not k.startswith("WARDIAN_")}
    run = lambda *a: subprocess.run([*wardian_cmd(), *a], env=env, capture_output=True, text=True, timeout=120)  # noqa: E731
    first = run("store", "migrate", "--store", url, "--json")
    assert first.returncode == 0, first.stderr
    out = json.loads(first.stdout)
    assert out["from_version"] == 0
    assert out["version"] >= 1
    second = run("store", "migrate", "--store", url)
    assert second.returncode == 0
    assert "nothing to do" in second.stdout
    dbname = url.split("///", 1)[1].split("?", 1)[0]
    pg_cluster.sql(f"INSERT INTO wardian_schema (version, applied_at) VALUES ({out['version'] + 1}, 0)", dbname)
    newer = run("store", "migrate", "--store", url)
    assert newer.returncode == 6
    assert "newer than this wardian" in newer.stderr
    home = short_home("wnew")
    try:
        started = subprocess.run([*wardian_cmd(), "app", "start", "--store", url, "--host-name", "alpha"],
                                 env={**env, "WARDIAN_HOME": str(home)}, capture_output=True, text=True, timeout=120)
        assert started.returncode == 6
        assert "newer than this wardian" in started.stderr
    finally:
        shutil.rmtree(home, ignore_errors=True)
    missing = run("store", "migrate")
    assert missing.returncode == 2
    assert "--store" in missing.stderr


@pytest.mark.parametrize("url", [
    "postgresql://wardian:s3cret-pw@127.0.0.1/db",
    "postgresql://127.0.0.1/db?password=s3cret-pw",
    "postgresql://127.0.0.1/db?sslpassword=s3cret-pw",
])
def test_a_url_with_a_password_is_refused_and_never_echoed(url: str) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("WARDIAN_")}
    home = short_home("wpw")
    try:
        for argv in (["app", "start", "--store", url], ["store", "migrate", "--store", url]):
            r = subprocess.run([*wardian_cmd(), *argv], env={**env, "WARDIAN_HOME": str(home)}, capture_output=True,
                               text=True, timeout=60)
            assert r.returncode == 2, r.stderr
            assert "invalid_arguments" in r.stderr
            assert "password" in r.stderr
            assert "s3cret-pw" not in r.stderr + r.stdout
        assert not (home / "store.url").exists()
    finally:
        shutil.rmtree(home, ignore_errors=True)


def test_tls_verify_full_and_a_plain_connection_is_refused_clearly() -> None:
    """The app reaches a TLS-only server with sslmode=verify-full against the cluster's own CA (password from
    PGPASSFILE, never in the URL); without TLS the server's refusal is reported as storage_unavailable, naming it."""
    with PrivateCluster(tls=True) as cluster:
        dbname = cluster.database().split("///", 1)[1].split("?", 1)[0]
        env_pass = {"PGPASSFILE": str(cluster.passfile)}
        world = Hosts(cluster.tcp_url(dbname))
        saved = {k: os.environ.get(k) for k in env_pass}
        os.environ.update(env_pass)
        try:
            alpha = world.start("alpha")
            _, a_token = alpha.add_agent("a")
            alpha.add_agent("b")
            alpha.call("message/send", {"session": a_token, "target": "b", "message": "over TLS"})
            ssl = cluster.sql("SELECT count(*) FROM pg_stat_ssl s JOIN pg_stat_activity a USING (pid) "
                              "WHERE a.application_name = 'wardian app' AND s.ssl", dbname)
            assert int(ssl) >= 1
            plain = cluster.tcp_url(dbname, sslmode="disable")
            home = short_home("wpl")
            world.roots.append(home)
            r = subprocess.run([*wardian_cmd(), "app", "start", "--store", plain, "--host-name", "beta"],
                               env={**{k: v for k, v in os.environ.items() if not k.startswith("WARDIAN_")},
                                    "WARDIAN_HOME": str(home)}, capture_output=True, text=True, timeout=120)
            assert r.returncode == 6, r.stderr
            assert "storage_unavailable" in r.stderr
            assert "cannot connect to the shared store" in r.stderr
            assert "no encryption" in r.stderr  # the server's pg_hba rule for non-TLS TCP, as the server says it
            assert cluster.password not in r.stderr
        finally:
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
            world.close()


def test_a_restarted_server_costs_no_false_receipt_and_the_apps_keep_serving() -> None:
    """PostgreSQL crashed (immediate stop) and restarted under a send load on two hosts: every receipt's record is
    there exactly once; a send refused as storage_unavailable left nothing; an uncertain one is reported as such (exit
    5 on the CLI, `delivery: "uncertain"`), never as a receipt. Afterwards both apps serve again and a wait on beta
    is woken by a send on alpha (the notification stream came back, and durable state was re-read)."""
    with PrivateCluster() as cluster:
        world = Hosts(cluster.database())
        try:
            alpha, beta = world.start("alpha"), world.start("beta")
            _, a_token = alpha.add_agent("a")
            _, b_token = beta.add_agent("b")
            outcomes: dict[str, str] = {}
            lock = threading.Lock()
            stop = threading.Event()

            def sender(app: AppHandle, prefix: str) -> None:
                i = 0
                with AppClient(app.home) as client:
                    while not stop.is_set():
                        text = f"{prefix}-{i}"
                        i += 1
                        try:
                            r = client.call("message/send", {"session": a_token, "target": "b", "message": text},
                                            timeout_s=60)
                            outcome = "receipt" if r["delivery"] in ("admitted", "provider_visible") else r["delivery"]
                        except errors.WardianError as exc:
                            outcome = exc.code
                        with lock:
                            outcomes[text] = outcome

            threads = [threading.Thread(target=sender, args=(app, f"{app.home.root.name}{k}"))
                       for app in (alpha, beta) for k in range(2)]
            for t in threads:
                t.start()
            eventually(lambda: len(outcomes) > 40, what="sends before the crash")
            cluster.crash()
            time.sleep(1.0)
            cluster.start()
            with lock:
                before = len(outcomes)

            def receipts_after_restart(app: AppHandle) -> int:
                name = app.home.root.name
                with lock:  # the senders add to `outcomes` as this reads it
                    after = list(outcomes.items())[before:]
                return sum(1 for t, o in after if o == "receipt" and t.startswith(name))

            # Each app's own: one app's writer may still wait out its reconnect backoff (up to 5 s) while the other's
            # senders already make receipts, and the reads below go to both.
            eventually(lambda: receipts_after_restart(alpha) > 20 and receipts_after_restart(beta) > 20,
                       timeout_s=60, what="receipts on both hosts after the restart")
            stop.set()
            for t in threads:
                t.join(60)

            stored: dict[str, int] = {}
            for r in alpha.call("mailbox/records", {"limit": 100_000})["records"]:
                stored[r["text"]] = stored.get(r["text"], 0) + 1
            assert all(n == 1 for n in stored.values())
            kinds = set(outcomes.values())
            assert kinds <= {"receipt", "uncertain", "storage_unavailable"}, kinds
            lost = [t for t, o in outcomes.items() if o == "receipt" and t not in stored]
            phantom = [t for t, o in outcomes.items() if o == "storage_unavailable" and t in stored]
            assert lost == []
            assert phantom == []
            assert "storage_unavailable" in kinds or "uncertain" in kinds  # the crash was felt

            woke: list[dict[str, Any]] = []
            beta.call("mailbox/receive", {"session": b_token, "limit": None})
            waiter = threading.Thread(target=lambda: woke.append(
                beta.call("mailbox/wait", {"session": b_token, "timeout_ms": 30_000}, timeout_s=60)))
            waiter.start()
            time.sleep(0.5)
            alpha.call("message/send", {"session": a_token, "target": "b", "message": "after"})
            waiter.join(60)
            assert woke
            assert woke[0]["woke"] is True
        finally:
            world.close()
