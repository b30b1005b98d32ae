"""Setting up a home: whether a folder is wardian's, creating it private, and tightening what the app made in it.

A folder is a wardian home only when wardian made it: it wrote the marker (`wardian.home.MARKER_NAME`) there when it
created the folder, or when it first took an empty folder of this user's. Nothing else counts (a `run/` or a
`wardian.db` is what any folder may hold: `/` holds `/run`), so wardian never changes the mode of, or writes into, a
folder it did not make (docs/guide/using.md#the-home, contract rule HOME-4). Every check runs before the first write,
and nothing here follows a link inside the home.

Used by every command that makes a home (`app start`, `app run`, `up`, `auth login`), before anything is written.
Stdlib only.
"""

from __future__ import annotations

import os
import stat
import sys
from contextlib import suppress
from pathlib import Path

from wardian import errors
from wardian.home import MARKER_NAME, MAX_SOCKET_PATH_BYTES, Home, check_local_filesystem

if sys.platform == "win32":  # access control lists for modes there
    from wardian import _home_windows

_MARKER_TEXT = (
    "This folder is a wardian home (WARDIAN_HOME): wardian made it and keeps it private.\n"
    "wardian only ever uses, or changes the modes in, a folder that holds this file.\n"
)

# What a home is, as `inspect_home` finds it.
NEW = "new"  # nothing there yet: wardian creates it
EMPTY = "empty"  # an empty folder of this user's, only its owner may enter: wardian takes it
MARKED = "marked"  # wardian's marker is there
LEGACY = "legacy"  # made by a wardian from before the marker: its store or credential index, checked by content

# What an app creates in its home besides `run/`, `logs/` and `agents/`: tightened to owner-only where found open to
# others (contract rule HOME-2), in a home wardian made and nowhere else.
_APP_FILES = ("wardian.db", "wardian.db-wal", "wardian.db-shm", "app.out", "store.url", "credentials.json",
              "credentials.lock", "team.json", MARKER_NAME)
_SQLITE_MAGIC = b"SQLite format 3\x00"
_SHARED_STORE_PREFIXES = (b"postgresql://", b"postgres://")
_READ_CAP = 1 << 16


def make_private_dir(path: Path) -> None:
    """Create `path` (and missing parents) with the leaf 0700 whatever the umask; an existing one is left as it is."""
    path.mkdir(parents=True, exist_ok=True, mode=0o700)


def inspect_home(home: Home) -> str:
    """What `home` is (NEW, EMPTY, MARKED or LEGACY), changing nothing and writing nothing.

    Raises:
        InsecureHome: not a directory of this user's; an empty one others may enter; a marker that is not wardian's.
        ForeignHome: a folder holding files wardian did not make (`/`, `/etc`, a person's own home, a project).
        StorageUnavailable: the home cannot be read.
    """
    if sys.platform == "win32":
        return _home_windows.inspect_home(home)
    try:
        st = os.stat(home.root)  # the home's own path may be a link a person made; nothing inside it is followed
    except FileNotFoundError:
        return NEW
    except OSError as exc:
        raise _unpreparable(home, exc) from None
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid():
        raise errors.InsecureHome(
            f"{home.root} is not a directory owned by this user (uid {os.geteuid()}); choose another "
            "WARDIAN_HOME", field="home", allowed="a new folder, or an empty one or a wardian home of this user's")
    try:
        kind = _kind(home)
    except OSError as exc:
        raise _unpreparable(home, exc) from None
    if kind == EMPTY and st.st_mode & 0o077:
        mode = f"{stat.S_IMODE(st.st_mode):o}"
        raise errors.InsecureHome(
            f"{home.root} has mode {mode}: other users may read the messages, tasks and replies stored there. Run "
            f"`chmod 700 {home.root}` (or choose a new WARDIAN_HOME, which wardian creates private), then start "
            "again", field="home", allowed="a home only its owner may enter (mode 700)", mode=mode)
    return kind


def adopt_home(home: Home) -> str:
    """Make `home` a wardian home, or refuse it having written nothing: create it (0700) when missing, write the
    marker into a new or empty folder, or into a home an older wardian made. Returns what `inspect_home` found.

    Raises: what `inspect_home` raises; StorageUnavailable (the home cannot be created or written).
    """
    if sys.platform == "win32":
        return _home_windows.adopt_home(home, _MARKER_TEXT)
    kind = inspect_home(home)
    _adopt(home, kind)
    return kind


def _adopt(home: Home, kind: str) -> None:
    try:
        if kind == NEW:
            make_private_dir(home.root)
            os.chmod(home.root, 0o700)
        if kind != MARKED:
            _write_marker(home.marker_path)
    except OSError as exc:
        raise _unpreparable(home, exc) from None


def prepare_home(home: Home) -> list[Path]:
    """Make `home` ready for an app: a wardian home (see `adopt_home`) with a private `run/` and `logs/`, or refuse it
    having changed nothing. In a home wardian made, what the app creates is tightened where it is open to others (an
    older wardian created it with the umask's modes), as ssh refuses a key others may read but wardian fixes what is
    its own. Returns the paths it tightened.

    Raises:
        InsecureHome, ForeignHome: see `inspect_home`.
        InsecureRuntimeDir: `run/` is a symlink, not a directory, owned by another uid, or writable by others.
        HomePathTooLong: the socket path would not fit in a sockaddr_un.
        UnsupportedFilesystem: the home is on a network filesystem.
        StorageUnavailable: the home cannot be created or written.
    """
    if sys.platform == "win32":
        return _home_windows.prepare_home(home, _MARKER_TEXT)
    if len(os.fsencode(home.socket_path)) > MAX_SOCKET_PATH_BYTES:
        raise errors.HomePathTooLong(
            f"the control socket path {str(home.socket_path)!r} is longer than {MAX_SOCKET_PATH_BYTES} "
            "bytes, the limit of a Unix socket address; choose a shorter WARDIAN_HOME", field="home")
    check_local_filesystem(home.root)
    kind = inspect_home(home)
    run_open = _check_run_dir(home) if kind in (MARKED, LEGACY) else False
    _adopt(home, kind)
    tightened: list[Path] = []
    try:
        if kind in (MARKED, LEGACY) and _tighten(home.root, 0o700, follow=True):
            tightened.append(home.root)
        with suppress(FileExistsError):
            os.mkdir(home.run_dir, 0o700)
        if run_open and _tighten(home.run_dir, 0o700):
            tightened.append(home.run_dir)
        with suppress(FileExistsError):
            os.mkdir(home.log_dir, 0o700)
        tightened += _tighten_contents(home)
    except OSError as exc:
        raise errors.StorageUnavailable(f"the home {home.root} cannot be written ({exc.strerror})",
                                        field="home") from None
    return tightened


def _unpreparable(home: Home, exc: OSError) -> errors.StorageUnavailable:
    return errors.StorageUnavailable(
        f"the home {home.root} cannot be prepared ({exc.strerror}); an app needs a writable local home", field="home")


def _kind(home: Home) -> str:
    """MARKED, EMPTY or LEGACY (see `inspect_home`). Raises: InsecureHome, ForeignHome; OSError."""
    try:
        mst = os.lstat(home.marker_path)
    except FileNotFoundError:
        mst = None
    if mst is not None:
        if not stat.S_ISREG(mst.st_mode) or mst.st_uid != os.geteuid():
            raise errors.InsecureHome(
                f"{home.marker_path} is not a file wardian wrote (a link, or another user's); remove it, or choose "
                "another WARDIAN_HOME", field="home", allowed="a marker wardian wrote, a regular file of this user's")
        return MARKED
    names = sorted(os.listdir(home.root))
    if not names:
        return EMPTY
    if _made_by_older_wardian(home):
        return LEGACY
    shown = ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")
    raise errors.ForeignHome(
        f"{home.root} is not a wardian home: it holds files wardian did not make ({shown}), and wardian never "
        "takes over such a folder. Choose a new or empty folder for WARDIAN_HOME (wardian creates a missing one)",
        field="home", allowed="a new folder, or an empty one or a wardian home of this user's")


def _made_by_older_wardian(home: Home) -> bool:
    """Whether the home holds what a wardian from before the marker wrote into every home it used, each checked by
    content: its SQLite store, the URL of the shared store it served, or its credential index (a JSON object)."""
    db = _own_file_head(home.db_path)
    if db is not None and db.startswith(_SQLITE_MAGIC):
        return True
    url = _own_file_head(home.store_url_path)
    if url is not None and url.startswith(_SHARED_STORE_PREFIXES):
        return True
    index = _own_file_head(home.root / "credentials.json")
    return index is not None and index.lstrip().startswith(b"{")


def _own_file_head(path: Path) -> bytes | None:
    """The first bytes of `path` when it is a regular file of this user's (never through a link), else None."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid():
            return None
        return os.read(fd, _READ_CAP)
    finally:
        os.close(fd)


def _write_marker(path: Path) -> None:
    """Write the marker, 0600, never through a link; one another wardian wrote meanwhile is kept.

    Raises: OSError."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    except FileExistsError:
        return
    try:
        os.write(fd, _MARKER_TEXT.encode("utf-8"))
    finally:
        os.close(fd)


def _check_run_dir(home: Home) -> bool:
    """Refuse a `run/` another user could use to hijack the socket; True when it exists and is only readable by others
    (to be tightened once every check passed).

    Raises: InsecureRuntimeDir; StorageUnavailable.
    """
    try:
        rst = os.lstat(home.run_dir)
    except FileNotFoundError:
        return False
    except OSError as exc:
        raise _unpreparable(home, exc) from None
    if stat.S_ISLNK(rst.st_mode) or not stat.S_ISDIR(rst.st_mode):
        raise errors.InsecureRuntimeDir(f"{home.run_dir} is not a plain directory (a symlink?); remove it")
    if rst.st_uid != os.geteuid():
        raise errors.InsecureRuntimeDir(
            f"{home.run_dir} is owned by uid {rst.st_uid}, not by this user ({os.geteuid()}); remove it")
    if rst.st_mode & 0o022:
        raise errors.InsecureRuntimeDir(
            f"{home.run_dir} has mode {stat.S_IMODE(rst.st_mode):o}: others may write in it; remove it "
            "or make it 0700")
    return bool(rst.st_mode & 0o077)


def _tighten(path: Path, mode: int, *, follow: bool = False) -> bool:
    """Set `mode` on `path` when it is a directory, file or socket of this user's that the group or others may access;
    True when changed. A link is never followed (`follow` only for the home's own path, which a person may have made a
    link): a directory or file is changed through a descriptor opened without following links.

    Raises: OSError.
    """
    try:
        st = os.stat(path) if follow else os.lstat(path)
    except FileNotFoundError:
        return False
    if st.st_uid != os.geteuid() or not st.st_mode & 0o077:
        return False
    if stat.S_ISSOCK(st.st_mode):
        os.chmod(path, mode)  # a socket cannot be opened; it sits in our private `run/`
        return True
    if not (stat.S_ISDIR(st.st_mode) or stat.S_ISREG(st.st_mode)):
        return False
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | (0 if follow else os.O_NOFOLLOW)
    fd = os.open(path, flags)
    try:
        now = os.fstat(fd)
        if (now.st_dev, now.st_ino) != (st.st_dev, st.st_ino):
            return False  # replaced since it was looked at: not what was checked
        os.fchmod(fd, mode)
    finally:
        os.close(fd)
    return True


def _tighten_contents(home: Home) -> list[Path]:
    """Make what the app created in its home owner-only where it is open to others; the paths it changed. Only the
    names an app creates are looked at, and in `run/`, `logs/` and `agents/` only files, sockets and folders of this
    user's.

    Raises: OSError.
    """
    agents = home.root / "agents"
    candidates = [home.log_dir, agents, *(home.root / name for name in _APP_FILES)]
    for folder in (home.run_dir, home.log_dir, agents):
        with suppress(FileNotFoundError, NotADirectoryError):
            candidates += sorted(folder.iterdir()) if not os.path.islink(folder) else []
    tightened: list[Path] = []
    for path in candidates:
        try:
            is_dir = stat.S_ISDIR(os.lstat(path).st_mode)
        except FileNotFoundError:
            continue
        if _tighten(path, 0o700 if is_dir else 0o600):
            tightened.append(path)
    return tightened
