"""A Claude Code agent's sign-in through the app, with the real Claude Code on the scripted model
(docs/providers/claude.md#private-directories-and-environment): the key `wardian auth login claude` stored reaches
the model on every request, and never the environment of Claude Code or of the commands its agent runs.

Both kinds are proven: an API key (`x-api-key`) and a `claude setup-token` token (`Authorization: Bearer`).
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from dataclasses import dataclass

import psutil
import pytest

from tests.conftest import AppHandle, app_on_root, short_home, wardian_cmd
from tests.providers.claude.conftest import claude_or_skip
from wardian.auth.store import CredentialStore
from wardian_harness.models.scripted_model import Message, ScriptedModel, ToolCall
from wardian_harness.providers.claude_home import ScriptedClaude, claude_overrides
from wardian_harness.secrets import assert_secrets_absent

API_KEY = "sk-ant-api03-canary-signin-7d1e4b9a2c"
OAUTH_TOKEN = "sk-ant-oat01-canary-signin-3f8c6a0e5b"
ENV_LISTING = ToolCall("Bash", {"command": "env; echo end-of-env", "description": "List the environment"},
                       namespace=None)
PARENT_COUNT = ToolCall("Bash", {"command": "cat /proc/$PPID/environ | tr '\\000' '\\n' | grep -c canary-signin",
                                 "description": "Count a word"}, namespace=None)


@dataclass
class SignInWorld:
    app: AppHandle
    model: ScriptedModel
    outputs: list[bytes]

    def cli(self, *args: str, stdin: bytes | None = None) -> None:
        env = {**self.app.env(), "WARDIAN_CREDENTIAL_STORE": "file"}
        done = subprocess.run([*wardian_cmd(), *args], env=env, input=stdin, capture_output=True, timeout=300,
                              check=False)
        self.outputs += [done.stdout, done.stderr]
        assert done.returncode == 0, (args, done.stderr.decode())


@pytest.fixture
def world() -> Iterator[SignInWorld]:
    env = {"WARDIAN_CLAUDE": str(claude_or_skip()), "WARDIAN_CREDENTIAL_STORE": "file"}
    with ScriptedModel() as model, app_on_root(short_home("wcs"), env) as app:
        yield SignInWorld(app, model, [])


@pytest.mark.parametrize(("flag", "secret"), [("--with-api-key", API_KEY), ("--with-oauth-token", OAUTH_TOKEN)],
                         ids=["api-key", "oauth-token"])  # a secret in a test's id would be in every environment
def test_the_sign_in_reaches_the_model_and_neither_claude_codes_environment_nor_its_commands(
        world: SignInWorld, flag: str, secret: str) -> None:
    """Before, the key was `ANTHROPIC_API_KEY` (or `CLAUDE_CODE_OAUTH_TOKEN`) in Claude Code's environment, which
    every Bash command of the agent inherited and any process of the user could read in /proc. Now Claude Code gets
    it on a file descriptor: the commands see no such variable, the parent they can read holds no copy, and no file
    under the home but the credential store holds it."""
    world.cli("auth", "login", "claude", flag, stdin=secret.encode() + b"\n")
    script = world.model.agent("worker").require_key(secret)
    script.add(ENV_LISTING, PARENT_COUNT, Message("done"))
    _, lead = world.app.add_agent("lead", "claude")
    worker, _ = world.app.add_agent("worker", "claude")
    settings = [*(s for s in claude_overrides(ScriptedClaude(script.base_url)) if "ANTHROPIC_API_KEY" not in s),
                'permissions.allow=["Bash"]']  # the agent's own commands run without asking
    world.cli("agent", "start", "worker", *[a for s in settings for a in ("-c", s)])
    pid = int(world.app.home.provider_pid_path("claude", worker["uuid"]).read_text(encoding="utf-8"))
    held = [name for name, value in psutil.Process(pid).environ().items() if secret in value]
    assert held == []  # Claude Code's own environment, which /proc shows to the user's processes
    task = world.app.call("task/followup", {"session": lead, "target": "worker", "message": "look around"})
    [reply] = world.app.records_for(lead, 1200)
    assert (reply["request_id"], reply["text"]) == (task["request_id"], "done")
    assert [r.carried(secret) for r in script.requests] == [True, True, True]
    env, counted = script.requests[-1].function_call_outputs()
    names = {line.split("=", 1)[0] for line in env.text.splitlines() if "=" in line}
    listed = "end-of-env" in env.text
    assert listed  # the command's whole environment:
    assert {"CLAUDE_CONFIG_DIR", "TMPDIR"} <= names
    assert not names & {"ANTHROPIC_API_KEY", "CLAUDE_CODE_OAUTH_TOKEN", "CLAUDE_CODE_API_KEY_FILE_DESCRIPTOR",
                        "CLAUDE_CODE_OAUTH_TOKEN_FILE_DESCRIPTOR"}
    leaked = secret in env.text
    assert not leaked  # compared here, so that a failure never prints the secret
    assert counted.text.strip() == "0"  # not in the environment of the process that runs the command either
    world.cli("agent", "stop", "worker")
    home = world.app.home
    assert_secrets_absent([home.root], world.outputs, [secret], exclude=[CredentialStore(home).path])
