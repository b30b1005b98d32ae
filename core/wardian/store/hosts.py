"""Hosts: which app serves which part of the roster, as functions of a `Store`.

Every app serves one host of its store: a name (`--host-name`, default the machine's hostname) under which it holds
a lease (`hosts.lease_owner`, renewed by heartbeat until `lease_expires_at`). Agents belong to the host that added
them (`agents.host`); only that host's app starts them, dispatches their tasks, pushes into their conversations and
settles what their runtimes left behind. On the embedded SQLite store the home lock already makes one app the only
one, so its app takes the lease whatever the row says and adopts every agent (a renamed machine keeps its agents).
On a shared store a second live app under the same host name is refused (`already_running`), unless it runs on the
same machine and home as the lease holder: then it holds that home's lock, so the holder is gone (killed).

Lease times are on the store's clock (`clock_ms`: the database server's on PostgreSQL), so hosts whose clocks
disagree still agree on who is live.
"""

from __future__ import annotations

from wardian import errors
from wardian.model import HostInfo
from wardian.store.engine import Store

HOST_COLS = "name, lease_owner, lease_expires_at, heartbeat_at, started_at, pid, machine, home"


def claim_host(
    store: Store, name: str, owner: str, ttl_ms: int, *, pid: int, machine: str, home: str, force: bool = False
) -> None:
    """Take the lease of host `name` for `owner` (an app's random token) and serve it from now on.

    `force`: take it whatever the row says (the embedded store, whose home lock already makes this app the
    only one); this also makes every agent of the store this host's.

    Raises:
        AlreadyRunning: another app holds a live lease on `name` from another machine or home.
    """
    with store.atomic():
        now = store.backend.clock_ms()
        store.db.write(
            "INSERT INTO hosts (name, started_at) VALUES (?, ?) ON CONFLICT (name) DO NOTHING", (name, now)
        )
        row = store.db.execute(f"SELECT {HOST_COLS} FROM hosts WHERE name = ?", (name,)).fetchone()
        live = row[1] is not None and row[2] is not None and row[2] > now
        same_place = row[6] == machine and row[7] == home
        if live and not force and not same_place:
            ago = max(0, now - (row[3] or now)) / 1000
            raise errors.AlreadyRunning(
                f"host {name!r} is served by a live app (pid {row[5]} on {row[6]}, home {row[7]}, last heartbeat "
                f"{ago:.1f} s ago); give this app another --host-name, or stop that one",
                field="host_name",
                host=name,
            )
        store.db.write(
            "UPDATE hosts SET lease_owner = ?, lease_expires_at = ?, heartbeat_at = ?, started_at = ?, pid = ?, "
            "machine = ?, home = ? WHERE name = ?",
            (owner, now + ttl_ms, now, now, pid, machine, home, name),
        )
        if force:
            store.db.write(
                "UPDATE agents SET host = ? WHERE kind = 'agent' AND (host IS NULL OR host != ?)", (name, name)
            )
    store.host = name
    store.lease_owner = owner


def renew_host(store: Store, ttl_ms: int) -> bool:
    """Extend this app's lease; False when it was lost (another app took the host after it expired)."""
    with store.atomic():
        now = store.backend.clock_ms()
        return (
            store.db.write(
                "UPDATE hosts SET lease_expires_at = ?, heartbeat_at = ? WHERE name = ? AND lease_owner = ?",
                (now + ttl_ms, now, store.host, store.lease_owner),
            ).rowcount
            == 1
        )


def release_host(store: Store) -> None:
    """A clean stop: the lease ends now, so the host shows offline at once."""
    with store.atomic():
        store.db.write(
            "UPDATE hosts SET lease_owner = NULL, lease_expires_at = NULL WHERE name = ? AND lease_owner = ?",
            (store.host, store.lease_owner),
        )


def list_hosts(store: Store) -> list[HostInfo]:
    """Every host of the store, by name, and whether its app's lease is live on the store's clock."""
    now = store.backend.clock_ms()
    return [
        HostInfo(
            name=r[0],
            live=r[1] is not None and r[2] is not None and r[2] > now,
            heartbeat_at=r[3],
            started_at=r[4],
            pid=r[5],
            machine=r[6],
        )
        for r in store.db.execute(f"SELECT {HOST_COLS} FROM hosts ORDER BY name")
    ]
