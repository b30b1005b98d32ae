"""send -> waiting recipient wakes: from just before the send is written to the waiter's answer, with 1 waiter,
100 waiters (one per recipient) of whom the send wakes one, 100 waits on one recipient, and (`--store postgresql`)
side by side on SQLite, one PostgreSQL app and two apps of one database."""

from __future__ import annotations

import selectors
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from benchmarks.apps import RunningApp, add_agents, drain_mailbox, fresh_app
from benchmarks.clients import RawConn, frame
from benchmarks.config import TEXT, Config
from benchmarks.figures import emit, latency_fields, median_pct
from wardian.client import AppClient

if TYPE_CHECKING:
    from wardian_harness.hosts.postgres import PrivateCluster

Agents = list[tuple[dict[str, Any], str]]


def _arm_wait(conn: RawConn, token: str) -> None:
    conn.send(frame("mailbox/wait", {"session": token, "timeout_ms": 60_000}))


def _blocked_settle() -> None:
    # The app has no observable "waiter registered" signal, so give it time to authenticate, look at durable
    # state and block; a wait that raced a record would only return early (measuring less, never more).
    time.sleep(0.003)


@dataclass
class _Sender:
    """The sending side of a one-app wake run: its connection, its session and the selector of the waits."""

    sel: selectors.BaseSelector
    conn: RawConn
    token: str

    def wake(self, waiters: list[RawConn], target_uuid: str) -> float:
        return _one_wake(self.sel, self.conn, self.token, waiters, target_uuid)


def bench_wake(cfg: Config) -> None:
    """send -> waiting recipient wakes: from just before the send is written to the waiter's answer."""
    with fresh_app() as app, AppClient(app.home) as client:
        (_, sender_token), = add_agents(client, "snd", 1)
        recipients = add_agents(client, "rcv", 100)
        sender = _Sender(selectors.DefaultSelector(), RawConn(app.socket_path), sender_token)
        # 1 waiter, and 100 waiters (one per recipient) of whom the send wakes one.
        for metric, n_waiters in (("wake_1_waiter", 1), ("wake_100_waiters", 100)):
            _wake_one_of(cfg, app, client, sender, recipients, metric, n_waiters)
        _wake_fan_out(cfg, app, client, sender, recipients[0])
        sender.conn.close()


def _wake_one_of(cfg: Config, app: RunningApp, client: AppClient, sender: _Sender, recipients: Agents, metric: str,
                 n_waiters: int) -> None:
    """`n_waiters` waits, one per recipient; each send wakes the next of them in turn."""
    conns = [RawConn(app.socket_path) for _ in range(n_waiters)]
    for conn, (_, token) in zip(conns, recipients, strict=False):
        _arm_wait(conn, token)
    time.sleep(0.2)
    rounds: list[list[float]] = []
    for _ in range(cfg.rounds):
        samples = []
        for i in range(cfg.wakes):
            k = i % n_waiters
            agent, token = recipients[k]
            _blocked_settle()
            samples.append(sender.wake([conns[k]], agent["uuid"]))
            drain_mailbox(client, token)
            _arm_wait(conns[k], token)
        rounds.append(samples)
    for c in conns:
        c.close()
    emit(metric, **latency_fields(rounds), waiters=n_waiters, unit="ms", target="p99_ms <= 5",
         met=median_pct(rounds, 0.99) <= 5)


def _wake_fan_out(cfg: Config, app: RunningApp, client: AppClient, sender: _Sender,
                  recipient: tuple[dict[str, Any], str]) -> None:
    """Fan-out: 100 waits on one recipient (e.g. several MCP servers of one agent); time to the last."""
    agent, token = recipient
    conns = [RawConn(app.socket_path) for _ in range(100)]
    rounds = []
    for _ in range(cfg.rounds):
        samples = []
        for _ in range(max(10, cfg.wakes // 5)):
            for c in conns:
                _arm_wait(c, token)
            # Every wait subscribed before the send leaves (app/status counts them), so the figure is the wake
            # alone, never a wait still arming behind the send.
            while client.call("app/status")["waiting"] < len(conns):
                time.sleep(0.001)
            samples.append(sender.wake(conns, agent["uuid"]))
            drain_mailbox(client, token)
        rounds.append(samples)
    for c in conns:
        c.close()
    emit("wake_100_waiters_same_recipient", **latency_fields(rounds), waiters=100, unit="ms", target="p99_ms <= 5",
         met=median_pct(rounds, 0.99) <= 5,
         note="time until the last of 100 waits on one recipient answered")


def _one_wake(sel: selectors.BaseSelector, send_conn: RawConn, sender_token: str, waiters: list[RawConn],
              target_uuid: str) -> float:
    """Send one message over `send_conn` and return the time until the last of `waiters` answered."""
    pending = {w.sock.fileno(): w for w in waiters}
    for w in waiters:
        sel.register(w.sock, selectors.EVENT_READ)
    t0 = time.perf_counter()
    send_conn.send(frame("message/send", {"session": sender_token, "target": target_uuid, "message": TEXT}))
    last = t0
    while pending:
        for key, _ in sel.select(timeout=10):
            last = time.perf_counter()
            w = pending.pop(key.fd)
            sel.unregister(w.sock)
            res = w.result()
            if not res["woke"]:
                raise RuntimeError(f"a waiter returned without waking: {res}")
        if not pending:
            break
    send_conn.result()
    return last - t0


@dataclass
class WakeCase:
    """One sender -> one waiting recipient, possibly on two apps (two hosts of one shared store)."""

    metric: str
    tag: dict[str, Any]
    target: float  # p99 ms
    send_conn: RawConn  # on the sender's app
    sender_token: str
    waiter: RawConn  # on the recipient's app
    recipient: tuple[dict[str, Any], str]
    recipient_client: AppClient  # the recipient's app: drains its mailbox, counts its waits
    rounds: list[list[float]]


def _wake_once(sel: selectors.BaseSelector, case: WakeCase) -> float:
    """Arm the case's wait, let it subscribe (the recipient's app/status counts it), then time one wake."""
    agent, token = case.recipient
    _arm_wait(case.waiter, token)
    deadline = time.monotonic() + 10
    while case.recipient_client.call("app/status")["waiting"] < 1:
        if time.monotonic() > deadline:
            raise RuntimeError(f"{case.metric} ({case.tag}): the wait never subscribed (it answered early?)")
        time.sleep(0.0005)
    took = _one_wake(sel, case.send_conn, case.sender_token, [case.waiter], agent["uuid"])
    drain_mailbox(case.recipient_client, token)
    return took


def _wake_rounds(cfg: Config, cases: list[WakeCase]) -> None:
    """Wake each case's waiter `cfg.wakes` times per round, the cases in turn round by round (same load)."""
    sel = selectors.DefaultSelector()
    for case in cases:  # warm-up: statement caches, the listener's first notifications
        for _ in range(20):
            _wake_once(sel, case)
    for _ in range(cfg.rounds):
        for case in cases:
            case.rounds.append([_wake_once(sel, case) for _ in range(cfg.wakes)])
    sel.close()
    for case in cases:
        p99 = median_pct(case.rounds, 0.99)
        emit(case.metric, **latency_fields(case.rounds), waiters=1, unit="ms", target=f"p99_ms <= {case.target:g}",
             met=p99 <= case.target, **case.tag,
             how="message/send written on the sender's connection -> the recipient's mailbox/wait answered "
                 "(woke), the wait subscribed first (app/status), mailbox drained between wakes")


def bench_wake_compare(cfg: Config, cluster: PrivateCluster) -> None:
    """send -> waiting recipient wakes, side by side: the SQLite app (one host), one PostgreSQL app (sender and
    waiter on host alpha) and two PostgreSQL apps on one database (sender on alpha, waiter on beta: the commit's
    NOTIFY wakes the other app's wait)."""
    url = cluster.database()
    with fresh_app() as sq, fresh_app(url, "alpha") as alpha, fresh_app(url, "beta") as beta, \
            AppClient(sq.home) as sq_client, AppClient(alpha.home) as a_client, AppClient(beta.home) as b_client:
        conns: list[RawConn] = []

        def conn(app: RunningApp) -> RawConn:
            conns.append(RawConn(app.socket_path))
            return conns[-1]

        (_, sq_sender), sq_rcv = add_agents(sq_client, "snd", 1)[0], add_agents(sq_client, "rcv", 1)[0]
        (_, a_sender), a_rcv = add_agents(a_client, "snd", 1)[0], add_agents(a_client, "rcv", 1)[0]
        b_rcv = add_agents(b_client, "rcv_beta", 1)[0]
        cases = [
            WakeCase("wake_1_waiter", {"store": "sqlite", "hosts": "same"}, 5, conn(sq), sq_sender, conn(sq), sq_rcv,
                     sq_client, []),
            WakeCase("wake_1_waiter", {"store": "postgresql", "hosts": "same"}, 5, conn(alpha), a_sender,
                     conn(alpha), a_rcv, a_client, []),
            WakeCase("wake_1_waiter_cross_host", {"store": "postgresql", "hosts": "alpha->beta"}, 20, conn(alpha),
                     a_sender, conn(beta), b_rcv, b_client, []),
        ]
        _wake_rounds(cfg, cases)
        for c in conns:
            c.close()
