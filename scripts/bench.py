"""Benchmarks of the messaging core (issue 2, "Done means"): one JSON object per line on stdout.

Usage: `.venv/bin/python scripts/bench.py [--quick] [--only NAME ...] [--store sqlite|postgresql]`

Every figure comes from a real `wardian app run` process on a fresh home under /tmp, started the way the
tests start it (`python -m wardian app run --home DIR --ready-fd N`), talked to over its control socket.
Progress and the import-time report go to stderr; stdout carries only the JSON lines:

    {"metric": ..., "p50_ms"/"p99_ms" or "value", "n": ..., "target": ..., "met": ..., "unit": ...}

Latency metrics repeat in rounds and report the median of the rounds' percentiles with their range, because
the machine is shared and noisy. `--quick` uses small sizes so the whole run fits in CI in well under a
minute; its figures are indicative only.

`--store postgresql` (#15) starts one private PostgreSQL server (`wardian_harness.postgres.PrivateCluster`, Debian's
binaries) and runs the store-bound figures on both backends in the same run, each line tagged `"store": "sqlite"` or
`"postgresql"` (rounds alternate between the backends where both run at once): `roundtrip` (the same two round
trips), `wake` (same-host wakes on each, and `wake_1_waiter_cross_host`: sender on host alpha, waiter on host beta,
two apps of one database), `throughput` (32 senders on the SQLite app vs 16 on each of two PostgreSQL apps, with
each store's one-writer ceiling and `pg_raw_insert_commit_per_s_32_connections`, raw psycopg on the same schema),
and `receive` (1,000,000 records on each; PostgreSQL seeded by INSERT ... SELECT generate_series). Without it
(`sqlite`, the default) the run and its lines are what they always were.

How each client is built, so the figure measures the app rather than the client:
- round trips use `AppClient` (the CLI's and MCP server's client) over one persistent connection;
- wake-ups and the 32 senders use raw non-blocking sockets driven by one epoll loop in this process, with
  request frames encoded once up front: per request the client spends two syscalls and a newline count,
  no threads and no GIL hand-offs, which leaves as much of the 2 cores as possible to the app;
- the cold start spawns the installed `wardian` console script, exactly as a person or an agent would;
- the MCP figures (#3) put `wardian mcp serve` (the console script, as Codex launches it) side by side with
  `scripts/trivial_mcp_server.py`, a one-tool server on the SDK's own stdio transport, in the same run: spawns
  alternate between the two, and round trips alternate call by call over two SDK client sessions on one loop,
  so both meet the same background load (and the same disk, for the durable `send_message`).
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import os
import selectors
import shutil
import signal
import socket
import stat
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from wardian import errors
from wardian.app.service import admit_op
from wardian.app.spawn import start_app
from wardian.client import AppClient
from wardian.home import Home
from wardian.model import InteractionKind, now_ms
from wardian.store import SqliteStore, Store
from wardian.store import testing as store_testing

if TYPE_CHECKING:
    from wardian_harness.postgres import PrivateCluster

TEXT = "benchmark message: " + "x" * 280  # ~300 bytes, the size perf-baselines.md uses per message


def log(msg: str) -> None:
    print(f"[bench] {msg}", file=sys.stderr, flush=True)


def emit(metric: str, **fields: Any) -> None:
    sys.stdout.write(orjson.dumps({"metric": metric, **fields}).decode("utf-8") + "\n")
    sys.stdout.flush()


def pct(samples: list[float], q: float) -> float:
    """The q-quantile (0..1) by nearest rank."""
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, max(0, round(q * len(ordered)) - 1))]


def ms(seconds: float) -> float:
    return round(seconds * 1000, 4)


def latency_fields(rounds: list[list[float]]) -> dict[str, Any]:
    """p50/p99 as the median over rounds, with the [min, max] range of the rounds."""
    p50s = [pct(r, 0.50) for r in rounds]
    p99s = [pct(r, 0.99) for r in rounds]
    out: dict[str, Any] = {"p50_ms": ms(statistics.median(p50s)), "p99_ms": ms(statistics.median(p99s)),
                           "n": sum(len(r) for r in rounds), "rounds": len(rounds)}
    if len(rounds) > 1:
        out["p50_range_ms"] = [ms(min(p50s)), ms(max(p50s))]
        out["p99_range_ms"] = [ms(min(p99s)), ms(max(p99s))]
    return out


# --- the app under test ---------------------------------------------------------------------------------


@dataclass
class RunningApp:
    home: Home
    proc: subprocess.Popen[bytes]

    @property
    def socket_path(self) -> str:
        return str(self.home.socket_path)

    def cpu_seconds(self) -> float:
        """User + system CPU time the app process has used so far (Linux /proc)."""
        fields = Path(f"/proc/{self.proc.pid}/stat").read_text(encoding="utf-8").rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def new_home() -> Path:
    # Short and under /tmp: a Unix socket path must fit in 108 bytes.
    return Path(tempfile.mkdtemp(prefix="wbench", dir="/tmp"))


@contextlib.contextmanager
def running_app(root: Path, extra_env: dict[str, str] | None = None,
                extra_args: tuple[str, ...] = ()) -> Iterator[RunningApp]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("WARDIAN_")}
    env.update(extra_env or {})
    with open(root / "bench-app.stderr", "wb") as err:
        try:
            proc = start_app(root, env=env, stderr=err, timeout_s=60, extra_args=extra_args)
        except errors.WardianError as exc:
            # The home is removed on the way out, so show the app's own words here.
            said = (root / "bench-app.stderr").read_text(encoding="utf-8", errors="replace")[-3000:]
            raise RuntimeError(f"the app did not start: {exc.code}: {exc.message}; its stderr ends with:\n{said}") \
                from None
    try:
        yield RunningApp(Home(root), proc)
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)


@contextlib.contextmanager
def fresh_app(store_url: str | None = None, host_name: str | None = None) -> Iterator[RunningApp]:
    """An app on a fresh home: on its own SQLite file, or serving `host_name` of the shared store `store_url`."""
    root = new_home()
    extra = (*(("--store", store_url) if store_url else ()), *(("--host-name", host_name) if host_name else ()))
    try:
        with running_app(root, extra_args=extra) as app:
            yield app
    finally:
        shutil.rmtree(root, ignore_errors=True)


def add_agents(client: AppClient, prefix: str, count: int) -> list[tuple[dict[str, Any], str]]:
    """Register `count` agents and issue each a session: [(agent, token)]."""
    out = []
    for i in range(count):
        agent = client.call("agent/add", {"name": f"{prefix}{i}", "provider": "codex"})
        token = client.call("agent/session", {"agent": agent["uuid"]})["session_id"]
        out.append((agent, token))
    return out


# --- raw NDJSON connections (the load generators) ---------------------------------------------------------


def frame(method: str, params: dict[str, Any], id_: int = 1) -> bytes:
    return orjson.dumps({"jsonrpc": "2.0", "id": id_, "method": method, "params": params}) + b"\n"


class RawConn:
    """One control connection without the client's conveniences: send a prepared frame, read lines."""

    def __init__(self, path: str) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(path)
        self.buf = b""

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def read_line(self, timeout_s: float = 30.0) -> bytes:
        self.sock.settimeout(timeout_s)
        while b"\n" not in self.buf:
            chunk = self.sock.recv(1 << 20)
            if not chunk:
                raise EOFError("the app closed the connection")
            self.buf += chunk
        line, _, self.buf = self.buf.partition(b"\n")
        return line

    def result(self, timeout_s: float = 30.0) -> Any:
        response = orjson.loads(self.read_line(timeout_s))
        if "error" in response:
            raise RuntimeError(f"app error: {response['error']}")
        return response["result"]

    def close(self) -> None:
        self.sock.close()


def drain_mailbox(client: AppClient, token: str) -> None:
    """Receive and acknowledge everything unacknowledged, so `mailbox/wait` blocks again."""
    page = client.call("mailbox/receive", {"session": token, "limit": 100})
    while page["records"]:
        page = client.call("mailbox/receive", {"session": token, "limit": 100, "ack_cursor": page["cursor"]})


# --- metrics ----------------------------------------------------------------------------------------------


def bench_roundtrip(cfg: Config) -> None:
    with fresh_app() as app, AppClient(app.home) as client:
        _roundtrips(cfg, [({}, client)])


def _roundtrips(cfg: Config, apps: list[tuple[dict[str, Any], AppClient]]) -> None:
    """Round trips of a cheap read and the roster listing on each of `apps` ((tag, client)), interleaved round by
    round so all meet the same background load; each figure is emitted with its app's tag."""
    cases: list[tuple[dict[str, Any], AppClient, str, str, dict[str, Any]]] = []
    for tag, client in apps:
        (_, token), _ = add_agents(client, "rt", 2)
        cases += [(tag, client, "roundtrip_mailbox_wait", "mailbox/wait", {"session": token, "timeout_ms": 0}),
                  (tag, client, "roundtrip_agent_list", "agent/list", {})]
    results: list[list[list[float]]] = [[] for _ in cases]
    for _, client, _, method, params in cases:
        for _ in range(200):
            client.call(method, params)  # warm-up: connection, statement cache, lazy imports
    for _ in range(cfg.rounds):
        for k, (_, client, _, method, params) in enumerate(cases):  # interleaved: all meet the same load
            samples = []
            for _ in range(cfg.roundtrips):
                t0 = time.perf_counter()
                client.call(method, params)
                samples.append(time.perf_counter() - t0)
            results[k].append(samples)
    for (tag, _, name, method, _), rounds in zip(cases, results, strict=True):
        emit(name, **latency_fields(rounds), method=method, unit="ms", target="p50_ms <= 0.3",
             met=ms(statistics.median(pct(r, 0.5) for r in rounds)) <= 0.3, **tag)


def _arm_wait(conn: RawConn, token: str) -> None:
    conn.send(frame("mailbox/wait", {"session": token, "timeout_ms": 60_000}))


def _blocked_settle() -> None:
    # The app has no observable "waiter registered" signal, so give it time to authenticate, look at durable
    # state and block; a wait that raced a record would only return early (measuring less, never more).
    time.sleep(0.003)


def bench_wake(cfg: Config) -> None:
    """send -> waiting recipient wakes: from just before the send is written to the waiter's answer."""
    with fresh_app() as app, AppClient(app.home) as client:
        (_, sender_token), = add_agents(client, "snd", 1)
        recipients = add_agents(client, "rcv", 100)
        send_conn = RawConn(app.socket_path)
        sel = selectors.DefaultSelector()

        def one_wake(waiters: list[RawConn], target_uuid: str) -> float:
            return _one_wake(sel, send_conn, sender_token, waiters, target_uuid)

        # 1 waiter, and 100 waiters (one per recipient) of whom the send wakes one.
        for metric, n_waiters in (("wake_1_waiter", 1), ("wake_100_waiters", 100)):
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
                    samples.append(one_wake([conns[k]], agent["uuid"]))
                    drain_mailbox(client, token)
                    _arm_wait(conns[k], token)
                rounds.append(samples)
            for c in conns:
                c.close()
            emit(metric, **latency_fields(rounds), waiters=n_waiters, unit="ms", target="p99_ms <= 5",
                 met=ms(statistics.median(pct(r, 0.99) for r in rounds)) <= 5)

        # Fan-out: 100 waits on one recipient (e.g. several MCP servers of one agent); time to the last (#13).
        agent, token = recipients[0]
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
                samples.append(one_wake(conns, agent["uuid"]))
                drain_mailbox(client, token)
            rounds.append(samples)
        for c in conns:
            c.close()
        send_conn.close()
        emit("wake_100_waiters_same_recipient", **latency_fields(rounds), waiters=100, unit="ms", target="p99_ms <= 5",
             met=ms(statistics.median(pct(r, 0.99) for r in rounds)) <= 5,
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
        p99 = ms(statistics.median(pct(r, 0.99) for r in case.rounds))
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


def drive_senders(path: str, frames: list[bytes], duration_s: float) -> tuple[int, int, list[float]]:
    """Each frame on its own connection, sent again as soon as its answer arrives, for `duration_s`.

    Returns (answers, errors, latencies of every answered request).
    """
    return drive_connections([(path, data) for data in frames], duration_s)


def drive_connections(targets: list[tuple[str, bytes]], duration_s: float) -> tuple[int, int, list[float]]:
    """As `drive_senders`, each (socket path, frame) on its own connection: the senders may talk to several apps."""
    sel = selectors.EpollSelector()
    conns: dict[int, tuple[socket.socket, bytes]] = {}
    for path, data in targets:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(path)
        s.setblocking(False)
        conns[s.fileno()] = (s, data)
        sel.register(s, selectors.EVENT_READ)
    started: dict[int, float] = {}
    latencies: list[float] = []
    answers = errors = 0
    end = time.perf_counter() + duration_s
    for fd, (s, data) in conns.items():
        started[fd] = time.perf_counter()
        s.send(data)
    outstanding = len(conns)
    while outstanding:
        for key, _ in sel.select(timeout=30):
            s, data = conns[key.fd]
            chunk = s.recv(65536)
            if not chunk:
                raise EOFError("the app closed a sender's connection")
            # One request in flight per connection, so a chunk holds at most one answer line.
            if not chunk.endswith(b"\n"):
                while not chunk.endswith(b"\n"):
                    more = s.recv(65536)
                    if not more:
                        raise EOFError("the app closed a sender's connection")
                    chunk += more
            now = time.perf_counter()
            latencies.append(now - started[key.fd])
            answers += 1
            if b'"error"' in chunk:
                errors += 1
            if now < end:
                started[key.fd] = now
                s.send(data)
            else:
                outstanding -= 1
    for s, _ in conns.values():
        s.close()
    sel.close()
    return answers, errors, latencies


@dataclass
class SendLoad:
    """32 senders in a ring over one or more apps, and what each round of driving them measured."""

    tag: dict[str, Any]
    apps: list[RunningApp]
    targets: list[tuple[str, bytes]]  # (the sender's app socket, its send frame)
    server_cpu: Callable[[], float] | None = None  # CPU seconds of a database server, when there is one
    total: int = 0

    def __post_init__(self) -> None:
        self.rates: list[float] = []
        self.p50s: list[float] = []
        self.p99s: list[float] = []
        self.cpu: list[float] = []
        self.client_cpu: list[float] = []
        self.server_us: list[float] = []
        self.syncs: list[float] = []

    def round(self, seconds: float) -> None:
        self.syncs.append(fdatasync_p50(self.apps[0].home.root))  # the disk's state right now: it bounds group commit
        server0 = self.server_cpu() if self.server_cpu else 0.0
        cpu0, own0, t0 = sum(a.cpu_seconds() for a in self.apps), time.process_time(), time.perf_counter()
        answers, errs, lat = drive_connections(self.targets, seconds)
        elapsed, used = time.perf_counter() - t0, sum(a.cpu_seconds() for a in self.apps) - cpu0
        self.client_cpu.append((time.process_time() - own0) / answers * 1e6)
        if self.server_cpu:
            self.server_us.append((self.server_cpu() - server0) / answers * 1e6)
        if errs:
            raise RuntimeError(f"{errs} of {answers} sends failed")
        self.total += answers
        self.rates.append(answers / elapsed)
        self.p50s.append(pct(lat, 0.5))
        self.p99s.append(pct(lat, 0.99))
        self.cpu.append(used / answers * 1e6)
        label = f"{self.tag['store']} " if self.tag else ""
        log(f"{label}sends: {answers / elapsed:,.0f}/s over {elapsed:.1f} s, app CPU {used / elapsed:.2f} cores")

    def emit(self, agents: int, ceiling: int, client: str, **extra: Any) -> None:
        emit("durable_sends_per_s_32_senders", value=round(statistics.median(self.rates)),
             range=[round(min(self.rates)), round(max(self.rates))], n=self.total, rounds=len(self.rates),
             senders=len(self.targets), latency_p50_ms=ms(statistics.median(self.p50s)),
             latency_p99_ms=ms(statistics.median(self.p99s)), app_cpu_us_per_send=round(statistics.median(self.cpu), 1),
             client_cpu_us_per_send=round(statistics.median(self.client_cpu), 1),
             disk_fdatasync_p50_ms=ms(statistics.median(self.syncs)), agents=agents,
             unit="sends/s", target=">= 20000", met=statistics.median(self.rates) >= 20_000, client=client,
             store_ceiling_sends_per_s=ceiling, **extra, **self.tag)


def ring_load(tag: dict[str, Any], apps: list[tuple[RunningApp, AppClient]], n: int = 32) -> SendLoad:
    """`n` agents spread evenly over `apps` (each added through its own app, so on a shared store it belongs to that
    app's host), taken in turn from each app; sender i writes to agent i+1 through its own app, so every agent is both
    a sender and a recipient (with two apps, every send crosses to the other host)."""
    per_app = [add_agents(client, "tp", n // len(apps)) for _, client in apps]
    ring = [(apps[k][0], per_app[k][i]) for i in range(n // len(apps)) for k in range(len(apps))]
    targets = [(app.socket_path, frame("message/send", {"session": token, "target": ring[(i + 1) % n][1][0]["uuid"],
                                                         "message": TEXT}))
               for i, (app, (_, token)) in enumerate(ring)]
    return SendLoad(tag, [app for app, _ in apps], targets)


def app_floor(cfg: Config, app: RunningApp, tag: dict[str, Any], n: int = 32) -> None:
    """The same senders against a request the app answers without the store (an unknown method: frame split, JSON
    parse, dispatch, error answer): the ceiling of this server and client on this machine, measured in the same run,
    so the durable figure can be read against it."""
    floor_frames = [frame("bench/no_such_method", {}) for _ in range(n)]
    drive_senders(app.socket_path, floor_frames, 0.3)
    cpu0, t0 = app.cpu_seconds(), time.perf_counter()
    floor_answers, _, floor_lat = drive_senders(app.socket_path, floor_frames, cfg.send_seconds)
    floor_elapsed, floor_cpu = time.perf_counter() - t0, app.cpu_seconds() - cpu0
    emit("app_floor_requests_per_s_32_senders", value=round(floor_answers / floor_elapsed), n=floor_answers,
         latency_p50_ms=ms(pct(floor_lat, 0.5)), app_cpu_us_per_request=round(floor_cpu / floor_answers * 1e6, 1),
         unit="requests/s", note="same senders, a request answered without touching the store (unknown "
         "method): the no-work ceiling of the app's request path plus this client on this machine", **tag)


ONE_APP_CLIENT = "32 connections on one epoll loop in the bench process, one request in flight each"


def bench_throughput(cfg: Config) -> None:
    with fresh_app() as app, AppClient(app.home) as client:
        load = ring_load({}, [(app, client)])
        drive_connections(load.targets, 0.5)  # warm-up
        for _ in range(cfg.rounds):
            load.round(cfg.send_seconds)
        status = client.call("app/status")
        app_floor(cfg, app, {})
        ceiling = store_ceiling(cfg)
        load.emit(status["agents"], ceiling, ONE_APP_CLIENT)


def bench_throughput_compare(cfg: Config, cluster: PrivateCluster) -> None:
    """Durable sends/s side by side: 32 senders on the SQLite app, and 32 senders spread over two apps (hosts alpha
    and beta, 16 each) of one PostgreSQL database, rounds alternating; then each store's one-writer ceiling and raw
    PostgreSQL INSERT+COMMIT from 32 connections on the same schema (apps stopped)."""
    url = cluster.database()
    with fresh_app() as sq, fresh_app(url, "alpha") as alpha, fresh_app(url, "beta") as beta, \
            AppClient(sq.home) as sq_client, AppClient(alpha.home) as a_client, AppClient(beta.home) as b_client:
        sq_load = ring_load({"store": "sqlite"}, [(sq, sq_client)])
        pg_load = ring_load({"store": "postgresql"}, [(alpha, a_client), (beta, b_client)])
        pg_load.server_cpu = lambda: pg_cpu_seconds(cluster)
        for load in (sq_load, pg_load):
            drive_connections(load.targets, 0.5)  # warm-up
        for _ in range(cfg.rounds):
            for load in (sq_load, pg_load):  # alternating, so both meet the same background load and disk
                load.round(cfg.send_seconds)
        sq_agents, pg_agents = sq_client.call("app/status")["agents"], a_client.call("app/status")["agents"]
        app_floor(cfg, sq, {"store": "sqlite"})
    sq_ceiling = store_ceiling(cfg, tag={"store": "sqlite"})
    pg_ceiling = store_ceiling(cfg, url=cluster.database(), tag={"store": "postgresql"})
    raw = pg_raw_ceiling(cfg, url)
    sq_load.emit(sq_agents, sq_ceiling, ONE_APP_CLIENT)
    sq_rate, pg_rate = statistics.median(sq_load.rates), statistics.median(pg_load.rates)
    pg_load.emit(pg_agents, pg_ceiling, "32 connections (16 to each of the apps alpha and beta, one database) on one "
                 "epoll loop in the bench process, one request in flight each; sender i -> agent i+1 on the other host",
                 apps=2, ratio_to_sqlite=round(pg_rate / sq_rate, 3), raw_ceiling_inserts_per_s=raw["schema"],
                 ratio_to_raw_ceiling=round(pg_rate / raw["schema"], 3),
                 raw_no_notify_inserts_per_s=raw["no_notify"],
                 ratio_to_raw_no_notify=round(pg_rate / raw["no_notify"], 3),
                 pg_server_cpu_us_per_send=round(statistics.median(pg_load.server_us), 1),
                 raw_ceiling_how="pg_raw_insert_commit_per_s_32_connections: raw psycopg, 32 threads/connections, one "
                                 "autocommit INSERT of one interactions row (= INSERT+COMMIT) each, no append lock, "
                                 "the schema's NOTIFY trigger on (raw_no_notify_*: that trigger disabled)")


def pg_cpu_seconds(cluster: PrivateCluster) -> float:
    """User + system CPU the private server's processes (postmaster and its children) have used so far; NaN when the
    data directory cannot be read."""
    try:
        postmaster = int((cluster.data / "postmaster.pid").read_text(encoding="utf-8").split()[0])
    except (OSError, ValueError, IndexError):
        return float("nan")
    ticks = 0
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            fields = Path(f"/proc/{entry}/stat").read_text(encoding="utf-8").rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue  # gone meanwhile
        if int(entry) == postmaster or int(fields[1]) == postmaster:
            ticks += int(fields[11]) + int(fields[12])
    return ticks / os.sysconf("SC_CLK_TCK")


RAW_INSERT = ("INSERT INTO interactions (public_id, kind, sender_id, recipient_id, body, created_at) "
              "VALUES (%s, 'information', %s, %s, %s, %s)")


RAW_VARIANTS = ("schema", "append_lock", "no_notify")


def pg_raw_ceiling(cfg: Config, url: str, n: int = 32) -> dict[str, int]:
    """PostgreSQL alone: `n` threads, each on its own psycopg connection, each doing one autocommit INSERT of one
    `interactions` row (a durable INSERT+COMMIT per round trip, synchronous_commit on, the schema's NOTIFY trigger
    firing with nobody listening) into the database the apps migrated and used, back to back for `send_seconds`.
    Then two variants: the store's append lock taken first (BEGIN; pg_advisory_xact_lock; INSERT; COMMIT), and the
    plain INSERT with the schema's NOTIFY trigger disabled on this database for that run only, which shows what the
    per-row NOTIFY costs (PostgreSQL serialises the commits of transactions that notified). Emitted as its own
    metric; returns each variant's median rows/s."""
    import threading

    import psycopg

    from wardian.store.pg_schema import APPEND_LOCK

    with psycopg.connect(url, autocommit=True) as conn:
        ids = [int(r[0]) for r in conn.execute("SELECT id FROM agents WHERE kind = 'agent' ORDER BY id").fetchall()]
    conns = [psycopg.connect(url, autocommit=True, prepare_threshold=0) for _ in range(n)]
    results: dict[str, tuple[list[float], list[float], int]] = {}
    try:
        for v, variant in enumerate(RAW_VARIANTS):
            if variant == "no_notify":  # this bench's own database, the apps stopped: re-enabled below
                conns[0].execute("ALTER TABLE interactions DISABLE TRIGGER interactions_notify")
            locked = variant == "append_lock"
            rates: list[float] = []
            p50s: list[float] = []
            total = 0
            for r in range(cfg.rounds + 1):  # round 0 warms up
                counts = [0] * n
                lat: list[list[float]] = [[] for _ in range(n)]
                spans = [0.0] * n
                start = threading.Barrier(n)

                def worker(k: int, r: int = r, v: int = v, locked: bool = locked, counts: list[int] = counts,
                           lat: list[list[float]] = lat, spans: list[float] = spans,
                           start: threading.Barrier = start) -> None:
                    conn, mine, sender, recipient = conns[k], lat[k], ids[k % len(ids)], ids[(k + 1) % len(ids)]
                    start.wait()
                    t_start = time.perf_counter()
                    end, i = t_start + (0.5 if r == 0 else cfg.send_seconds), 0
                    while (t0 := time.perf_counter()) < end:
                        params = (f"msg_raw{v}{r:02d}{k:02d}{i:012x}", sender, recipient, TEXT, now_ms())
                        if locked:
                            with conn.transaction():
                                conn.execute("SELECT pg_advisory_xact_lock(%s)", (APPEND_LOCK,))
                                conn.execute(RAW_INSERT, params)
                        else:
                            conn.execute(RAW_INSERT, params)
                        mine.append(time.perf_counter() - t0)
                        i += 1
                    counts[k], spans[k] = i, time.perf_counter() - t_start

                threads = [threading.Thread(target=worker, args=(k,)) for k in range(n)]
                for t in threads:
                    t.start()
                for t in threads:
                    t.join()
                if r == 0:
                    continue
                rates.append(sum(counts) / max(spans))
                p50s.append(pct([x for m in lat for x in m], 0.5))
                total += sum(counts)
            results[variant] = (rates, p50s, total)
            log(f"raw PostgreSQL INSERT+COMMIT, {n} connections, {variant}: {statistics.median(rates):,.0f}/s")
    finally:
        with contextlib.suppress(psycopg.Error):
            conns[0].execute("ALTER TABLE interactions ENABLE TRIGGER interactions_notify")
        for c in conns:
            c.close()
    fields: dict[str, Any] = {}
    for variant in RAW_VARIANTS[1:]:
        rates, p50s, total = results[variant]
        fields.update({f"{variant}_per_s": round(statistics.median(rates)),
                       f"{variant}_range": [round(min(rates)), round(max(rates))], f"{variant}_n": total,
                       f"{variant}_latency_p50_ms": ms(statistics.median(p50s))})
    rates, p50s, total = results["schema"]
    value = round(statistics.median(rates))
    emit("pg_raw_insert_commit_per_s_32_connections", value=value, range=[round(min(rates)), round(max(rates))],
         n=total, rounds=len(rates), latency_p50_ms=ms(statistics.median(p50s)), unit="rows/s", **fields,
         store="postgresql",
         how="raw psycopg (no wardian code), 32 threads each on its own connection: one autocommit INSERT of one "
             "300-byte information row into the real interactions table (migrated by the app: its indexes and its "
             "per-row NOTIFY trigger, nobody listening) = one durable INSERT+COMMIT per round trip; append_lock_*: "
             "BEGIN, pg_advisory_xact_lock(APPEND_LOCK), INSERT, COMMIT (the store's commit-order rule); "
             "no_notify_*: the plain INSERT with the trigger interactions_notify disabled for that run only")
    return {variant: round(statistics.median(results[variant][0])) for variant in RAW_VARIANTS}


def store_ceiling(cfg: Config, url: str | None = None, tag: dict[str, Any] | None = None) -> int:
    """The store alone: the app's send operation (authenticate, resolve, admit) in batches of 32, one COMMIT
    each under synchronous=FULL, run back to back in this process with no socket, server or client.

    What one writer can do at best on this machine: the app's sends/s cannot exceed it (its statements and
    COMMITs are serial, and its server and the 32 senders share the same cores). Emitted as its own metric.
    With `url`, the same on a fresh PostgreSQL database (synchronous_commit on; every statement a round trip).
    """
    root = new_home()
    store: Store
    if url is None:
        store = SqliteStore.open(Home(root).db_path)
    else:
        from wardian.store.postgres import PostgresStore

        store = PostgresStore.open(url)
    try:
        agents = [store.add_agent(f"ceil{i}", "codex", None) for i in range(32)]
        tokens = [store.create_session(a.id) for a in agents]

        ops = [admit_op(tokens[i], agents[(i + 1) % 32].uuid, InteractionKind.INFORMATION, TEXT) for i in range(32)]
        bare = [True] * len(ops)
        rates, stmt_us, commit_us = [], [], []
        total = 0
        for _ in range(cfg.rounds):
            done, in_stmts, in_commit = 0, 0.0, 0.0
            t0 = time.perf_counter()
            while time.perf_counter() - t0 < cfg.send_seconds:
                t1 = time.perf_counter()
                results = store.begin_batch(ops, bare)
                t2 = time.perf_counter()
                results = store.commit_batch(results)
                in_commit += time.perf_counter() - t2
                in_stmts += t2 - t1
                if any(r.error is not None for r in results):
                    raise RuntimeError(f"a store-only send failed: {next(r.error for r in results if r.error)}")
                done += len(ops)
            rates.append(done / (time.perf_counter() - t0))
            total += done
            stmt_us.append(in_stmts / done * 1e6)
            commit_us.append(in_commit / done * 1e6)
    finally:
        store.close()
        shutil.rmtree(root, ignore_errors=True)
    value = round(statistics.median(rates))
    emit("store_ceiling_sends_per_s_batches_of_32", value=value, range=[round(min(rates)), round(max(rates))], n=total,
         statements_us_per_send=round(statistics.median(stmt_us), 1),
         commit_us_per_send=round(statistics.median(commit_us), 1), unit="sends/s",
         note="the app's send operation on the store alone, batches of 32 committed back to back in the bench "
         "process (no socket, server or client): the most one writer can do here, an upper bound for "
         "durable_sends_per_s_32_senders", **(tag or {}))
    return value


def fdatasync_p50(directory: Path, n: int = 50) -> float:
    """Median time of rewriting 16 KiB of a file and fdatasync-ing it: what one durable COMMIT waits for."""
    path = directory / "bench-fsync-probe"
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        os.pwrite(fd, b"\0" * 16384, 0)
        os.fsync(fd)
        times = []
        for _ in range(n):
            os.pwrite(fd, b"x" * 16384, 0)
            t0 = time.perf_counter()
            os.fdatasync(fd)
            times.append(time.perf_counter() - t0)
    finally:
        os.close(fd)
        path.unlink()
    return statistics.median(times)


def seed_store(root: Path, recipients: int, per_recipient: int) -> list[str]:
    """Fill a new home's store with recipients x per_recipient records, interleaved; return the tokens."""
    home = Home(root)
    (root / "run").mkdir(mode=0o700, parents=True, exist_ok=True)
    (root / "logs").mkdir(mode=0o700, exist_ok=True)
    store = SqliteStore.open(home.db_path)
    try:
        sender = store.add_agent("seed-sender", "codex", None)
        caller = store.authenticate(store.create_session(sender.id))
        agents = [store.add_agent(f"inbox{i}", "codex", None) for i in range(recipients)]
        tokens = [store.create_session(a.id) for a in agents]
        # The first record of each recipient goes through admit (the store's own path); the rest are the same
        # rows written by the store's seeding hook in big transactions, ~10x faster than 1M admits.
        for agent in agents:
            store.admit(caller, agent, InteractionKind.INFORMATION, TEXT)
        total, done, batch = recipients * per_recipient, recipients, 100_000
        ids = [a.id for a in agents]
        t0 = time.perf_counter()
        while done < total:
            end = min(total, done + batch)
            store_testing.seed_information(store, sender.id, ids, end - done, TEXT, start=done)  # one fsync each
            done = end
            if done % 200_000 == 0 or done == total:
                log(f"seeded {done:,} records in {time.perf_counter() - t0:.1f} s")
    finally:
        store.close()
    return tokens


@dataclass
class ReceiveCase:
    """One app's mailboxes of `stored` seeded records, and the rounds measured on them."""

    tag: dict[str, Any]
    client: AppClient
    tokens: list[str]
    target: float  # p99 ms
    first: list[list[float]]
    walk: list[list[float]]


def bench_receive(cfg: Config) -> None:
    recipients, per = 100, cfg.records // 100
    root = new_home()
    try:
        tokens = seed_store(root, recipients, per)
        log(f"store size {(root / 'wardian.db').stat().st_size / 1e6:.0f} MB")
        with running_app(root) as app, AppClient(app.home) as client:
            _receive_rounds(cfg, [ReceiveCase({}, client, tokens, 2, [], [])], recipients * per)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _receive_rounds(cfg: Config, cases: list[ReceiveCase], stored: int) -> None:
    """The first page of 100 (nothing acked) and a cursor walk of one backlog, on each case's app, the cases in
    turn round by round so all meet the same background load; each figure is emitted with its case's tag."""
    for case in cases:
        for token in case.tokens[:10]:  # warm-up
            case.client.call("mailbox/receive", {"session": token, "limit": 100})
    for r in range(cfg.rounds):
        for case in cases:
            client, tokens, recipients = case.client, case.tokens, len(case.tokens)
            samples = []
            for i in range(cfg.receives):
                params = {"session": tokens[i % recipients], "limit": 100}
                t0 = time.perf_counter()
                page = client.call("mailbox/receive", params)
                samples.append(time.perf_counter() - t0)
                if len(page["records"]) != 100 or not page["more"]:
                    raise RuntimeError(f"expected a full page with more to come, got {len(page['records'])}")
            case.first.append(samples)
            # Cursor continuation: walk one recipient's whole backlog, page after page, acking nothing.
            samples = []
            token, cursor = tokens[(r * 7 + 3) % recipients], None
            while len(samples) < cfg.receives:
                params = {"session": token, "limit": 100}
                if cursor is not None:
                    params["cursor"] = cursor
                t0 = time.perf_counter()
                page = client.call("mailbox/receive", params)
                samples.append(time.perf_counter() - t0)
                cursor = page["cursor"] if page["more"] else None
            case.walk.append(samples)
    for case in cases:
        for metric, rounds, how in (("receive_100_at_1m", case.first, "the same first page, nothing acked"),
                                    ("receive_100_at_1m_cursor", case.walk, "successive pages via cursor")):
            p99 = ms(statistics.median(pct(r, 0.99) for r in rounds))
            emit(metric, **latency_fields(rounds), stored=stored, recipients=len(case.tokens),
                 limit=100, how=how, unit="ms", target=f"p99_ms <= {case.target:g}", met=p99 <= case.target, **case.tag)


PG_SEED = (
    "INSERT INTO interactions (public_id, kind, sender_id, recipient_id, body, created_at) "
    "SELECT 'msg_' || lpad(to_hex(?::bigint), 11, '0') || lpad(to_hex(g), 16, '0'), 'information', ?, "
    "(?::bigint[])[1 + (g % ?)::int], ?, ? FROM generate_series(?::bigint, ?::bigint) AS g"
)


def seed_pg(client: AppClient, url: str, recipients: int, per_recipient: int) -> list[str]:
    """As `seed_store`, on the shared store an app serves: the agents, their sessions and each recipient's first
    record through the app (its host's agents, the store's own admit), the rest as the same rows (what `admit` writes,
    recipients in turn) by INSERT ... SELECT generate_series in transactions of 100,000, through the store's raw
    statement hook; triggers off for the seeding session only (session_replication_role = replica: no NOTIFY of a
    million records to the running app), then VACUUM ANALYZE, as autovacuum would leave the table."""
    from wardian.store.postgres import PostgresStore

    sender = client.call("agent/add", {"name": "seed-sender", "provider": "codex"})
    sender_token = client.call("agent/session", {"agent": sender["uuid"]})["session_id"]
    inboxes = add_agents(client, "inbox", recipients)
    for agent, _ in inboxes:
        client.call("message/send", {"session": sender_token, "target": agent["uuid"], "message": TEXT})
    store = PostgresStore.open(url, migrate=False)
    try:
        ids = {str(uuid): int(id_) for uuid, id_ in store_testing.execute(store, "SELECT uuid, id FROM agents")}
        recipient_ids = [ids[agent["uuid"]] for agent, _ in inboxes]
        store_testing.execute(store, "SET session_replication_role = replica")
        total, done, batch = recipients * per_recipient, recipients, 100_000
        t0 = time.perf_counter()
        while done < total:
            end = min(total, done + batch)
            with store.atomic():
                store_testing.execute(store, PG_SEED, (now_ms(), ids[sender["uuid"]], recipient_ids, recipients, TEXT,
                                                       now_ms(), done, end - 1))
            done = end
            if done % 200_000 == 0 or done == total:
                log(f"postgresql: seeded {done:,} records in {time.perf_counter() - t0:.1f} s")
        store_testing.execute(store, "SET session_replication_role = DEFAULT")
        store_testing.execute(store, "VACUUM (ANALYZE) interactions")
        size = store_testing.execute(store, "SELECT pg_total_relation_size('interactions')")[0][0]
        log(f"postgresql: interactions with its indexes {int(size) / 1e6:.0f} MB")
    finally:
        store.close()
    return [token for _, token in inboxes]


def bench_receive_compare(cfg: Config, cluster: PrivateCluster) -> None:
    """receive 100 at 1,000,000 records side by side: the SQLite app on its seeded home, and an app on a seeded
    PostgreSQL database (host alpha), rounds alternating."""
    recipients, per = 100, cfg.records // 100
    root = new_home()
    url = cluster.database()
    try:
        sq_tokens = seed_store(root, recipients, per)
        log(f"sqlite: store size {(root / 'wardian.db').stat().st_size / 1e6:.0f} MB")
        with fresh_app(url, "alpha") as pg, AppClient(pg.home) as pg_client:
            pg_tokens = seed_pg(pg_client, url, recipients, per)
            with running_app(root) as sq, AppClient(sq.home) as sq_client:
                _receive_rounds(cfg, [ReceiveCase({"store": "sqlite"}, sq_client, sq_tokens, 2, [], []),
                                      ReceiveCase({"store": "postgresql"}, pg_client, pg_tokens, 5, [], [])],
                                recipients * per)
    finally:
        shutil.rmtree(root, ignore_errors=True)
        with contextlib.suppress(Exception):
            cluster.sql(f'DROP DATABASE "{url.split("///", 1)[1].split("?", 1)[0]}" WITH (FORCE)')


def bench_roundtrip_compare(cfg: Config, cluster: PrivateCluster) -> None:
    """App round trips side by side: the SQLite app and an app on a PostgreSQL database (host alpha)."""
    with fresh_app() as sq, fresh_app(cluster.database(), "alpha") as pg, AppClient(sq.home) as sq_client, \
            AppClient(pg.home) as pg_client:
        _roundtrips(cfg, [({"store": "sqlite"}, sq_client), ({"store": "postgresql"}, pg_client)])


def _console_script() -> str:
    candidate = Path(sys.executable).parent / "wardian"
    found = str(candidate) if candidate.exists() else shutil.which("wardian")
    if not found:
        raise RuntimeError("the wardian console script is not installed next to this interpreter")
    return found


def _spawn_times(argv: list[str], env: dict[str, str], runs: int, ok: Callable[[int], bool]) -> list[float]:
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        proc = subprocess.run(argv, env=env, stdin=subprocess.DEVNULL, capture_output=True, check=False)
        times.append(time.perf_counter() - t0)
        if not ok(proc.returncode):
            raise RuntimeError(f"{argv} exited {proc.returncode}: {proc.stderr.decode(errors='replace')}")
    return times


def bench_cold_start(cfg: Config) -> None:
    script = _console_script()
    with fresh_app() as app, AppClient(app.home) as client:
        (_, token), = add_agents(client, "cold", 1)
        env = {k: v for k, v in os.environ.items() if not k.startswith("WARDIAN_")}
        env.update({"WARDIAN_HOME": str(app.home.root), "WARDIAN_SESSION_ID": token})
        argv = [script, "message", "wait", "--timeout-ms", "0"]
        _spawn_times(argv, env, 3, lambda rc: rc == 8)  # warm the page cache; 8 = timed out (empty mailbox)
        cli, floor = [], []
        for _ in range(cfg.rounds):  # interleave with the interpreter's own start-up, the floor
            cli += _spawn_times(argv, env, cfg.cold_runs // cfg.rounds + 1, lambda rc: rc == 8)
            floor += _spawn_times([sys.executable, "-c", "pass"], env, cfg.cold_runs // cfg.rounds + 1,
                                  lambda rc: rc == 0)
        emit("cli_cold_start_message_wait", value=ms(statistics.median(cli)),
             range=[ms(min(cli)), ms(max(cli))], p90_ms=ms(pct(cli, 0.9)), n=len(cli), unit="ms",
             command="wardian message wait --timeout-ms 0", target="<= 150",
             met=statistics.median(cli) * 1000 <= 150)
        emit("python_start_floor", value=ms(statistics.median(floor)), range=[ms(min(floor)), ms(max(floor))],
             n=len(floor), unit="ms", command=f"{Path(sys.executable).name} -c pass")
        proc = subprocess.run([sys.executable, "-X", "importtime", *argv], env=env, capture_output=True,
                              check=False)
        report_imports(proc.stderr.decode("utf-8", "replace"))


def report_imports(stderr: str, top: int = 15) -> None:
    """Print the modules with the largest self import time (from `-X importtime`) to stderr."""
    rows = []
    for line in stderr.splitlines():
        if not line.startswith("import time:") or "self [us]" in line:
            continue
        self_us, cumulative_us, name = (part.strip() for part in line[len("import time:"):].split("|"))
        rows.append((int(self_us), int(cumulative_us), name))
    total = sum(r[0] for r in rows)
    log(f"import time of `wardian message wait`: {total / 1000:.1f} ms in {len(rows)} modules; top by self time:")
    for self_us, cumulative_us, name in sorted(rows, reverse=True)[:top]:
        log(f"  {self_us / 1000:7.2f} ms self {cumulative_us / 1000:8.2f} ms cumulative  {name.strip()}")
    emit("cli_import_time", value=ms(total / 1e6), n=len(rows), unit="ms",
         note="sum of self times from python -X importtime for `wardian message wait`")


# --- frozen binaries (#6) ----------------------------------------------------------------------------------

REPO = Path(__file__).resolve().parent.parent
INIT_LINE = (b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18",'
             b'"capabilities":{},"clientInfo":{"name":"bench","version":"0"}}}\n')


def _frozen_cli() -> Path:
    """The frozen CLI to measure: WARDIAN_FROZEN_CLI, else dist/wardian/wardian (`python build/freeze.py`)."""
    exe = Path(os.environ.get("WARDIAN_FROZEN_CLI") or REPO / "dist" / "wardian" / "wardian").absolute()
    if not exe.is_file():
        raise RuntimeError(f"no frozen CLI at {exe}: run `python build/freeze.py` or set WARDIAN_FROZEN_CLI")
    return exe


def _tree_mb(path: Path) -> float:
    if path.is_file():
        return round(path.stat().st_size / 1e6, 1)
    # Regular files only, links not followed, so nothing counts twice.
    return round(sum(st.st_size for st in (p.lstat() for p in path.rglob("*")) if stat.S_ISREG(st.st_mode)) / 1e6, 1)


def _initialize_time(argv: list[str], env: dict[str, str]) -> float:
    """Spawn `argv` (an MCP stdio server) and time until its answer to `initialize` arrives."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(argv, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    assert proc.stdin is not None
    assert proc.stdout is not None
    proc.stdin.write(INIT_LINE)
    proc.stdin.flush()
    line = proc.stdout.readline()
    elapsed = time.perf_counter() - t0
    proc.stdin.close()
    proc.wait(timeout=60)
    proc.stdout.close()
    if b'"serverInfo"' not in line:
        raise RuntimeError(f"{argv} did not answer initialize: {line[:200]!r}")
    return elapsed


def _start_fields(times: list[float]) -> dict[str, Any]:
    return {"value": ms(statistics.median(times)), "range": [ms(min(times)), ms(max(times))],
            "p90_ms": ms(pct(times, 0.9)), "n": len(times), "unit": "ms"}


def bench_frozen(cfg: Config) -> None:
    """Frozen vs. source entry points, measured interleaved in one run: `message wait --timeout-ms 0` (an app
    round trip) and `mcp serve` -> `initialize` answer. A `dist/onefile/wardian` (`build/freeze.py --onefile`)
    is measured too when present, for the onedir/onefile choice. Opt-in: `--only frozen`."""
    frozen, plain = _frozen_cli(), _console_script()
    onefile = REPO / "dist" / "onefile" / "wardian"
    entries = {"frozen": str(frozen), "plain": plain, **({"onefile": str(onefile)} if onefile.is_file() else {})}
    with fresh_app() as app, AppClient(app.home) as client:
        (_, token), = add_agents(client, "frz", 1)
        env = {k: v for k, v in os.environ.items() if not k.startswith("WARDIAN_")}
        env.update({"WARDIAN_HOME": str(app.home.root), "WARDIAN_SESSION_ID": token})
        waits: dict[str, list[float]] = {name: [] for name in entries}
        for exe in entries.values():
            _spawn_times([exe, "message", "wait", "--timeout-ms", "0"], env, 3, lambda rc: rc == 8)  # page cache
        per_round = cfg.cold_runs // cfg.rounds + 1
        for _ in range(cfg.rounds):
            for _ in range(per_round):  # one of each in turn, so all meet the same background load
                for name, exe in entries.items():
                    waits[name] += _spawn_times([exe, "message", "wait", "--timeout-ms", "0"], env, 1,
                                                lambda rc: rc == 8)
        for name, times in waits.items():
            fields = _start_fields(times)
            if name == "frozen":
                fields.update(target="<= 150", met=fields["value"] <= 150)
            emit(f"{name}_cli_cold_start_message_wait", **fields, command="wardian message wait --timeout-ms 0",
                 entry=entries[name], plain_ms=ms(statistics.median(waits["plain"])))
        serve_env = {k: v for k, v in env.items() if k != "WARDIAN_SESSION_ID"}
        inits: dict[str, list[float]] = {name: [] for name in entries}
        for exe in entries.values():
            _initialize_time([exe, "mcp", "serve"], serve_env)  # warm-up
        for _ in range(max(3, cfg.cold_runs // 4)):
            for name, exe in entries.items():
                inits[name].append(_initialize_time([exe, "mcp", "serve"], serve_env))
        for name, times in inits.items():
            emit(f"{name}_mcp_serve_initialize", **_start_fields(times), command="wardian mcp serve -> initialize",
                 entry=entries[name], plain_ms=ms(statistics.median(inits["plain"])))
    emit("frozen_dist_size", value=_tree_mb(frozen.parent), n=1, unit="MB", entry=str(frozen.parent),
         **({"onefile_mb": _tree_mb(onefile)} if onefile.is_file() else {}))


# --- MCP server (#3) ---------------------------------------------------------------------------------------

TRIVIAL_MCP_SERVER = Path(__file__).resolve().parent / "trivial_mcp_server.py"
# What the SDK's own client sends first (mcp 2.3.0 `ClientSession.initialize`, LATEST_HANDSHAKE_VERSION).
MCP_INITIALIZE = orjson.dumps({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
    "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "bench", "version": "0"}}}) + b"\n"


def _spawn_to_initialize(argv: list[str], env: dict[str, str]) -> float:
    """Seconds from spawning `argv` to reading its answer to `initialize` (then it is told to exit)."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(argv, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    assert proc.stdin is not None
    assert proc.stdout is not None
    try:
        proc.stdin.write(MCP_INITIALIZE)
        proc.stdin.flush()
        line = proc.stdout.readline()
        elapsed = time.perf_counter() - t0
        answer = orjson.loads(line)
        if "result" not in answer or answer.get("id") != 0:
            raise RuntimeError(f"{argv} answered initialize with {line[:300]!r}")
        proc.stdin.close()
        if proc.wait(timeout=30) != 0:
            raise RuntimeError(f"{argv} exited {proc.returncode} after initialize")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
    return elapsed


def bench_mcp_startup(cfg: Config) -> None:
    """spawn -> `initialize` result: `wardian mcp serve` next to the trivial SDK server, alternating."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("WARDIAN_")}
    wardian = [_console_script(), "mcp", "serve"]
    trivial = [sys.executable, str(TRIVIAL_MCP_SERVER)]
    for argv in (wardian, trivial):
        _spawn_to_initialize(argv, env)  # warm the page cache
    ours: list[float] = []
    theirs: list[float] = []
    for _ in range(cfg.mcp_spawns):
        ours.append(_spawn_to_initialize(wardian, env))
        theirs.append(_spawn_to_initialize(trivial, env))
    ratio = statistics.median(ours) / statistics.median(theirs)
    emit("mcp_startup_trivial_sdk_server", value=ms(statistics.median(theirs)),
         range=[ms(min(theirs)), ms(max(theirs))], n=len(theirs), unit="ms",
         command=f"python {TRIVIAL_MCP_SERVER.relative_to(TRIVIAL_MCP_SERVER.parents[1])}")
    emit("mcp_startup", value=ms(statistics.median(ours)), range=[ms(min(ours)), ms(max(ours))], n=len(ours),
         unit="ms", command="wardian mcp serve", ratio_to_trivial=round(ratio, 3), target="ratio <= 0.5",
         met=ratio <= 0.5)
    log(f"mcp startup: wardian {ms(statistics.median(ours))} ms, trivial SDK server "
        f"{ms(statistics.median(theirs))} ms, ratio {ratio:.3f} (target <= 0.5)")


def bench_mcp_roundtrip(cfg: Config) -> None:
    """`tools/call` round trips through the SDK client: send_message next to the trivial tool, call by call."""
    import anyio
    from mcp.client.session import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    with fresh_app() as app, AppClient(app.home) as client:
        (_, token), (target, _) = add_agents(client, "mcp", 2)
        env = {k: v for k, v in os.environ.items() if not k.startswith("WARDIAN_")}
        ours_env = {**env, "WARDIAN_HOME": str(app.home.root), "WARDIAN_SESSION_ID": token}
        send_args = {"target": target["uuid"], "message": TEXT}
        direct_params = {"session": token, **send_args}
        names = ("trivial", "send_message", "list_agents", "app_send")
        rounds: dict[str, list[list[float]]] = {name: [] for name in names}
        disk = fdatasync_p50(app.home.root)  # the disk's state: it bounds the durable send

        async def run() -> None:
            trivial = StdioServerParameters(command=sys.executable, args=[str(TRIVIAL_MCP_SERVER)], env=env)
            ours = StdioServerParameters(command=_console_script(), args=["mcp", "serve"], env=ours_env)
            async with stdio_client(trivial) as (tr, tw), ClientSession(tr, tw) as t, \
                    stdio_client(ours) as (wr, ww), ClientSession(wr, ww) as w:
                await t.initialize()
                await w.initialize()

                async def one(name: str) -> float:
                    t0 = time.perf_counter()
                    if name == "trivial":
                        result = await t.call_tool("noop", {})
                    elif name == "app_send":  # the app's own durable send, no MCP: the floor of send_message
                        client.call("message/send", direct_params)
                        return time.perf_counter() - t0
                    else:
                        result = await w.call_tool(name, send_args if name == "send_message" else {})
                    elapsed = time.perf_counter() - t0
                    if result.is_error:
                        raise RuntimeError(f"{name} failed: {result.content}")
                    return elapsed

                for _ in range(max(50, cfg.mcp_calls // 10)):  # warm-up: SDK lazy paths, pooled connection
                    for name in names:
                        await one(name)
                for _ in range(cfg.rounds):
                    samples: dict[str, list[float]] = {name: [] for name in names}
                    for _ in range(cfg.mcp_calls):
                        for name in names:  # call by call, so all four meet the same load and disk
                            samples[name].append(await one(name))
                    for name in names:
                        rounds[name].append(samples[name])

        anyio.run(run)

    def ratio(name: str) -> float:
        return statistics.median(pct(r, 0.5) / pct(t, 0.5) for r, t in zip(rounds[name], rounds["trivial"],
                                                                             strict=True))

    send_ratio, list_ratio = ratio("send_message"), ratio("list_agents")
    emit("mcp_roundtrip_trivial_tool", **latency_fields(rounds["trivial"]), unit="ms",
         tool="noop of scripts/trivial_mcp_server.py", client="mcp ClientSession over stdio")
    emit("mcp_roundtrip_send_message", **latency_fields(rounds["send_message"]), unit="ms",
         ratio_to_trivial_p50=round(send_ratio, 3), target="ratio_to_trivial_p50 <= 1.3", met=send_ratio <= 1.3,
         client="mcp ClientSession over stdio", disk_fdatasync_p50_ms=ms(disk),
         note="includes the app's durable commit: see app_roundtrip_message_send")
    emit("mcp_roundtrip_list_agents", **latency_fields(rounds["list_agents"]), unit="ms",
         ratio_to_trivial_p50=round(list_ratio, 3), client="mcp ClientSession over stdio",
         note="a tool that writes nothing: the MCP layer's own cost")
    emit("app_roundtrip_message_send", **latency_fields(rounds["app_send"]), unit="ms",
         client="AppClient, one persistent connection", disk_fdatasync_p50_ms=ms(disk),
         note="the same send without MCP, measured alongside")
    median = {name: statistics.median(pct(r, 0.5) for r in rounds[name]) for name in names}
    log(f"mcp round trip p50: send_message {ms(median['send_message'])} ms, trivial tool "
        f"{ms(median['trivial'])} ms, ratio {send_ratio:.3f} (target <= 1.3); list_agents "
        f"{ms(median['list_agents'])} ms, ratio {list_ratio:.3f}; the app's own message/send "
        f"{ms(median['app_send'])} ms")


def bench_mcp_first_wait(cfg: Config) -> None:
    """spawn -> answer of the first `tools/call` (#13): `wardian mcp serve`'s first `wait_agent(timeout_ms=0)` and
    first `receive_messages(timeout_ms=0)` next to the trivial SDK server's first `noop` and, for reference, its
    own first `list_agents` (a call that never waited for the SDK), spawns alternating.

    Each spawn is a host's session: `initialize`, its answer, `notifications/initialized` and the call, timed from
    the spawn to the call's answer; then stdin is closed and the server must exit 0.
    """
    initialized = orjson.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}) + b"\n"

    def first_call(argv: list[str], env: dict[str, str], tool: str, arguments: dict[str, Any]) -> float:
        call = orjson.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                             "params": {"name": tool, "arguments": arguments}}) + b"\n"
        t0 = time.perf_counter()
        proc = subprocess.Popen(argv, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.DEVNULL, start_new_session=True)
        assert proc.stdin is not None
        assert proc.stdout is not None
        try:
            proc.stdin.write(MCP_INITIALIZE)
            proc.stdin.flush()
            if orjson.loads(proc.stdout.readline()).get("id") != 0:
                raise RuntimeError(f"{argv} did not answer initialize first")
            proc.stdin.write(initialized + call)
            proc.stdin.flush()
            line = proc.stdout.readline()
            elapsed = time.perf_counter() - t0
            answer = orjson.loads(line)
            if answer.get("id") != 1 or "result" not in answer or answer["result"].get("isError"):
                raise RuntimeError(f"{argv} answered {tool} with {line[:300]!r}")
            proc.stdin.close()
            if proc.wait(timeout=30) != 0:
                raise RuntimeError(f"{argv} exited {proc.returncode} after {tool}")
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait(timeout=10)
            proc.stdout.close()
        return elapsed

    with fresh_app() as app, AppClient(app.home) as client:
        (_, token), = add_agents(client, "first", 1)
        env = {k: v for k, v in os.environ.items() if not k.startswith("WARDIAN_")}
        ours_env = {**env, "WARDIAN_HOME": str(app.home.root), "WARDIAN_SESSION_ID": token}
        wardian = [_console_script(), "mcp", "serve"]
        kinds: dict[str, tuple[list[str], dict[str, str], str, dict[str, Any]]] = {
            "trivial": ([sys.executable, str(TRIVIAL_MCP_SERVER)], env, "noop", {}),
            "wait_agent": (wardian, ours_env, "wait_agent", {"timeout_ms": 0}),
            "receive_messages": (wardian, ours_env, "receive_messages", {"timeout_ms": 0}),
            "list_agents": (wardian, ours_env, "list_agents", {}),
        }
        for kind in kinds.values():
            first_call(*kind)  # warm the page cache
        samples: dict[str, list[float]] = {name: [] for name in kinds}
        for _ in range(cfg.mcp_spawns):
            for name, kind in kinds.items():  # alternating, so all of them meet the same background load
                samples[name].append(first_call(*kind))
    trivial_p50 = pct(samples["trivial"], 0.5)
    emit("mcp_first_call_trivial_sdk_server", **latency_fields([samples["trivial"]]), unit="ms",
         how="spawn -> answer of the first tools/call noop",
         command=f"python {TRIVIAL_MCP_SERVER.relative_to(TRIVIAL_MCP_SERVER.parents[1])}")
    for name in ("wait_agent", "receive_messages"):
        p50 = pct(samples[name], 0.5)
        emit(f"mcp_first_{name}", **latency_fields([samples[name]]), unit="ms",
             how=f"spawn -> answer of the first tools/call {name} (timeout_ms 0)", command="wardian mcp serve",
             ratio_to_trivial_p50=round(p50 / trivial_p50, 3), target="p50_ms <= 300", met=p50 * 1000 <= 300)
    emit("mcp_first_list_agents", **latency_fields([samples["list_agents"]]), unit="ms",
         how="spawn -> answer of the first tools/call list_agents", command="wardian mcp serve",
         ratio_to_trivial_p50=round(pct(samples["list_agents"], 0.5) / trivial_p50, 3),
         note="reference: the first call of a tool that never waits")
    log("mcp first call p50: " + ", ".join(f"{name} {ms(pct(times, 0.5))} ms" for name, times in samples.items()))


# --- driver -----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Config:
    rounds: int
    roundtrips: int
    wakes: int
    send_seconds: float
    records: int
    receives: int
    cold_runs: int
    mcp_spawns: int
    mcp_calls: int


FULL = Config(rounds=3, roundtrips=3000, wakes=200, send_seconds=4.0, records=1_000_000, receives=300,
              cold_runs=30, mcp_spawns=15, mcp_calls=300)
QUICK = Config(rounds=1, roundtrips=500, wakes=50, send_seconds=1.0, records=100_000, receives=100,
               cold_runs=20, mcp_spawns=4, mcp_calls=50)

BENCHES: dict[str, Callable[[Config], None]] = {
    "roundtrip": bench_roundtrip,
    "wake": bench_wake,
    "throughput": bench_throughput,
    "receive": bench_receive,
    "cold_start": bench_cold_start,
    "mcp_startup": bench_mcp_startup,
    "mcp_roundtrip": bench_mcp_roundtrip,
    "mcp_first_wait": bench_mcp_first_wait,
}
def bench_codex_dispatch(cfg: Config) -> None:
    """Issue 4: task admitted -> turn/start written (a fake app-server on stdio that timestamps each line it
    reads), and admitted -> reply published for a one-message turn of the real Codex on the scripted model."""
    repo = Path(__file__).resolve().parent.parent
    fake = repo / "tests" / "codex" / "fake_codex.py"
    n = 30 if cfg is QUICK else 200
    root = new_home()
    wrapper = root / "codex"
    wrapper.write_text(f"#!/bin/sh\nexec {sys.executable} {fake} \"$@\"\n", encoding="utf-8")
    wrapper.chmod(0o755)
    log_path = root / "fake.jsonl"
    from_call: list[float] = []
    from_receipt: list[float] = []
    try:
        with running_app(root, {"WARDIAN_CODEX": str(wrapper), "FAKE_CODEX_LOG": str(log_path)}) as app, \
                AppClient(app.home) as client:
            (_, lead), _ = add_agents(client, "lead", 1)[0], add_agents(client, "worker", 1)
            client.call("agent/start", {"agent": "worker0"}, timeout_s=60)
            seen = 0
            for i in range(n):
                t0 = time.time_ns()
                receipt = client.call("task/followup", {"session": lead, "target": "worker0", "message": f"t{i}"})
                t1 = time.time_ns()
                rid = receipt["request_id"]
                while True:
                    lines = log_path.read_text(encoding="utf-8").splitlines()[seen:]
                    hit = [orjson.loads(x) for x in lines if rid in x and '"turn/start"' in x]
                    if hit:
                        seen += len(lines)
                        break
                    time.sleep(0.0005)
                from_call.append((hit[0]["_received_ns"] - t0) / 1e9)
                from_receipt.append((hit[0]["_received_ns"] - t1) / 1e9)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    # Admitted = the receipt is back (the task is committed); the call's own commit is reported beside it.
    emit("codex_admitted_to_turn_start_written", **latency_fields([from_receipt]), unit="ms",
         target="p50_ms <= 5, p99_ms <= 20",
         met=pct(from_receipt, 0.5) <= 0.005 and pct(from_receipt, 0.99) <= 0.020,
         how="receipt returned (task committed) -> the app-server read turn/start (fake app-server on stdio)",
         from_call_p50_ms=ms(pct(from_call, 0.5)), from_call_p99_ms=ms(pct(from_call, 0.99)),
         disk_fdatasync_p50_ms=ms(fdatasync_p50(Path(tempfile.gettempdir()))))
    _bench_codex_reply(cfg, repo)


def _bench_codex_reply(cfg: Config, repo: Path) -> None:
    from wardian_harness.codex_home import ScriptedProvider, codex_overrides
    from wardian_harness.codex_install import find_codex
    from wardian_harness.scripted_model import Message, ScriptedModel

    n = 5 if cfg is QUICK else 30
    samples: list[float] = []
    root = new_home()
    try:
        with ScriptedModel() as model, running_app(root, {"WARDIAN_CODEX": str(find_codex()),
                                                         "WARDIAN_SCRIPTED_MODEL_KEY": "bench"}) as app, \
                AppClient(app.home) as client:
            (_, lead), _ = add_agents(client, "lead", 1)[0], add_agents(client, "worker", 1)
            script = model.agent("worker0")
            overrides = codex_overrides(ScriptedProvider(base_url=script.base_url))
            client.call("agent/start", {"agent": "worker0", "config": overrides}, timeout_s=300)
            for i in range(n):
                script.add(Message(f"answer {i}", phase="final_answer"))
                t0 = time.perf_counter()
                rid = client.call("task/followup", {"session": lead, "target": "worker0",
                                                    "message": f"q{i}"})["request_id"]
                while True:
                    page = client.call_wait("mailbox/receive", {"session": lead, "timeout_ms": 30000}, 30000)
                    if page["records"]:
                        client.call("mailbox/receive", {"session": lead, "ack_cursor": page["cursor"], "limit": 1})
                    if any(r["request_id"] == rid and r["kind"] == "reply" for r in page["records"]):
                        break
                samples.append(time.perf_counter() - t0)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    emit("codex_admitted_to_reply_published", **latency_fields([samples]), unit="ms",
         how="followup call -> the requester receives reply done, one-message turn of real Codex on the scripted model")


def bench_opencode(cfg: Config) -> None:
    """Issue 14: task admitted -> OpenCode accepted the prompt_async (its stored user message's `time.created`, the
    msg_ id the app chose), and admitted -> reply published for a one-message turn, beside Codex's in the same run.
    Real OpenCode (pinned, from npm) and real Codex, both on the scripted model."""
    import sqlite3
    from contextlib import closing

    from wardian_harness.opencode_home import ScriptedOpenCode, find_opencode, opencode_overrides
    from wardian_harness.scripted_model import Message, ScriptedModel

    n = 10 if cfg is QUICK else 60
    accepted: list[float] = []
    stored: list[float] = []
    replied: list[float] = []
    root = new_home()
    try:
        with ScriptedModel() as model, running_app(root, {"WARDIAN_OPENCODE": str(find_opencode().executable),
                                                         "WARDIAN_SCRIPTED_MODEL_KEY": "bench"}) as app, \
                AppClient(app.home) as client:
            (_, lead), = add_agents(client, "lead", 1)
            worker = client.call("agent/add", {"name": "worker0", "provider": "opencode"})
            script = model.agent("worker0")
            client.call("agent/start", {"agent": "worker0",
                                        "config": opencode_overrides(ScriptedOpenCode(script.base_url))}, timeout_s=300)
            sent: list[tuple[str, int]] = []
            for i in range(n + 2):  # the first two warm OpenCode's lazily loaded provider and prompt path
                script.add(Message(f"answer {i}"))
                t0 = time.perf_counter()
                rid = client.call("task/followup", {"session": lead, "target": "worker0",
                                                    "message": f"q{i}"})["request_id"]
                t1_ns = time.time_ns()
                while True:
                    page = client.call_wait("mailbox/receive", {"session": lead, "timeout_ms": 30000}, 30000)
                    if page["records"]:
                        client.call("mailbox/receive", {"session": lead, "ack_cursor": page["cursor"], "limit": 1})
                    if any(r["request_id"] == rid and r["kind"] == "reply" for r in page["records"]):
                        break
                if i >= 2:
                    replied.append(time.perf_counter() - t0)
                    story = client.call("request/show", {"id": rid})["task"]
                    sent.append((story["provider_message_id"], t1_ns))
                    accepted.append(story["facts"]["submitted_at"] / 1e3 - t1_ns / 1e9)
            db = Home(root).agent_dir(worker["uuid"]) / "opencode" / "data" / "opencode" / "opencode.db"
            with tempfile.TemporaryDirectory() as tmp:
                for f in (db, db.with_name(db.name + "-wal")):
                    if f.exists():
                        shutil.copyfile(f, Path(tmp) / f.name)
                with closing(sqlite3.connect(Path(tmp) / db.name)) as conn:
                    created = dict(conn.execute("SELECT id, time_created FROM message"))
            stored = [created[msg] / 1e3 - t1_ns / 1e9 for msg, t1_ns in sent]
    finally:
        shutil.rmtree(root, ignore_errors=True)
    floor = _opencode_store_floor(n)
    emit("opencode_admitted_to_prompt_accepted", **latency_fields([stored]), unit="ms",
         target="p50_ms <= 5, p99_ms <= 20", met=pct(stored, 0.5) <= 0.005 and pct(stored, 0.99) <= 0.020,
         how="receipt returned (task committed) -> OpenCode stored the user message under the msg_ id the app chose "
             "(its time.created; 1 ms resolution), agent idle",
         app_recorded_p50_ms=ms(pct(accepted, 0.5)), app_recorded_p99_ms=ms(pct(accepted, 0.99)),
         opencode_own_p50_ms=ms(pct(floor, 0.5)), opencode_own_p99_ms=ms(pct(floor, 0.99)),
         opencode_own_how="a raw http.client POST of a noReply message to a fresh serve of the same binary -> its "
                          "time.created: OpenCode's own share, which no client can go below")
    emit("opencode_admitted_to_reply_published", **latency_fields([replied]), unit="ms",
         how="followup call -> the requester receives reply done, one-message turn of real OpenCode on the scripted "
             "model (the first two turns, which load OpenCode's provider, not counted)")
    _bench_codex_reply(cfg, Path(__file__).resolve().parent.parent)


def _opencode_store_floor(n: int) -> list[float]:
    """OpenCode's own time from a request's first byte to the message's `time.created`: a fresh `opencode serve`
    (private XDG dirs, no model needed for `noReply`), one keep-alive http.client connection, `n` messages."""
    from wardian.providers.opencode.runtime import new_message_id
    from wardian_harness.opencode_home import find_opencode

    root = new_home()
    env = {**os.environ, "HOME": str(root), "OPENCODE_DISABLE_MODELS_FETCH": "1", "OPENCODE_DISABLE_AUTOUPDATE": "1",
           "OPENCODE_DISABLE_SHARE": "1", "OPENCODE_DISABLE_LSP_DOWNLOAD": "1"}
    for key in ("CONFIG", "DATA", "CACHE", "STATE"):
        env[f"XDG_{key}_HOME"] = str(root / key.lower())
    proc = subprocess.Popen([str(find_opencode().executable), "serve", "--hostname", "127.0.0.1", "--port", "0"],
                            env=env, cwd=root, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            stdin=subprocess.DEVNULL, text=True, encoding="utf-8", start_new_session=True)
    samples: list[float] = []
    try:
        assert proc.stdout is not None
        url = next(line.split("listening on ", 1)[1].strip() for line in proc.stdout if "listening on " in line)
        host, port = url.removeprefix("http://").rsplit(":", 1)
        conn = http.client.HTTPConnection(host, int(port), timeout=30)

        def call(method: str, path: str, body: dict[str, Any] | None = None) -> Any:
            conn.request(method, path, body=orjson.dumps(body) if body is not None else None,
                         headers={"content-type": "application/json"})
            return orjson.loads(conn.getresponse().read() or b"null")

        session = call("POST", "/session", {})["id"]
        for i in range(n + 3):
            mid = new_message_id()
            t0 = time.time_ns()
            call("POST", f"/session/{session}/message",
                 {"messageID": mid, "noReply": True, "parts": [{"type": "text", "text": f"m{i}"}]})
            created = call("GET", f"/session/{session}/message/{mid}")["info"]["time"]["created"]
            if i >= 3:
                samples.append((created - t0 / 1e6) / 1e3)
        conn.close()
    finally:
        os.killpg(proc.pid, signal.SIGKILL)  # a bench child; OpenCode may ignore SIGTERM (opencode-offline.md §6)
        proc.wait(timeout=30)
        shutil.rmtree(root, ignore_errors=True)
    return samples


def bench_console(cfg: Config) -> None:
    """Issue 16: the web console. (1) A committed record visible in a real browser: the app's receipt of a send ->
    the row in the exchange page's DOM, carried by Server-Sent Events (chromium via Playwright, /usr/bin/chromium).
    (2) The exchange page's first page at 1,000,000 records: the server's own time (its Server-Timing header) and the
    client's round trip, unfiltered and filtered by agent."""
    from urllib.parse import urlsplit

    from playwright.sync_api import sync_playwright

    @contextlib.contextmanager
    def console_app(root: Path) -> Iterator[tuple[RunningApp, str]]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("WARDIAN_")}
        with open(root / "bench-app.stderr", "wb") as err:
            proc = start_app(root, env=env, stderr=err, timeout_s=120, extra_args=("--console", "127.0.0.1:0"))
        try:
            with AppClient(Home(root)) as c:
                yield RunningApp(Home(root), proc), str(c.call("app/status")["console"])
        finally:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)

    # (1) commit -> DOM
    sends = 40 if cfg is QUICK else 200
    root = new_home()
    from_receipt: list[list[float]] = []
    from_call: list[list[float]] = []
    try:
        with console_app(root) as (app, base), AppClient(app.home) as client, sync_playwright() as pw:
            (_, lead), _ = add_agents(client, "lead", 1)[0], add_agents(client, "worker", 1)
            browser = pw.chromium.launch(executable_path="/usr/bin/chromium", args=["--no-sandbox"])
            page = browser.new_page()
            page.goto(client.call("console/login")["url"], wait_until="commit")
            page.wait_for_url("**/agents")
            page.goto(base + "/exchange")
            page.wait_for_function("document.getElementById('live').dataset.state === 'on'")
            # The wall-clock time (ms) at which each row entered the DOM, by record id.
            page.evaluate("""() => {
                window.__arrived = {};
                const body = document.querySelector('#exchange tbody');
                new MutationObserver((changes) => {
                    const now = performance.timeOrigin + performance.now();
                    for (const c of changes) for (const n of c.addedNodes)
                        if (n.dataset && !(n.dataset.key in window.__arrived)) window.__arrived[n.dataset.key] = now;
                }).observe(body, {childList: true});
            }""")
            for _ in range(cfg.rounds):
                receipt_samples, call_samples = [], []
                for i in range(sends):
                    time.sleep(0.06)  # an isolated commit: past the console's render interval (50 ms)
                    t0 = time.time()
                    rid = client.call("message/send", {"session": lead, "target": "worker0",
                                                       "message": f"console {i}"})["interaction_id"]
                    t1 = time.time()
                    page.wait_for_function("id => id in window.__arrived", arg=rid, timeout=30_000)
                    arrived = page.evaluate("id => window.__arrived[id]", rid) / 1000
                    receipt_samples.append(arrived - t1)
                    call_samples.append(arrived - t0)
                from_receipt.append(receipt_samples)
                from_call.append(call_samples)
            browser.close()
    finally:
        shutil.rmtree(root, ignore_errors=True)
    p50 = ms(statistics.median(pct(r, 0.5) for r in from_receipt))
    p99 = ms(statistics.median(pct(r, 0.99) for r in from_receipt))
    emit("console_commit_to_dom", **latency_fields(from_receipt), unit="ms", target="p50_ms <= 100, p99_ms <= 250",
         met=p50 <= 100 and p99 <= 250, browser="chromium (Debian, headless) via Playwright",
         how="send receipt returned (record committed) -> its row added to the exchange page's DOM (SSE)",
         from_call_p50_ms=ms(statistics.median(pct(r, 0.5) for r in from_call)),
         from_call_p99_ms=ms(statistics.median(pct(r, 0.99) for r in from_call)))

    # (2) the first page at 1,000,000 records
    recipients, per = 100, cfg.records // 100
    root = new_home()
    try:
        seed_store(root, recipients, per)
        with console_app(root) as (app, base), AppClient(app.home) as client:
            url = urlsplit(client.call("console/login")["url"])
            conn = http.client.HTTPConnection("127.0.0.1", url.port, timeout=30)

            def get(path: str, cookie: str = "") -> tuple[float, float, Any]:
                t0 = time.perf_counter()
                conn.request("GET", path, headers={"Cookie": cookie} if cookie else {})
                response = conn.getresponse()
                body = response.read()
                took = time.perf_counter() - t0
                if response.status != 200:
                    raise RuntimeError(f"GET {path}: {response.status} {body[:300]!r}")
                server = float(response.getheader("server-timing", "app;dur=nan").split("dur=")[1]) / 1000
                return server, took, response

            _, _, login = get(f"{url.path}?{url.query}")
            cookie = login.getheader("set-cookie").split(";")[0]
            for case, path in (("", "/exchange"), ("_agent", "/exchange?agent=inbox7")):
                for _ in range(20):  # warm-up
                    get(path, cookie)
                server_rounds, client_rounds = [], []
                for _ in range(cfg.rounds):
                    server_samples, client_samples = [], []
                    for _ in range(cfg.receives):
                        server, took, _ = get(path, cookie)
                        server_samples.append(server)
                        client_samples.append(took)
                    server_rounds.append(server_samples)
                    client_rounds.append(client_samples)
                p99 = ms(statistics.median(pct(r, 0.99) for r in server_rounds))
                emit(f"console_exchange_first_page_at_1m{case}", **latency_fields(server_rounds), unit="ms",
                     stored=recipients * per, rows=50, path=path, target="p99_ms <= 50", met=p99 <= 50,
                     how="the server's time for GET (its Server-Timing header): auth, exchange/page, render",
                     round_trip_p50_ms=ms(statistics.median(pct(r, 0.5) for r in client_rounds)),
                     round_trip_p99_ms=ms(statistics.median(pct(r, 0.99) for r in client_rounds)))
            conn.close()
    finally:
        shutil.rmtree(root, ignore_errors=True)


# Run only when named with --only: they need a frozen build (`python build/freeze.py`), the Codex or OpenCode CLI,
# or chromium.
OPT_IN: dict[str, Callable[[Config], None]] = {
    "frozen": bench_frozen,
    "codex": bench_codex_dispatch,
    "opencode": bench_opencode,
    "console": bench_console,
}


# `--store postgresql`: each runs its figure on both backends in one run, tagged with `store`.
PG_BENCHES: dict[str, Callable[[Config, PrivateCluster], None]] = {
    "roundtrip": bench_roundtrip_compare,
    "wake": bench_wake_compare,
    "throughput": bench_throughput_compare,
    "receive": bench_receive_compare,
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes for CI (indicative figures only)")
    parser.add_argument("--only", nargs="+", choices=sorted(BENCHES | OPT_IN),
                        help="run only these benchmarks (opt-in ones only this way: " + ", ".join(OPT_IN) + ")")
    parser.add_argument("--store", choices=("sqlite", "postgresql"), default="sqlite",
                        help="postgresql: also run " + ", ".join(PG_BENCHES) + " on a private PostgreSQL server, "
                        "beside SQLite in the same run (only these benchmarks then)")
    args = parser.parse_args(argv)
    cfg = QUICK if args.quick else FULL
    t0 = time.perf_counter()
    if args.store == "postgresql":
        if args.only and (other := sorted(set(args.only) - set(PG_BENCHES))):
            parser.error(f"--store postgresql runs only {', '.join(PG_BENCHES)}, not {', '.join(other)}")
        from wardian_harness.postgres import PrivateCluster

        with PrivateCluster() as cluster:
            log(f"private PostgreSQL server in {cluster.root} (port {cluster.port})")
            for name, compare in PG_BENCHES.items():
                if args.only and name not in args.only:
                    continue
                log(f"{name} (sqlite and postgresql) ...")
                started = time.perf_counter()
                compare(cfg, cluster)
                log(f"{name} done in {time.perf_counter() - started:.1f} s")
        log(f"all done in {time.perf_counter() - t0:.1f} s (load average {os.getloadavg()[0]:.2f})")
        return 0
    for name, bench in (BENCHES | OPT_IN).items():
        if (args.only and name not in args.only) or (name in OPT_IN and not args.only):
            continue
        log(f"{name} ...")
        started = time.perf_counter()
        bench(cfg)
        log(f"{name} done in {time.perf_counter() - started:.1f} s")
    log(f"all done in {time.perf_counter() - t0:.1f} s (load average {os.getloadavg()[0]:.2f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
