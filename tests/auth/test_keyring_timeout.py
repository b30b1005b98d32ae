"""A keyring that does not answer (a locked Secret Service waiting for an unlock, a D-Bus peer that never replies)
bounds every call: reading an agent's credential fails with a clear error naming the way out
(`WARDIAN_CREDENTIAL_STORE=file`) instead of hanging `agent start` and the app; and that way out works while the
keyring still hangs. A real `keyring` backend set in-process stands in for the blocked one."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import keyring
import pytest

from tests.auth.conftest import MemoryKeyring
from wardian import errors
from wardian.auth import keyrings
from wardian.auth.model import Credential, CredentialKind
from wardian.auth.store import CredentialStore
from wardian.home import Home

pytestmark = pytest.mark.fast

KEY = "sk-test-0123456789abcdef3f9a"
KEY2 = "sk-test-fedcba98765432107b2c"
BOUND_S = 0.2  # the bound under test; the blocked calls wait for `release`, never for a clock


class BlockedKeyring(MemoryKeyring):
    """A backend whose every call blocks until `release` (as a locked Secret Service's prompt does), holding the
    entries it was given."""

    def __init__(self, entries: dict[tuple[str, str], str]) -> None:
        super().__init__()
        self.entries = dict(entries)
        self.release = threading.Event()
        self.asked: list[str] = []

    def _wait(self, what: str) -> None:
        self.asked.append(what)
        self.release.wait()

    def get_password(self, service: str, username: str) -> str | None:
        self._wait("get")
        return super().get_password(service, username)

    def set_password(self, service: str, username: str, password: str) -> None:
        self._wait("set")
        super().set_password(service, username, password)

    def delete_password(self, service: str, username: str) -> None:
        self._wait("delete")
        super().delete_password(service, username)


@pytest.fixture
def blocked(home: Home, memory_keyring: MemoryKeyring, monkeypatch: pytest.MonkeyPatch) -> Iterator[BlockedKeyring]:
    """A codex credential saved in a working keyring, which then stops answering (released at the end, so its
    waiting threads end)."""
    CredentialStore(home).put(Credential("codex", "default", CredentialKind.API_KEY, KEY))
    assert [k for k, v in memory_keyring.entries.items() if v == KEY], "the secret went to the keyring"
    ring = BlockedKeyring(memory_keyring.entries)
    monkeypatch.setattr(keyrings, "TIMEOUT_S", BOUND_S)
    keyring.set_keyring(ring)  # the memory_keyring fixture restores the process's keyring afterwards
    try:
        yield ring
    finally:
        ring.release.set()


def test_a_keyring_that_does_not_answer_fails_the_read_naming_the_fix(home: Home, blocked: BlockedKeyring) -> None:
    with pytest.raises(errors.StorageUnavailable) as info:
        CredentialStore(home).get("codex")  # what each `agent start` reads
    assert blocked.asked == ["get"]  # it was asked, and did not answer
    message = info.value.message
    assert f"did not answer within {BOUND_S:g} s" in message
    assert "WARDIAN_CREDENTIAL_STORE=file" in message
    assert KEY not in message


def test_the_file_store_is_a_way_round_a_keyring_that_still_hangs(home: Home, blocked: BlockedKeyring,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """`WARDIAN_CREDENTIAL_STORE=file` and a new login: the login stands although the old keyring copy cannot be
    removed (a warning says so), and later reads never wait for the keyring."""
    monkeypatch.setenv("WARDIAN_CREDENTIAL_STORE", "file")
    entry = CredentialStore(home).put(Credential("codex", "default", CredentialKind.API_KEY, KEY2))
    assert entry.stored == "file"
    assert blocked.asked == ["delete"]  # the old copy: asked for, not answered, left behind
    asked = len(blocked.asked)
    assert [c.secret for c in CredentialStore(home).get("codex")] == [KEY2]
    assert len(blocked.asked) == asked, "the read did not touch the keyring"


def test_a_keyring_that_does_not_answer_the_probe_is_not_used_for_a_login(home: Home, blocked: BlockedKeyring,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """`auto` probes the keyring before a login saves a secret there: a probe with no answer means not usable, and
    the secret goes to the home's 0600 file; `keyring` (forced) refuses and saves nothing."""
    monkeypatch.setenv("WARDIAN_CREDENTIAL_STORE", "keyring")
    with pytest.raises(errors.StorageUnavailable, match="no usable OS keyring"):
        CredentialStore(home).put(Credential("opencode", "default", CredentialKind.API_KEY, KEY2, "openai"))
    assert not CredentialStore(home).has("opencode", "default")
    monkeypatch.setenv("WARDIAN_CREDENTIAL_STORE", "auto")
    entry = CredentialStore(home).put(Credential("opencode", "default", CredentialKind.API_KEY, KEY2, "openai"))
    assert entry.stored == "file"
