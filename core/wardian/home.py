"""The layout of a WARDIAN_HOME, shared by the app (which owns it) and its clients (which only look).

```
$WARDIAN_HOME/
  wardian-home                  the marker: wardian made this folder (only such a folder is used, or tightened)
  wardian.db (+ -wal, -shm)     the interaction store; only the app opens it
  run/            0700          created by the app; refused when another uid owns it or others may enter
    app.v1.sock   0600          the control socket (the version is the control protocol's)
    app.lock                    flock held by the running app: one app per home
    app.pid
    console-login-<hash>.html   `wardian console`'s private page forwarding a browser to a one-time login (0600)
  logs/app.log                  the app's log (never contains a session secret)
  logs/<provider>-<uuid>.log    each provider process's standard error
  run/<provider>-<uuid>.pid     the process group of an agent's provider runtime while it runs
  agents/<uuid>/                one agent's private provider home (e.g. codex/), socket and default workspace
  worktrees/<name>/             an agent's git worktree (`worktree = true`), its workspace; kept until removed
  codex-auth/     0700          the Codex home of wardian's own ChatGPT sign-in (wardian.providers.codex.chatgpt_owner)
  app.out                       `wardian app start`'s capture of the app's own output
```
Clients never create anything here: discovery without a home must leave the disk untouched.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from wardian import errors
from wardian.limits import PROTOCOL_VERSION

ENV_HOME = "WARDIAN_HOME"
ENV_SESSION = "WARDIAN_SESSION_ID"
# Set to 1 in an MCP server's registration: it tells the app once its host has listed the tools (`session/announce`).
ENV_MCP_ANNOUNCE = "WARDIAN_MCP_ANNOUNCE"
ENV_STORE = "WARDIAN_STORE"  # the shared store an app serves, when --store is not given
# The file that makes a folder a wardian home: wardian writes it when it creates the folder or takes an empty one, and
# only a folder holding it is used as a home or has modes changed (`wardian.home_setup`).
MARKER_NAME = "wardian-home"
# sockaddr_un.sun_path holds 108 bytes on Linux (104 on macOS) including the terminating NUL.
MAX_SOCKET_PATH_BYTES = 103
# Where Linux lists the mounts this process sees; absent elsewhere (the check is then skipped).
MOUNTINFO = Path("/proc/self/mountinfo")
# SQLite's WAL needs shared memory between the processes of one host: a home on a network or cluster
# filesystem may corrupt the store or lose commits (sqlite.org/wal.html; contract rule HOME-3,
# reliability row D10).
NETWORK_FILESYSTEMS = frozenset({
    "nfs", "nfs4", "cifs", "smb3", "smbfs", "ncpfs", "afs", "coda", "ceph", "glusterfs", "lustre", "gfs2",
    "ocfs2", "9p", "davfs", "fuse.sshfs", "sshfs", "fuse.glusterfs", "fuse.cephfs", "fuse.s3fs", "fuse.rclone",
    "fuse.davfs2", "fuse.gcsfuse", "fuse.juicefs",
})
_MOUNTINFO_ESCAPE = re.compile(r"\\([0-7]{3})")


class Home:
    """A home's paths, immutable. A plain class rather than a frozen dataclass or a NamedTuple: every CLI command
    builds one, and the dataclasses module (with inspect behind it) and typing are a sizeable part of the CLI's cold
    start (docs/benchmarks.md)."""

    __slots__ = ("root",)
    root: Path

    def __init__(self, root: Path) -> None:
        object.__setattr__(self, "root", root)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"Home is immutable: cannot set {name}")

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Home) and other.root == self.root

    def __hash__(self) -> int:
        return hash(self.root)

    def __repr__(self) -> str:
        return f"Home(root={self.root!r})"

    @property
    def db_path(self) -> Path:
        return self.root / "wardian.db"

    @property
    def store_url_path(self) -> Path:
        """Which shared store this home's app serves (docs/guide/several-machines.md): the URL, without a password,
        written at its first start."""
        return self.root / "store.url"

    @property
    def marker_path(self) -> Path:
        """The file that makes a folder a wardian home (see `adopt_home`)."""
        return self.root / MARKER_NAME

    @property
    def run_dir(self) -> Path:
        return self.root / "run"

    @property
    def socket_path(self) -> Path:
        return self.run_dir / f"app.v{PROTOCOL_VERSION}.sock"

    @property
    def lock_path(self) -> Path:
        return self.run_dir / "app.lock"

    @property
    def pid_path(self) -> Path:
        return self.run_dir / "app.pid"

    @property
    def log_dir(self) -> Path:
        return self.root / "logs"

    @property
    def app_out_path(self) -> Path:
        return self.root / "app.out"

    @property
    def codex_auth_dir(self) -> Path:
        return self.root / "codex-auth"

    def agent_dir(self, agent_uuid: str) -> Path:
        return self.root / "agents" / agent_uuid

    def default_workspace(self, agent_uuid: str) -> Path:
        """The workspace of an agent added without `--workspace`."""
        return self.agent_dir(agent_uuid) / "workspace"

    def worktree_path(self, agent_name: str) -> Path:
        """The git worktree of an agent made with one (by name, so that an agent added again finds its work)."""
        return self.root / "worktrees" / agent_name

    def provider_log_path(self, provider: str, agent_uuid: str) -> Path:
        return self.log_dir / f"{provider}-{agent_uuid}.log"

    def provider_pid_path(self, provider: str, agent_uuid: str) -> Path:
        return self.run_dir / f"{provider}-{agent_uuid}.pid"

    def other_version_sockets(self) -> list[Path]:
        try:
            return [p for p in self.run_dir.glob("app.v*.sock") if p != self.socket_path]
        except OSError:
            return []


def resolve_home(explicit: str | os.PathLike[str] | None = None) -> Home:
    """The home named by `--home`, else by WARDIAN_HOME.

    Raises:
        InvalidArguments: neither is set.
    """
    raw = os.fspath(explicit) if explicit is not None else os.environ.get(ENV_HOME, "")
    if not raw:
        raise errors.InvalidArguments(
            "no Wardian home: pass --home DIR or set WARDIAN_HOME to the running app's home", field="home")
    return Home(Path(raw).expanduser().absolute())


def filesystem_type(path: Path, mountinfo: str) -> str | None:
    """The type of the filesystem holding the absolute, symlink-free `path`, read from `mountinfo` text
    (proc(5) `/proc/self/mountinfo`: the mount point is field 5, the type follows the ` - ` separator).

    The mount with the longest mount point containing `path` wins; a later line for the same mount point
    (mounted over the earlier one) replaces it. None when no line applies.
    """
    best: tuple[int, str] | None = None
    for line in mountinfo.splitlines():
        fields = line.split(" ")
        try:
            sep = fields.index("-", 6)
            mount_point = Path(_MOUNTINFO_ESCAPE.sub(lambda m: chr(int(m[1], 8)), fields[4]))
            fstype = fields[sep + 1]
        except (ValueError, IndexError):
            continue
        if (path == mount_point or mount_point in path.parents) and (
                best is None or len(mount_point.parts) >= best[0]):
            best = (len(mount_point.parts), fstype)
    return best[1] if best else None


def check_local_filesystem(path: Path, mountinfo_path: Path | None = None) -> None:
    """Refuse a home on a network filesystem (Linux; elsewhere nothing is checked).

    Raises:
        UnsupportedFilesystem: the nearest existing directory of `path` is on nfs, cifs, sshfs or the like.
    """
    try:
        text = (mountinfo_path or MOUNTINFO).read_text(encoding="utf-8", errors="surrogateescape")
    except OSError:
        return
    existing = path
    while not existing.exists() and existing.parent != existing:
        existing = existing.parent
    fstype = filesystem_type(existing.resolve(), text)
    if fstype is not None and fstype in NETWORK_FILESYSTEMS:
        raise errors.UnsupportedFilesystem(
            f"{path} is on a {fstype} filesystem; the store needs a local disk (SQLite WAL does not work over "
            "a network filesystem): choose a WARDIAN_HOME on a local filesystem", field="home",
            allowed="a home on a local filesystem", filesystem=fstype)
