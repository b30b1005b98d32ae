"""The layout of a WARDIAN_HOME, shared by the app (which owns it) and its clients (which only look).

```
$WARDIAN_HOME/
  wardian.db (+ -wal, -shm)     the interaction store; only the app opens it
  run/            0700          created by the app; refused when another uid owns it or others may enter
    app.v1.sock   0600          the control socket (the version is the control protocol's)
    app.lock                    flock held by the running app: one app per home
    app.pid
  logs/app.log                  the app's log (never contains a session secret)
  logs/<provider>-<uuid>.log    each provider process's standard error
  run/<provider>-<uuid>.pid     the process group of an agent's provider runtime while it runs
  agents/<uuid>/                one agent's private provider home (e.g. codex/), socket and default workspace
  app.out                       `wardian app start`'s capture of the app's own output
```
Clients never create anything here: discovery without a home must leave the disk untouched.
"""

from __future__ import annotations

import os
import re
import stat
from contextlib import suppress
from pathlib import Path

from wardian import errors
from wardian.limits import PROTOCOL_VERSION

ENV_HOME = "WARDIAN_HOME"
ENV_SESSION = "WARDIAN_SESSION_ID"
ENV_STORE = "WARDIAN_STORE"  # the shared store an app serves, when --store is not given
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

    def agent_dir(self, agent_uuid: str) -> Path:
        return self.root / "agents" / agent_uuid

    def default_workspace(self, agent_uuid: str) -> Path:
        """The workspace of an agent added without `--workspace`."""
        return self.agent_dir(agent_uuid) / "workspace"

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


# What the app creates in a home (beside `run/` and `logs/`): tightened to owner-only when found open
# (contract rule HOME-2).
_APP_FILES = ("wardian.db", "wardian.db-wal", "wardian.db-shm", "app.out")


def make_private_dir(path: Path) -> None:
    """Create `path` (and missing parents) with the leaf 0700 whatever the umask; an existing one is left as it is."""
    path.mkdir(parents=True, exist_ok=True, mode=0o700)


def _is_app_made(home: Home) -> bool:
    """A home an app has used (its store or its `run/` exists): the app made what is in it, so it may fix modes."""
    return home.db_path.exists() or home.run_dir.is_dir()


def _tighten(path: Path, mode: int) -> bool:
    """chmod `path` (not following a link) to `mode` when group or others have any access; True when changed."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return False
    if stat.S_ISLNK(st.st_mode) or st.st_uid != os.geteuid() or not st.st_mode & 0o077:
        return False
    os.chmod(path, mode)
    return True


def prepare_home(home: Home) -> list[Path]:
    """Create the home, private (0700 directories, 0600 files whatever the umask), with its private `run/`, or
    refuse an insecure one. An existing home the app made is tightened where it is open to others (an older wardian
    created it with the umask's modes); any other existing home open to others is refused, as ssh refuses a key
    others may read. Returns the paths it tightened.

    Raises:
        InsecureHome: the home is not a directory of this user's, or others may enter it and no app made it.
        InsecureRuntimeDir: `run/` is a symlink, not a directory, owned by another uid, or writable by others.
        HomePathTooLong: the socket path would not fit in a sockaddr_un.
        UnsupportedFilesystem: the home is on a network filesystem; nothing was created.
        StorageUnavailable: the home cannot be created or written.
    """
    if len(os.fsencode(home.socket_path)) > MAX_SOCKET_PATH_BYTES:
        raise errors.HomePathTooLong(
            f"the control socket path {str(home.socket_path)!r} is longer than {MAX_SOCKET_PATH_BYTES} "
            "bytes, the limit of a Unix socket address; choose a shorter WARDIAN_HOME", field="home")
    check_local_filesystem(home.root)
    tightened: list[Path] = []
    try:
        if _secure_root(home):
            tightened.append(home.root)
        with suppress(FileExistsError):
            os.mkdir(home.run_dir, 0o700)
        rst = os.lstat(home.run_dir)
    except OSError as exc:
        raise errors.StorageUnavailable(
            f"the home {home.root} cannot be prepared ({exc.strerror}); an app needs a writable local home",
            field="home") from None
    _secure_run_dir(home, rst)
    try:
        home.log_dir.mkdir(mode=0o700, exist_ok=True)
        tightened += _tighten_contents(home)
    except OSError as exc:
        raise errors.StorageUnavailable(f"the home {home.root} cannot be written ({exc.strerror})",
                                        field="home") from None
    return tightened


def _secure_root(home: Home) -> bool:
    """Create the home's folder private, or check an existing one; True when an open one the app made was tightened.

    Raises: InsecureHome; OSError.
    """
    if not home.root.exists():
        make_private_dir(home.root)
        os.chmod(home.root, 0o700)
    st = os.stat(home.root)
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid():
        raise errors.InsecureHome(
            f"{home.root} is not a directory owned by this user (uid {os.geteuid()}); choose another "
            "WARDIAN_HOME", field="home")
    if not st.st_mode & 0o077:
        return False
    if not _is_app_made(home):
        raise errors.InsecureHome(
            f"{home.root} has mode {stat.S_IMODE(st.st_mode):o}: other users may read the messages, tasks "
            f"and replies stored there. Run `chmod 700 {home.root}` (or choose a new WARDIAN_HOME, which the "
            "app creates private), then start again", field="home",
            allowed="a home only its owner may enter (mode 700)", mode=f"{stat.S_IMODE(st.st_mode):o}")
    os.chmod(home.root, 0o700)
    return True


def _secure_run_dir(home: Home, rst: os.stat_result) -> None:
    """Refuse a `run/` (its stat `rst`) another user could use to hijack the socket; tighten one only readable.

    Raises: InsecureRuntimeDir.
    """
    if stat.S_ISLNK(rst.st_mode) or not stat.S_ISDIR(rst.st_mode):
        raise errors.InsecureRuntimeDir(f"{home.run_dir} is not a plain directory (a symlink?); remove it")
    if rst.st_uid != os.geteuid():
        raise errors.InsecureRuntimeDir(
            f"{home.run_dir} is owned by uid {rst.st_uid}, not by this user ({os.geteuid()}); remove it")
    if rst.st_mode & 0o077:
        if rst.st_mode & 0o022:
            raise errors.InsecureRuntimeDir(
                f"{home.run_dir} has mode {stat.S_IMODE(rst.st_mode):o}: others may write in it; remove it "
                "or make it 0700")
        os.chmod(home.run_dir, 0o700)


def _tighten_contents(home: Home) -> list[Path]:
    """Make what the app created in the home owner-only where it is open to others; the paths it changed.

    Raises: OSError.
    """
    tightened: list[Path] = []
    for directory in (home.log_dir, home.root / "agents"):
        if _tighten(directory, 0o700):
            tightened.append(directory)
    for path in [*(home.root / name for name in _APP_FILES), *home.log_dir.glob("*"), *home.run_dir.glob("*")]:
        if _tighten(path, 0o700 if path.is_dir() else 0o600):
            tightened.append(path)
    agents = home.root / "agents"
    for agent_dir in agents.iterdir() if agents.is_dir() else ():
        if _tighten(agent_dir, 0o700):
            tightened.append(agent_dir)
    return tightened
