"""A network path a test can cut without a word: the dead network of docs/guide/several-machines.md (a cable pulled,
a partition, a firewall or NAT that forgot the flow), made with the kernel's own tools.

`DeadLink(target)` makes a network namespace joined to this one by a veth pair and runs a TCP relay inside it (`python
-m wardian_harness.hosts.netns`), listening on the namespace's address and forwarding each connection to the Unix socket
`target` (a `PrivateCluster`'s: the server then sees a local connection, trusted, without TLS). A client in this
namespace reaches it over TCP at `url(dbname, user)`, through the veth pair.

`cut()` puts a `blackhole` qdisc on both ends of the pair: every packet either side sends is dropped after its kernel
reported it sent, so neither side hears an error, a reset or an ICMP message, and a new connection's SYN goes
unanswered: a silent partition, not a refusal. (`ip link set … down` is not silent: the route goes, and a send fails at
once; `netem loss 100%` needs the sch_netem module, which a kernel may lack; `blackhole` is built into every kernel
with traffic control.) `heal()` removes them. Leaving the context, even after a failure half-way through building it,
stops the relay and deletes the namespace, which takes the veth pair with it.

Needs root (CAP_NET_ADMIN) and iproute2 (`ip`, `tc`): `unavailable()` says why not, for a skip reason. Several links
at once (xdist workers) never collide: names carry this process's pid and a random token, and each link takes a /30 of
198.18.0.0/15 (RFC 2544's benchmarking range, never a real network) that no interface holds, chosen under a file lock.
A process killed before it cleaned up leaves a namespace whose name carries its pid: `reap_links()` removes the links
of processes that are gone, and `DeadLink` runs it before making one.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import fcntl
import ipaddress
import os
import re
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import psutil

from wardian_harness.processes.proctree import ProcessTree

__all__ = ["DeadLink", "reap_links", "unavailable"]

PREFIX = "wdl"
RANGE = ipaddress.IPv4Network("198.18.0.0/15")
RELAY_PORT = 5432
READY_TIMEOUT_S = 30.0
_NAME = re.compile(rf"^{PREFIX}-(\d+)-([0-9a-f]{{6}})$")


def unavailable() -> str | None:
    """Why a link cannot be made here (None: it can)."""
    if os.geteuid() != 0:
        return "a network namespace needs root (CAP_NET_ADMIN)"
    missing = [tool for tool in ("ip", "tc") if shutil.which(tool) is None]
    if missing:
        return f"iproute2 is not installed ({', '.join(missing)} missing)"
    return None


def _run(*argv: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(list(argv), capture_output=True, text=True, encoding="utf-8", timeout=30, check=False,
                          stdin=subprocess.DEVNULL)
    if check and done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} failed ({done.returncode}): {done.stderr.strip()[-500:]}")
    return done


class DeadLink:
    """One relay behind a veth pair that `cut()` silences and `heal()` restores; a context manager."""

    def __init__(self, target: str) -> None:
        self.target = target
        self.token = secrets.token_hex(3)
        self.namespace = f"{PREFIX}-{os.getpid()}-{self.token}"
        self.outside = f"{PREFIX}{self.token}o"  # the veth end in this namespace (at most 15 characters)
        self.inside = f"{PREFIX}{self.token}i"
        self.host = ""  # the relay's address, inside the namespace
        self.is_cut = False
        self._tree = ProcessTree(f"deadlink-{self.token}")

    def url(self, dbname: str, user: str) -> str:
        """A libpq URL of `dbname` through the relay (plain TCP: the hop behind the relay is a local socket)."""
        return f"postgresql://{user}@{self.host}:{RELAY_PORT}/{dbname}?sslmode=disable"

    def cut(self) -> None:
        """Drop every packet both ways, from now on, silently."""
        _run("tc", "qdisc", "replace", "dev", self.outside, "root", "blackhole")
        _run("ip", "netns", "exec", self.namespace, "tc", "qdisc", "replace", "dev", self.inside, "root", "blackhole")
        self.is_cut = True

    def heal(self) -> None:
        """Let packets through again."""
        _run("tc", "qdisc", "del", "dev", self.outside, "root", check=False)
        _run("ip", "netns", "exec", self.namespace, "tc", "qdisc", "del", "dev", self.inside, "root", check=False)
        self.is_cut = False

    def __enter__(self) -> DeadLink:
        reap_links()
        try:
            self._build()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Stop the relay and delete the namespace and the pair (each step whatever the others did)."""
        self._tree.close()
        _remove(self.namespace, self.outside)

    def _build(self) -> None:
        _run("ip", "netns", "add", self.namespace)
        _run("ip", "link", "add", self.outside, "type", "veth", "peer", "name", self.inside, "netns", self.namespace)
        with _address_lock():
            net = _free_subnet()
            outside, inside = list(net.hosts())
            _run("ip", "addr", "add", f"{outside}/{net.prefixlen}", "dev", self.outside)
        _run("ip", "link", "set", self.outside, "up")
        _run("ip", "-n", self.namespace, "addr", "add", f"{inside}/{net.prefixlen}", "dev", self.inside)
        _run("ip", "-n", self.namespace, "link", "set", self.inside, "up")
        _run("ip", "-n", self.namespace, "link", "set", "lo", "up")
        self.host = str(inside)
        relay = self._tree.spawn(
            ["ip", "netns", "exec", self.namespace, sys.executable, "-m", "wardian_harness.hosts.netns", self.host,
             str(RELAY_PORT), self.target], env=dict(os.environ), stdout=subprocess.PIPE, stdin=subprocess.DEVNULL)
        assert relay.stdout is not None
        os.set_blocking(relay.stdout.fileno(), False)
        deadline = time.monotonic() + READY_TIMEOUT_S
        said = b""
        while b"\n" not in said:
            if relay.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the relay in {self.namespace} did not start: {said!r}")
            said += relay.stdout.read() or b""
            time.sleep(0.02)


@contextlib.contextmanager
def _address_lock() -> Iterator[None]:
    """One process at a time picks and assigns a subnet (an flock the kernel drops if its holder dies)."""
    fd = os.open(Path(tempfile.gettempdir()) / "wardian-deadlink.lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _free_subnet() -> ipaddress.IPv4Network:
    """A random /30 of `RANGE` that overlaps no address of an interface of this namespace."""
    addresses = re.findall(r"inet (\S+)", _run("ip", "-o", "-4", "addr").stdout)
    held = [ipaddress.IPv4Interface(a).network for a in addresses]
    for _ in range(100):
        index = secrets.randbelow(RANGE.num_addresses // 4)
        net = ipaddress.IPv4Network((int(RANGE.network_address) + 4 * index, 30))
        if not any(net.overlaps(h) for h in held):
            return net
    raise RuntimeError(f"no free /30 in {RANGE}")


def _remove(namespace: str, outside: str) -> None:
    for pid in _run("ip", "netns", "pids", namespace, check=False).stdout.split():
        with contextlib.suppress(psutil.Error, ValueError):
            psutil.Process(int(pid)).kill()
    _run("ip", "netns", "del", namespace, check=False)
    _run("ip", "link", "del", outside, check=False)  # gone with its peer already, unless the peer never moved


def reap_links() -> list[str]:
    """Remove the links (namespace, relay, veth pair) whose owner process is gone; returns their namespaces.

    A pid reused since is taken for the owner, and its link is left for a later pass: a link is never removed on a
    guess."""
    if unavailable() is not None:
        return []
    reaped: list[str] = []
    for line in _run("ip", "netns", "list", check=False).stdout.splitlines():
        name = line.split(" ", 1)[0]
        match = _NAME.match(name)
        if match is None or psutil.pid_exists(int(match[1])):
            continue
        _remove(name, f"{PREFIX}{match[2]}o")
        reaped.append(name)
    return reaped


# --- the relay, inside the namespace ------------------------------------------------------------------------


async def _pump(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    except OSError:
        pass
    finally:
        writer.close()


async def _relay(host: str, port: int, target: str) -> None:
    async def one(client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        try:
            server_r, server_w = await asyncio.open_unix_connection(target)
        except OSError:
            client_w.close()
            return
        await asyncio.gather(_pump(client_r, server_w), _pump(server_r, client_w))

    server = await asyncio.start_server(one, host, port)
    sys.stdout.buffer.write(b"ready\n")
    sys.stdout.flush()
    await server.serve_forever()


def main() -> None:
    parser = argparse.ArgumentParser(description="relay TCP connections on HOST:PORT to the Unix socket TARGET")
    parser.add_argument("host")
    parser.add_argument("port", type=int)
    parser.add_argument("target")
    args = parser.parse_args()
    asyncio.run(_relay(args.host, args.port, args.target))


if __name__ == "__main__":
    main()
