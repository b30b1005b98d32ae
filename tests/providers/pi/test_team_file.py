"""A mixed team in a team file (docs/guide/team-file.md, docs/guide/pi.md): `wardian up` starts a Pi lead and a Codex
worker from `[agents.NAME]` tables whose settings are TOML (Pi's `models.*` as an inline table), the lead's task
reaches the worker and back, and `wardian down` leaves nothing running."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator

import pytest

from tests.conftest import pinned_npm_tool, wardian_cmd
from tests.providers.pi.conftest import MODEL, REPO
from wardian.client import AppClient
from wardian.home import Home
from wardian_harness.acceptance.homes import IsolatedRun
from wardian_harness.models.scripted_model import Message, ScriptedModel, ToolCall
from wardian_harness.processes.proctree import ProcessTree
from wardian_harness.providers.codex_home import DUMMY_API_KEY, ScriptedProvider, codex_overrides
from wardian_harness.providers.codex_install import discover_codex


def pi_toml(base_url: str) -> list[str]:
    """`pi_settings` as a team file's TOML lines."""
    return [f'models.providers.scripted = {{baseUrl = "{base_url}", api = "openai-completions", apiKey = "dummy", '
            'compat = {supportsDeveloperRole = false, supportsReasoningEffort = false}, '
            f'models = [{{id = "{MODEL}"}}]}}', 'defaultProvider = "scripted"', f'defaultModel = "{MODEL}"']


@pytest.fixture
def run() -> Iterator[tuple[IsolatedRun, ProcessTree, ScriptedModel, dict[str, str]]]:
    codex = discover_codex()
    pi = pinned_npm_tool(REPO / "node_modules" / ".bin" / "pi", "Pi CLI")
    isolated = IsolatedRun.create(prefix="wpt")
    tree = ProcessTree(isolated.run_id)
    try:
        with ScriptedModel() as model:
            env = isolated.child_env({"PATH": f"{codex.executable.parent}:/usr/bin:/bin",
                                      "WARDIAN_CODEX": str(codex.executable), "WARDIAN_PI": str(pi),
                                      "WARDIAN_SCRIPTED_MODEL_KEY": DUMMY_API_KEY})
            yield isolated, tree, model, env
    finally:
        left = tree.close()
        isolated.close()
        assert not left, f"processes left running: {[p.pid for p in left]}"


def test_up_starts_a_pi_lead_and_a_codex_worker_from_the_team_file_and_down_ends_them(
        run: tuple[IsolatedRun, ProcessTree, ScriptedModel, dict[str, str]]) -> None:
    isolated, tree, model, env = run
    lead, worker = model.agent("lead"), model.agent("worker")
    lead.add(ToolCall("followup_task", {"target": "worker", "message": "six times seven?"}, namespace=None),
             ToolCall("receive_messages", {"timeout_ms": 60000}, namespace=None), Message("The worker says 42."))
    worker.add(Message("42"))
    lines = ["[team]", f"home = {json.dumps(str(isolated.wardian_home))}", ""]
    for name, provider, settings, grants in (
            ("lead", "pi", pi_toml(lead.base_url), ["followup_task"]),
            ("worker", "codex", codex_overrides(ScriptedProvider(base_url=worker.base_url)), [])):
        lines += [f"[agents.{name}]", f'provider = "{provider}"',
                  f"workspace = {json.dumps(str(isolated.workspace(name)))}",
                  f"approve_tools = {json.dumps(grants)}", "", f"[agents.{name}.settings]", *settings, ""]
    team = isolated.root / "wardian.toml"
    team.write_text("\n".join(lines), encoding="utf-8")

    def wardian(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*wardian_cmd(), *args], env=env, capture_output=True, text=True, encoding="utf-8",
                              timeout=600, check=False, stdin=subprocess.DEVNULL)

    up = wardian("up", "-f", str(team), "--json")
    assert up.returncode == 0, up.stderr
    agents = {a["name"]: a for a in json.loads(up.stdout)["agents"]}
    assert {n: (a["action"], a["error"]) for n, a in agents.items()} == {"lead": ("added", None),
                                                                         "worker": ("added", None)}
    with AppClient(Home(isolated.wardian_home)) as app:
        person = app.call("agent/add", {"name": "person", "provider": "codex"})
        token = app.call("agent/session", {"agent": person["uuid"]})["session_id"]
        task = app.call("task/followup", {"session": token, "target": "lead", "message": "Ask the worker."})
        page = app.call_wait("mailbox/receive", {"session": token, "timeout_ms": 60000}, 60000)
    assert [(r["request_id"], r["text"]) for r in page["records"]] == [(task["request_id"], "The worker says 42.")]
    down = wardian("down", "-f", str(team))
    assert down.returncode == 0, down.stderr
    assert tree.members() == []
