"""One temporary PostgreSQL cluster of a private server (see the package's docstring): made, started, stopped,
crashed, given databases and destroyed, with its owner record written for the reaper."""

from __future__ import annotations

import contextlib
import json
import os
import pwd
import secrets
import shutil
import socket
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil

from wardian_harness.hosts.postgres._server import (
    OWNER_FILE,
    ROOT_PREFIX,
    SUPERUSER,
    clusters_dir,
    ensure_parent,
    find_pg_bin,
    pidfile_pid,
    run_as_server,
)
from wardian_harness.hosts.postgres.reaper import reap_orphans, track, untrack
from wardian_harness.processes.owner import Owner
from wardian_harness.tls import make_server_certificate

__all__ = ["PrivateCluster"]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


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
        self.root = Path(tempfile.mkdtemp(prefix=ROOT_PREFIX, dir=ensure_parent(self.parent)))
        self.owner = Owner.of(os.getpid())
        self._write_record()
        track(self)

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
        """The owner record (`OWNER_FILE`) the reaper reads: see the package docstring."""
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
        untrack(self)

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

    def _write_record(self) -> None:
        """Write the owner record (atomically: the reaper never reads half of one), naming the server once it runs."""
        server: dict[str, Any] | None = None
        if (pid := pidfile_pid(self.data)) is not None:
            with contextlib.suppress(psutil.Error):
                server = Owner.of(pid).as_json()
        record = {"owner": self.owner.as_json(), "postmaster": server, "data": str(self.data), "bin": str(self.bin)}
        partial = self.root / f".{OWNER_FILE}.partial"
        partial.write_text(json.dumps(record) + "\n", encoding="utf-8")
        os.replace(partial, self.record_path)

    def _pg_ctl(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        return run_as_server([str(self.bin / "pg_ctl"), "-D", str(self.data), *args], check=check)

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
        run_as_server(
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
