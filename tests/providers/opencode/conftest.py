"""Fixtures for the OpenCode runtime: the real OpenCode CLI (pinned, from npm) driven by the scripted model's chat
dialect, beside real Codex agents on its Responses dialect (mixed teams)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import AppHandle, app_on_root, short_home, start_app, stop_app, unavailable
from tests.providers.codex.conftest import codex_or_skip
from wardian_harness.models.scripted_model import AgentScript, ScriptedModel
from wardian_harness.providers.codex_home import ScriptedProvider, codex_overrides
from wardian_harness.providers.opencode_home import (
    OpenCodeNotFound,
    ScriptedOpenCode,
    find_opencode,
    opencode_overrides,
)


def opencode_or_skip() -> Path:
    try:
        return find_opencode().executable
    except OpenCodeNotFound as exc:
        unavailable(f"the pinned OpenCode CLI is not installed (scripts/setup.sh --with-node): {exc}")


@dataclass
class MixedWorld:
    app: AppHandle
    model: ScriptedModel
    env: dict[str, str]

    def agent(self, name: str, provider: str = "opencode", *, start: bool = True,
              extra: list[str] | None = None) -> tuple[dict[str, Any], str, AgentScript]:
        """Register an agent with its own script (and start it when asked)."""
        agent, token = self.app.add_agent(name, provider)
        script = self.model.agent(name)
        if start:
            self.start(name, provider, script, extra)
        return agent, token, script

    def start(self, name: str, provider: str, script: AgentScript, extra: list[str] | None = None) -> dict[str, Any]:
        config = (opencode_overrides(ScriptedOpenCode(script.base_url)) if provider == "opencode"
                  else codex_overrides(ScriptedProvider(base_url=script.base_url)))
        return self.app.call("agent/start", {"agent": name, "config": [*config, *(extra or [])]}, timeout_s=300)

    def restart_app(self) -> AppHandle:
        stop_app(self.app.proc)
        self.app.proc = start_app(self.app.home.root, self.env)
        return self.app


@pytest.fixture
def mixed_world() -> Iterator[MixedWorld]:
    opencode = opencode_or_skip()
    codex = codex_or_skip()
    env = {"WARDIAN_OPENCODE": str(opencode), "WARDIAN_CODEX": str(codex),
           "WARDIAN_SCRIPTED_MODEL_KEY": "dummy-key"}
    with ScriptedModel() as model, app_on_root(short_home("wo"), env) as handle:
        yield MixedWorld(handle, model, env)
