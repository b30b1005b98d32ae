"""The OS keyring, through the `keyring` library: whether a usable one is here, and its three operations.

`keyring` picks the platform's store (macOS Keychain, Windows Credential Locker, a freedesktop Secret Service such
as GNOME Keyring or KWallet on Linux) and falls back to a backend that fails every call when none is reachable, as
on a headless Linux machine without a D-Bus session. A keyring is usable here when it is not that fail (or null)
backend and a probe entry can be written, read back and deleted. `keyring` is imported only when a credential is
read or saved: the CLI's other commands must start fast (wardian.cli).
"""

from __future__ import annotations

import logging
import secrets
from typing import Any

from wardian import errors

log = logging.getLogger("wardian.auth")

PROBE_ACCOUNT = "wardian-probe"


class KeyringAccess:
    """One keyring backend; every failure of it is a StorageUnavailable that never quotes a secret."""

    def __init__(self, backend: Any) -> None:
        self._backend = backend
        self.backend_name: str = str(getattr(type(backend), "name", type(backend).__name__))

    def get(self, service: str, account: str) -> str | None:
        try:
            value = self._backend.get_password(service, account)
        except Exception as exc:  # a backend raises what its platform raises (D-Bus, Keychain, ...)
            raise _unavailable("read", exc) from None
        return value if isinstance(value, str) else None

    def set(self, service: str, account: str, secret: str) -> None:
        try:
            self._backend.set_password(service, account, secret)
        except Exception as exc:
            raise _unavailable("write", exc) from None

    def delete(self, service: str, account: str) -> None:
        from keyring.errors import PasswordDeleteError

        try:
            self._backend.delete_password(service, account)
        except PasswordDeleteError:
            pass  # already gone: what a delete wanted
        except Exception as exc:
            raise _unavailable("delete an entry of", exc) from None


def _unavailable(what: str, exc: Exception) -> errors.StorageUnavailable:
    return errors.StorageUnavailable(f"could not {what} the OS keyring ({type(exc).__name__}); unlock it, or set "
                                     "WARDIAN_CREDENTIAL_STORE=file to keep credentials in the home",
                                     field="credentials")


def open_keyring(service: str, *, probe: bool = True) -> KeyringAccess | None:
    """The OS keyring, or None when none is usable here. `probe` writes, reads back and deletes one entry of
    `service` first (a backend may exist and still refuse, e.g. a locked or absent Secret Service)."""
    try:
        import keyring
        from keyring.backends import fail, null

        backend = keyring.get_keyring()
    except Exception as exc:  # a broken keyring configuration: the file store is still safe
        log.warning("the OS keyring cannot be loaded (%s); credentials go to the home's file", type(exc).__name__)
        return None
    if isinstance(backend, fail.Keyring | null.Keyring):
        return None
    access = KeyringAccess(backend)
    if not probe:
        return access
    token = secrets.token_hex(16)
    try:
        access.set(service, PROBE_ACCOUNT, token)
        usable = access.get(service, PROBE_ACCOUNT) == token
        access.delete(service, PROBE_ACCOUNT)
    except errors.StorageUnavailable:
        usable = False
    return access if usable else None
