"""The sign-in of an ACP agent (docs/guide/acp.md#private-directories-settings-and-sign-in): the key `wardian auth
login qwen|gemini --with-api-key` stored reaches the agent's process environment only, the model receives it, and
no file under the home holds it, nor any approval (docs/guide/approvals.md#secrets)."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from tests.conftest import AppHandle, app_on_root, pinned_npm_tool, short_home, wardian_cmd
from tests.providers.acp.conftest import REPO
from wardian.auth.store import CredentialStore
from wardian_harness.models.scripted_model import Message, ScriptedModel, ToolCall
from wardian_harness.providers.acp_home import acp_launch
from wardian_harness.secrets import assert_secrets_absent

KEY = "sk-canary-acp-signin-5e2d8b1f0a"


@dataclass
class SignInWorld:
    app: AppHandle
    model: ScriptedModel
    provider: str
    outputs: list[bytes]

    def cli(self, *args: str, stdin: bytes | None = None) -> None:
        env = {**self.app.env(), "WARDIAN_CREDENTIAL_STORE": "file"}
        done = subprocess.run([*wardian_cmd(), *args], env=env, input=stdin, capture_output=True, timeout=300,
                              check=False)
        self.outputs += [done.stdout, done.stderr]
        assert done.returncode == 0, (args, done.stderr.decode())


@pytest.fixture(params=["qwen", "gemini"])
def world(request: pytest.FixtureRequest) -> Iterator[SignInWorld]:
    provider = str(request.param)
    cli = pinned_npm_tool(REPO / "node_modules" / ".bin" / provider, f"{provider} CLI")
    env = {f"WARDIAN_{provider.upper()}": str(cli), "WARDIAN_CREDENTIAL_STORE": "file"}
    with ScriptedModel() as model, app_on_root(short_home("was"), env) as app:
        yield SignInWorld(app, model, provider, [])


def test_the_stored_key_reaches_the_agent_and_no_file_of_the_home(world: SignInWorld) -> None:
    world.cli("auth", "login", world.provider, "--with-api-key", stdin=KEY.encode() + b"\n")
    _, lead = world.app.add_agent("lead", world.provider)
    world.app.add_agent("worker", world.provider)
    script = world.model.agent("worker").require_key(KEY)
    script.add(Message("signed in"))
    config, env = acp_launch(world.provider, script.base_url)
    settings = [s for s in config if "_API_KEY" not in s]
    world.app.call("agent/start", {"agent": "worker", "config": settings, "env": env}, timeout_s=300)
    world.app.call("task/followup", {"session": lead, "target": "worker", "message": "hello"})
    assert [r["text"] for r in world.app.records_for(lead)] == ["signed in"]
    assert script.unauthorized_requests == []
    home = world.app.home
    assert_secrets_absent([home.root], world.outputs, [KEY], exclude=[CredentialStore(home).path])
    # The model writes the key into a command that needs approval: the approval (kept, listed, logged) never holds
    # it (docs/guide/approvals.md#secrets).
    command = f"curl -H 'Authorization: Bearer {KEY}' http://127.0.0.1:9/"
    shell = ToolCall("run_shell_command", {"command": command, "description": "use the key"}, namespace=None)
    script.add(shell, *(() if world.provider == "qwen" else (Message("refused"),)))
    world.app.call("task/followup", {"session": lead, "target": "worker", "message": "show the key"})
    assert len(world.app.records_for(lead)) == 1
    (asked,) = world.app.call("approval/list", {"pending": False})["approvals"]
    assert (asked["status"], asked["kind"], asked["detail"]["command"]) == (
        "denied", "command", command.replace(KEY, "[redacted]"))
    world.cli("approval", "list", "--all", "--json")
    world.cli("message", "log")
    world.cli("agent", "stop", "worker")
    # The agent's own transcript holds what its model wrote; the store, the app's logs and every output do not.
    assert_secrets_absent([*home.root.glob("wardian.db*"), home.root / "logs"], world.outputs, [KEY])
