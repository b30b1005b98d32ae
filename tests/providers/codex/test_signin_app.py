"""Codex sign-in through the app, with the real Codex on the scripted model (docs/providers/codex.md#sign-in): a
start that is not signed in is refused by `wardian agent start` (exit 9, the fix named, nothing left running), and a
turn whose key the model rejects ends at once: the task gets a `failed` notice and the agent shows `signed_out` in
`agent list`, `list_agents` and the console, until its next successful start.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Iterator
from contextlib import closing
from typing import Any

import psutil
import pytest

from tests.console.conftest import ConsoleApp, ConsoleWorld, console_app_on_a_fresh_home
from tests.mcp.mcp_harness import mcp_server, server_env
from tests.providers.codex.conftest import CodexWorld, codex_or_skip
from tests.providers.codex.test_runtime import agent_row, wait_reply
from tests.providers.codex.test_signin import interrupted_turns
from wardian_harness.models.scripted_model import AgentScript, Message, ScriptedModel
from wardian_harness.providers.codex_home import ScriptedProvider, codex_overrides

RIGHT_KEY = "sk-test-right-5a6b7c8d9e0f1a2b"


def openai_settings(script: AgentScript) -> list[str]:
    """The built-in OpenAI provider (it needs an OpenAI sign-in) pointed at the scripted model."""
    return [f"openai_base_url={script.base_url}", "model=mock-model", "approval_policy=never",
            "features.plugins=false", "features.apps=false"]


def codex_processes_of(world: CodexWorld, agent_uuid: str) -> list[psutil.Process]:
    """Running processes whose CODEX_HOME is the agent's private home."""
    home = str(world.app.home.agent_dir(agent_uuid) / "codex")
    found = []
    for proc in psutil.process_iter():
        try:
            if proc.environ().get("CODEX_HOME") == home:
                found.append(proc)
        except (psutil.AccessDenied, psutil.NoSuchProcess, psutil.ZombieProcess):
            continue
    return found


def refused_start(world: CodexWorld, name: str, settings: list[str]) -> tuple[str, dict[str, Any]]:
    """`wardian agent start NAME -c …`, which must exit 9; its stderr, and the agent's row after."""
    agent, _ = world.app.add_agent(name)
    script = world.model.agent(name)
    proc = world.app.cli("agent", "start", name, *[a for s in settings for a in ("-c", s)])
    stderr = proc.stderr.decode()
    assert proc.returncode == 9, stderr
    assert proc.stdout == b""
    assert script.requests == []  # nothing was delivered
    assert codex_processes_of(world, agent["uuid"]) == []  # nothing left running
    assert not world.app.home.provider_pid_path("codex", agent["uuid"]).exists()
    return stderr, agent_row(world, name)


def signed_out_reason(world: CodexWorld, name: str) -> str | None:
    """Why the agent shows `signed_out`, as the store recorded it (read-only)."""
    with closing(sqlite3.connect(f"file:{world.app.home.db_path}?mode=ro", uri=True)) as db:
        row = db.execute("SELECT signed_out_reason FROM agents WHERE name = ?", (name,)).fetchone()
    return None if row is None else row[0]


def test_a_start_without_a_sign_in_is_refused_with_exit_9_and_the_fix(codex_world: CodexWorld) -> None:
    """The refused agent shows `signed_out` (not `errored`: nothing failed but its sign-in), with the reason."""
    stderr, row = refused_start(codex_world, "lead", openai_settings(codex_world.model.agent("lead")))
    assert "wardian: not_signed_in: Codex agent lead is not signed in" in stderr
    assert "wardian auth login codex --with-api-key" in stderr
    assert row["status"] == "signed_out"
    assert "Codex agent lead is not signed in" in (signed_out_reason(codex_world, "lead") or "")
    listed = codex_world.app.cli("agent", "list", check=True).stdout.decode()
    assert re.split(r"\s{2,}", next(x for x in listed.splitlines() if x.startswith("lead ")))[4] == "signed_out"


def test_a_start_whose_env_key_variable_is_missing_is_refused_naming_it(codex_world: CodexWorld) -> None:
    settings = [*codex_overrides(ScriptedProvider(base_url=codex_world.model.agent("lead").base_url,
                                                  env_key="WARDIAN_TEST_NO_SUCH_KEY"))]
    stderr, row = refused_start(codex_world, "lead", settings)
    assert "wardian: not_signed_in: Codex agent lead is not signed in" in stderr
    assert "WARDIAN_TEST_NO_SUCH_KEY" in stderr
    assert row["status"] == "signed_out"
    assert "WARDIAN_TEST_NO_SUCH_KEY" in (signed_out_reason(codex_world, "lead") or "")


@pytest.fixture
def console_world() -> Iterator[ConsoleWorld]:
    """Real Codex agents on the scripted model, in an app that serves its console."""
    codex = codex_or_skip()
    extra = {"WARDIAN_CODEX": str(codex), "WARDIAN_SCRIPTED_MODEL_KEY": "dummy-key"}
    with ScriptedModel() as model, console_app_on_a_fresh_home("wsa", extra) as handle:
        yield ConsoleWorld(handle, model, codex, extra, ConsoleApp(handle))


def retrying(script: AgentScript) -> list[str]:
    """The scripted provider with Codex's default retries (the harness's own has none): a 401 is tried six times."""
    return [*codex_overrides(ScriptedProvider(base_url=script.base_url)),
            "model_providers.mock.request_max_retries=4", "model_providers.mock.stream_max_retries=5"]


def statuses(world: ConsoleWorld, name: str, token: str) -> dict[str, str]:
    """The agent's status as `agent/list`, `wardian agent list`, `list_agents` (MCP) and the console show it."""
    row = agent_row(world, name)
    listed = world.app.cli("agent", "list", check=True).stdout.decode()
    line = next(x for x in listed.splitlines() if x.startswith(name + " "))
    with mcp_server(server_env(str(world.app.home.root), token)) as mcp:
        tool = next(a for a in mcp.ok("list_agents")["agents"] if a["name"] == name)
    web = world.web
    _, _, page = web.http("GET", "/agents", {"Cookie": web.login_cookie()})
    marker = f'data-name="{name}"'.encode()
    row_html = page[page.rindex(b"<tr", 0, page.index(marker)):].split(b"</tr>", 1)[0]
    shown = row_html.split(b'data-status="', 1)[1].split(b'"', 1)[0].decode()
    assert f'<span class="status s-{shown}">{shown}</span>'.encode() in row_html  # what the person reads
    return {"agent/list": row["status"], "cli": re.split(r"\s{2,}", line)[4], "list_agents": tool["status"],
            "console": shown}


def test_a_rejected_key_fails_the_task_at_once_and_the_agent_shows_signed_out_until_restarted(
        console_world: ConsoleWorld) -> None:
    world = console_world
    _, lead_token, _ = world.agent("lead", start=False)
    worker, _, script = world.agent("worker", start=False)
    script.require_key(RIGHT_KEY)  # the app's agents send "dummy-key" (their env_key variable)
    world.app.call("agent/start", {"agent": "worker", "config": retrying(script)}, timeout_s=300)
    task = world.app.call("task/followup", {"session": lead_token, "target": "worker", "message": "do it"})
    (notice,) = wait_reply(world, lead_token)
    assert (notice["kind"], notice["status"], notice["request_id"]) == ("notice", "failed", task["request_id"])
    assert "the provider rejected the agent's credentials" in notice["text"]
    assert "401" in notice["text"]
    assert script.unauthorized_requests
    # Ended by the runtime at a 401, not failed by Codex after its five retries.
    (turn,) = interrupted_turns(world.app.home.agent_dir(worker["uuid"]) / "codex")
    assert f"the turn {turn} failed" in notice["text"]
    assert set(statuses(world, "worker", lead_token).values()) == {"signed_out"}
    # Fixed (here: the model now takes the key it is sent), the next start clears it and the next task works.
    script.require_key("dummy-key").add(Message("done now", phase="final_answer"))
    world.app.call("agent/start", {"agent": "worker", "config": retrying(script)}, timeout_s=300)
    assert set(statuses(world, "worker", lead_token).values()) == {"idle"}
    again = world.app.call("task/followup", {"session": lead_token, "target": "worker", "message": "again"})
    (reply,) = wait_reply(world, lead_token)
    assert (reply["kind"], reply["status"], reply["request_id"], reply["text"]) == (
        "reply", "done", again["request_id"], "done now")
    assert worker["uuid"] == agent_row(world, "worker")["uuid"]
