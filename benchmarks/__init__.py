"""Benchmarks of the messaging core (docs/benchmarks.md): one JSON object per line on stdout (`scripts/bench.py` is
the command).

Every figure comes from a real `wardian app run` process on a fresh home under /tmp, started the way the tests start
it (`wardian_harness.processes.apps`: `python -m wardian app run --home DIR --ready-fd N`), talked to over its
control socket.
Progress and the import-time report go to stderr; stdout carries only the JSON lines:

    {"metric": ..., "p50_ms"/"p99_ms" or "value", "n": ..., "target": ..., "met": ..., "unit": ...}

The metric names and the fields of each line are an interface (tests and the docs read them). Latency metrics repeat
in rounds and report the median of the rounds' percentiles with their range, because the machine is shared and
noisy. `--quick` uses small sizes so the whole run fits in CI in well under a minute; its figures are indicative only.

`--store postgresql` starts one private PostgreSQL server (`wardian_harness.hosts.postgres.PrivateCluster`, Debian's
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
  no threads and no GIL hand-offs, which leaves as much of the 2 cores as possible to the app (`clients`);
- the cold start spawns the installed `wardian` console script, exactly as a person or an agent would;
- the MCP figures put `wardian mcp serve` (the console script, as Codex launches it) side by side with
  `scripts/trivial_mcp_server.py`, a one-tool server on the SDK's own stdio transport, in the same run: spawns
  alternate between the two, and round trips alternate call by call over two SDK client sessions on one loop,
  so both meet the same background load (and the same disk, for the durable `send_message`).

Layout: `runner` (the command line and the one registry of subjects), `config` (the sizes), `figures` (percentiles
and the JSON lines), `apps` (the app under test and its agents), `clients` (the raw load generators), then one
module per subject: `roundtrip`, `wake`, `sends`, `store`, `postgres`, `cursor` (receive), `cli`, `frozen`, `mcp`,
`mcp_calls`, `codex`, `opencode`, `claude`, `console`.
"""
