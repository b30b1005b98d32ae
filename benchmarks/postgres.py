"""PostgreSQL alone and PostgreSQL seeded: raw psycopg INSERT+COMMIT from 32 connections on the schema the apps
migrated (`pg_raw_insert_commit_per_s_32_connections`), and a million records written into an app's database."""

from __future__ import annotations

import contextlib
import statistics
import threading
import time
from typing import TYPE_CHECKING, Any

from benchmarks.apps import add_agents
from benchmarks.config import TEXT, Config
from benchmarks.figures import emit, log, ms, pct
from wardian.client import AppClient
from wardian.model import now_ms
from wardian.store import testing as store_testing

if TYPE_CHECKING:
    import psycopg

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
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        ids = [int(r[0]) for r in conn.execute("SELECT id FROM agents WHERE kind = 'agent' ORDER BY id").fetchall()]
    conns = [psycopg.connect(url, autocommit=True, prepare_threshold=0) for _ in range(n)]
    results: dict[str, tuple[list[float], list[float], int]] = {}
    try:
        for v, variant in enumerate(RAW_VARIANTS):
            if variant == "no_notify":  # this bench's own database, the apps stopped: re-enabled below
                conns[0].execute("ALTER TABLE interactions DISABLE TRIGGER interactions_notify")
            results[variant] = _raw_variant(cfg, conns, ids, v, locked=variant == "append_lock")
            log(f"raw PostgreSQL INSERT+COMMIT, {n} connections, {variant}: "
                f"{statistics.median(results[variant][0]):,.0f}/s")
    finally:
        with contextlib.suppress(psycopg.Error):
            conns[0].execute("ALTER TABLE interactions ENABLE TRIGGER interactions_notify")
        for c in conns:
            c.close()
    _emit_raw(results)
    return {variant: round(statistics.median(results[variant][0])) for variant in RAW_VARIANTS}


def _raw_variant(cfg: Config, conns: list[psycopg.Connection[Any]], ids: list[int], v: int,
                 locked: bool) -> tuple[list[float], list[float], int]:
    """Rounds of one variant (round 0 warms up): each round's rows/s, its p50 latency, and the rows in all."""
    rates: list[float] = []
    p50s: list[float] = []
    total = 0
    for r in range(cfg.rounds + 1):  # round 0 warms up
        counts, lat, spans = _raw_round(conns, ids, v, r, locked, 0.5 if r == 0 else cfg.send_seconds)
        if r == 0:
            continue
        rates.append(sum(counts) / max(spans))
        p50s.append(pct([x for m in lat for x in m], 0.5))
        total += sum(counts)
    return rates, p50s, total


def _raw_round(conns: list[psycopg.Connection[Any]], ids: list[int], v: int, r: int, locked: bool,
               seconds: float) -> tuple[list[int], list[list[float]], list[float]]:
    """One round: a thread per connection inserting back to back for `seconds`, all released at once; per thread
    its row count, each INSERT's latency and the time it ran."""
    from wardian.store.postgres.schema import APPEND_LOCK

    n = len(conns)
    counts = [0] * n
    lat: list[list[float]] = [[] for _ in range(n)]
    spans = [0.0] * n
    start = threading.Barrier(n)

    def worker(k: int) -> None:
        conn, mine, sender, recipient = conns[k], lat[k], ids[k % len(ids)], ids[(k + 1) % len(ids)]
        start.wait()
        t_start = time.perf_counter()
        end, i = t_start + seconds, 0
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
    return counts, lat, spans


def _emit_raw(results: dict[str, tuple[list[float], list[float], int]]) -> None:
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
    from wardian.store.postgres import open_postgres

    sender = client.call("agent/add", {"name": "seed-sender", "provider": "codex"})
    sender_token = client.call("agent/session", {"agent": sender["uuid"]})["session_id"]
    inboxes = add_agents(client, "inbox", recipients)
    for agent, _ in inboxes:
        client.call("message/send", {"session": sender_token, "target": agent["uuid"], "message": TEXT})
    store = open_postgres(url, migrate=False)
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
