"""Durable sends per second: 32 senders in a ring, one request in flight each, against the app's no-work ceiling
(`app_floor_...`) and the store's one-writer ceiling; with `--store postgresql` the same beside 32 senders spread
over two apps of one PostgreSQL database."""

from __future__ import annotations

import os
import shutil
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from benchmarks.apps import (
    RunningApp,
    add_agents,
    cpu_seconds,
    fresh_app,
    new_home,
    pid_cpu_seconds,
    start_minimal_server,
)
from benchmarks.clients import drive_connections, drive_senders, frame
from benchmarks.config import TEXT, Config
from benchmarks.figures import emit, log, ms, pct
from benchmarks.postgres import pg_raw_ceiling
from benchmarks.store import fdatasync_p50, store_ceiling
from wardian.client import AppClient
from wardian.home import Home
from wardian.store import open_sqlite, roster

if TYPE_CHECKING:
    from wardian_harness.hosts.postgres import PrivateCluster


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
        self.batches = 0  # the apps' writer transactions and operations over the rounds (`app/status`)
        self.operations = 0

    def writer_counts(self) -> tuple[int, int]:
        """The apps' store writers' transactions and operations so far, summed."""
        batches = operations = 0
        for app in self.apps:
            with AppClient(app.home) as client:
                status = client.call("app/status")
            batches += status["store_batches"]
            operations += status["store_operations"]
        return batches, operations

    def round(self, seconds: float) -> None:
        self.syncs.append(fdatasync_p50(self.apps[0].home.root))  # the disk's state right now: it bounds group commit
        batches0, operations0 = self.writer_counts()
        server0 = self.server_cpu() if self.server_cpu else 0.0
        cpu0, own0, t0 = sum(cpu_seconds(a) for a in self.apps), time.process_time(), time.perf_counter()
        answers, errs, lat = drive_connections(self.targets, seconds)
        elapsed, used = time.perf_counter() - t0, sum(cpu_seconds(a) for a in self.apps) - cpu0
        self.client_cpu.append((time.process_time() - own0) / answers * 1e6)
        if self.server_cpu:
            self.server_us.append((self.server_cpu() - server0) / answers * 1e6)
        if errs:
            raise RuntimeError(f"{errs} of {answers} sends failed")
        batches1, operations1 = self.writer_counts()
        self.batches += batches1 - batches0
        self.operations += operations1 - operations0
        self.total += answers
        self.rates.append(answers / elapsed)
        self.p50s.append(pct(lat, 0.5))
        self.p99s.append(pct(lat, 0.99))
        self.cpu.append(used / answers * 1e6)
        label = f"{self.tag['store']} " if self.tag else ""
        log(f"{label}sends: {answers / elapsed:,.0f}/s over {elapsed:.1f} s, app CPU {used / elapsed:.2f} cores")

    def emit(self, agents: int, ceiling: int, client: str, minimal: int | None = None, **extra: Any) -> None:
        if minimal is not None:
            extra |= {"minimal_server_sends_per_s": minimal,
                      "ratio_to_minimal_server": round(statistics.median(self.rates) / minimal, 3)}
        emit("durable_sends_per_s_32_senders", value=round(statistics.median(self.rates)),
             range=[round(min(self.rates)), round(max(self.rates))], n=self.total, rounds=len(self.rates),
             senders=len(self.targets), latency_p50_ms=ms(statistics.median(self.p50s)),
             latency_p99_ms=ms(statistics.median(self.p99s)), app_cpu_us_per_send=round(statistics.median(self.cpu), 1),
             client_cpu_us_per_send=round(statistics.median(self.client_cpu), 1),
             disk_fdatasync_p50_ms=ms(statistics.median(self.syncs)), agents=agents,
             app_mean_batch=round(self.operations / self.batches, 1) if self.batches else None,
             unit="sends/s", target=">= 20000", met=statistics.median(self.rates) >= 20_000, client=client,
             store_ceiling_sends_per_s=ceiling, ratio_to_ceiling=round(statistics.median(self.rates) / ceiling, 3),
             **extra, **self.tag)


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
    cpu0, t0 = cpu_seconds(app), time.perf_counter()
    floor_answers, _, floor_lat = drive_senders(app.socket_path, floor_frames, cfg.send_seconds)
    floor_elapsed, floor_cpu = time.perf_counter() - t0, cpu_seconds(app) - cpu0
    emit("app_floor_requests_per_s_32_senders", value=round(floor_answers / floor_elapsed), n=floor_answers,
         latency_p50_ms=ms(pct(floor_lat, 0.5)), app_cpu_us_per_request=round(floor_cpu / floor_answers * 1e6, 1),
         unit="requests/s", note="same senders, a request answered without touching the store (unknown "
         "method): the no-work ceiling of the app's request path plus this client on this machine", **tag)


ONE_APP_CLIENT = "32 connections on one epoll loop in the bench process, one request in flight each"


@dataclass
class MinimalServerRun:
    """What `minimal_server_rate` measured of one shape, emitted once the store's ceiling of the same run is known."""

    rates: list[float]
    cpu_us: list[float]
    total: int = 0
    mean_batch: float = 0.0

    @property
    def value(self) -> int:
        return round(statistics.median(self.rates))


def emit_minimal(runs: dict[str, MinimalServerRun], ceiling: int, tag: dict[str, Any]) -> int:
    """One line for the `fill` shape (the faster here), the other shapes' figures beside it; returns its rate."""
    fill = runs["fill"]
    beside: dict[str, Any] = {}
    for shape in ("overlap", "fill_unvalidated"):
        run = runs[shape]
        beside |= {f"{shape}_shape_sends_per_s": run.value,
                   f"{shape}_shape_ratio_to_ceiling": round(run.value / ceiling, 3),
                   f"{shape}_shape_server_cpu_us_per_send": round(statistics.median(run.cpu_us), 1),
                   f"{shape}_shape_mean_batch": round(run.mean_batch, 1)}
    emit("minimal_server_sends_per_s_32_senders", value=fill.value,
         range=[round(min(fill.rates)), round(max(fill.rates))], n=fill.total, rounds=len(fill.rates), senders=32,
         server_cpu_us_per_send=round(statistics.median(fill.cpu_us), 1), mean_batch=round(fill.mean_batch, 1),
         unit="sends/s", store_ceiling_sends_per_s=ceiling, ratio_to_ceiling=round(fill.value / ceiling, 3),
         shape="fill", **beside, client=ONE_APP_CLIENT,
         note="benchmarks/minimal_server.py: the app's send operation, store, params model and answer behind the "
         "least server (NDJSON on a Unix socket, no tasks, futures or wake-ups), the same 32 senders; shape fill: a "
         "batch waits for as many requests as the last one held (at most 0.5 ms), statements and COMMIT on the loop; "
         "overlap_shape_*: the app's group commit (statements on the loop, COMMIT on a worker); "
         "fill_unvalidated_shape_*: fill without validating the params", **tag)
    return fill.value


def minimal_server_rate(cfg: Config) -> dict[str, MinimalServerRun]:
    """The same 32 senders in a ring against `benchmarks.minimal_server` in each shape, each on a fresh SQLite
    store, rounds alternating between the shapes as the app's rounds do."""
    from benchmarks.minimal_server import SHAPES

    roots, procs, targets = [], {}, {}
    try:
        for shape in SHAPES:
            root = new_home()
            roots.append(root)
            store = open_sqlite(Home(root).db_path)
            try:
                agents = [roster.add_agent(store, f"min{i}", "codex", None) for i in range(32)]
                tokens = [roster.create_session(store, a.id) for a in agents]
            finally:
                store.close()
            socket_path = str(root / "minimal.sock")
            procs[shape] = start_minimal_server(shape, socket_path, str(Home(root).db_path))
            targets[shape] = [(socket_path, frame("message/send", {
                "session": tokens[i], "target": agents[(i + 1) % 32].uuid, "message": TEXT})) for i in range(32)]
            drive_connections(targets[shape], 0.5)  # warm-up
        runs = {shape: MinimalServerRun([], []) for shape in SHAPES}
        for _ in range(cfg.rounds):
            for shape, run in runs.items():
                pid = procs[shape].pid
                cpu0, t0 = pid_cpu_seconds(pid), time.perf_counter()
                answers, errs, _ = drive_connections(targets[shape], cfg.send_seconds)
                elapsed = time.perf_counter() - t0
                if errs:
                    raise RuntimeError(f"{errs} of {answers} sends to the minimal server ({shape}) failed")
                run.rates.append(answers / elapsed)
                run.cpu_us.append((pid_cpu_seconds(pid) - cpu0) / answers * 1e6)
                run.total += answers
                log(f"minimal server ({shape}) sends: {answers / elapsed:,.0f}/s over {elapsed:.1f} s")
        for shape, proc in procs.items():
            proc.terminate()
            out, _ = proc.communicate(timeout=30)
            batches, sends = (int(x) for x in out.split())
            runs[shape].mean_batch = sends / batches
        return runs
    finally:
        for proc in procs.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        for root in roots:
            shutil.rmtree(root, ignore_errors=True)


def bench_throughput(cfg: Config) -> None:
    with fresh_app() as app, AppClient(app.home) as client:
        load = ring_load({}, [(app, client)])
        drive_connections(load.targets, 0.5)  # warm-up
        for _ in range(cfg.rounds):
            load.round(cfg.send_seconds)
        status = client.call("app/status")
        app_floor(cfg, app, {})
    minimal = minimal_server_rate(cfg)
    ceiling = store_ceiling(cfg)
    load.emit(status["agents"], ceiling, ONE_APP_CLIENT, emit_minimal(minimal, ceiling, {}))


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
    minimal = minimal_server_rate(cfg)
    sq_ceiling = store_ceiling(cfg, tag={"store": "sqlite"})
    pg_ceiling = store_ceiling(cfg, url=cluster.database(), tag={"store": "postgresql"})
    raw = pg_raw_ceiling(cfg, url)
    sq_load.emit(sq_agents, sq_ceiling, ONE_APP_CLIENT, emit_minimal(minimal, sq_ceiling, {"store": "sqlite"}))
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
