"""App round trips over one persistent `AppClient` connection: a cheap read (`mailbox/wait` with timeout 0) and
the roster listing."""

from __future__ import annotations

import statistics
import time
from typing import TYPE_CHECKING, Any

from benchmarks.apps import add_agents, fresh_app
from benchmarks.config import Config
from benchmarks.figures import emit, latency_fields, ms, pct
from wardian.client import AppClient

if TYPE_CHECKING:
    from wardian_harness.hosts.postgres import PrivateCluster


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
    p50s = {(tag.get("store"), name): statistics.median(pct(r, 0.5) for r in rounds)
            for (tag, _, name, _, _), rounds in zip(cases, results, strict=True)}
    for (tag, _, name, method, _), rounds in zip(cases, results, strict=True):
        # A PostgreSQL line carries its p50 over SQLite's, measured interleaved in the same run.
        ratio = ({"ratio_to_sqlite": round(p50s[(tag["store"], name)] / p50s[("sqlite", name)], 2)}
                 if tag.get("store") == "postgresql" and ("sqlite", name) in p50s else {})
        emit(name, **latency_fields(rounds), method=method, unit="ms", target="p50_ms <= 0.3",
             met=ms(p50s[(tag.get("store"), name)]) <= 0.3, **ratio, **tag)


def bench_roundtrip_compare(cfg: Config, cluster: PrivateCluster) -> None:
    """App round trips side by side: the SQLite app and an app on a PostgreSQL database (host alpha)."""
    with fresh_app() as sq, fresh_app(cluster.database(), "alpha") as pg, AppClient(sq.home) as sq_client, \
            AppClient(pg.home) as pg_client:
        _roundtrips(cfg, [({"store": "sqlite"}, sq_client), ({"store": "postgresql"}, pg_client)])
