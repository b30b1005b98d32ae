"""A private PostgreSQL server for the tests, the bench and the two-host acceptance (docs/guide/several-machines.md):
Debian's binaries, a temporary cluster, nothing shared with any other server on the machine.

`PrivateCluster.start()` runs `initdb` (trust for local connections only, one superuser `wardian`) in a temporary
directory and `pg_ctl start` with the Unix socket in that directory and, when asked, TCP on 127.0.0.1 (a free port)
with TLS from a CA of its own (`tls=True`: `ca_path` is what a client passes as `sslrootcert`; TCP then requires TLS
and a password, which lives in a 0600 passfile, never in a URL). `database()` creates a fresh database and returns
its URL. `stop()`, `crash()` (`-m immediate`, as a kill -9 of the server would) and `restart()` control the server.

PostgreSQL refuses to run as root (`initdb: cannot be run as root`); under root, the server's own commands run as the
`postgres` user (created by Debian's package) on a directory it owns, and connecting stays root's.
Binaries: `WARDIAN_PG_BIN` when set, else the newest `/usr/lib/postgresql/*/bin`, else PATH.

Orphans. A test process killed with kill -9 (or by a timeout) never runs `destroy()`, and its server, detached by
`pg_ctl`, runs on. So every cluster lives under one parent directory per user and machine (`clusters_dir()`:
`<temp dir>/wardian-pg-<uid>`, 0700, the server's user's) and carries `owner.json`, written when the directory is made
and again at each start:

    {"owner": {"pid": 123, "started": 1796117640.12}, "postmaster": {"pid": 456, "started": 1796117641.5},
     "data": "/tmp/wardian-pg-0/wpgab12cd34/data", "bin": "/usr/lib/postgresql/15/bin"}

`started` is the process's start time (psutil's `create_time()`): a pid alone may name another process by now.
`reap_orphans()` stops (`pg_ctl stop -m immediate`, then SIGKILL) and removes every cluster whose owner is gone, and
never touches one whose owner is alive (other xdist workers, other sessions). It runs whenever a new cluster is
started, at this process's exit, and at each test session's start and end (tests/conftest.py).

The package: `cluster` (`PrivateCluster`), `reaper` (`reap_orphans` and this process's own clusters at exit) and
`_server` (the server's binaries, its user and the parent directory both work in).
"""

from wardian_harness.hosts.postgres._server import (
    OWNER_FILE,
    PG_BIN_ENV,
    SUPERUSER,
    PgNotFound,
    clusters_dir,
    find_pg_bin,
)
from wardian_harness.hosts.postgres.cluster import PrivateCluster
from wardian_harness.hosts.postgres.reaper import reap_orphans

__all__ = ["OWNER_FILE", "PG_BIN_ENV", "SUPERUSER", "PgNotFound", "PrivateCluster", "clusters_dir", "find_pg_bin",
           "reap_orphans"]
