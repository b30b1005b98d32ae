"""The sign-in of a Pi agent (docs/guide/pi.md#sign-in): the key `wardian auth login pi --provider ID
--with-api-key` stored reaches Pi's process environment only, named by its `models.json` (`apiKey` names a
variable, which Pi reads at each request), the model receives it, and no file under the home holds it."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from tests.conftest import AppHandle, app_on_root, pinned_npm_tool, short_home, wardian_cmd
from tests.providers.pi.conftest import REPO, pi_settings
from wardian.auth.store import CredentialStore
from wardian_harness.models.scripted_model import Message, ScriptedModel
from wardian_harness.secrets import assert_secrets_absent

KEY = "sk-canary-pi-signin-7c1d9e2b4f"


@dataclass
class SignInWorld:
    app: AppHandle
    model: ScriptedModel
    outputs: list[bytes]

    def cli(self, *args: str, stdin: bytes | None = None, ok: bool = True) -> subprocess.CompletedProcess[bytes]:
        env = {**self.app.env(), "WARDIAN_CREDENTIAL_STORE": "file"}
        done = subprocess.run([*wardian_cmd(), *args], env=env, input=stdin, capture_output=True, timeout=300,
                              check=False)
        self.outputs += [done.stdout, done.stderr]
        assert (done.returncode == 0) is ok, (args, done.stderr.decode())
        return done


@pytest.fixture
def world() -> Iterator[SignInWorld]:
    cli = pinned_npm_tool(REPO / "node_modules" / ".bin" / "pi", "Pi CLI")
    env = {"WARDIAN_PI": str(cli), "WARDIAN_CREDENTIAL_STORE": "file"}
    with ScriptedModel() as model, app_on_root(short_home("wps"), env) as app:
        yield SignInWorld(app, model, [])


def test_the_stored_key_reaches_pi_by_its_variable_and_no_file_of_the_home(world: SignInWorld) -> None:
    world.cli("auth", "login", "pi", "--provider", "scripted", "--with-api-key", stdin=KEY.encode() + b"\n")
    _, lead = world.app.add_agent("lead", "pi")
    agent, _ = world.app.add_agent("worker", "pi")
    script = world.model.agent("worker").require_key(KEY)
    script.add(Message("signed in"))
    world.app.call("agent/start", {"agent": "worker", "config": pi_settings(script.base_url)}, timeout_s=300)
    world.app.call("task/followup", {"session": lead, "target": "worker", "message": "hello"})
    assert [r["text"] for r in world.app.records_for(lead)] == ["signed in"]
    assert script.unauthorized_requests == []
    models = world.app.home.agent_dir(agent["uuid"]) / "pi" / "agent" / "models.json"
    assert json.loads(models.read_text(encoding="utf-8"))["providers"]["scripted"]["apiKey"] == (
        "WARDIAN_PI_KEY_SCRIPTED")
    world.cli("agent", "stop", "worker")
    home = world.app.home
    assert_secrets_absent([home.root], world.outputs, [KEY], exclude=[CredentialStore(home).path])


def test_a_pi_key_names_its_model_provider(world: SignInWorld) -> None:
    done = world.cli("auth", "login", "pi", "--with-api-key", stdin=KEY.encode() + b"\n", ok=False)
    assert b"invalid_arguments" in done.stderr
    assert KEY.encode() not in done.stderr + done.stdout
