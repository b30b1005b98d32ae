"""`wardian auth login|status|logout` as a person runs them: without an app, the secret only on standard input,
never printed, never anywhere in the home but the credential file; every bad input a clear error that stores and
changes nothing."""

from __future__ import annotations

import json
import os
import pty
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import AppHandle, short_home, stop_app, wardian_cmd
from wardian.auth.store import CredentialStore
from wardian.cli.exits import EXIT_NOT_FOUND, EXIT_OK, EXIT_USAGE
from wardian.home import Home
from wardian_harness.secrets import assert_secrets_absent

pytestmark = pytest.mark.fast  # the fast tier (scripts/check test-fast)

CODEX_KEY = "sk-proj-codex-0123456789abcdef3f9a"
OPENAI_KEY = "sk-oc-openai-0123456789abcd1111"
ANTHROPIC_KEY = "sk-ant-api03-0123456789abcd2222"
CLAUDE_TOKEN = "sk-ant-oat01-0123456789abcd3333"


class Cli:
    """The CLI on one home, every output kept for the secrets check."""

    def __init__(self, home: Path) -> None:
        self.home = Home(home)
        self.outputs: list[bytes] = []

    def __call__(self, *args: str, stdin: bytes | int | None = None) -> subprocess.CompletedProcess[bytes]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("WARDIAN_")}
        env |= {"WARDIAN_HOME": str(self.home.root), "WARDIAN_CREDENTIAL_STORE": "file"}
        argv = [*wardian_cmd(), *args]
        if isinstance(stdin, bytes):
            result = subprocess.run(argv, env=env, input=stdin, capture_output=True, timeout=90, check=False)
        else:
            result = subprocess.run(argv, env=env, stdin=subprocess.DEVNULL if stdin is None else stdin,
                                    capture_output=True, timeout=90, check=False)
        self.outputs += [result.stdout, result.stderr]
        return result

    def index(self) -> bytes | None:
        path = self.home.root / "credentials.json"
        return path.read_bytes() if path.exists() else None

    def check_no_secret_leaked(self, *extra_roots: Path) -> None:
        assert_secrets_absent([self.home.root, *extra_roots], self.outputs,
                              [CODEX_KEY, OPENAI_KEY, ANTHROPIC_KEY, CLAUDE_TOKEN],
                              exclude=[self.home.root / "credentials.json"])


@pytest.fixture
def cli() -> Iterator[Cli]:
    root = short_home("wauth")
    yield Cli(root / "home")
    subprocess.run(["rm", "-rf", str(root)], check=True)


def store(cli: Cli) -> CredentialStore:
    return CredentialStore(cli.home)


def test_login_status_logout_without_an_app(cli: Cli, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WARDIAN_CREDENTIAL_STORE", "file")
    r = cli("auth", "login", "codex", "--with-api-key", stdin=CODEX_KEY.encode() + b"\n")
    assert r.returncode == EXIT_OK, r.stderr
    assert b"codex api key \xe2\x80\xa63f9a as 'default', kept in " + str(cli.home.root).encode() in r.stdout
    assert cli("auth", "login", "opencode", "--provider", "openai", "--with-api-key", "--name", "team",
               stdin=OPENAI_KEY.encode()).returncode == EXIT_OK
    assert cli("auth", "login", "opencode", "--provider", "anthropic", "--with-api-key", "--name", "team",
               stdin=ANTHROPIC_KEY.encode() + b"\r\n").returncode == EXIT_OK
    assert cli("auth", "login", "claude", "--with-oauth-token", stdin=CLAUDE_TOKEN.encode()).returncode == EXIT_OK
    assert [c.secret for c in store(cli).get("opencode", "team")] == [ANTHROPIC_KEY, OPENAI_KEY]
    assert store(cli).get("claude")[0].kind.value == "oauth_token"
    assert (os.stat(cli.home.root).st_mode & 0o777, os.stat(cli.home.root / "credentials.json").st_mode & 0o777) == (
        0o700, 0o600)

    status = json.loads(cli("auth", "status", "--json").stdout)
    assert [(c["provider"], c["name"], c["kind"], c["provider_id"], c["mask"], c["stored"], c["agents"])
            for c in status["credentials"]] == [
        ("claude", "default", "oauth_token", None, "…3333", "file", []),
        ("codex", "default", "api_key", None, "…3f9a", "file", []),
        ("opencode", "team", "api_key", "anthropic", "…2222", "file", []),
        ("opencode", "team", "api_key", "openai", "…1111", "file", [])]
    assert "credentials.json" in status["store"]
    text = cli("auth", "status").stdout.decode()
    assert "opencode  team     api_key      openai" in text

    out = cli("auth", "logout", "opencode", "--name", "team", "--provider", "openai", "--json")
    assert json.loads(out.stdout)["removed"] == 1
    assert [c.provider_id for c in store(cli).get("opencode", "team")] == ["anthropic"]
    assert cli("auth", "logout", "codex").returncode == EXIT_OK
    assert store(cli).get("codex") == ()
    cli.check_no_secret_leaked()


def test_a_secret_is_never_typed_at_a_terminal(cli: Cli) -> None:
    leader, follower = pty.openpty()
    try:
        r = cli("auth", "login", "codex", "--with-api-key", stdin=follower)
    finally:
        os.close(follower)
        os.close(leader)
    assert r.returncode == EXIT_USAGE
    assert b"read from standard input, not typed" in r.stderr
    assert cli.index() is None


BAD = [
    (["codex", "--with-api-key"], b"", "the key is empty"),
    (["codex", "--with-api-key"], b"\n", "the key is empty"),
    (["codex", "--with-api-key"], CODEX_KEY.encode() + b"\n" + OPENAI_KEY.encode(), "line break"),
    (["codex", "--with-api-key"], CODEX_KEY.encode() + b"\n\n", "line break"),
    (["codex", "--with-api-key"], b"sk-\x00" + CODEX_KEY.encode(), "NUL"),
    (["codex", "--with-api-key"], b" " + CODEX_KEY.encode(), "white space"),
    (["codex", "--with-api-key"], b"\xff" + CODEX_KEY.encode(), "not UTF-8"),
    (["codex", "--with-api-key"], b"k" * 5000, "5000 characters"),
    (["goose", "--with-api-key"], CODEX_KEY.encode(), "no sign-in for provider 'goose'"),
    (["codex", "--with-api-key", "--provider", "openai"], CODEX_KEY.encode(), "a codex credential has none"),
    (["opencode", "--with-api-key"], OPENAI_KEY.encode(), "give its id with --provider"),
    (["opencode", "--provider", "openai"], OPENAI_KEY.encode(), "--with-api-key"),
    (["codex", "--with-oauth-token"], CODEX_KEY.encode(), "cannot be a oauth_token"),
    (["claude"], CLAUDE_TOKEN.encode(), "--with-api-key or --with-oauth-token"),
    (["codex", "--with-api-key", "--name", "Not Valid"], CODEX_KEY.encode(), "not a credential name"),
    (["claude", "--with-api-key", "--browser"], ANTHROPIC_KEY.encode(), "--browser is for Codex"),
]


@pytest.mark.parametrize(("args", "stdin", "words"), BAD)
def test_bad_login_input_is_refused_and_stores_nothing(cli: Cli, args: list[str], stdin: bytes, words: str) -> None:
    assert cli("auth", "login", "claude", "--with-api-key", "--name", "kept",
               stdin=ANTHROPIC_KEY.encode()).returncode == EXIT_OK
    before = cli.index()
    r = cli("auth", "login", *args, stdin=stdin)
    assert r.returncode == EXIT_USAGE, r.stderr
    assert words in r.stderr.decode()
    assert cli.index() == before
    cli.check_no_secret_leaked()


def test_logout_of_nothing_is_not_found_and_changes_nothing(cli: Cli) -> None:
    assert cli("auth", "status").returncode == EXIT_OK
    assert json.loads(cli("auth", "status", "--json").stdout)["credentials"] == []
    assert cli("auth", "logout", "codex").returncode == EXIT_NOT_FOUND
    assert cli.index() is None
    assert not cli.home.root.exists(), "nothing was created"
    cli("auth", "login", "opencode", "--provider", "openai", "--with-api-key", stdin=OPENAI_KEY.encode())
    before = cli.index()
    for args, code in ((["codex"], EXIT_NOT_FOUND), (["opencode", "--name", "other"], EXIT_NOT_FOUND),
                       (["opencode", "--provider", "anthropic"], EXIT_NOT_FOUND),
                       (["codex", "--provider", "openai"], EXIT_USAGE), (["goose"], EXIT_USAGE)):
        r = cli("auth", "logout", *args, "--json")
        assert r.returncode == code, (args, r.stderr)
        assert json.loads(r.stdout)["error"]["code"] == ("unknown_credential" if code == EXIT_NOT_FOUND
                                                         else "invalid_arguments")
    assert cli.index() == before


def codex_home(tmp: Path, doc: dict[str, object]) -> Path:
    home = tmp / "dot-codex"
    home.mkdir()
    (home / "auth.json").write_text(json.dumps(doc))
    os.chmod(home / "auth.json", 0o600)
    return home


@pytest.mark.parametrize("doc", [{"auth_mode": "apikey", "OPENAI_API_KEY": CODEX_KEY},
                                 {"OPENAI_API_KEY": CODEX_KEY}], ids=["apikey", "no-mode"])
def test_import_an_api_key_login_from_a_codex_home(cli: Cli, tmp_path: Path, doc: dict[str, object]) -> None:
    home = codex_home(tmp_path, doc)
    before = {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in home.iterdir()}
    r = cli("auth", "login", "codex", "--from-codex-home", str(home), "--name", "mine")
    assert r.returncode == EXIT_OK, r.stderr
    assert store(cli).get("codex", "mine")[0].secret == CODEX_KEY
    assert {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in home.iterdir()} == before, "only read"
    cli.check_no_secret_leaked()


CHATGPT = {"auth_mode": "chatgpt", "OPENAI_API_KEY": None,
           "tokens": {"id_token": "e30.e30.sig", "access_token": "e30.e30.sig", "refresh_token": "rt-0123456789",
                      "account_id": "acct"}}


@pytest.mark.parametrize(("doc", "words"), [
    (CHATGPT, "holds a ChatGPT sign-in, which wardian does not copy"),
    ({**CHATGPT, "OPENAI_API_KEY": CODEX_KEY}, "holds a ChatGPT sign-in"),
    ({"tokens": CHATGPT["tokens"]}, "holds a ChatGPT sign-in"),
    ({"auth_mode": "agentIdentity"}, "'agentIdentity' login, not an API key"),
    ([1, 2], "not a Codex login file"),
], ids=["chatgpt", "chatgpt-with-key", "no-mode-tokens", "other-mode", "not-an-object"])
def test_a_chatgpt_or_foreign_codex_login_is_refused(cli: Cli, tmp_path: Path, doc: object, words: str) -> None:
    home = tmp_path / "dot-codex"
    home.mkdir()
    (home / "auth.json").write_text(json.dumps(doc))
    r = cli("auth", "login", "codex", "--from-codex-home", str(home))
    assert r.returncode == EXIT_USAGE
    assert words in r.stderr.decode()
    assert cli.index() is None
    assert sorted(p.name for p in home.iterdir()) == ["auth.json"]
    missing = cli("auth", "login", "codex", "--from-codex-home", str(tmp_path / "nowhere"))
    assert (missing.returncode, b"no Codex login file" in missing.stderr) == (EXIT_USAGE, True)
    cli.check_no_secret_leaked()


def test_chatgpt_sign_in_is_its_own_path(cli: Cli, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without a key it is the ChatGPT sign-in (tests/auth/test_chatgpt_cli.py), which needs the Codex CLI: with
    none found it is refused, and nothing is stored."""
    monkeypatch.setenv("PATH", "/usr/bin:/bin")  # no `codex` there (and WARDIAN_CODEX is not passed on)
    r = cli("auth", "login", "codex", "--json")
    assert r.returncode == EXIT_USAGE
    error = json.loads(r.stdout)["error"]
    assert (error["code"], "no Codex CLI found" in error["message"]) == ("unsupported", True)
    assert cli.index() is None


def test_status_names_the_agents_using_each_credential(app: AppHandle) -> None:
    cli = Cli(app.home.root)
    cli("auth", "login", "codex", "--with-api-key", stdin=CODEX_KEY.encode())
    cli("auth", "login", "codex", "--with-api-key", "--name", "work", stdin=OPENAI_KEY.encode())
    cli("auth", "login", "opencode", "--provider", "openai", "--with-api-key", stdin=ANTHROPIC_KEY.encode())
    assert cli("agent", "add", "lead", "--provider", "codex").returncode == EXIT_OK
    assert cli("agent", "add", "worker", "--provider", "codex", "--auth", "work").returncode == EXIT_OK
    assert cli("agent", "add", "helper", "--provider", "opencode").returncode == EXIT_OK
    expected = {("codex", "default"): ["lead"], ("codex", "work"): ["worker"], ("opencode", "default"): ["helper"]}

    def used() -> dict[tuple[str, str], list[str]]:
        status = json.loads(cli("auth", "status", "--json").stdout)
        assert status["agents_known"] is True
        return {(c["provider"], c["name"]): c["agents"] for c in status["credentials"]}

    assert used() == expected  # through the running app
    stop_app(app.proc)
    assert used() == expected  # from the home's store, read-only
    assert "worker" in cli("auth", "status").stdout.decode()
    cli.check_no_secret_leaked()
