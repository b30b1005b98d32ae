"""`wardian_harness.secrets`: the check every sign-in test runs over homes, logs and outputs must find a secret
wherever it is (a binary store, a chunk boundary, UTF-16), and must never print it."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from wardian_harness import secrets
from wardian_harness.secrets import assert_secrets_absent, find_secrets

pytestmark = pytest.mark.fast  # the fast tier (scripts/check test-fast)

KEY = "sk-live-0123456789abcdef3f9a"
OTHER = "sk-other-fedcba9876543210"


def test_finds_a_secret_in_a_binary_store_and_names_only_where(tmp_path: Path) -> None:
    db = tmp_path / "home" / "store.db"
    db.parent.mkdir()
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE t (blob BLOB)")
        conn.execute("INSERT INTO t VALUES (?)", (b"\x00\xff" + KEY.encode() + b"\x00",))
    conn.close()
    (tmp_path / "home" / "clean.txt").write_text("nothing here")
    with pytest.raises(AssertionError) as info:
        assert_secrets_absent([tmp_path / "home"], ["clean output"], [OTHER, KEY])
    message = str(info.value)
    assert "secret #1 (…3f9a)" in message
    assert str(db) in message
    assert KEY not in message
    assert "clean.txt" not in message


def test_texts_utf16_and_chunk_boundaries(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(secrets, "CHUNK", 7)  # every secret straddles chunks
    (tmp_path / "a.bin").write_bytes(b"x" * 5 + KEY.encode("utf-16-le") + b"y" * 3)
    (tmp_path / "b.log").write_bytes(b"z" * 11 + OTHER.encode())
    leaks = find_secrets([tmp_path], [b"..." + KEY.encode(), "clean", f"said {OTHER}"], [KEY, OTHER])
    assert sorted(str(leak) for leak in leaks) == sorted([
        f"secret #0 (…3f9a) found in {tmp_path / 'a.bin'} (byte 5)",
        f"secret #1 (…3210) found in {tmp_path / 'b.log'} (byte 11)",
        "secret #0 (…3f9a) found in text[0]",
        "secret #1 (…3210) found in text[2]",
    ])


def test_exclusions_links_and_missing_roots(tmp_path: Path) -> None:
    kept = tmp_path / "credentials.json"
    kept.write_text(KEY)
    (tmp_path / "link").symlink_to(kept)
    assert_secrets_absent([tmp_path, tmp_path / "absent"], [], [KEY], exclude=[kept])
    assert [leak.where for leak in find_secrets([tmp_path], [], [KEY])] == [f"{kept} (byte 0)"]


def test_a_check_that_could_not_fail_is_refused(tmp_path: Path) -> None:
    with pytest.raises(AssertionError, match="no secrets"):
        assert_secrets_absent([tmp_path], [], [])
    with pytest.raises(ValueError, match="shorter"):
        assert_secrets_absent([tmp_path], [], ["abc"])
