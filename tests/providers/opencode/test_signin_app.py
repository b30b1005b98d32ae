"""OpenCode agents' sign-in through the app and the CLI (docs/guide/sign-in.md): credentials from the home's store
reach each agent's model, an agent with no key is refused with exit 9 and nothing left running, and a key the model
rejects mid-loop fails the task with a notice and shows the agent `signed_out` until a new key and a restart."""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import psutil
import pytest

from tests.conftest import AppHandle, short_home, start_app, stop_app, wardian_cmd
from tests.providers.opencode.conftest import opencode_or_skip
from tests.providers.opencode.test_signin import KEY_A, KEY_B, WRONG
from wardian.auth.store import CredentialStore
from wardian.client import AppClient
from wardian.home import Home
from wardian_harness.models.scripted_model import Message, ScriptedModel
from wardian_harness.models.scripted_model import key_fingerprint as fp
from wardian_harness.providers.opencode_home import ScriptedOpenCode, opencode_overrides
from wardian_harness.secrets import assert_secrets_absent


@dataclass
class SignInWorld:
    app: AppHandle
    model: ScriptedModel
    store: CredentialStore
    outputs: list[str]

    def settings(self, name: str) -> list[str]:
        """The agent's -c settings: its scripted model, no key in the config."""
        url = self.model.agent(name).base_url
        return [o for o in opencode_overrides(ScriptedOpenCode(url)) if ".apiKey=" not in o]

    def presented(self) -> list[tuple[str, str | None]]:
        """(agent, key fingerprint) of every model request, in order per agent."""
        return [(r.agent, r.key) for _, script in sorted(self.model.agents.items()) for r in script.requests]

    def cli(self, *args: str, input: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
        env = {**self.app.env(), "WARDIAN_CREDENTIAL_STORE": "file"}
        done = subprocess.run([*wardian_cmd(), *args], env=env, input=input, capture_output=True, timeout=120)
        self.outputs += [done.stdout.decode(errors="replace"), done.stderr.decode(errors="replace")]
        return done

    def login(self, name: str, provider_id: str, secret: str) -> None:
        """`wardian auth login opencode`, the key on standard input."""
        done = self.cli("auth", "login", "opencode", "--provider", provider_id, "--with-api-key", "--name", name,
                        input=secret.encode() + b"\n")
        assert done.returncode == 0, done.stderr.decode()

    def start(self, name: str, *extra: str) -> subprocess.CompletedProcess[bytes]:
        return self.cli("agent", "start", name, *[a for s in self.settings(name) for a in ("-c", s)], *extra)

    def status(self, name: str) -> str:
        return str(next(a for a in self.app.call("agent/list")["agents"] if a["name"] == name)["status"])


@pytest.fixture
def signin_world() -> Iterator[SignInWorld]:
    opencode = opencode_or_skip()
    root = short_home("sa")
    env = {"WARDIAN_OPENCODE": str(opencode), "WARDIAN_CREDENTIAL_STORE": "file"}  # the logins' own backend
    with ScriptedModel() as model:
        proc = start_app(root, env)
        handle = AppHandle(Home(root), proc, AppClient(Home(root)))
        try:
            yield SignInWorld(handle, model, CredentialStore(Home(root)), [])
        finally:
            handle.client.close()
            stop_app(handle.proc)
            shutil.rmtree(root, ignore_errors=True)


def records_for(world: SignInWorld, token: str, rounds: int = 600) -> list[dict[str, Any]]:
    """Wait (bounded, on the mailbox) for records of the caller, acknowledge them, and return them."""
    return world.app.records_for(token, rounds)


def no_leaks(world: SignInWorld, secrets: list[str]) -> None:
    """No secret under the agents' private homes, in the logs, in the store's records or any CLI output (the
    credential file, the store's own place for secrets, is the one exception)."""
    root = world.app.home.root
    assert_secrets_absent([root], world.outputs, secrets, exclude=[world.store.path])


def test_two_agents_with_two_named_credentials_each_reach_the_model_with_their_own(
        signin_world: SignInWorld) -> None:
    world = signin_world
    world.login("work", "scripted", KEY_A)
    world.login("personal", "scripted", KEY_B)
    world.model.agent("a").require_key(KEY_A)
    world.model.agent("b").require_key(KEY_B)
    world.model.agent("a", Message("a answers"))
    world.model.agent("b", Message("b answers"))
    _, lead = world.app.add_agent("lead", "opencode")
    assert world.cli("agent", "add", "a", "--provider", "opencode", "--auth", "work").returncode == 0
    assert world.cli("agent", "add", "b", "--provider", "opencode", "--auth", "personal").returncode == 0
    for name in ("a", "b"):
        started = world.start(name)
        assert started.returncode == 0, started.stderr.decode()
    tasks = {name: world.app.call("task/followup", {"session": lead, "target": name, "message": f"hi {name}"})
             for name in ("a", "b")}
    got: dict[str, str] = {}
    while len(got) < 2:
        got.update({r["request_id"]: r["text"] for r in records_for(world, lead)})
    assert got == {tasks["a"]["request_id"]: "a answers", tasks["b"]["request_id"]: "b answers"}
    assert world.presented() == [("a", fp(KEY_A)), ("b", fp(KEY_B))]
    world.cli("agent", "list", "--json")
    world.cli("auth", "status", "--json")
    no_leaks(world, [KEY_A, KEY_B])


def test_an_agent_without_a_key_is_refused_with_exit_9_and_nothing_left_running(signin_world: SignInWorld) -> None:
    world = signin_world
    assert world.cli("agent", "add", "c", "--provider", "opencode").returncode == 0
    refused = world.cli("agent", "start", "c", "-c", 'model="openai/gpt-5"')
    assert refused.returncode == 9, refused.stderr.decode()
    assert ("OpenCode agent c has no key for provider openai: run `wardian auth login opencode --provider openai "
            "--with-api-key`") in refused.stderr.decode()
    assert psutil.Process(world.app.proc.pid).children(recursive=True) == []
    assert world.presented() == []
    assert world.status("c") == "signed_out"  # refused for its sign-in only: not errored


def test_a_key_rejected_mid_loop_fails_the_task_signs_the_agent_out_until_a_new_key_and_a_restart(
        signin_world: SignInWorld) -> None:
    world = signin_world
    world.login("default", "scripted", WRONG)
    world.model.agent("d").require_key(KEY_A)
    world.model.agent("d", Message("answered with the right key"))
    _, lead = world.app.add_agent("lead", "opencode")
    assert world.cli("agent", "add", "d", "--provider", "opencode").returncode == 0
    assert world.start("d").returncode == 0
    first = world.app.call("task/followup", {"session": lead, "target": "d", "message": "first"})
    [notice] = records_for(world, lead)
    assert (notice["kind"], notice["status"], notice["request_id"]) == ("notice", "failed", first["request_id"])
    assert "the provider rejected the agent's credentials" in notice["text"]
    assert world.status("d") == "signed_out"
    assert world.presented() == [("d", fp(WRONG))]
    world.login("default", "scripted", KEY_A)
    assert world.cli("agent", "start", "d").returncode == 0  # its saved settings, the new key
    assert world.status("d") == "idle"
    second = world.app.call("task/followup", {"session": lead, "target": "d", "message": "second"})
    replies: list[dict[str, Any]] = records_for(world, lead)
    assert [(r["request_id"], r["status"], r["text"]) for r in replies] == [
        (second["request_id"], "done", "answered with the right key")]
    world.cli("agent", "list", "--json")
    no_leaks(world, [KEY_A, WRONG])
    assert json.dumps(world.app.call("agent/list")).count(KEY_A) == 0


def test_a_config_key_that_overrides_the_credential_is_warned_about_in_the_start_output_and_the_log(
        signin_world: SignInWorld) -> None:
    world = signin_world
    config_key = "sk-oc-config-2Wq4Er6Ty8"
    world.login("default", "scripted", KEY_A)
    assert world.cli("agent", "add", "g", "--provider", "opencode").returncode == 0
    started = world.start("g", "-c", f'provider.scripted.options.apiKey="{config_key}"', "--json")
    assert started.returncode == 0, started.stderr.decode()
    warning = ("OpenCode agent g: its opencode.json sets provider.scripted.options.apiKey, which OpenCode uses "
               "instead of the key of credential 'default'; remove that setting (from the agent's -c settings, or "
               "from its opencode.json) to use the credential")
    assert json.loads(started.stdout)["warnings"] == [warning]
    assert f"wardian: warning: {warning}\n" in started.stderr.decode()
    assert warning in (world.app.home.log_dir / "app.log").read_text()
    plain = world.cli("agent", "start", "g")  # its saved settings: the same warning, in words
    assert f"wardian: warning: {warning}\n" in plain.stderr.decode()
    no_leaks(world, [KEY_A])
