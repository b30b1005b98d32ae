"""What a private PostgreSQL server's cluster and its reaper share: where the server's binaries are, the user its
commands run as (`postgres` under root, which PostgreSQL refuses to run as), the one parent directory of every cluster
of this user, and the server's own pid file."""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import stat
import subprocess
import tempfile
from pathlib import Path

__all__ = ["OWNER_FILE", "PG_BIN_ENV", "ROOT_PREFIX", "SUPERUSER", "PgNotFound", "clusters_dir", "ensure_parent",
           "find_pg_bin", "is_private_parent", "pidfile_pid", "run_as_server", "server_ids"]

PG_BIN_ENV = "WARDIAN_PG_BIN"
SUPERUSER = "wardian"
OWNER_FILE = "owner.json"
ROOT_PREFIX = "wpg"


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


def clusters_dir() -> Path:
    """The parent directory of every private cluster of this user on this machine, `<temp dir>/wardian-pg-<uid>`.

    One well-known place, so that a later session finds what a killed one left there; under the system temp dir (as
    `mkdtemp` put the clusters before), whose short path keeps the Unix socket `<root>/.s.PGSQL.<port>` within
    the 107 bytes a socket address allows."""
    return Path(tempfile.gettempdir()) / f"wardian-pg-{os.geteuid()}"


def server_ids() -> tuple[int, int]:
    """The uid and gid the server runs as: `postgres` under root (see the package docstring), else ours."""
    if os.geteuid() == 0:
        owner = pwd.getpwnam("postgres")
        return owner.pw_uid, owner.pw_gid
    return os.geteuid(), os.getegid()


def is_private_parent(st: os.stat_result) -> bool:
    """A real directory (no symlink), this user's or the server user's, and closed to everyone else: the parent sits
    in a world-writable temp dir, where another user could have made it first, and the reaper acts on what it holds."""
    return (
        stat.S_ISDIR(st.st_mode) and st.st_uid in {os.geteuid(), server_ids()[0]} and not st.st_mode & 0o077
    )


def ensure_parent(parent: Path) -> Path:
    """Make `parent` (0700, owned by the server's user, which must pass through it to its data directory) or check
    that the existing one is ours.

    Raises:
        RuntimeError: `parent` exists and is not this user's own private directory.
    """
    parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    st = parent.lstat()
    uid, gid = server_ids()
    if stat.S_ISDIR(st.st_mode) and st.st_uid in {os.geteuid(), uid}:
        if st.st_uid != uid:
            os.chown(parent, uid, gid)
        if stat.S_IMODE(st.st_mode) != 0o700:
            os.chmod(parent, 0o700)
    if not is_private_parent(parent.lstat()):
        raise RuntimeError(f"{parent} is not a private directory of this user's (someone else's, or a symlink): "
                           "remove it, or give the cluster another parent")
    return parent


def _server_command() -> list[str]:
    return ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []


def run_as_server(argv: list[str], *, check: bool = True, timeout: float = 120) -> subprocess.CompletedProcess[str]:
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


def pidfile_pid(data: Path) -> int | None:
    """The server's pid: the first line of PostgreSQL's own `postmaster.pid`, there while the server runs (and after
    it was killed). The lines are listed in https://github.com/postgres/postgres/blob/master/src/include/utils/pidfile.h
    """
    try:
        first = (data / "postmaster.pid").read_text(encoding="utf-8", errors="replace").split("\n", 1)[0]
        return int(first.strip())
    except (OSError, ValueError):
        return None
