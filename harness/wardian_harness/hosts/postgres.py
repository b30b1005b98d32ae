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
"""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import glob
import itertools
import json
import os
import pwd
import secrets
import shutil
import socket
import stat
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil

from wardian_harness.processes.owner import Owner
from wardian_harness.tls import make_server_certificate

__all__ = ["OWNER_FILE", "PG_BIN_ENV", "PgNotFound", "PrivateCluster", "clusters_dir", "find_pg_bin",
           "reap_orphans"]

PG_BIN_ENV = "WARDIAN_PG_BIN"
SUPERUSER = "wardian"
OWNER_FILE = "owner.json"
ROOT_PREFIX = "wpg"
STOP_TIMEOUT_S = 15
KILL_TIMEOUT_S = 10.0


class PgNotFound(Exception):
    """No PostgreSQL server binaries (initdb, pg_ctl, postgres) were found."""


def find_pg_bin() -> Path:
    """The directory of `initdb` and `pg_ctl`.

    Raises:
        PgNotFound: none found; the message says how to install them.
    """
    configured = os.environ.get(PG_BIN_ENV)
    candidates = (
        [Path(configured)]
        if configured
        else [Path(p) for p in sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=_major, reverse=True)]
    )
    on_path = shutil.which("initdb")
    if not configured and on_path:
        candidates.append(Path(on_path).parent)
    for folder in candidates:
        if (folder / "initdb").is_file() and (folder / "pg_ctl").is_file():
            return folder
    raise PgNotFound(
        "PostgreSQL's server binaries were not found (tried "
        + (", ".join(map(str, candidates)) or "nothing")
        + f"); install Debian's postgresql "
        f"(scripts/setup.sh --with-system) or set {PG_BIN_ENV}"
    )


def _major(path: str) -> int:
    try:
        return int(Path(path).parent.name.split(".")[0])
    except ValueError:
        return 0


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def clusters_dir() -> Path:
    """The parent directory of every private cluster of this user on this machine, `<temp dir>/wardian-pg-<uid>`.

    One well-known place, so that a later session finds what a killed one left there; under the system temp dir (as
    `mkdtemp` put the clusters before), whose short path keeps the Unix socket `<root>/.s.PGSQL.<port>` within
    the 107 bytes a socket address allows."""
    return Path(tempfile.gettempdir()) / f"wardian-pg-{os.geteuid()}"


def _server_ids() -> tuple[int, int]:
    """The uid and gid the server runs as: `postgres` under root (see the module docstring), else ours."""
    if os.geteuid() == 0:
        owner = pwd.getpwnam("postgres")
        return owner.pw_uid, owner.pw_gid
    return os.geteuid(), os.getegid()


def _ours(st: os.stat_result) -> bool:
    """A real directory (no symlink), this user's or the server user's, and closed to everyone else: the parent sits
    in a world-writable temp dir, where another user could have made it first, and the reaper acts on what it holds."""
    return (
        stat.S_ISDIR(st.st_mode) and st.st_uid in {os.geteuid(), _server_ids()[0]} and not st.st_mode & 0o077
    )


def _ensure_parent(parent: Path) -> Path:
    """Make `parent` (0700, owned by the server's user, which must pass through it to its data directory) or check
    that the existing one is ours.

    Raises:
        RuntimeError: `parent` exists and is not this user's own private directory.
    """
    parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    st = parent.lstat()
    uid, gid = _server_ids()
    if stat.S_ISDIR(st.st_mode) and st.st_uid in {os.geteuid(), uid}:
        if st.st_uid != uid:
            os.chown(parent, uid, gid)
        if stat.S_IMODE(st.st_mode) != 0o700:
            os.chmod(parent, 0o700)
    if not _ours(parent.lstat()):
        raise RuntimeError(f"{parent} is not a private directory of this user's (someone else's, or a symlink): "
                           "remove it, or give the cluster another parent")
    return parent


def _server_command() -> list[str]:
    return ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []


def _run(argv: list[str], *, check: bool = True, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """Run one of the server's commands as the server's user."""
    done = subprocess.run(
        [*_server_command(), *argv],
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=timeout,
        check=False,
        stdin=subprocess.DEVNULL,
        cwd="/",
    )
    if check and done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv[:2])} failed ({done.returncode}): {done.stderr.strip()[-2000:]}")
    return done


def _pidfile_pid(data: Path) -> int | None:
    """The server's pid: the first line of PostgreSQL's own `postmaster.pid`, there while the server runs (and after
    it was killed). The lines are listed in https://github.com/postgres/postgres/blob/master/src/include/utils/pidfile.h
    """
    try:
        first = (data / "postmaster.pid").read_text(encoding="utf-8", errors="replace").split("\n", 1)[0]
        return int(first.strip())
    except (OSError, ValueError):
        return None


@dataclass
class PrivateCluster:
    """One temporary PostgreSQL cluster. Use as a context manager, or `start()` then `destroy()`.

    Its directory `root` is made at once, under `parent` (`clusters_dir()` unless given: tests of the reaper give
    their own), with the owner record of this process in it."""

    tls: bool = False
    parent: Path = field(default_factory=clusters_dir)
    port: int = field(default_factory=_free_port)
    password: str = field(default_factory=lambda: secrets.token_urlsafe(24))
    bin: Path = field(default_factory=find_pg_bin)
    _databases: int = 0
    root: Path = field(init=False)
    owner: Owner = field(init=False)

    def __post_init__(self) -> None:
        self.root = Path(tempfile.mkdtemp(prefix=ROOT_PREFIX, dir=_ensure_parent(self.parent)))
        self.owner = Owner.of(os.getpid())
        self._write_record()
        _track(self)

    # --- paths -----------------------------------------------------------------------------------------

    @property
    def data(self) -> Path:
        return self.root / "data"

    @property
    def socket_dir(self) -> str:
        return str(self.root)

    @property
    def ca_path(self) -> Path:
        """The CA certificate a TLS client verifies the server against (`sslrootcert`)."""
        return self.root / "ca.crt"

    @property
    def passfile(self) -> Path:
        """A libpq password file (0600) for the TCP connections: `PGPASSFILE`."""
        return self.root / "pgpass"

    @property
    def record_path(self) -> Path:
        """The owner record (`OWNER_FILE`) the reaper reads: see the module docstring."""
        return self.root / OWNER_FILE

    # --- lifecycle --------------------------------------------------------------------------------------

    def start(self) -> PrivateCluster:
        """initdb (once) and start the server; returns once it accepts connections. A new cluster first reaps the
        orphans beside it (`reap_orphans`)."""
        if not self.data.exists():
            reap_orphans(self.parent)
            self._initdb()
        self._pg_ctl("start", "-w", "-t", "60", "-l", str(self.root / "server.log"), "-o", self._options())
        self._write_record()
        return self

    def stop(self) -> None:
        """A clean shutdown (`-m fast`): sessions are ended, the server exits."""
        self._pg_ctl("stop", "-w", "-t", "60", "-m", "fast", check=False)

    def crash(self) -> None:
        """`-m immediate`: the server exits at once without a checkpoint, as after a crash; recovery replays WAL."""
        self._pg_ctl("stop", "-w", "-t", "60", "-m", "immediate", check=False)

    def restart(self) -> None:
        self.stop()
        self.start()

    def running(self) -> bool:
        return self._pg_ctl("status", check=False).returncode == 0

    def destroy(self) -> None:
        if self.data.exists():
            self.crash()
        shutil.rmtree(self.root, ignore_errors=True)
        _untrack(self)

    def __enter__(self) -> PrivateCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.destroy()

    # --- databases ---------------------------------------------------------------------------------------

    def database(self, name: str | None = None) -> str:
        """Create a fresh database and return its URL over the Unix socket (no password: local trust)."""
        self._databases += 1
        name = name or f"w{os.getpid()}_{self._databases}_{secrets.token_hex(3)}"
        self.sql(f'CREATE DATABASE "{name}"')
        return self.url(name)

    def url(self, dbname: str) -> str:
        """The URL of `dbname` over the Unix socket (`host` is the socket directory)."""
        return f"postgresql:///{dbname}?host={self.socket_dir}&port={self.port}&user={SUPERUSER}"

    def tcp_url(self, dbname: str, *, sslmode: str = "verify-full") -> str:
        """The URL of `dbname` over TCP with TLS: no password in it (use `passfile`, as `PGPASSFILE`)."""
        return f"postgresql://{SUPERUSER}@127.0.0.1:{self.port}/{dbname}?sslmode={sslmode}&sslrootcert={self.ca_path}"

    def sql(self, statement: str, dbname: str = "postgres") -> str:
        """Run one statement as the superuser through psql-free psycopg; returns the first value as text."""
        import psycopg

        with psycopg.connect(
            host=self.socket_dir, port=self.port, user=SUPERUSER, dbname=dbname, autocommit=True
        ) as conn:
            cur = conn.execute(statement)  # type: ignore[arg-type]  # statements here are our own literals
            row = cur.fetchone() if cur.description else None
        return "" if row is None else str(row[0])

    # --- internals -----------------------------------------------------------------------------------------

    def _run(self, argv: list[str], *, check: bool = True) -> subprocess.CompletedProcess[str]:
        return _run(argv, check=check)

    def _write_record(self) -> None:
        """Write the owner record (atomically: the reaper never reads half of one), naming the server once it runs."""
        server: dict[str, Any] | None = None
        if (pid := _pidfile_pid(self.data)) is not None:
            with contextlib.suppress(psutil.Error):
                server = Owner.of(pid).as_json()
        record = {"owner": self.owner.as_json(), "postmaster": server, "data": str(self.data), "bin": str(self.bin)}
        partial = self.root / f".{OWNER_FILE}.partial"
        partial.write_text(json.dumps(record) + "\n", encoding="utf-8")
        os.replace(partial, self.record_path)

    def _pg_ctl(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        return self._run([str(self.bin / "pg_ctl"), "-D", str(self.data), *args], check=check)

    def _initdb(self) -> None:
        self.root.mkdir(mode=0o700, parents=True, exist_ok=True)
        if os.geteuid() == 0:
            owner = pwd.getpwnam("postgres")
            os.chown(self.root, owner.pw_uid, owner.pw_gid)
        pwfile = self.root / "initdb-password"
        pwfile.write_text(self.password + "\n", encoding="utf-8")
        if os.geteuid() == 0:
            os.chown(pwfile, pwd.getpwnam("postgres").pw_uid, -1)
        os.chmod(pwfile, 0o600)
        self._run(
            [
                str(self.bin / "initdb"),
                "-D",
                str(self.data),
                "-U",
                SUPERUSER,
                "--auth-local=trust",
                "--auth-host=scram-sha-256",
                f"--pwfile={pwfile}",
                "-E",
                "UTF8",
                "--no-instructions",
            ]
        )
        pwfile.unlink()
        # TCP only with TLS and a password; the Unix socket (in our private directory) trusts its local users.
        hba = [
            "local all all trust",
            "hostssl all all 127.0.0.1/32 scram-sha-256",
            "hostnossl all all 127.0.0.1/32 reject",
        ]
        self._write_as_server(self.data / "pg_hba.conf", "\n".join(hba) + "\n")
        if self.tls:
            self._make_certificates()
        self.passfile.write_text(f"127.0.0.1:{self.port}:*:{SUPERUSER}:{self.password}\n", encoding="utf-8")
        os.chmod(self.passfile, 0o600)

    def _options(self) -> str:
        listen = "127.0.0.1" if self.tls else ""
        opts = [
            f"-k {self.socket_dir}",
            f"-c listen_addresses='{listen}'",
            f"-p {self.port}",
            "-c fsync=on",
            "-c synchronous_commit=on",
            "-c max_connections=200",
        ]
        if self.tls:
            opts += [
                "-c ssl=on",
                f"-c ssl_cert_file={self.data / 'server.crt'}",
                f"-c ssl_key_file={self.data / 'server.key'}",
            ]
        return " ".join(opts)

    def _write_as_server(self, path: Path, text: str, mode: int = 0o600) -> None:
        path.write_text(text, encoding="utf-8")
        os.chmod(path, mode)
        if os.geteuid() == 0:
            owner = pwd.getpwnam("postgres")
            os.chown(path, owner.pw_uid, owner.pw_gid)

    def _make_certificates(self) -> None:
        """A CA of its own (`ca_path`) and a server certificate for 127.0.0.1 signed by it, in the data directory."""
        made = make_server_certificate("wardian test CA")
        self.ca_path.write_bytes(made.ca)
        self._write_as_server(self.data / "server.crt", made.cert.decode(), 0o644)
        self._write_as_server(self.data / "server.key", made.key.decode())


# --- the reaper ---------------------------------------------------------------------------------------------

_OWN: dict[Path, PrivateCluster] = {}
"""This process's clusters not yet destroyed, for `_at_exit`."""
_PARENTS: set[Path] = set()


def _track(cluster: PrivateCluster) -> None:
    if not _PARENTS:
        atexit.register(_at_exit)
    _OWN[cluster.root] = cluster
    _PARENTS.add(cluster.parent)


def _untrack(cluster: PrivateCluster) -> None:
    _OWN.pop(cluster.root, None)


def _at_exit() -> None:
    """At a normal exit: destroy what this process still owns (a cluster never destroyed would be an orphan a moment
    later), then reap the orphans beside them. A forked child exiting owns none of its parent's clusters."""
    for cluster in list(_OWN.values()):
        if cluster.owner.pid == os.getpid():
            with contextlib.suppress(Exception):
                cluster.destroy()
    for parent in _PARENTS:
        with contextlib.suppress(Exception):
            reap_orphans(parent)


def reap_orphans(parent: Path | None = None) -> list[Path]:
    """Stop and remove every cluster under `parent` (`clusters_dir()` unless given) whose owner process is gone;
    returns the roots removed.

    Only directories carrying an owner record are looked at: one without is being made right now (the record follows
    `mkdtemp` at once), or is not a cluster of this module. A cluster whose owner is alive is never touched, nor one
    whose record cannot be read. One reaper at a time per parent (an flock); a second one returns at once, as the
    first is doing the work. Errors on one cluster leave it for the next pass and never reach the caller: this runs
    at session start and at exit.
    """
    parent = clusters_dir() if parent is None else parent
    reaped: list[Path] = []
    try:
        if not _ours(parent.lstat()):
            return reaped
        with _reaper_lock(parent) as locked:
            if not locked:
                return reaped
            with os.scandir(parent) as entries:
                roots = [Path(e.path) for e in entries
                         if e.name.startswith(ROOT_PREFIX) and e.is_dir(follow_symlinks=False)]
            for root in roots:
                try:
                    if _reap(root):
                        reaped.append(root)
                except (OSError, subprocess.SubprocessError, psutil.Error):
                    continue
    except OSError:
        pass
    return reaped


@contextlib.contextmanager
def _reaper_lock(parent: Path) -> Iterator[bool]:
    """An exclusive, non-blocking flock on `parent/.reaper.lock`; yields whether it was taken. The kernel drops it
    when its holder dies, so a reaper killed mid-pass blocks no one."""
    try:
        fd = os.open(parent / ".reaper.lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
    except OSError:
        yield False
        return
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            yield False
            return
        yield True
    finally:
        os.close(fd)


def _reap(root: Path) -> bool:
    """Reap one cluster if its owner is gone; whether its directory was removed."""
    try:
        record = json.loads((root / OWNER_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    owner = Owner.from_json(record.get("owner")) if isinstance(record, dict) else None
    if owner is None or owner.alive():
        return False
    data = root / "data"
    server = _server_of(data, record)
    if server is not None and not _stop(server, data, record):
        return False
    shutil.rmtree(root, ignore_errors=True)
    return not root.exists()


def _server_of(data: Path, record: dict[str, Any]) -> psutil.Process | None:
    """The running postmaster of `data`, if any: the pid in `postmaster.pid` (else the record's), and only if that
    process is a postgres started with `-D data` - the file outlives a killed server, and after a reboot its pid may
    name anything.

    Raises:
        psutil.AccessDenied: the process may not be inspected (the caller leaves the cluster alone).
    """
    recorded = Owner.from_json(record.get("postmaster"))
    candidates = [_pidfile_pid(data), recorded.pid if recorded else None]
    for pid in dict.fromkeys(p for p in candidates if p is not None):
        try:
            proc = psutil.Process(pid)
            if proc.status() == psutil.STATUS_ZOMBIE:
                continue
            args = proc.cmdline()
        except psutil.NoSuchProcess:
            continue
        target = os.path.realpath(data)
        if any(flag == "-D" and os.path.realpath(value) == target for flag, value in itertools.pairwise(args)):
            return proc
    return None


def _stop(server: psutil.Process, data: Path, record: dict[str, Any]) -> bool:
    """`pg_ctl stop -m immediate` (the server ends its own children and removes its shared memory), then SIGKILL for
    the server and whatever of its children outlived it, and the shared memory it left; each step bounded. Whether all
    of them are gone."""
    segment = _segment(data)
    try:
        procs = [server, *server.children(recursive=True)]
    except psutil.NoSuchProcess:
        return True
    pg_ctl: Path | None = Path(str(record.get("bin", ""))) / "pg_ctl"
    if not pg_ctl.is_file():
        try:
            pg_ctl = find_pg_bin() / "pg_ctl"
        except PgNotFound:
            pg_ctl = None  # SIGKILL alone, then
    if pg_ctl is not None:
        with contextlib.suppress(OSError, subprocess.SubprocessError):
            _run([str(pg_ctl), "-D", str(data), "stop", "-w", "-t", str(STOP_TIMEOUT_S), "-m", "immediate"],
                 check=False, timeout=STOP_TIMEOUT_S + 15)
    for proc in procs:
        if _running(proc):
            with contextlib.suppress(psutil.NoSuchProcess):
                proc.kill()  # psutil checks first that the pid still names this process
    deadline = time.monotonic() + KILL_TIMEOUT_S
    while any(_running(p) for p in procs):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    if segment is not None:
        _drop_segment(*segment)
    return True


def _segment(data: Path) -> tuple[str, str] | None:
    """The System V shared memory segment of the server, (key, id) as line 7 of `postmaster.pid` gives them (see
    `_pidfile_pid`): beside its mmap'd memory PostgreSQL keeps this small one as an interlock, and removes it only
    itself, at its own exit (https://www.postgresql.org/docs/current/kernel-resources.html)."""
    try:
        lines = (data / "postmaster.pid").read_text(encoding="utf-8", errors="replace").splitlines()
        key, shmid = lines[6].split()
        return (str(int(key)), str(int(shmid)))
    except (OSError, IndexError, ValueError):
        return None


def _drop_segment(key: str, shmid: str) -> None:
    """Remove the segment a killed server left (`ipcrm`), if it is still that one (same key and id, in decimal in
    Linux's /proc/sysvipc/shm as in `postmaster.pid`) and nothing is attached to it any more. Elsewhere, or without
    `ipcrm`, it stays: 56 bytes."""
    try:
        rows = Path("/proc/sysvipc/shm").read_text(encoding="utf-8").splitlines()[1:]
    except OSError:
        return
    for row in rows:
        cols = row.split()
        if len(cols) > 6 and (cols[0], cols[1]) == (key, shmid) and cols[6] == "0":
            with contextlib.suppress(OSError, subprocess.SubprocessError):
                subprocess.run(["ipcrm", "-m", shmid], capture_output=True, timeout=30, check=False,
                               stdin=subprocess.DEVNULL)


def _running(proc: psutil.Process) -> bool:
    """Alive and still the same process; a zombie has exited (its parent, init here, has not collected it yet)."""
    try:
        return proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False
