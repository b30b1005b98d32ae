"""Fixtures for Pi agents on the real Pi CLI (pinned, from npm) and the scripted model's Chat dialect (Pi's
`openai-completions` api): `pi_app` drives a real `wardian app run` home whose Pi agents the app itself starts
(`agent/start`)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import AppHandle, app_on_root, pinned_npm_tool, short_home, start_app, stop_app
from wardian_harness.models.scripted_model import AgentScript, ScriptedModel
from wardian_harness.providers.pi_home import MODEL as MODEL  # the tests name the scripted model from here
from wardian_harness.providers.pi_home import pi_settings

REPO = Path(__file__).resolve().parents[3]


@dataclass
class PiApp:
    """A running `wardian app run` home (restartable) and the scripted model its Pi agents talk to."""

    app: AppHandle
    model: ScriptedModel
    env: dict[str, str]

    def agent(self, name: str, *, start: bool = True, approve: list[str] | None = None,
              config: list[str] | None = None) -> tuple[dict[str, Any], str, AgentScript]:
        agent, token = self.app.add_agent(name, "pi")
        script = self.model.agent(name)
        if start:
            self.start(name, approve=approve, config=config)
        return agent, token, script

    def start(self, name: str, *, approve: list[str] | None = None,
              config: list[str] | None = None) -> dict[str, Any]:
        params = {"agent": name, "approve_tools": approve or [],
                  "config": [*pi_settings(self.model.agent(name).base_url), *(config or [])]}
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

    def facts(self, rid: str) -> dict[str, Any]:
        return dict(self.app.call("request/show", {"id": rid})["task"]["facts"])


@pytest.fixture
def pi_app() -> Iterator[PiApp]:
    cli = pinned_npm_tool(REPO / "node_modules" / ".bin" / "pi", "Pi CLI")
    env = {"WARDIAN_PI": str(cli)}
    with ScriptedModel() as model, app_on_root(short_home("wp"), env) as handle:
        yield PiApp(handle, model, env)


def settle() -> None:
    """The interval of a bounded poll, not a synchronisation point."""
    threading.Event().wait(0.05)


def collect(world: PiApp, token: str, count: int) -> list[dict[str, Any]]:
    """The next `count` records for the caller of `token` (acknowledged), waiting (bounded) until they came."""
    got: list[dict[str, Any]] = []
    while len(got) < count:
        got.extend(world.app.records_for(token))
    assert len(got) == count, f"more records than expected: {got}"
    return got
