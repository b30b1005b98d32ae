"""`--auth NAME` on `wardian agent add` and `agent start`: the credential an agent's starts use, checked against the
home's credential store (exit 9 and the fix when none is stored under the name), shown by `agent list --json`."""

from __future__ import annotations

import json

import pytest

from tests.conftest import AppHandle
from wardian.auth.model import Credential, CredentialKind
from wardian.auth.store import CredentialStore
from wardian.cli.exits import EXIT_NOT_SIGNED_IN, EXIT_OK, EXIT_USAGE

pytestmark = pytest.mark.fast  # the fast tier (scripts/check test-fast)

WORK = "sk-work-0123456789abcdef"


def test_auth_on_add_and_start(app: AppHandle, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WARDIAN_CREDENTIAL_STORE", "file")
    CredentialStore(app.home).put(Credential("codex", "work", CredentialKind.API_KEY, WORK))

    refused = app.cli("agent", "add", "lead", "--provider", "codex", "--auth", "nope")
    assert refused.returncode == EXIT_NOT_SIGNED_IN, refused.stderr
    assert b"wardian auth login codex --with-api-key --name nope" in refused.stderr
    assert app.call("agent/list")["agents"] == [], "nothing was added"
    bad = app.cli("agent", "add", "lead", "--provider", "codex", "--auth", "Not A Name")
    assert bad.returncode == EXIT_USAGE
    assert b"credential name" in bad.stderr

    added = app.cli("agent", "add", "lead", "--provider", "codex", "--auth", "work", "--json")
    assert added.returncode == EXIT_OK, added.stderr
    uuid = json.loads(added.stdout)["uuid"]
    listed = json.loads(app.cli("agent", "list", "--json").stdout)
    assert listed["managed"][uuid]["auth"] == "work"

    refused = app.cli("agent", "start", "lead", "--auth", "nope")
    assert refused.returncode == EXIT_NOT_SIGNED_IN
    assert b"no Codex credential named 'nope'" in refused.stderr
    assert json.loads(app.cli("agent", "list", "--json").stdout)["managed"][uuid]["auth"] == "work"
    for out in (refused.stdout, refused.stderr, added.stdout, added.stderr):
        assert WORK.encode() not in out
