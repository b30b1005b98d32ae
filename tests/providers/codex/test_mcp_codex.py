"""`wardian mcp serve` inside the real Codex CLI (MCP-1, CFG-1), offline against the scripted model.

Each test registers the server with `wardian codex register` into a fresh private CODEX_HOME, points that home at
the scripted model and drives `codex app-server` over stdio (tests/harness/appserver.py). Codex launches the
registered `wardian mcp serve` itself, with the WARDIAN_HOME and WARDIAN_SESSION_ID registration wrote.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import pytest
import tomlkit

from tests.conftest import AppHandle
from tests.harness.appserver import AppServer, app_server
from tests.providers.codex.conftest import codex_or_skip
from wardian.protocol.tools import TOOL_NAMES
from wardian_harness.models.scripted_model import AgentScript, Message, ScriptedModel, ToolCall
from wardian_harness.providers.codex_home import ScriptedProvider, codex_env, write_codex_config

pytestmark = pytest.mark.codex

# Codex's refusal of an MCP call it would have to ask about under approval_policy = "never" (docs/providers/codex.md).
APPROVAL_REFUSAL = "requires approval"


@dataclass
class Registered:
    """A managed agent registered into its own fresh CODEX_HOME, which points at the agent's script."""

    app: AppHandle
    agent: dict[str, Any]
    codex_home: Path
    workspace: Path
    env: dict[str, str]
    script: AgentScript
    stderr: Path


@pytest.fixture
def model() -> Iterator[ScriptedModel]:
    with ScriptedModel() as scripted:
        yield scripted


@pytest.fixture
def private_dir() -> Iterator[Path]:
    root = Path(tempfile.mkdtemp(prefix="wcx"))
    try:
        yield root
    finally:
        shutil.rmtree(root, ignore_errors=True)


def register(app: AppHandle, model: ScriptedModel, root: Path, name: str, *approve: str) -> Registered:
    """`wardian codex register` for a new agent `name` into `root/<name>/codex`, then the scripted provider."""
    agent, _ = app.add_agent(name)
    codex_home = root / name / "codex"
    codex_home.mkdir(mode=0o700, parents=True)
    args = ["codex", "register", "--codex-home", str(codex_home), "--agent", name]
    if approve:
        args += ["--approve-tools", ",".join(approve)]
    proc = app.cli(*args)
    assert proc.returncode == 0, proc.stderr.decode("utf-8", "replace")
    script = model.agent(name)
    provider = ScriptedProvider(base_url=script.base_url)
    write_codex_config(codex_home, provider)
    workspace = root / name / "workspace"
    workspace.mkdir()
    return Registered(app, agent, codex_home, workspace, codex_env(codex_home, home=root / name, provider=provider),
                      script, root / name / "app-server.stderr")


@contextmanager
def codex_app_server(agent: Registered) -> Iterator[AppServer]:
    """An initialized `codex app-server` on the agent's home; the wardian server is `required`, so thread/start
    waits for it and the first model request already offers its tools."""
    with app_server(codex_or_skip(), agent.env, agent.workspace, ["-c", "mcp_servers.wardian.required=true"],
                    stderr=agent.stderr) as server:
        server.timeout_s = 90
        server.initialize()
        yield server


def run_turn(server: AppServer, agent: Registered, text: str) -> dict[str, Any]:
    thread_id = server.start_thread(agent.workspace)
    return server.wait_turn_completed(server.start_turn(thread_id, text))


def test_codex_lists_the_eight_tools_of_the_registered_server(app: AppHandle, model: ScriptedModel,
                                                              private_dir: Path) -> None:
    """CFG-1, TOOL-1: after `wardian codex register` into a fresh private home, `codex app-server` reports the eight
    tools (mcpServerStatus/list) with our annotations."""
    alice = register(app, model, private_dir, "alice")
    with codex_app_server(alice) as server:
        status = server.request("mcpServerStatus/list", {})
    [wardian] = [s for s in status["data"] if s["name"] == "wardian"]
    assert sorted(wardian["tools"]) == sorted(TOOL_NAMES)
    assert wardian["serverInfo"]["name"] == "wardian"
    assert wardian["tools"]["list_agents"]["annotations"]["readOnlyHint"] is True
    assert wardian["tools"]["send_message"]["inputSchema"]["additionalProperties"] is False


def test_a_scripted_turn_sends_a_message_through_codex_attributed_to_the_calling_agent(
        app: AppHandle, model: ScriptedModel, private_dir: Path) -> None:
    """APR-2: a scripted turn calls send_message through Codex (granted with --approve-tools, as
    approval_policy = "never" requires) and the record lands in the store, attributed by the app to the agent
    whose session registration wrote, not to anything the model said."""
    alice = register(app, model, private_dir, "alice", "send_message")
    bob, _ = app.add_agent("bob")
    alice.script.add(ToolCall("send_message", {"target": "bob", "message": "hello from Codex ✓\nline 2"}),
                     Message("sent", phase="final_answer"))
    with codex_app_server(alice) as server:
        turn = run_turn(server, alice, "tell bob hello")
    assert turn["status"] == "completed"
    first, second = alice.script.requests
    assert "send_message" in first.offered_tools()
    [output] = second.function_call_outputs()
    assert APPROVAL_REFUSAL not in output.text
    receipt = orjson.loads(output.text[output.text.index("{"):output.text.rindex("}") + 1])
    records = [r for r in app.call("mailbox/records", {"limit": 1000})["records"]
               if r["id"] == receipt["interaction_id"]]
    assert [(r["kind"], r["sender"]["uuid"], r["recipient"]["uuid"], r["text"]) for r in records] == [
        ("information", alice.agent["uuid"], bob["uuid"], "hello from Codex ✓\nline 2")]


# Each tool with arguments it accepts; a refused call never reaches wardian, a run one answers (maybe an error).
CALLS: dict[str, dict[str, Any]] = {
    "list_agents": {},
    "wait_agent": {"timeout_ms": 0},
    "receive_messages": {},
    "send_message": {"target": "bob", "message": "probe"},
    "followup_task": {"target": "bob", "message": "probe"},
    "reply": {"request_id": "ask_none", "status": "done", "message": "probe"},
    "interrupt_agent": {"target": "bob"},
    "answer_approval": {"approval_id": "apr_0", "decision": "deny"},
}


def test_without_a_grant_only_the_read_only_and_closed_world_tools_run_under_approval_never(
        app: AppHandle, model: ScriptedModel, private_dir: Path) -> None:
    """APR-1 (verified on the real binary, docs/guide/codex.md#tool-approval): with no --approve-tools and
    approval_policy = "never", Codex runs list_agents and wait_agent (read-only) and receive_messages (neither
    destructive nor open-world) and refuses send_message, followup_task, reply, interrupt_agent and answer_approval."""
    alice = register(app, model, private_dir, "alice")
    app.add_agent("bob")
    config = tomlkit.parse((alice.codex_home / "config.toml").read_text(encoding="utf-8"))
    assert config["approval_policy"] == "never"
    assert "tools" not in config["mcp_servers"]["wardian"]  # no grant of any kind
    alice.script.add(*(ToolCall(name, arguments) for name, arguments in CALLS.items()),
                     Message("probed", phase="final_answer"))
    with codex_app_server(alice) as server:
        turn = run_turn(server, alice, "probe every tool")
    assert turn["status"] == "completed"
    outputs = {o.name: o.text for request in alice.script.requests for o in request.function_call_outputs()}
    assert set(outputs) == set(CALLS)
    refused = {name for name, text in outputs.items() if APPROVAL_REFUSAL in text}
    assert refused == {"send_message", "followup_task", "reply", "interrupt_agent", "answer_approval"}
    ran = set(CALLS) - refused
    assert ran == {"list_agents", "wait_agent", "receive_messages"}
    assert '"caller"' in outputs["list_agents"]  # wardian answered: the call really ran
    sent = [r for r in app.call("mailbox/records", {"limit": 1000})["records"]
            if r["sender"]["uuid"] == alice.agent["uuid"]]
    assert sent == []  # nothing refused reached the app
