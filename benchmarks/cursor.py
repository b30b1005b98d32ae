"""`mailbox/receive` at a million stored records: the first page of 100 (nothing acked) and a cursor walk of one
backlog, page after page; with `--store postgresql` on both backends, rounds alternating. In the default run the same
rounds then run against the least server (`benchmarks.minimal_server`) on the same home, the floor under the app's
cursor walk (`minimal_server_receive_100_at_1m_cursor`)."""

from __future__ import annotations

import contextlib
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from benchmarks.apps import bench_app, fresh_app, new_home, start_minimal_server
from benchmarks.config import Config
from benchmarks.figures import emit, latency_fields, log, median_pct, ms, pct
from benchmarks.postgres import seed_pg
from benchmarks.store import seed_store
from wardian.client import AppClient
from wardian.home import Home

if TYPE_CHECKING:
    from wardian_harness.hosts.postgres import PrivateCluster


@dataclass
class ReceiveCase:
    """One app's mailboxes of `stored` seeded records, and the rounds measured on them."""

    tag: dict[str, Any]
    client: AppClient
    tokens: list[str]
    target: float  # p99 ms
    first: list[list[float]]
    walk: list[list[float]]
    first_reads: list[float] = field(default_factory=list)  # walk pages read for the first time (a durable write)
    rereads: list[float] = field(default_factory=list)  # walk pages read again (read-only)
    walk_offset: int = 0  # which recipients' backlogs the walks take (another case on the same home takes others)


def bench_receive(cfg: Config) -> None:
    recipients, per = 100, cfg.records // 100
    root = new_home()
    try:
        tokens = seed_store(root, recipients, per)
        log(f"store size {(root / 'wardian.db').stat().st_size / 1e6:.0f} MB")
        with bench_app(root) as app, AppClient(app.home) as client:
            case = ReceiveCase({}, client, tokens, 2, [], [])
            _measure_rounds(cfg, [case])
        floor = _least_server_rounds(cfg, root, tokens)
        _emit_rounds([case], recipients * per, floor)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _least_server_rounds(cfg: Config, root: Path, tokens: list[str]) -> ReceiveCase:
    """The same rounds against the least server on the app's home, once the app has stopped: the app's params model,
    store receive and answer with nothing else around them (`benchmarks.minimal_server`); its walks take backlogs
    the app's walks did not, so their first reads are first reads too."""
    home = Home(root)
    proc = start_minimal_server("fill", str(home.socket_path), str(home.db_path))
    try:
        with AppClient(home) as client:
            case = ReceiveCase({}, client, tokens, 2, [], [], walk_offset=len(tokens) // 2)
            _measure_rounds(cfg, [case])
        proc.terminate()
        proc.communicate(timeout=30)
        return case
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def _receive_rounds(cfg: Config, cases: list[ReceiveCase], stored: int) -> None:
    _measure_rounds(cfg, cases)
    _emit_rounds(cases, stored)


def _measure_rounds(cfg: Config, cases: list[ReceiveCase]) -> None:
    """The first page of 100 (nothing acked) and a cursor walk of one backlog, on each case's app, the cases in
    turn round by round so all meet the same background load."""
    for case in cases:
        for token in case.tokens[:10]:  # warm-up
            case.client.call("mailbox/receive", {"session": token, "limit": 100})
    for r in range(cfg.rounds):
        for case in cases:
            case.first.append(_first_pages(cfg, case))
            case.walk.append(_cursor_walk(cfg, case, case.tokens[(r * 7 + 3 + case.walk_offset) % len(case.tokens)]))


def _walk_split(case: ReceiveCase) -> dict[str, float | int]:
    """A walk's first reads and re-reads apart (a first read is a re-read plus one durable COMMIT)."""
    if not (case.first_reads and case.rereads):
        return {}
    return {"first_read_p50_ms": ms(pct(case.first_reads, 0.5)), "first_read_p99_ms": ms(pct(case.first_reads, 0.99)),
            "first_reads": len(case.first_reads), "reread_p50_ms": ms(pct(case.rereads, 0.5)),
            "reread_p99_ms": ms(pct(case.rereads, 0.99))}


def _emit_rounds(cases: list[ReceiveCase], stored: int, floor: ReceiveCase | None = None) -> None:
    """Each case's figures with its tag (PostgreSQL's with its ratio to SQLite's), and the least server's walk with
    the app's ratio to it when it ran."""
    floor_p99 = median_pct(floor.walk, 0.99) if floor is not None else None
    sqlite_p99: dict[str, float] = {}  # the SQLite case's p99 of each metric, for the other store's same-run ratio
    for case in cases:
        for metric, rounds, how in (("receive_100_at_1m", case.first, "the same first page, nothing acked"),
                                    ("receive_100_at_1m_cursor", case.walk, "successive pages via cursor")):
            p99 = median_pct(rounds, 0.99)
            ratio: dict[str, float | int] = {}
            if case.tag.get("store") == "sqlite":
                sqlite_p99[metric] = p99
            elif metric in sqlite_p99 and sqlite_p99[metric] > 0:
                ratio = {"ratio_to_sqlite": round(p99 / sqlite_p99[metric], 3)}  # of p99, the target's figure
            if metric.endswith("_cursor"):
                ratio |= _walk_split(case)
                if floor_p99 and not case.tag:
                    ratio |= {"minimal_server_p99_ms": floor_p99,
                              "ratio_to_minimal_server": round(p99 / floor_p99, 3)}  # of p99, the target's figure
            emit(metric, **latency_fields(rounds), stored=stored, recipients=len(case.tokens),
                 limit=100, how=how, unit="ms", target=f"p99_ms <= {case.target:g}", met=p99 <= case.target,
                 **ratio, **case.tag)
    if floor is not None:
        emit("minimal_server_receive_100_at_1m_cursor", **latency_fields(floor.walk), **_walk_split(floor),
             stored=stored, recipients=len(floor.tokens), limit=100, how="successive pages via cursor", unit="ms",
             note="benchmarks/minimal_server.py on the same home once the app stopped: the app's params model, "
                  "store receive (a first read's durable COMMIT on the loop) and answer, NDJSON on a Unix socket, "
                  "nothing else; the same client and rounds, other recipients' backlogs")


def _first_pages(cfg: Config, case: ReceiveCase) -> list[float]:
    """`cfg.receives` first pages, the recipients in turn."""
    samples = []
    for i in range(cfg.receives):
        params = {"session": case.tokens[i % len(case.tokens)], "limit": 100}
        t0 = time.perf_counter()
        page = case.client.call("mailbox/receive", params)
        samples.append(time.perf_counter() - t0)
        if len(page["records"]) != 100 or not page["more"]:
            raise RuntimeError(f"expected a full page with more to come, got {len(page['records'])}")
    return samples


def _cursor_walk(cfg: Config, case: ReceiveCase, token: str) -> list[float]:
    """Cursor continuation: walk one recipient's whole backlog, page after page, acking nothing."""
    samples: list[float] = []
    cursor = None
    first_pass = True  # the first walk through the backlog marks each record received (a durable write per page)
    while len(samples) < cfg.receives:
        params = {"session": token, "limit": 100}
        if cursor is not None:
            params["cursor"] = cursor
        t0 = time.perf_counter()
        page = case.client.call("mailbox/receive", params)
        samples.append(time.perf_counter() - t0)
        (case.first_reads if first_pass else case.rereads).append(samples[-1])
        cursor = page["cursor"] if page["more"] else None
        first_pass = first_pass and cursor is not None
    return samples


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
            with bench_app(root) as sq, AppClient(sq.home) as sq_client:
                _receive_rounds(cfg, [ReceiveCase({"store": "sqlite"}, sq_client, sq_tokens, 2, [], []),
                                      ReceiveCase({"store": "postgresql"}, pg_client, pg_tokens, 5, [], [])],
                                recipients * per)
    finally:
        shutil.rmtree(root, ignore_errors=True)
        with contextlib.suppress(Exception):
            cluster.sql(f'DROP DATABASE "{url.split("///", 1)[1].split("?", 1)[0]}" WITH (FORCE)')
