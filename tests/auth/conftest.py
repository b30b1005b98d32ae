"""Credential-store fixtures: a private home and, for the keyring path, a real in-memory keyring backend."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import keyring
import keyring.backend
import pytest
from keyring.compat import properties
from keyring.errors import PasswordDeleteError

from wardian.home import Home


class MemoryKeyring(keyring.backend.KeyringBackend):
    """A keyring backend keeping entries in a dict: the keyring path's tests, without a Secret Service.

    Its priority raises, as a backend not suited to this environment does, so keyring's own discovery never picks
    it: only the tests that `keyring.set_keyring` it use it."""

    @properties.classproperty
    def priority(cls) -> float:
        raise RuntimeError("tests only: set with keyring.set_keyring")

    def __init__(self) -> None:
        super().__init__()
        self.entries: dict[tuple[str, str], str] = {}

    def get_password(self, service: str, username: str) -> str | None:
        return self.entries.get((service, username))

    def set_password(self, service: str, username: str, password: str) -> None:
        self.entries[(service, username)] = password

    def delete_password(self, service: str, username: str) -> None:
        if self.entries.pop((service, username), None) is None:
            raise PasswordDeleteError(username)


@pytest.fixture
def home(tmp_path: Path) -> Home:
    return Home(tmp_path / "home")


@pytest.fixture
def file_backend(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WARDIAN_CREDENTIAL_STORE", "file")


@pytest.fixture
def memory_keyring(monkeypatch: pytest.MonkeyPatch) -> Iterator[MemoryKeyring]:
    """The in-memory keyring as this process's keyring (`auto` then uses it), restored afterwards."""
    monkeypatch.setenv("WARDIAN_CREDENTIAL_STORE", "auto")
    before = keyring.get_keyring()
    ring = MemoryKeyring()
    keyring.set_keyring(ring)
    try:
        yield ring
    finally:
        keyring.set_keyring(before)
