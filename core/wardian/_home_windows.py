"""Setting up a home on Windows: the rules of `wardian.home_setup` with access control lists for file modes (it calls
these where `sys.platform == "win32"`; docs/guide/windows.md).

- A new home is created with a protected DACL that admits this user alone, inherited by everything made in it
  (`winsec.make_private`): the Windows edition of mode 0700.
- An existing empty folder is taken only when its DACL lets no other user in (SYSTEM and the Administrators group
  aside, who can read any file on Windows); otherwise it is refused (`InsecureHome`), having changed nothing.
- A folder wardian made (its marker is there) whose DACL lets others in is made private again, and the paths so
  tightened are returned, as on POSIX; so are `run/` and `logs/` there.
- A folder holding anything else is never taken (`ForeignHome`). There is no older wardian on Windows to recognise.
"""

from __future__ import annotations

import os
from contextlib import suppress
from pathlib import Path

from wardian import errors, winsec
from wardian.home import Home

NEW, EMPTY, MARKED = "new", "empty", "marked"  # as wardian.home_setup names them


def _others(path: Path, me: str) -> list[str]:
    """Who besides this user (and the OS) may enter `path`. Raises: OSError."""
    return winsec.others_allowed(winsec.path_sddl(str(path)), me)


def inspect_home(home: Home) -> str:
    """`home_setup.inspect_home` on Windows.

    Raises:
        InsecureHome, ForeignHome, StorageUnavailable: as there.
    """
    try:
        if not os.path.lexists(home.root):
            return NEW
        if not home.root.is_dir():
            raise errors.InsecureHome(f"{home.root} is not a folder; choose another WARDIAN_HOME", field="home",
                                      allowed="a new folder, or an empty one or a wardian home of this user's")
        if home.marker_path.is_file():
            return MARKED
        names = sorted(os.listdir(home.root))
        if names:
            shown = ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")
            raise errors.ForeignHome(
                f"{home.root} is not a wardian home: it holds files wardian did not make ({shown}), and wardian never "
                "takes over such a folder. Choose a new or empty folder for WARDIAN_HOME (wardian creates a missing "
                "one)", field="home", allowed="a new folder, or an empty one or a wardian home of this user's")
        others = _others(home.root, winsec.user_sid())
    except OSError as exc:
        raise _unpreparable(home, exc) from None
    if others:
        raise errors.InsecureHome(
            f"{home.root} lets other users in ({', '.join(others)}): they could read the messages, tasks and replies "
            "stored there. Remove their entries from the folder's permissions, or choose a new WARDIAN_HOME (which "
            "wardian creates private), then start again", field="home",
            allowed="a folder whose access list names only its owner (SYSTEM and Administrators aside)")
    return EMPTY


def adopt_home(home: Home, marker_text: str) -> str:
    """`home_setup.adopt_home` on Windows. Raises: what `inspect_home` raises."""
    kind = inspect_home(home)
    try:
        if kind == NEW:
            home.root.mkdir(parents=True)
            winsec.make_private(str(home.root), winsec.user_sid())
        if kind != MARKED:
            with suppress(FileExistsError), open(home.marker_path, "x", encoding="utf-8") as marker:
                marker.write(marker_text)
    except OSError as exc:
        raise _unpreparable(home, exc) from None
    return kind


def prepare_home(home: Home, marker_text: str) -> list[Path]:
    """`home_setup.prepare_home` on Windows: a wardian home with `run/` and `logs/`, each private; the paths it made
    private again.

    Raises:
        InsecureHome, ForeignHome, StorageUnavailable: as `home_setup.prepare_home`.
    """
    adopt_home(home, marker_text)
    me = winsec.user_sid()
    tightened: list[Path] = []
    try:
        for path in (home.root, home.run_dir, home.log_dir):
            made = not path.exists()
            path.mkdir(exist_ok=True)
            if _others(path, me):
                winsec.make_private(str(path), me)
                # Windows gives a folder made here the home's inherited owner-only DACL; Wine 8.0 gives it one
                # from its Unix mode bits instead (docs/guide/windows.md). Made private before anyone could have
                # used it, it was never open: only a folder found open is reported.
                if not made:
                    tightened.append(path)
    except OSError as exc:
        raise _unpreparable(home, exc) from None
    return tightened


def _unpreparable(home: Home, exc: OSError) -> errors.StorageUnavailable:
    return errors.StorageUnavailable(f"the home {home.root} cannot be prepared ({exc.strerror or exc})", field="home")


def refuse_open(path: Path, field: str) -> None:
    """Refuse `path` (the credential file, the home it is in) if its DACL lets another user in: the Windows edition
    of the mode checks before a secret is read or written there.

    Raises:
        InsecureHome: others may read it. StorageUnavailable: its DACL cannot be read.
    """
    try:
        others = _others(path, winsec.user_sid())
    except OSError as exc:
        raise errors.StorageUnavailable(f"the access list of {path} cannot be read ({exc.strerror or exc})",
                                        field=field) from None
    if others:
        raise errors.InsecureHome(
            f"{path} lets other users in ({', '.join(others)}): a credential kept there could be read by them. "
            "Remove their entries from its permissions, then sign in again", field=field,
            allowed="a file or folder whose access list names only its owner (SYSTEM and Administrators aside)")


def private_dir(path: Path) -> None:
    """Create the folder `path` (and missing parents) and make it private to this user (an agent's provider home).

    Raises:
        OSError: it cannot be created, or its DACL set.
    """
    path.mkdir(parents=True, exist_ok=True)
    me = winsec.user_sid()
    if _others(path, me):
        winsec.make_private(str(path), me)
