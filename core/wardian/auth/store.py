"""The home's credential store: the secrets `wardian auth login` saves and each agent's starts read
(docs/guide/sign-in.md#where-credentials-are-stored).

```
$WARDIAN_HOME/credentials.json   0600   the index: provider, name, kind, OpenCode provider id, mask, where the
                                        secret is; with the secret itself when it is kept in the file
$WARDIAN_HOME/credentials.lock   0600   flock held while a login or logout rewrites the index
OS keyring                              service `wardian-<16 hex of sha256(home path)>`, one entry per credential
```

The secret goes to the OS keyring (through the `keyring` library) when a usable backend exists, else into the
index file, which is only ever replaced whole: a temporary 0600 file in the home, fsync'd, renamed over it.
`WARDIAN_CREDENTIAL_STORE` chooses: `auto` (the default: the keyring when usable), `file` or `keyring`. Each entry
records where its secret went, so a change of backend leaves earlier logins readable. The keyring service is named
after the home, so two homes never share an entry.

Reading never creates anything (`wardian auth status` without a home leaves the disk untouched); writing creates
the home private (0700) when it does not exist yet, and refuses one others may enter.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import logging
import os
import stat
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from wardian import errors
from wardian.auth.checks import check_credential, check_name, check_provider
from wardian.auth.keyrings import KeyringAccess, open_keyring
from wardian.auth.model import DEFAULT_NAME, Credential, CredentialKind
from wardian.home import Home, make_private_dir

log = logging.getLogger("wardian.auth")

ENV_BACKEND = "WARDIAN_CREDENTIAL_STORE"
BACKENDS = ("auto", "file", "keyring")
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


def backend_choice() -> str:
    """The backend `WARDIAN_CREDENTIAL_STORE` asks for (`auto` when unset).

    Raises: InvalidArguments (any other value).
    """
    choice = os.environ.get(ENV_BACKEND, "") or "auto"
    if choice not in BACKENDS:
        raise errors.InvalidArguments(f"{ENV_BACKEND}={choice[:40]!r} is not a credential store",
                                      field=ENV_BACKEND, allowed=", ".join(BACKENDS))
    return choice


def keyring_service(home: Home) -> str:
    """The keyring service of a home's credentials: one per home path, so two homes never share an entry."""
    digest = hashlib.sha256(os.fsencode(home.root.resolve())).hexdigest()[:16]
    return f"wardian-{digest}"


class CredentialStore:
    """One home's credentials. Thread-safe enough for its use: each call reads the index afresh, and every rewrite
    holds the home's credential lock, so a login in the CLI and a start in the app never see half a file."""

    def __init__(self, home: Home) -> None:
        self.home = home
        self.path = home.root / "credentials.json"
        self.lock_path = home.root / "credentials.lock"
        self.service = keyring_service(home)
        self._keyring: KeyringAccess | None = None
        self._probed = False

    # --- reading ---------------------------------------------------------------------------------------

    def get(self, provider: str, name: str = DEFAULT_NAME) -> tuple[Credential, ...]:
        """Every credential of `provider` under `name` (OpenCode: one per provider id), with its secret; () when
        there is none.

        Raises: InvalidArguments (provider, name); StorageUnavailable (the index or the keyring cannot be read, or
        an indexed secret is missing from it); InsecureHome (the index is open to others).
        """
        check_provider(provider)
        check_name(name)
        found: list[Credential] = []
        for raw in self._read_index():
            if raw["provider"] != provider or raw["name"] != name:
                continue
            entry = _entry_of(raw)
            secret = raw.get("secret", "") if entry.stored == "file" else self._keyring_secret(entry)
            found.append(Credential(entry.provider, entry.name, entry.kind, secret, entry.provider_id))
        return tuple(sorted(found, key=lambda c: c.provider_id or ""))

    def entries(self) -> list[CredentialEntry]:
        """Every stored credential's metadata and mask, never its secret; reads only the index (no keyring)."""
        return sorted((_entry_of(raw) for raw in self._read_index()),
                      key=lambda e: (e.provider, e.name, e.provider_id or ""))

    def has(self, provider: str, name: str) -> bool:
        return any(e.provider == provider and e.name == name for e in self.entries())

    def backend_description(self, *, probe: bool = True) -> str:
        """Where a login made now would be kept, in words for a person; without `probe`, an OS keyring is taken as
        usable when one is configured (nothing is written to it)."""
        access = self._usable_keyring() if probe or backend_choice() == "file" else self._reader()
        if access is not None:
            return f"the OS keyring ({access.backend_name}), service {self.service}"
        return f"{self.path} (mode 0600)"

    # --- writing ---------------------------------------------------------------------------------------

    def put(self, credential: Credential) -> CredentialEntry:
        """Save `credential`, replacing the one with the same provider, name and provider id.

        Raises: InvalidArguments (a field; nothing is saved); StorageUnavailable; InsecureHome.
        """
        check_credential(credential)
        backend_choice()  # an unknown backend name is refused before the home is touched
        with self._locked():
            index = self._read_index()
            access = self._usable_keyring() if credential.kind is not CredentialKind.CHATGPT else None
            stored: Stored = "keyring" if access is not None else "file"
            entry = CredentialEntry(credential.provider, credential.name, credential.kind, credential.provider_id,
                                    credential.mask(), stored, int(time.time() * 1000))
            raw: dict[str, Any] = _raw_of(entry)
            if access is not None:
                access.set(self.service, _account(entry), credential.secret)
            else:
                raw["secret"] = credential.secret
            kept = [r for r in index if not _same(r, entry)]
            replaced = [r for r in index if _same(r, entry)]
            self._write_index([*kept, raw])
            for old in replaced:
                if old.get("stored") == "keyring" and stored != "keyring":
                    self._forget_old_copy(_entry_of(old))
        return entry

    def remove(self, provider: str, name: str, provider_id: str | None = None) -> int:
        """Forget `provider`'s credentials under `name` (only `provider_id`'s when given); how many were removed.

        Raises: InvalidArguments; StorageUnavailable; InsecureHome.
        """
        check_provider(provider)
        check_name(name)
        if not self.path.exists():
            return 0
        with self._locked():
            index = self._read_index()
            gone = [r for r in index if r["provider"] == provider and r["name"] == name
                    and (provider_id is None or r.get("provider_id") == provider_id)]
            if not gone:
                return 0
            self._write_index([r for r in index if not any(r is g for g in gone)])
        for raw in gone:
            if raw.get("stored") == "keyring":
                self._keyring_delete(_entry_of(raw))
        return len(gone)

    # --- the keyring -----------------------------------------------------------------------------------

    def _usable_keyring(self) -> KeyringAccess | None:
        """The OS keyring when the chosen backend may use it and it works; None: the file.

        Raises: StorageUnavailable (`keyring` was asked for and is not usable).
        """
        choice = backend_choice()
        if choice == "file":
            return None
        if not self._probed:
            self._keyring = open_keyring(self.service)
            self._probed = True
        if self._keyring is None and choice == "keyring":
            raise errors.StorageUnavailable(
                f"{ENV_BACKEND}=keyring, but no usable OS keyring was found (on Linux: a Secret Service such as "
                "GNOME Keyring or KeePassXC on the session's D-Bus); unset it to keep credentials in a 0600 file "
                "in the home", field=ENV_BACKEND)
        return self._keyring

    def _reader(self) -> KeyringAccess | None:
        """The OS keyring for reading or deleting entries already there (no probe: they were written to it)."""
        if self._keyring is None:
            self._keyring = open_keyring(self.service, probe=False)
        return self._keyring

    def _keyring_secret(self, entry: CredentialEntry) -> str:
        access = self._reader()
        secret = access.get(self.service, _account(entry)) if access is not None else None
        if secret is None:
            raise errors.StorageUnavailable(
                f"the {entry.provider} credential {entry.name!r} is kept in the OS keyring, which does not hold it "
                f"now (locked, or not reachable from here); sign in again with `wardian auth login {entry.provider}` "
                "(with WARDIAN_CREDENTIAL_STORE=file it is kept in the home instead)", field="credential")
        return secret

    def _keyring_delete(self, entry: CredentialEntry) -> None:
        access = self._reader()
        if access is not None:
            access.delete(self.service, _account(entry))

    def _forget_old_copy(self, entry: CredentialEntry) -> None:
        """The keyring copy of a credential a login just replaced in the file: removed, or left with a warning when
        the keyring is locked or does not answer (the login stands: that is what `…STORE=file` is for)."""
        try:
            self._keyring_delete(entry)
        except errors.StorageUnavailable as exc:
            log.warning("the earlier OS keyring copy of the %s credential %r was not removed: %s", entry.provider,
                        entry.name, exc.message)

    # --- the index file --------------------------------------------------------------------------------

    def _read_index(self) -> list[dict[str, Any]]:
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except FileNotFoundError:
            return []
        except OSError as exc:
            raise errors.StorageUnavailable(f"the credential file {self.path} cannot be read ({exc.strerror})",
                                            field="credentials") from None
        with os.fdopen(fd, "rb") as f:
            st = os.fstat(f.fileno())
            if st.st_mode & 0o077 or st.st_uid != os.geteuid():
                raise errors.InsecureHome(
                    f"{self.path} has mode {stat.S_IMODE(st.st_mode):o} (owner uid {st.st_uid}): others may read "
                    f"the secrets in it. Run `chmod 600 {self.path}` if it is yours, then sign in again",
                    field="credentials", allowed="a file only its owner may read (mode 600)")
            data = f.read()
        try:
            doc = json.loads(data)
            entries = doc["entries"]
            if doc.get("version") != INDEX_VERSION or not isinstance(entries, list):
                raise ValueError("unknown version")
            for raw in entries:
                _entry_of(raw)
        except (ValueError, KeyError, TypeError, AttributeError):
            raise errors.StorageUnavailable(
                f"the credential file {self.path} is not one this wardian wrote (version {INDEX_VERSION}); move it "
                "away and sign in again", field="credentials") from None
        return list(entries)

    def _write_index(self, entries: list[dict[str, Any]]) -> None:
        """Replace the index whole: a 0600 temporary file in the home, fsync'd, renamed over it, the folder
        fsync'd (a crash leaves the old index or the new one, never a torn one)."""
        data = json.dumps({"version": INDEX_VERSION, "entries": entries}, indent=2, sort_keys=True).encode()
        fd, tmp = tempfile.mkstemp(prefix=".credentials-", suffix=".tmp", dir=self.home.root)  # mode 0600
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, self.path)
        except OSError as exc:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise errors.StorageUnavailable(f"the credential file {self.path} cannot be written ({exc.strerror})",
                                            field="credentials") from None
        with contextlib.suppress(OSError):
            dfd = os.open(self.home.root, os.O_RDONLY | os.O_DIRECTORY)
            try:
                os.fsync(dfd)
            finally:
                os.close(dfd)

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        """The home, private, with its credential lock held (one rewrite of the index at a time)."""
        self._private_home()
        try:
            fd = os.open(self.lock_path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        except OSError as exc:
            raise errors.StorageUnavailable(f"the credential lock {self.lock_path} cannot be opened "
                                            f"({exc.strerror})", field="credentials") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)

    def _private_home(self) -> None:
        """Create the home 0700 when missing; refuse one that is not this user's or that others may enter.

        Raises: InsecureHome; StorageUnavailable.
        """
        root = self.home.root
        try:
            if not root.exists():
                make_private_dir(root)
                os.chmod(root, 0o700)
            st = os.stat(root)
        except OSError as exc:
            raise errors.StorageUnavailable(f"the home {root} cannot be created ({exc.strerror})",
                                            field="home") from None
        if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid() or st.st_mode & 0o077:
            raise errors.InsecureHome(
                f"{root} is not a directory only this user may enter (mode {stat.S_IMODE(st.st_mode):o}): a "
                f"credential kept there could be read by others. Run `chmod 700 {root}`, then sign in again",
                field="home", allowed="a home only its owner may enter (mode 700)")


def _account(entry: CredentialEntry) -> str:
    """The keyring account (user name) of one credential within the home's service."""
    return f"{entry.provider}/{entry.name}/{entry.provider_id or ''}"


def _same(raw: dict[str, Any], entry: CredentialEntry) -> bool:
    return (raw["provider"], raw["name"], raw.get("provider_id")) == (entry.provider, entry.name, entry.provider_id)


def _raw_of(entry: CredentialEntry) -> dict[str, Any]:
    return {"provider": entry.provider, "name": entry.name, "kind": entry.kind.value,
            "provider_id": entry.provider_id, "mask": entry.mask, "stored": entry.stored,
            "updated_at": entry.updated_at}


def _entry_of(raw: dict[str, Any]) -> CredentialEntry:
    """Raises: KeyError, ValueError, TypeError (an entry this wardian did not write)."""
    stored = raw["stored"]
    if stored not in ("file", "keyring"):
        raise ValueError(stored)
    provider_id = raw.get("provider_id")
    if provider_id is not None and not isinstance(provider_id, str):
        raise TypeError(provider_id)
    return CredentialEntry(str(raw["provider"]), str(raw["name"]), CredentialKind(raw["kind"]), provider_id,
                           str(raw["mask"]), stored, int(raw["updated_at"]))


def credential_file(home: Home) -> Path:
    """The home's credential index (the one file under the home a secret may be in)."""
    return home.root / "credentials.json"
