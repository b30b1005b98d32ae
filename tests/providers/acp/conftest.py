"""Fixtures for ACP agents on the real Qwen Code and Gemini CLIs (pinned, from npm) and the scripted model (its Chat
dialect for Qwen Code, its Gemini dialect for Gemini CLI): `acp_app` drives a real `wardian app run` home whose
agents of one ACP provider the app itself starts (`agent/start`), once per provider."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import AppHandle, app_on_root, pinned_npm_tool, short_home, start_app, stop_app
from wardian_harness.models.scripted_model import AgentScript, ScriptedModel
from wardian_harness.providers.acp_home import acp_launch

REPO = Path(__file__).resolve().parents[3]




@dataclass
class AcpApp:
    """A running `wardian app run` home (restartable) and the scripted model its agents of `provider` talk to."""

    app: AppHandle
    model: ScriptedModel
    env: dict[str, str]
    provider: str
    command: list[str] | None = None
    """A generic ACP agent's command line (provider `acp`)."""

    def agent(self, name: str, *, start: bool = True, approve: list[str] | None = None,
              **approvals: Any) -> tuple[dict[str, Any], str, AgentScript]:
        agent, token = self.app.add_agent(name, self.provider, self.command)
        script = self.model.agent(name)
        if start:
            self.start(name, approve=approve, **approvals)
        return agent, token, script

    def start(self, name: str, *, approve: list[str] | None = None, **approvals: Any) -> dict[str, Any]:
        """`approvals`: the start's `approvals` and `approval_timeout_ms` (docs/guide/approvals.md)."""
        config, env = acp_launch(self.provider, self.model.agent(name).base_url)
        params = {"agent": name, "approve_tools": approve or [], "config": config, "env": env, **approvals}
        return dict(self.app.call("agent/start", params, timeout_s=300))

    def restart_app(self) -> None:
        stop_app(self.app.proc)
        self.app.proc = start_app(self.app.home.root, self.env)

    def row(self, name: str) -> dict[str, Any]:
        return next(a for a in self.app.call("agent/list")["agents"] if a["name"] == name)

    def wait_status(self, name: str, status: str) -> dict[str, Any]:
        for _ in range(2400):
            agent = self.row(name)
            if agent["status"] == status and (status != "active" or agent["active_turn_id"]):
                return agent
            settle()
        raise AssertionError(f"{name} never became {status}")


@pytest.fixture(params=["qwen", "gemini"])
def acp_app(request: pytest.FixtureRequest) -> Iterator[AcpApp]:
    provider = str(request.param)
    cli = pinned_npm_tool(REPO / "node_modules" / ".bin" / provider, f"{provider} CLI")
    env = {f"WARDIAN_{provider.upper()}": str(cli)}
    with ScriptedModel() as model, app_on_root(short_home("wa"), env) as handle:
        yield AcpApp(handle, model, env, provider)


@pytest.fixture
def generic_app() -> Iterator[AcpApp]:
    """A home whose agents are generic ACP agents (`--provider acp`): the pinned OpenCode CLI as `opencode acp`."""
    cli = pinned_npm_tool(REPO / "node_modules" / ".bin" / "opencode", "OpenCode CLI")
    with ScriptedModel() as model, app_on_root(short_home("wg"), {}) as handle:
        yield AcpApp(handle, model, {}, "acp", [str(cli), "acp"])


def settle() -> None:
    """The interval of a bounded poll, not a synchronisation point."""
    threading.Event().wait(0.05)


def state_of(world: AcpApp, rid: str) -> str:
    return str(world.app.call("request/show", {"id": rid})["task"]["facts"]["state"])


def collect(world: AcpApp, token: str, count: int) -> list[dict[str, Any]]:
    """The next `count` records for the caller of `token` (acknowledged), waiting (bounded) until they came."""
    got: list[dict[str, Any]] = []
    while len(got) < count:
        got.extend(world.app.records_for(token))
    assert len(got) == count, f"more records than expected: {got}"
    return got


def pending_approval(world: AcpApp, request_id: str) -> dict[str, Any]:
    """The pending approval the task's turn asked, once `approval list` shows it (bounded poll)."""
    for _ in range(2400):
        found = [a for a in world.app.call("approval/list", {})["approvals"] if a["request_id"] == request_id]
        if found:
            return found[0]
        settle()
    raise AssertionError(f"no approval pending for {request_id}")
