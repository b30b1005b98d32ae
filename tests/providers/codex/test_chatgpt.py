"""Codex agents on wardian's own ChatGPT sign-in, end to end with the real Codex CLI and the app, offline.

The ChatGPT side is `wardian_harness.models.chatgpt_backend`: HTTPS on loopback with a CA made for the run, the OAuth
token endpoint (each refresh token accepted once, then rotated), `/oauth/revoke`, and the backend Codex calls,
whose model requests reach the scripted model. wardian's session is seeded the way a finished sign-in leaves it
(the owner home's `auth.json`), since the sign-in itself needs auth.openai.com.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import pytest

from tests.conftest import AppHandle, short_home, start_app, stop_app
from tests.providers.codex.conftest import codex_or_skip
from wardian.auth.model import Credential, CredentialKind
from wardian.auth.store import CredentialStore
from wardian.client import AppClient
from wardian.home import Home
from wardian.home_setup import adopt_home
from wardian_harness.models.chatgpt_backend import CLIENT_ID, ChatGPTBackend
from wardian_harness.models.scripted_model import Message, ScriptedModel
from wardian_harness.processes.apps import AppProcess

pytestmark = pytest.mark.codex

CHATGPT = Credential("codex", "default", CredentialKind.CHATGPT, "")


@dataclass
class ChatGPTWorld:
    app: AppHandle
    model: ScriptedModel
    backend: ChatGPTBackend
    env: dict[str, str]

    def start(self, name: str) -> dict[str, Any]:
        return self.app.call("agent/start", {"agent": name, "config": self.backend.codex_overrides(name)},
                             timeout_s=300)

    def token_calls(self) -> list[dict[str, Any]]:
        return [{"status": r.status, **(r.body or {})} for r in self.backend.requests_to("/oauth/token")]


def seed_owner(root: Path, backend: ChatGPTBackend, *, expired: bool) -> None:
    """wardian's session as a finished `wardian auth login codex` leaves it, pointed at the test backend."""
    adopt_home(Home(root))  # a wardian home, as `wardian auth login` makes it
    owner = root / "codex-auth"
    owner.mkdir(mode=0o700, parents=True)
    (owner / "config.toml").write_text("\n".join(backend.codex_overrides()) + "\n", encoding="utf-8")
    auth = owner / "auth.json"
    auth.write_text(json.dumps(backend.login(expired=expired)), encoding="utf-8")
    auth.chmod(0o600)
    CredentialStore(Home(root)).put(CHATGPT)


@pytest.fixture
def chatgpt_world(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[ChatGPTWorld]:
    codex = codex_or_skip()
    monkeypatch.setenv("WARDIAN_CREDENTIAL_STORE", "file")
    root = short_home("wg")
    with ScriptedModel() as model, ChatGPTBackend(tmp_path / "chatgpt", model) as backend:
        seed_owner(root, backend, expired=True)
        env = {"WARDIAN_CODEX": str(codex), "WARDIAN_CREDENTIAL_STORE": "file", **backend.env()}
        proc = start_app(root, env)
        handle = AppHandle(Home(root), proc, AppClient(Home(root)))
        try:
            yield ChatGPTWorld(handle, model, backend, env)
        finally:
            handle.client.close()
            stop_app(handle.proc)
            shutil.rmtree(root, ignore_errors=True)


def ask(world: ChatGPTWorld, lead: str, names: list[str], text: str) -> list[dict[str, Any]]:
    """Send each agent a task at once; the replies (or notices) to them, received and acknowledged (bounded)."""
    receipts = [world.app.call("task/followup", {"session": lead, "target": n, "message": text}) for n in names]
    replies: list[dict[str, Any]] = []
    for _ in range(len(names) * 5):
        if len(replies) >= len(names):
            break
        page = world.app.call("mailbox/receive", {"session": lead, "timeout_ms": 60000}, timeout_s=90)
        if page["records"]:
            world.app.call("mailbox/receive", {"session": lead, "ack_cursor": page["cursor"], "limit": 1})
        replies += [r for r in page["records"] if r["kind"] in ("reply", "notice")]
    assert {r["request_id"] for r in replies} == {r["request_id"] for r in receipts}
    return replies


def files_under(path: Path) -> Iterator[Path]:
    for p in path.rglob("*"):
        if p.is_file() and not p.is_symlink():
            yield p


def leaks(paths: list[Path], secrets: list[str]) -> list[str]:
    found = []
    for path in paths:
        data = path.read_bytes()
        found += [f"{path}: …{s[-8:]}" for s in secrets if s.encode() in data]
    return found


def test_three_agents_share_the_session_and_only_the_owner_refreshes(chatgpt_world: ChatGPTWorld) -> None:
    world, backend = chatgpt_world, chatgpt_world.backend
    _, lead = world.app.add_agent("lead")
    names = ["ada", "bob", "cyd"]
    for name in names:
        world.app.add_agent(name)
        world.model.agent(name, Message(f"{name} here", phase="final_answer"),
                          Message(f"{name} again", phase="final_answer"))
    # Three starts at once: the session's expired access token is refreshed once, by the owner, for all of them.
    with ThreadPoolExecutor(3) as pool:
        started = list(pool.map(world.start, names))
    assert all(s["thread_id"] for s in started)
    replies = ask(world, lead, names, "hello")
    assert sorted((r["status"], r["text"]) for r in replies) == [("done", f"{n} here") for n in names]
    seeded = backend.refresh_tokens_used
    assert [c["status"] for c in world.token_calls()] == [200]
    assert world.token_calls()[0]["client_id"] == CLIENT_ID

    # The backend now refuses every token handed out: each agent asks the app, the owner rotates once.
    backend.reject_access_tokens()
    replies = ask(world, lead, names, "again")
    assert sorted((r["status"], r["text"]) for r in replies) == [("done", f"{n} again") for n in names]
    calls = world.token_calls()
    assert [c["status"] for c in calls] == [200, 200], calls  # never a reused refresh token
    assert calls[1]["refresh_token"] != seeded[0]
    rejected = [r for r in backend.requests_to("/codex/responses") if r.status == 401]
    assert len(rejected) >= len(names)

    # `auth status` shows the one ChatGPT credential and the agents on it, and no token.
    status = world.app.cli("auth", "status", "--json")
    [entry] = json.loads(status.stdout)["credentials"]
    assert (entry["kind"], entry["mask"], sorted(entry["agents"])) == ("chatgpt", "…", [*names, "lead"])
    printed = status.stdout + status.stderr + world.app.cli("auth", "status").stdout

    # The agents never held a refresh token or a file of the session.
    agents_dir = world.app.home.root / "agents"
    assert not list(agents_dir.rglob("auth.json"))

    for name in names:
        world.app.call("agent/stop", {"agent": name}, timeout_s=60)
    stop_app(world.app.proc)
    assert backend.requests_to("/oauth/revoke") == []
    # No token anywhere it must not be: the agents' homes, the logs, the app's own output.
    secrets = backend.issued_secrets()
    logs = world.app.home.root / "logs"
    assert leaks([*files_under(agents_dir), *files_under(logs)], secrets) == []
    output = cast(AppProcess, world.app.proc).stderr_output() + printed
    assert not any(s.encode() in output for s in secrets)
    assert os.stat(world.app.home.root / "codex-auth").st_mode & 0o777 == 0o700


def test_a_start_without_the_session_is_refused_as_not_signed_in(chatgpt_world: ChatGPTWorld) -> None:
    """The credential is recorded but the session has ended (here its file is gone, as after a failed refresh or a
    sign-out elsewhere): the agent's start is refused, naming the fix, and nothing reached the model."""
    world = chatgpt_world
    (world.app.home.root / "codex-auth" / "auth.json").unlink()
    world.app.add_agent("ada")
    world.model.agent("ada")
    result = world.app.cli("agent", "start", "ada", *[a for c in world.backend.codex_overrides("ada")
                                                      for a in ("-c", c)])
    assert result.returncode == 9, result.stderr
    assert b"ChatGPT sign-in is missing or has ended; run `wardian auth login codex`" in result.stderr
    assert world.model.agents["ada"].requests == []
    assert world.backend.requests_to("/oauth/token") == []
