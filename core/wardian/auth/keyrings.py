"""The OS keyring, through the `keyring` library: whether a usable one is here, and its three operations.

`keyring` picks the platform's store (macOS Keychain, Windows Credential Locker, a freedesktop Secret Service such
as GNOME Keyring or KWallet on Linux) and falls back to a backend that fails every call when none is reachable, as
on a headless Linux machine without a D-Bus session. A keyring is usable here when it is not that fail (or null)
backend and a probe entry can be written, read back and deleted. `keyring` is imported only when a credential is
read or saved: the CLI's other commands must start fast (wardian.cli).

Every call into the backend is bounded (`TIMEOUT_S`): a Secret Service that is locked may wait for a person to
unlock it, or a D-Bus peer may never answer, and an unbounded read would hang `agent start` and the app with it. A
call runs in a daemon thread of its own (a blocked D-Bus call cannot be cancelled; the thread is left to end or to
die with the process) and one that does not return in time is a StorageUnavailable naming the way out:
`WARDIAN_CREDENTIAL_STORE=file`.
"""

from __future__ import annotations

import logging
import secrets
import threading
from collections.abc import Callable
from typing import Any, TypeVar

from wardian import errors

log = logging.getLogger("wardian.auth")

PROBE_ACCOUNT = "wardian-probe"
TIMEOUT_S = 10.0  # per keyring call: a healthy backend answers in milliseconds, an unlock prompt may wait forever
FIX = "unlock it, or set WARDIAN_CREDENTIAL_STORE=file to keep credentials in the home"
_T = TypeVar("_T")


class KeyringTimeout(Exception):
    """A keyring call did not return within its bound."""


def bounded(call: Callable[[], _T], timeout_s: float) -> _T:
    """`call()`'s result or exception, run in a daemon thread. Raises: KeyringTimeout (no answer in `timeout_s`)."""
    outcome: list[Any] = []
    done = threading.Event()

    def run() -> None:
        try:
            outcome.append((True, call()))
        except BaseException as exc:  # handed to the caller, whatever the backend raised
            outcome.append((False, exc))
        finally:
            done.set()

    threading.Thread(target=run, name="wardian-keyring", daemon=True).start()
    if not done.wait(timeout_s):
        raise KeyringTimeout
    ok, value = outcome[0]
    if not ok:
        raise value
    return value  # type: ignore[no-any-return]


class KeyringAccess:
    """One keyring backend; every failure of it, a hang included, is a StorageUnavailable that never quotes a
    secret."""

    def __init__(self, backend: Any, *, timeout_s: float | None = None) -> None:
        self._backend = backend
        self.timeout_s = TIMEOUT_S if timeout_s is None else timeout_s
        self.backend_name: str = str(getattr(type(backend), "name", type(backend).__name__))

    def _call(self, what: str, call: Callable[[], _T]) -> _T:
        try:
            return bounded(call, self.timeout_s)
        except KeyringTimeout:
            raise errors.StorageUnavailable(
                f"the OS keyring ({self.backend_name}) did not answer within {self.timeout_s:g} s when asked to "
                f"{what} it (a locked Secret Service waits for an unlock); {FIX}", field="credentials") from None

    def get(self, service: str, account: str) -> str | None:
        try:
            value = self._call("read", lambda: self._backend.get_password(service, account))
        except errors.StorageUnavailable:
            raise
        except Exception as exc:  # a backend raises what its platform raises (D-Bus, Keychain, ...)
            raise _unavailable("read", exc) from None
        return value if isinstance(value, str) else None

    def set(self, service: str, account: str, secret: str) -> None:
        try:
            self._call("write", lambda: self._backend.set_password(service, account, secret))
        except errors.StorageUnavailable:
            raise
        except Exception as exc:
            raise _unavailable("write", exc) from None

    def delete(self, service: str, account: str) -> None:
        from keyring.errors import PasswordDeleteError  # keyring is never loaded with this module (see its docstring)

        try:
            self._call("delete an entry of", lambda: self._backend.delete_password(service, account))
        except PasswordDeleteError:
            pass  # already gone: what a delete wanted
        except errors.StorageUnavailable:
            raise
        except Exception as exc:
            raise _unavailable("delete an entry of", exc) from None


def _unavailable(what: str, exc: Exception) -> errors.StorageUnavailable:
    return errors.StorageUnavailable(f"could not {what} the OS keyring ({type(exc).__name__}); {FIX}",
                                     field="credentials")


def open_keyring(service: str, *, probe: bool = True) -> KeyringAccess | None:
    """The OS keyring, or None when none is usable here. `probe` writes, reads back and deletes one entry of
    `service` first (a backend may exist and still refuse, e.g. a locked or absent Secret Service)."""
    try:
        import keyring  # keyring and its backends (~100 ms): only once a keyring is asked for, not with this module
        from keyring.backends import fail, null

        backend = bounded(keyring.get_keyring, TIMEOUT_S)  # choosing one may ask D-Bus which services exist
    except KeyringTimeout:
        log.warning("the OS keyring did not load within %g s; it is not used (WARDIAN_CREDENTIAL_STORE=file keeps "
                    "credentials in the home)", TIMEOUT_S)
        return None
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
