"""The home's credential store: both backends (the 0600 file, the OS keyring through `keyring`), replacement,
removal, what is shown, and every refusal leaving the store as it was."""

from __future__ import annotations

import json
import os
import stat
import threading
from pathlib import Path

import pytest

from tests.auth.conftest import MemoryKeyring
from wardian import errors
from wardian.auth.model import Credential, CredentialKind
from wardian.auth.store import CredentialStore, keyring_service
from wardian.home import Home

pytestmark = pytest.mark.fast  # the fast tier (scripts/check test-fast)

KEY = "sk-test-0123456789abcdef3f9a"
KEY2 = "sk-test-fedcba98765432107b2c"


def api_key(provider: str = "codex", name: str = "default", secret: str = KEY,
            provider_id: str | None = None, kind: CredentialKind = CredentialKind.API_KEY) -> Credential:
    return Credential(provider, name, kind, secret, provider_id)


def mode(path: Path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


@pytest.mark.usefixtures("file_backend")
def test_file_backend_round_trip_private_and_atomic(home: Home) -> None:
    store = CredentialStore(home)
    assert store.get("codex") == ()
    assert not home.root.exists(), "reading creates nothing"
    entry = store.put(api_key())
    assert (entry.stored, entry.mask, entry.kind) == ("file", "…3f9a", CredentialKind.API_KEY)
    assert mode(home.root) == 0o700
    assert mode(store.path) == 0o600
    assert store.get("codex") == (api_key(),)
    assert store.get("codex")[0].secret == KEY
    assert str(store.path) in store.backend_description()
    # Replacing keeps one entry; no temporary file is left behind.
    store.put(api_key(secret=KEY2))
    assert [c.secret for c in store.get("codex")] == [KEY2]
    assert sorted(p.name for p in home.root.iterdir()) == ["credentials.json", "credentials.lock", "wardian-home"]


@pytest.mark.usefixtures("file_backend")
def test_names_and_opencode_provider_ids(home: Home) -> None:
    store = CredentialStore(home)
    store.put(api_key("opencode", provider_id="openai"))
    store.put(api_key("opencode", provider_id="anthropic", secret=KEY2))
    store.put(api_key("codex", name="work", secret=KEY2))
    assert [(c.provider_id, c.secret) for c in store.get("opencode")] == [("anthropic", KEY2), ("openai", KEY)]
    assert store.get("codex") == ()
    assert store.get("codex", "work") == (api_key(name="work", secret=KEY2),)
    assert [(e.provider, e.name, e.provider_id) for e in store.entries()] == [
        ("codex", "work", None), ("opencode", "default", "anthropic"), ("opencode", "default", "openai")]
    assert all(KEY not in repr(e) and KEY2 not in repr(e) for e in store.entries())
    assert KEY not in repr(store.get("opencode"))
    assert store.remove("opencode", "default", "openai") == 1
    assert [c.provider_id for c in store.get("opencode")] == ["anthropic"]
    assert store.remove("opencode", "default") == 1
    assert store.remove("opencode", "default") == 0
    assert store.remove("claude", "default") == 0
    assert store.has("codex", "work")
    assert not store.has("codex", "default")


def test_keyring_backend_keeps_the_secret_out_of_the_file(home: Home, memory_keyring: MemoryKeyring) -> None:
    store = CredentialStore(home)
    entry = store.put(api_key(provider="claude", kind=CredentialKind.OAUTH_TOKEN))
    assert entry.stored == "keyring"
    assert "OS keyring" in store.backend_description()
    assert KEY not in store.path.read_text()
    service = keyring_service(home)
    assert memory_keyring.entries == {(service, "claude/default/"): KEY}, "the probe entry is gone"
    assert store.get("claude") == (api_key(provider="claude", kind=CredentialKind.OAUTH_TOKEN),)
    # Another home has its own service: nothing is shared.
    other = CredentialStore(Home(home.root.parent / "other"))
    assert other.service != service
    assert other.get("claude") == ()
    assert store.remove("claude", "default") == 1
    assert memory_keyring.entries == {}


def test_switching_backends_keeps_earlier_logins(home: Home, memory_keyring: MemoryKeyring,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    CredentialStore(home).put(api_key())
    monkeypatch.setenv("WARDIAN_CREDENTIAL_STORE", "file")
    store = CredentialStore(home)
    assert store.get("codex")[0].secret == KEY, "an entry says where its secret is"
    store.put(api_key(secret=KEY2))
    assert memory_keyring.entries == {}, "the keyring copy is deleted once the file holds the new one"
    assert [(e.stored, e.mask) for e in store.entries()] == [("file", "…7b2c")]


def test_a_keyring_entry_gone_missing_is_a_clear_error(home: Home, memory_keyring: MemoryKeyring) -> None:
    store = CredentialStore(home)
    store.put(api_key())
    memory_keyring.entries.clear()
    with pytest.raises(errors.StorageUnavailable, match="sign in again"):
        CredentialStore(home).get("codex")


def test_forced_keyring_without_one_saves_nothing(home: Home, monkeypatch: pytest.MonkeyPatch) -> None:
    import keyring
    from keyring.backends import fail

    before = keyring.get_keyring()
    keyring.set_keyring(fail.Keyring())
    try:
        monkeypatch.setenv("WARDIAN_CREDENTIAL_STORE", "keyring")
        with pytest.raises(errors.StorageUnavailable, match="no usable OS keyring"):
            CredentialStore(home).put(api_key())
        monkeypatch.setenv("WARDIAN_CREDENTIAL_STORE", "auto")
        assert CredentialStore(home).put(api_key()).stored == "file", "auto falls back to the file"
    finally:
        keyring.set_keyring(before)
    assert [c.secret for c in CredentialStore(home).get("codex")] == [KEY]


def test_unknown_backend_name(home: Home, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WARDIAN_CREDENTIAL_STORE", "vault")
    with pytest.raises(errors.InvalidArguments) as info:
        CredentialStore(home).put(api_key())
    assert info.value.allowed == "auto, file, keyring"
    assert not home.root.exists()


BAD = [
    (api_key(secret=""), "secret", "empty"),
    (api_key(secret=KEY + "\n" + KEY2), "secret", "line break"),
    (api_key(secret=KEY + "\r"), "secret", "line break"),
    (api_key(secret="sk-\0abcdefghijkl"), "secret", "NUL"),
    (api_key(secret="sk-\x1babcdefghijkl"), "secret", "control character"),
    (api_key(secret=" " + KEY), "secret", "white space"),
    (api_key(secret=KEY + "\t"), "secret", "control character"),
    (api_key(secret="k" * 4097), "secret", "4097 characters"),
    (api_key(provider="goose"), "provider", "no sign-in"),
    (api_key(name="Work"), "name", "not a credential name"),
    (api_key(name="-x"), "name", "not a credential name"),
    (api_key(name="a" * 65), "name", "not a credential name"),
    (api_key(provider_id="openai"), "provider_id", "has none"),
    (api_key(provider="opencode"), "provider_id", "--provider"),
    (api_key(provider="opencode", provider_id="Open AI"), "provider_id", "not an OpenCode provider id"),
    (api_key(kind=CredentialKind.OAUTH_TOKEN), "kind", "cannot be"),
    (api_key(provider="opencode", provider_id="x", kind=CredentialKind.CHATGPT, secret=""), "kind", "cannot be"),
    (api_key(kind=CredentialKind.CHATGPT), "secret", "no secret"),
]


@pytest.mark.parametrize(("credential", "field", "words"), BAD)
@pytest.mark.usefixtures("file_backend")
def test_bad_input_is_refused_and_changes_nothing(home: Home, credential: Credential, field: str,
                                                  words: str) -> None:
    store = CredentialStore(home)
    store.put(api_key(name="kept", secret=KEY2))
    before = store.path.read_bytes()
    with pytest.raises(errors.InvalidArguments) as info:
        store.put(credential)
    assert info.value.field == field
    assert info.value.allowed
    assert words in info.value.message
    if credential.secret:
        assert credential.secret.strip() not in str(info.value.to_data()), "an error never quotes the secret"
    assert store.path.read_bytes() == before


@pytest.mark.usefixtures("file_backend")
def test_chatgpt_record_holds_no_secret(home: Home) -> None:
    store = CredentialStore(home)
    entry = store.put(api_key(kind=CredentialKind.CHATGPT, secret=""))
    assert (entry.kind, entry.mask) == (CredentialKind.CHATGPT, "…")
    assert store.get("codex")[0].kind is CredentialKind.CHATGPT


@pytest.mark.usefixtures("file_backend")
def test_an_open_credential_file_or_home_is_refused(home: Home) -> None:
    store = CredentialStore(home)
    store.put(api_key())
    os.chmod(store.path, 0o644)
    with pytest.raises(errors.InsecureHome, match="chmod 600"):
        store.get("codex")
    os.chmod(store.path, 0o600)
    os.chmod(home.root, 0o755)
    with pytest.raises(errors.InsecureHome, match="chmod 700"):
        store.put(api_key(secret=KEY2))
    os.chmod(home.root, 0o700)
    assert store.get("codex")[0].secret == KEY


@pytest.mark.usefixtures("file_backend")
def test_a_foreign_or_torn_file_is_refused(home: Home) -> None:
    store = CredentialStore(home)
    store.put(api_key())
    for text in ("{", json.dumps({"version": 99, "entries": []}), json.dumps({"version": 1, "entries": [{}]})):
        store.path.write_text(text)
        with pytest.raises(errors.StorageUnavailable, match="not one this wardian wrote"):
            store.entries()
        with pytest.raises(errors.StorageUnavailable):
            store.put(api_key(secret=KEY2))
        assert store.path.read_text() == text


@pytest.mark.usefixtures("file_backend")
def test_concurrent_logins_all_land(home: Home) -> None:
    names = [f"n{i}" for i in range(16)]
    threads = [threading.Thread(target=CredentialStore(home).put, args=(api_key(name=n, secret=KEY + n),))
               for n in names]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    store = CredentialStore(home)
    assert sorted(e.name for e in store.entries()) == sorted(names)
    assert all(store.get("codex", n)[0].secret == KEY + n for n in names)
