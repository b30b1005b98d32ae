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

import hashlib
import logging
import os
import time
from pathlib import Path
from typing import Any

from wardian import errors
from wardian.auth.checks import check_credential, check_name, check_provider
from wardian.auth.index import CredentialEntry, Stored, entry_of, locked, raw_of, read_index, same, write_index
from wardian.auth.keyrings import KeyringAccess, open_keyring
from wardian.auth.model import DEFAULT_NAME, Credential, CredentialKind
from wardian.home import Home

log = logging.getLogger("wardian.auth")

ENV_BACKEND = "WARDIAN_CREDENTIAL_STORE"
BACKENDS = ("auto", "file", "keyring")


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
        for raw in read_index(self.path):
            if raw["provider"] != provider or raw["name"] != name:
                continue
            entry = entry_of(raw)
            secret = raw.get("secret", "") if entry.stored == "file" else self._keyring_secret(entry)
            found.append(Credential(entry.provider, entry.name, entry.kind, secret, entry.provider_id))
        return tuple(sorted(found, key=lambda c: c.provider_id or ""))

    def entries(self) -> list[CredentialEntry]:
        """Every stored credential's metadata and mask, never its secret; reads only the index (no keyring)."""
        return sorted((entry_of(raw) for raw in read_index(self.path)),
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
        with locked(self.home.root, self.lock_path):
            index = read_index(self.path)
            access = self._usable_keyring() if credential.kind is not CredentialKind.CHATGPT else None
            stored: Stored = "keyring" if access is not None else "file"
            entry = CredentialEntry(credential.provider, credential.name, credential.kind, credential.provider_id,
                                    credential.mask(), stored, int(time.time() * 1000))
            raw: dict[str, Any] = raw_of(entry)
            if access is not None:
                access.set(self.service, _account(entry), credential.secret)
            else:
                raw["secret"] = credential.secret
            kept = [r for r in index if not same(r, entry)]
            replaced = [r for r in index if same(r, entry)]
            write_index(self.home.root, self.path, [*kept, raw])
            for old in replaced:
                if old.get("stored") == "keyring" and stored != "keyring":
                    self._forget_old_copy(entry_of(old))
        return entry

    def remove(self, provider: str, name: str, provider_id: str | None = None) -> int:
        """Forget `provider`'s credentials under `name` (only `provider_id`'s when given); how many were removed.

        Raises: InvalidArguments; StorageUnavailable; InsecureHome.
        """
        check_provider(provider)
        check_name(name)
        if not self.path.exists():
            return 0
        with locked(self.home.root, self.lock_path):
            index = read_index(self.path)
            gone = [r for r in index if r["provider"] == provider and r["name"] == name
                    and (provider_id is None or r.get("provider_id") == provider_id)]
            if not gone:
                return 0
            write_index(self.home.root, self.path, [r for r in index if not any(r is g for g in gone)])
        for raw in gone:
            if raw.get("stored") == "keyring":
                self._keyring_delete(entry_of(raw))
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

def _account(entry: CredentialEntry) -> str:
    """The keyring account (user name) of one credential within the home's service."""
    return f"{entry.provider}/{entry.name}/{entry.provider_id or ''}"


def credential_file(home: Home) -> Path:
    """The home's credential index (the one file under the home a secret may be in)."""
    return home.root / "credentials.json"
