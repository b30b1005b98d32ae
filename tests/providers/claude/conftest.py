"""Fixtures for Claude Code agents, on the real Claude Code CLI (pinned, from npm) and the scripted model's Messages
dialect: `claude_world` drives the runtime directly, each agent with private directories and a `ClaudeSpec` built
here the way the provider's `prepare` builds one (the provider's own tests cover `prepare`); `claude_app` drives a
real `wardian app run` home, whose agents the app itself starts (`agent/start`)."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import pytest

from tests.conftest import AppHandle, app_on_root, pinned_npm_tool, short_home, start_app, stop_app
from wardian.providers.base import Capabilities, ProviderEvent, StateChange, TurnOutcome
from wardian.providers.claude.runtime import ClaudeRuntime
from wardian.providers.claude.spec import ClaudeSpec
from wardian_harness.models.scripted_model import AgentScript, ScriptedModel
from wardian_harness.providers.claude_home import ScriptedClaude, claude_overrides

REPO = Path(__file__).resolve().parents[3]
CLAUDE = REPO / "node_modules" / ".bin" / "claude"
CAPABILITIES = Capabilities(steer=True, inject=True, interrupt=True, exact_completion=True, attach=False,
                            inject_while_active=True, tool_grants=True)


def claude_or_skip() -> Path:
    return pinned_npm_tool(CLAUDE, "Claude Code CLI")


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def claude_env(root: Path, base_url: str, *, key: str | None = "sk-scripted") -> dict[str, str]:
    """The environment `prepare` gives Claude Code: private directories, the quiet variables, the credential."""
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8", "HOME": str(root / "home"),
           "CLAUDE_CONFIG_DIR": str(root / "config"), "TMPDIR": str(root / "tmp"),
           "CLAUDE_CODE_TMPDIR": str(root / "tmp"), "XDG_RUNTIME_DIR": str(root / "run"),
           "XDG_CACHE_HOME": str(root / "cache"), "ANTHROPIC_BASE_URL": base_url.removesuffix("/v1"),
           "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "DISABLE_AUTOUPDATER": "1", "DISABLE_TELEMETRY": "1",
           "DISABLE_ERROR_REPORTING": "1", "CLAUDE_CODE_MAX_RETRIES": "0"}
    if key is not None:
        env["ANTHROPIC_API_KEY"] = key
    return env


@dataclass
class ClaudeWorld:
    """One scripted model and a private root for the agents' Claude Code directories."""

    model: ScriptedModel
    root: Path
    executable: Path

    def spec(self, name: str, script: AgentScript, *, session_id: str | None = None,
             allowed_tools: tuple[str, ...] = (), key: str | None = "sk-scripted",
             mcp_servers: dict[str, Any] | None = None) -> ClaudeSpec:
        """A spec for agent `name` on `script`; the same name gives the same directories (a restart)."""
        base = self.root / name
        for sub in ("home", "config", "tmp", "run", "cache", "work"):
            (base / sub).mkdir(parents=True, exist_ok=True, mode=0o700)
        mcp = base / "mcp.json"
        mcp.write_text(json.dumps({"mcpServers": mcp_servers or {}}), encoding="utf-8")
        return ClaudeSpec(name=name, executable=str(self.executable), workspace=base / "work",
                          env=claude_env(base, script.base_url, key=key), config_dir=base / "config",
                          mcp_config=mcp, allowed_tools=allowed_tools, session_id=session_id,
                          capabilities=CAPABILITIES, stderr_path=base / "claude.log", pid_path=base / "claude.pid")


@pytest.fixture
def claude_world() -> Iterator[ClaudeWorld]:
    executable = claude_or_skip()
    root = Path(tempfile.mkdtemp(prefix="wcl", dir="/tmp"))
    with ScriptedModel() as model:
        try:
            yield ClaudeWorld(model, root, executable)
        finally:
            shutil.rmtree(root, ignore_errors=True)


@dataclass
class Running:
    """A started runtime and every event it emitted so far (read by a task of the test's)."""

    runtime: ClaudeRuntime
    events: list[ProviderEvent] = field(default_factory=list)
    changed: anyio.Event = field(default_factory=anyio.Event)

    async def until(self, check: Callable[[list[ProviderEvent]], bool], timeout_s: float = 90.0) -> None:
        """Wait (bounded) until `check` holds for the events so far."""
        with anyio.fail_after(timeout_s):
            while not check(self.events):
                await self.changed.wait()

    async def outcome(self, turn_id: str, timeout_s: float = 90.0) -> TurnOutcome:
        await self.until(lambda es: any(isinstance(e, TurnOutcome) and e.turn_id == turn_id for e in es),
                         timeout_s)
        return next(e for e in self.events if isinstance(e, TurnOutcome) and e.turn_id == turn_id)

    def outcomes(self) -> list[TurnOutcome]:
        return [e for e in self.events if isinstance(e, TurnOutcome)]

    def states(self) -> list[StateChange]:
        return [e for e in self.events if isinstance(e, StateChange)]


@asynccontextmanager
async def running(spec: ClaudeSpec) -> AsyncIterator[Running]:
    """Start a runtime on `spec`, collect its events, and stop it (bounded) on the way out."""
    runtime = ClaudeRuntime(spec)
    run = Running(runtime)

    async def collect() -> None:
        async with runtime.events:
            async for event in runtime.events:
                run.events.append(event)
                run.changed.set()
                run.changed = anyio.Event()

    async with anyio.create_task_group() as tg:
        tg.start_soon(collect)
        await tg.start(runtime.run)
        try:
            yield run
        finally:
            runtime.stop()


# --- a real app home ------------------------------------------------------------------------------------------


@dataclass
class ClaudeApp:
    """A running `wardian app run` home (restartable) and the scripted model its Claude Code agents talk to."""

    app: AppHandle
    model: ScriptedModel
    env: dict[str, str]

    def agent(self, name: str, *, start: bool = True, approve: list[str] | None = None,
              config: list[str] | None = None) -> tuple[dict[str, Any], str, AgentScript]:
        """Register agent `name` (a Claude Code agent), and start it on its script unless `start` is False."""
        agent, token = self.app.add_agent(name, "claude")
        script = self.model.agent(name)
        if start:
            self.start(name, approve=approve, config=config)
        return agent, token, script

    def start(self, name: str, *, approve: list[str] | None = None, config: list[str] | None = None,
              mode: str | None = None) -> dict[str, Any]:
        params: dict[str, Any] = {"agent": name, "approve_tools": approve or [], "config": [
            *claude_overrides(ScriptedClaude(self.model.agent(name).base_url)), *(config or [])]}
        if mode is not None:
            params["mode"] = mode
        return dict(self.app.call("agent/start", params, timeout_s=300))

    def restart_app(self) -> None:
        """Stop the app (its agents' Claude Code processes end with it) and start it again on the same home."""
        stop_app(self.app.proc)
        self.app.proc = start_app(self.app.home.root, self.env)


@pytest.fixture
def claude_app() -> Iterator[ClaudeApp]:
    claude = claude_or_skip()
    env = {"WARDIAN_CLAUDE": str(claude)}
    with ScriptedModel() as model, app_on_root(short_home("wc"), env) as handle:
        yield ClaudeApp(handle, model, env)


def settle() -> None:
    """The interval of a bounded poll, not a synchronisation point."""
    threading.Event().wait(0.05)


def records_for(world: ClaudeApp, token: str, rounds: int = 1200) -> list[dict[str, Any]]:
    """The next page of records for the caller of `token` (acknowledged), waiting (bounded) until there is one."""
    return world.app.records_for(token, rounds)


def state_of(world: ClaudeApp, rid: str) -> str:
    return str(world.app.call("request/show", {"id": rid})["task"]["facts"]["state"])
