"""The home's credential index, `$WARDIAN_HOME/credentials.json` (docs/guide/sign-in.md#where-credentials-are-stored):
the shape of its entries, reading it (refusing one others may read), replacing it whole, and the lock and private
home a rewrite needs. Where each secret lives (this file or the OS keyring) is `wardian.auth.store`'s to decide.
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from wardian import errors, filelock
from wardian.auth.model import CredentialKind
from wardian.home import Home
from wardian.home_setup import adopt_home

if sys.platform == "win32":  # privacy by access list there
    from wardian import _home_windows

# Not following links and not inherited by children; Windows has neither flag (its home is private by ACL).
_NO_FOLLOW = getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)

INDEX_VERSION = 1
Stored = Literal["file", "keyring"]


@dataclass(frozen=True, slots=True)
class CredentialEntry:
    """What may be shown of a stored credential: everything but its secret."""

    provider: str
    name: str
    kind: CredentialKind
    provider_id: str | None
    mask: str
    stored: Stored
    """Where its secret is: the OS keyring, or the home's credential file."""
    updated_at: int
    """When it was saved (milliseconds since the epoch)."""


def read_index(path: Path) -> list[dict[str, Any]]:
    """The index's entries ([] when there is none), each checked to be one this wardian wrote.

    Raises: StorageUnavailable (unreadable, or not this wardian's); InsecureHome (others may read it).
    """
    try:
        fd = os.open(path, os.O_RDONLY | _NO_FOLLOW)
    except FileNotFoundError:
        return []
    except OSError as exc:
        raise errors.StorageUnavailable(f"the credential file {path} cannot be read ({exc.strerror})",
                                        field="credentials") from None
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())
        if sys.platform == "win32":
            _home_windows.refuse_open(path, "credentials")
        elif st.st_mode & 0o077 or st.st_uid != os.geteuid():
            raise errors.InsecureHome(
                f"{path} has mode {stat.S_IMODE(st.st_mode):o} (owner uid {st.st_uid}): others may read "
                f"the secrets in it. Run `chmod 600 {path}` if it is yours, then sign in again",
                field="credentials", allowed="a file only its owner may read (mode 600)")
        data = f.read()
    try:
        doc = json.loads(data)
        entries = doc["entries"]
        if doc.get("version") != INDEX_VERSION or not isinstance(entries, list):
            raise ValueError("unknown version")
        for raw in entries:
            entry_of(raw)
    except (ValueError, KeyError, TypeError, AttributeError):
        raise errors.StorageUnavailable(
            f"the credential file {path} is not one this wardian wrote (version {INDEX_VERSION}); move it "
            "away and sign in again", field="credentials") from None
    return list(entries)


def write_index(root: Path, path: Path, entries: list[dict[str, Any]]) -> None:
    """Replace the index whole: a 0600 temporary file in the home, fsync'd, renamed over it, the folder
    fsync'd (a crash leaves the old index or the new one, never a torn one)."""
    data = json.dumps({"version": INDEX_VERSION, "entries": entries}, indent=2, sort_keys=True).encode()
    fd, tmp = tempfile.mkstemp(prefix=".credentials-", suffix=".tmp", dir=root)  # mode 0600
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise errors.StorageUnavailable(f"the credential file {path} cannot be written ({exc.strerror})",
                                        field="credentials") from None
    with contextlib.suppress(OSError):
        dfd = os.open(root, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))  # Windows refuses: nothing to sync
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)


@contextlib.contextmanager
def locked(root: Path, lock_path: Path) -> Iterator[None]:
    """The home, private, with its credential lock held (one rewrite of the index at a time)."""
    private_home(root)
    try:
        fd = os.open(lock_path, os.O_RDWR | os.O_CREAT | _NO_FOLLOW, 0o600)
    except OSError as exc:
        raise errors.StorageUnavailable(f"the credential lock {lock_path} cannot be opened "
                                        f"({exc.strerror})", field="credentials") from None
    try:
        filelock.lock(fd, wait=True)
        yield
    finally:
        os.close(fd)


def private_home(root: Path) -> None:
    """Create the home 0700 when missing (a wardian home: `wardian.home_setup.adopt_home`); refuse one that is not a
    wardian home of this user's, or that others may enter, having written nothing.

    Raises: InsecureHome (ForeignHome among them); StorageUnavailable.
    """
    adopt_home(Home(root))
    if sys.platform == "win32":
        _home_windows.refuse_open(root, "home")
        return
    try:
        st = os.stat(root)
    except OSError as exc:
        raise errors.StorageUnavailable(f"the home {root} cannot be created ({exc.strerror})",
                                        field="home") from None
    if st.st_mode & 0o077:
        raise errors.InsecureHome(
            f"{root} is not a directory only this user may enter (mode {stat.S_IMODE(st.st_mode):o}): a "
            f"credential kept there could be read by others. Run `chmod 700 {root}`, then sign in again",
            field="home", allowed="a home only its owner may enter (mode 700)")


def same(raw: dict[str, Any], entry: CredentialEntry) -> bool:
    return (raw["provider"], raw["name"], raw.get("provider_id")) == (entry.provider, entry.name, entry.provider_id)


def raw_of(entry: CredentialEntry) -> dict[str, Any]:
    return {"provider": entry.provider, "name": entry.name, "kind": entry.kind.value,
            "provider_id": entry.provider_id, "mask": entry.mask, "stored": entry.stored,
            "updated_at": entry.updated_at}


def entry_of(raw: dict[str, Any]) -> CredentialEntry:
    """Raises: KeyError, ValueError, TypeError (an entry this wardian did not write)."""
    stored = raw["stored"]
    if stored not in ("file", "keyring"):
        raise ValueError(stored)
    provider_id = raw.get("provider_id")
    if provider_id is not None and not isinstance(provider_id, str):
        raise TypeError(provider_id)
    return CredentialEntry(str(raw["provider"]), str(raw["name"]), CredentialKind(raw["kind"]), provider_id,
                           str(raw["mask"]), stored, int(raw["updated_at"]))
