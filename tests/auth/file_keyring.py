"""A keyring backend keeping its entries in one JSON file (`WARDIAN_TEST_KEYRING`), for the tests that run the CLI
and the app as separate processes: they select it with keyring's own `PYTHON_KEYRING_BACKEND`, and then share
one keyring, as processes on a desktop share its Secret Service or Keychain.

It is viable only where `WARDIAN_TEST_KEYRING` is set, so keyring's discovery in any other process never picks it.
"""

from __future__ import annotations

import fcntl
import json
import os
from pathlib import Path

import keyring.backend
from keyring.compat import properties
from keyring.errors import PasswordDeleteError

ENV_FILE = "WARDIAN_TEST_KEYRING"


class FileKeyring(keyring.backend.KeyringBackend):
    @properties.classproperty
    def priority(cls) -> float:
        if not os.environ.get(ENV_FILE):
            raise RuntimeError(f"tests only: set {ENV_FILE}")
        return 1

    @staticmethod
    def path() -> Path:
        return Path(os.environ[ENV_FILE])

    def _update(self, service: str, username: str, password: str | None) -> bool:
        """Set (or, with None, delete) one entry under an exclusive lock; False when there was none to delete."""
        fd = os.open(self.path(), os.O_RDWR | os.O_CREAT, 0o600)
        with os.fdopen(fd, "r+") as f:
            fcntl.flock(f.fileno(), fcntl.LOCK_EX)
            entries: dict[str, str] = json.loads(f.read() or "{}")
            key = f"{service}\n{username}"
            existed = key in entries
            if password is None:
                entries.pop(key, None)
            else:
                entries[key] = password
            f.seek(0)
            f.truncate()
            f.write(json.dumps(entries))
        return existed

    def get_password(self, service: str, username: str) -> str | None:
        try:
            entries: dict[str, str] = json.loads(self.path().read_text() or "{}")
        except FileNotFoundError:
            return None
        return entries.get(f"{service}\n{username}")

    def set_password(self, service: str, username: str, password: str) -> None:
        self._update(service, username, password)

    def delete_password(self, service: str, username: str) -> None:
        if not self._update(service, username, None):
            raise PasswordDeleteError(username)


def entries(path: Path) -> dict[str, str]:
    return json.loads(path.read_text() or "{}") if path.exists() else {}
