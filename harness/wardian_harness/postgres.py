"""A private PostgreSQL server for the tests, the bench and the two-host acceptance (#15): Debian's binaries, a
temporary cluster, nothing shared with any other server on the machine.

`PrivateCluster.start()` runs `initdb` (trust for local connections only, one superuser `wardian`) in a temporary
directory and `pg_ctl start` with the Unix socket in that directory and, when asked, TCP on 127.0.0.1 (a free port)
with TLS from a CA of its own (`tls=True`: `ca_path` is what a client passes as `sslrootcert`; TCP then requires TLS
and a password, which lives in a 0600 passfile, never in a URL). `database()` creates a fresh database and returns
its URL. `stop()`, `crash()` (`-m immediate`, as a kill -9 of the server would) and `restart()` control the server.

PostgreSQL refuses to run as root (`initdb: cannot be run as root`); under root, the server's own commands run as the
`postgres` user (created by Debian's package) on a directory it owns, and connecting stays root's.
Binaries: `WARDIAN_PG_BIN` when set, else the newest `/usr/lib/postgresql/*/bin`, else PATH.
"""

from __future__ import annotations

import datetime
import glob
import ipaddress
import os
import pwd
import secrets
import shutil
import socket
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["PG_BIN_ENV", "PgNotFound", "PrivateCluster", "find_pg_bin"]

PG_BIN_ENV = "WARDIAN_PG_BIN"
SUPERUSER = "wardian"


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


@dataclass
class PrivateCluster:
    """One temporary PostgreSQL cluster. Use as a context manager, or `start()` then `destroy()`."""

    tls: bool = False
    root: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="wpg")))
    port: int = field(default_factory=_free_port)
    password: str = field(default_factory=lambda: secrets.token_urlsafe(24))
    bin: Path = field(default_factory=find_pg_bin)
    _databases: int = 0

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

    # --- lifecycle --------------------------------------------------------------------------------------

    def start(self) -> PrivateCluster:
        """initdb (once) and start the server; returns once it accepts connections."""
        if not self.data.exists():
            self._initdb()
        self._pg_ctl("start", "-w", "-t", "60", "-l", str(self.root / "server.log"), "-o", self._options())
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

    def _as_server_user(self) -> list[str]:
        return ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []

    def _run(self, argv: list[str], *, check: bool = True) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            [*self._as_server_user(), *argv],
            capture_output=True,
            text=True,
            encoding="utf-8",
            timeout=120,
            check=False,
            stdin=subprocess.DEVNULL,
            cwd="/",
        )
        if check and done.returncode != 0:
            raise RuntimeError(f"{' '.join(argv[:2])} failed ({done.returncode}): {done.stderr.strip()[-2000:]}")
        return done

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
        """A CA of its own and a server certificate for 127.0.0.1 (and localhost) signed by it."""
        from cryptography import x509
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.x509.oid import NameOID

        now = datetime.datetime.now(datetime.UTC)
        ca_key = ec.generate_private_key(ec.SECP256R1())
        ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "wardian test CA")])
        ca = (
            x509.CertificateBuilder()
            .subject_name(ca_name)
            .issuer_name(ca_name)
            .public_key(ca_key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .sign(ca_key, hashes.SHA256())
        )
        key = ec.generate_private_key(ec.SECP256R1())
        cert = (
            x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")]))
            .issuer_name(ca_name)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(
                x509.SubjectAlternativeName(
                    [x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.DNSName("localhost")]
                ),
                critical=False,
            )
            .sign(ca_key, hashes.SHA256())
        )
        self.ca_path.write_bytes(ca.public_bytes(serialization.Encoding.PEM))
        self._write_as_server(self.data / "server.crt", cert.public_bytes(serialization.Encoding.PEM).decode(), 0o644)
        self._write_as_server(
            self.data / "server.key",
            key.private_bytes(
                serialization.Encoding.PEM, serialization.PrivateFormat.TraditionalOpenSSL, serialization.NoEncryption()
            ).decode(),
        )
