"""The layout of a WARDIAN_HOME, shared by the app (which owns it) and its clients (which only look).

```
$WARDIAN_HOME/
  wardian.db (+ -wal, -shm)     the interaction store; only the app opens it
  run/            0700          created by the app; refused when another uid owns it or others may enter
    app.v1.sock   0600          the control socket (the version is the control protocol's)
    app.lock                    flock held by the running app: one app per home
    app.pid
  logs/app.log                  the app's log (never contains a session secret)
```
Clients never create anything here: discovery without a home must leave the disk untouched.
"""

from __future__ import annotations

import os
import stat
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path

from wardian import errors
from wardian.model import PROTOCOL_VERSION

ENV_HOME = "WARDIAN_HOME"
ENV_SESSION = "WARDIAN_SESSION_ID"
# sockaddr_un.sun_path holds 108 bytes on Linux (104 on macOS) including the terminating NUL.
MAX_SOCKET_PATH_BYTES = 103


@dataclass(frozen=True, slots=True)
class Home:
    root: Path

    @property
    def db_path(self) -> Path:
        return self.root / "wardian.db"

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


def prepare_runtime_dir(home: Home) -> None:
    """Create the home and its private `run/` directory, or refuse an insecure one.

    Raises:
        InsecureRuntimeDir: `run/` is a symlink, not a directory, owned by another uid, or open to others.
        HomePathTooLong: the socket path would not fit in a sockaddr_un.
    """
    if len(os.fsencode(home.socket_path)) > MAX_SOCKET_PATH_BYTES:
        raise errors.HomePathTooLong(
            f"the control socket path {str(home.socket_path)!r} is longer than {MAX_SOCKET_PATH_BYTES} "
            "bytes, the limit of a Unix socket address; choose a shorter WARDIAN_HOME", field="home")
    home.root.mkdir(parents=True, exist_ok=True)
    with suppress(FileExistsError):
        os.mkdir(home.run_dir, 0o700)
    st = os.lstat(home.run_dir)
    if stat.S_ISLNK(st.st_mode) or not stat.S_ISDIR(st.st_mode):
        raise errors.InsecureRuntimeDir(f"{home.run_dir} is not a plain directory (a symlink?); remove it")
    if st.st_uid != os.geteuid():
        raise errors.InsecureRuntimeDir(
            f"{home.run_dir} is owned by uid {st.st_uid}, not by this user ({os.geteuid()}); remove it")
    if st.st_mode & 0o077:
        if st.st_mode & 0o022:
            raise errors.InsecureRuntimeDir(
                f"{home.run_dir} has mode {stat.S_IMODE(st.st_mode):o}: others may write in it; remove it "
                "or make it 0700")
        os.chmod(home.run_dir, 0o700)
    home.log_dir.mkdir(mode=0o700, exist_ok=True)
