"""`wardian auth` with an OS keyring: the secret goes to the keyring and nowhere in the home (not even the index),
every later process finds it there, and logout deletes it. keyring's own `PYTHON_KEYRING_BACKEND` selects a
file-backed backend shared by the processes (`tests/auth/file_keyring.py`), as a desktop's Secret Service is."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.auth.file_keyring import entries
from tests.conftest import short_home, wardian_cmd
from wardian.cli.exits import EXIT_OK
from wardian.home import Home
from wardian_harness.secrets import assert_secrets_absent

pytestmark = pytest.mark.fast  # the fast tier (scripts/check test-fast)

REPO = Path(__file__).resolve().parents[2]
KEY = "sk-proj-keyring-0123456789abcdef7e1d"


@pytest.mark.skipif(bool(os.environ.get("WARDIAN_TEST_CLI")), reason="a frozen CLI cannot load a test backend")
def test_the_keyring_holds_the_secret_across_processes() -> None:
    root = short_home("wakr")
    home, ring = Home(root / "home"), root / "ring.json"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("WARDIAN_", "PYTHON_KEYRING"))}
    env |= {"WARDIAN_HOME": str(home.root), "WARDIAN_TEST_KEYRING": str(ring), "PYTHONPATH": str(REPO),
            "PYTHON_KEYRING_BACKEND": "tests.auth.file_keyring.FileKeyring"}
    outputs: list[bytes] = []

    def run(*argv: str, stdin: bytes = b"") -> subprocess.CompletedProcess[bytes]:
        result = subprocess.run(argv, env=env, input=stdin, capture_output=True, timeout=90, check=False, cwd=root)
        outputs.extend((result.stdout, result.stderr))
        assert result.returncode == EXIT_OK, result.stderr
        return result

    try:
        login = run(*wardian_cmd(), "auth", "login", "codex", "--with-api-key", stdin=KEY.encode() + b"\n")
        assert b"kept in the OS keyring, service wardian-" in login.stdout
        assert list(entries(ring).values()) == [KEY], "the probe entry is gone, the key is there"
        status = json.loads(run(*wardian_cmd(), "auth", "status", "--json").stdout)
        assert [(c["stored"], c["mask"]) for c in status["credentials"]] == [("keyring", "…7e1d")]
        assert "OS keyring" in status["store"]
        read = run(sys.executable, "-c", "from wardian.auth.store import CredentialStore; from wardian.home import "
                   "resolve_home; print(CredentialStore(resolve_home()).get('codex')[0].secret == " + repr(KEY) + ")")
        assert read.stdout.strip() == b"True", "another process reads it from the keyring"
        assert_secrets_absent([home.root], outputs, [KEY])  # no exclusion: not even the index
        run(*wardian_cmd(), "auth", "logout", "codex")
        assert entries(ring) == {}
    finally:
        subprocess.run(["rm", "-rf", str(root)], check=True)
