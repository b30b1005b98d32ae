"""The store alone, in the bench process: the app's send operation in batches back to back (the one-writer ceiling
the app's sends/s cannot exceed), the disk's fdatasync time that bounds a durable COMMIT, and the seeding of a home
with a million records for the receive and console figures."""

from __future__ import annotations

import os
import shutil
import statistics
import time
from pathlib import Path
from typing import Any

from benchmarks.apps import new_home
from benchmarks.config import TEXT, Config
from benchmarks.figures import emit, log
from wardian.app.service import admit_as
from wardian.home import Home
from wardian.model import InteractionKind
from wardian.store import Store, mailbox, open_sqlite, roster
from wardian.store import testing as store_testing


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
        store = open_sqlite(Home(root).db_path)
    else:
        from wardian.store.postgres import open_postgres

        store = open_postgres(url)
    try:
        agents = [roster.add_agent(store, f"ceil{i}", "codex", None) for i in range(32)]
        tokens = [roster.create_session(store, a.id) for a in agents]

        ops = [(admit_as, (tokens[i], agents[(i + 1) % 32].uuid, InteractionKind.INFORMATION, TEXT))
               for i in range(32)]
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
    store = open_sqlite(home.db_path)
    try:
        sender = roster.add_agent(store, "seed-sender", "codex", None)
        caller = roster.authenticate(store, roster.create_session(store, sender.id))
        agents = [roster.add_agent(store, f"inbox{i}", "codex", None) for i in range(recipients)]
        tokens = [roster.create_session(store, a.id) for a in agents]
        # The first record of each recipient goes through admit (the store's own path); the rest are the same
        # rows written by the store's seeding hook in big transactions, ~10x faster than 1M admits.
        for agent in agents:
            mailbox.admit(store, caller, agent, InteractionKind.INFORMATION, TEXT)
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
