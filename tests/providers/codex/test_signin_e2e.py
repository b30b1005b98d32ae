"""Codex sign-in end to end, as a person does it: `wardian auth login codex --with-api-key [--name …]`, then
`wardian agent add|start … --auth …`, with the real Codex on the scripted model (which answers 401 unless a request
carries the agent's own key). Every key used is then searched for everywhere it must not be: the home (the
agents' private homes, the store, the app's and the providers' logs), every CLI output, the console's pages and
an evidence report; only the credential store itself may hold it (docs/guide/sign-in.md).
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import wardian_cmd
from tests.console.conftest import ConsoleApp, ConsoleWorld, console_app_on_a_fresh_home
from tests.providers.codex.conftest import codex_or_skip
from tests.providers.codex.test_runtime import agent_row, wait_reply
from tests.providers.codex.test_signin import interrupted_turns
from wardian_harness.acceptance.report import (
    executable_evidence,
    find_rollouts,
    read_rollout,
    text_counts,
    write_report,
)
from wardian_harness.models.scripted_model import AgentScript, Message, ScriptedModel
from wardian_harness.secrets import assert_secrets_absent

KEY_WORK = "sk-e2e-work-3c5d7e9f1a2b4c6d"
KEY_HOME = "sk-e2e-home-8e7d6c5b4a3f2e1d"
KEY_OLD = "sk-e2e-old-0a1b2c3d4e5f6a7b"
KEY_NEW = "sk-e2e-new-7f6e5d4c3b2a1f0e"
KEYS = (KEY_WORK, KEY_HOME, KEY_OLD, KEY_NEW)


class Person:
    """Runs the CLI as a person would, and keeps every output for the secret search."""

    def __init__(self, world: ConsoleWorld) -> None:
        self.world = world
        self.outputs: list[bytes] = []

    def run(self, *args: str, stdin: bytes | None = None, expect: int = 0) -> str:
        env = {**self.world.app.env(), "WARDIAN_CREDENTIAL_STORE": "file"}
        proc = subprocess.run([*wardian_cmd(), *args], env=env, input=stdin, capture_output=True, timeout=600,
                              check=False)
        self.outputs += [proc.stdout, proc.stderr]
        assert proc.returncode == expect, (args, proc.returncode, proc.stderr.decode())
        return (proc.stdout + proc.stderr).decode()

    def login(self, key: str, name: str) -> None:
        self.run("auth", "login", "codex", "--with-api-key", "--name", name, stdin=key.encode() + b"\n")

    def start(self, name: str, script: AgentScript, *extra: str, expect: int = 0) -> str:
        settings = [f"openai_base_url={script.base_url}", "model=mock-model", "approval_policy=never",
                    "features.plugins=false", "features.apps=false"]
        return self.run("agent", "start", name, *extra, *[a for s in settings for a in ("-c", s)], expect=expect)


@pytest.fixture
def world() -> Iterator[ConsoleWorld]:
    codex = codex_or_skip()
    extra = {"WARDIAN_CODEX": str(codex), "WARDIAN_CREDENTIAL_STORE": "file"}
    with ScriptedModel() as model, console_app_on_a_fresh_home("wse", extra) as handle:
        yield ConsoleWorld(handle, model, codex, extra, ConsoleApp(handle))


def ask(world: ConsoleWorld, token: str, target: str, text: str) -> tuple[str, dict[str, Any]]:
    task = world.app.call("task/followup", {"session": token, "target": target, "message": text})
    (answer,) = wait_reply(world, token)
    assert answer["request_id"] == task["request_id"]
    return task["request_id"], answer


def console_pages(web: ConsoleApp) -> list[bytes]:
    cookie = web.login_cookie()
    return [web.http("GET", path, {"Cookie": cookie})[2] for path in ("/agents", "/exchange", "/act")]


def evidence(world: ConsoleWorld, folder: Path, names: list[str]) -> list[Path]:
    """An evidence report of the run, as the native acceptance writes one (records and rollouts); it refuses to be
    written with a key in it, and its files are searched again after."""
    records = world.app.call("mailbox/records", {"limit": 1000})["records"]
    agents = []
    for row in world.app.call("agent/list")["agents"]:
        if row["name"] in names:
            home = world.app.home.agent_dir(row["uuid"]) / "codex"
            agents.append({"name": row["name"], "uuid": row["uuid"], "thread_ids": [row.get("thread_id") or ""],
                           "rollouts": [read_rollout(p) for p in find_rollouts(home)]})
    codex = executable_evidence(world.codex, "codex")
    report = {"run": {"mode": "background", "real_model": False,
                      "codex": {"version": "0.171.0", "path": codex["path"], "sha256": codex["sha256"]}},
              "input": {"text": "sign-in", "counts": text_counts("sign-in")}, "outcome": "done", "agents": agents,
              "records": records, "checks": ["each agent reached the model with its own key"]}
    return list(write_report(report, folder, secrets=KEYS))


def test_codex_sign_in_end_to_end_with_named_credentials_a_rejection_and_a_new_login(
        world: ConsoleWorld, tmp_path: Path) -> None:
    person = Person(world)
    _, lead = world.app.add_agent("lead")
    # Two agents, two named credentials: each reaches the model with its own key (the model refuses any other).
    person.login(KEY_WORK, "work")
    person.login(KEY_HOME, "home")
    work, home = world.model.agent("alpha").require_key(KEY_WORK), world.model.agent("beta").require_key(KEY_HOME)
    work.add(Message("alpha answers", phase="final_answer"))
    home.add(Message("beta answers", phase="final_answer"))
    person.run("agent", "add", "alpha", "--provider", "codex", "--auth", "work")
    person.run("agent", "add", "beta", "--provider", "codex", "--auth", "home")
    person.start("alpha", work)
    person.start("beta", home)
    assert ask(world, lead, "alpha", "go")[1]["text"] == "alpha answers"
    assert ask(world, lead, "beta", "go")[1]["text"] == "beta answers"
    assert [r.carried(KEY_WORK) for r in work.requests] == [True]
    assert [r.carried(KEY_HOME) for r in home.requests] == [True]

    # No credential at all (none under `default`): the start is refused, naming the fix.
    gamma = world.model.agent("gamma")
    person.run("agent", "add", "gamma", "--provider", "codex")
    refused = person.start("gamma", gamma, expect=9)
    assert "not_signed_in: Codex agent gamma is not signed in" in refused
    assert "wardian auth login codex --with-api-key" in refused
    assert gamma.requests == []

    # A key the provider no longer takes: the turn ends at its first 401 with the failed notice, `signed_out`.
    delta = world.model.agent("delta").require_key(KEY_NEW)
    person.login(KEY_OLD, "rotated")
    person.run("agent", "add", "delta", "--provider", "codex", "--auth", "rotated")
    person.start("delta", delta)
    _, notice = ask(world, lead, "delta", "are you there?")
    assert (notice["kind"], notice["status"]) == ("notice", "failed")
    assert "rejected the agent's credentials" in notice["text"]
    assert delta.unauthorized_requests
    assert all(r.carried(KEY_OLD) for r in delta.unauthorized_requests)
    delta_home = world.app.home.agent_dir(agent_row(world, "delta")["uuid"]) / "codex"
    (turn,) = interrupted_turns(delta_home)  # ended by the runtime at a 401, not by Codex after its retries
    assert f"the turn {turn} failed" in notice["text"]
    assert agent_row(world, "delta")["status"] == "signed_out"
    assert "signed_out" in person.run("agent", "list")
    # The person logs in again under the same name with the right key; the next start clears it and works.
    person.login(KEY_NEW, "rotated")
    delta.add(Message("delta is back", phase="final_answer"))
    person.start("delta", delta)
    assert agent_row(world, "delta")["status"] == "idle"
    assert ask(world, lead, "delta", "now?")[1]["text"] == "delta is back"
    assert delta.requests[-1].carried(KEY_NEW)

    status = person.run("auth", "status", "--json")
    assert {c["name"] for c in json.loads(status)["credentials"]} >= {"work", "home", "rotated"}
    pages = console_pages(world.web)
    # The agents page: delta's new login cleared its state; gamma, whose start was refused, stays signed out.
    assert agent_row(world, "gamma")["status"] == "signed_out"
    rows = {name: [r for r in pages[0].split(b"<tr") if f">{name}<".encode() in r] for name in ("delta", "gamma")}
    assert len(rows["delta"]) == 1
    assert b"signed_out" not in rows["delta"][0]
    assert b"signed_out" in b"".join(rows["gamma"])
    report = evidence(world, tmp_path / "evidence", ["alpha", "beta", "delta"])
    root = world.app.home.root
    assert_secrets_absent([root, *report], [*person.outputs, *pages], KEYS, exclude=[root / "credentials.json"])
