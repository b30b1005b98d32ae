"""Fixtures for the Codex runtime: the real Codex CLI (pinned, from npm) driven by the scripted model."""

from __future__ import annotations

import shutil
import stat
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import AppHandle, short_home, start_app, stop_app, unavailable
from wardian.client import AppClient
from wardian.home import Home
from wardian_harness.models.scripted_model import AgentScript, ScriptedModel
from wardian_harness.providers.codex_home import ScriptedProvider, codex_overrides
from wardian_harness.providers.codex_install import CodexNotFound, find_codex


def codex_or_skip() -> Path:
    try:
        return find_codex()
    except CodexNotFound as exc:
        unavailable(f"the pinned Codex CLI is not installed (scripts/setup.sh --with-node): {exc}")


@dataclass
class CodexWorld:
    app: AppHandle
    model: ScriptedModel
    codex: Path
    env: dict[str, str]

    def restart_app(self) -> AppHandle:
        """Stop the app (every owner and its app-server ends) and start a new one on the same home."""
        stop_app(self.app.proc)
        self.app.proc = start_app(self.app.home.root, self.env)
        return self.app

    def agent(self, name: str, *, start: bool = True, approve: tuple[str, ...] = ()) -> tuple[dict, str, AgentScript]:
        """Register an agent with its own script; start its Codex owner when asked."""
        agent, token = self.app.add_agent(name)
        script = self.model.agent(name)
        if start:
            self.start(name, script, approve)
        return agent, token, script

    def start(self, name: str, script: AgentScript, approve: tuple[str, ...] = ()) -> dict:
        overrides = codex_overrides(ScriptedProvider(base_url=script.base_url))
        return self.app.call("agent/start", {"agent": name, "config": overrides, "approve_tools": list(approve)},
                             timeout_s=300)


OLDEST_CODEX = Path(__file__).resolve().parents[3] / "scripts/npm/codex-0.154.0/node_modules/.bin/codex"


@pytest.fixture
def codex_world() -> Iterator[CodexWorld]:
    yield from _world(codex_or_skip())


@pytest.fixture
def oldest_codex_world() -> Iterator[CodexWorld]:
    """The oldest stable Codex VER-2 supports (0.154.0): idle and information delivery, no steering."""
    if not OLDEST_CODEX.exists():
        unavailable(f"{OLDEST_CODEX} is missing (scripts/setup.sh --with-node installs it)")
    yield from _world(OLDEST_CODEX)


def _world(codex: Path) -> Iterator[CodexWorld]:
    root = short_home("wc")
    # Codex core logs every interrupt it receives at info ("interrupt received…"): a turn that ends interrupted
    # with nobody asking can then be traced in its log (agents' app-servers inherit the app's environment).
    extra = {"WARDIAN_CODEX": str(codex), "WARDIAN_SCRIPTED_MODEL_KEY": "dummy-key", "RUST_LOG": "warn,codex_core=info"}
    with ScriptedModel() as model:
        proc = start_app(root, extra)
        handle = AppHandle(Home(root), proc, AppClient(Home(root)))
        try:
            yield CodexWorld(handle, model, codex, extra)
        finally:
            handle.client.close()
            stop_app(handle.proc)
            shutil.rmtree(root, ignore_errors=True)


FAKE_CODEX = Path(__file__).with_name("fake_codex.py")


@pytest.fixture
def fake_world(tmp_path: Path) -> Iterator[tuple[Path, Path, Path]]:
    """(home root, a `codex` executable running the fake app-server, its request log) for the fault tests."""
    root = short_home("wf")
    exe = tmp_path / "codex"
    exe.write_text(f"#!/bin/sh\nexec {sys.executable} {FAKE_CODEX} \"$@\"\n", encoding="utf-8")
    exe.chmod(exe.stat().st_mode | stat.S_IXUSR)
    log = tmp_path / "requests.jsonl"
    yield root, exe, log
    shutil.rmtree(root, ignore_errors=True)
