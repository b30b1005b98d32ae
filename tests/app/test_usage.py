"""Token usage per turn (docs/guide/teams.md#usage): each provider's own report of what a turn's model requests cost
is recorded with the task the turn served, and summed per agent; what no provider reported is unknown, never 0.

Each case drives a real agent of one provider on the scripted model, whose responses report a usage chosen here in
that provider's dialect (cached tokens included): the numbers wardian shows must be exactly those, once each
provider's own way of counting (cache reads apart from input, reasoning apart from output) is undone.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import AppHandle, app_on_root, pinned_npm_tool, short_home
from tests.console.conftest import ConsoleApp, console_app_on_a_fresh_home
from tests.providers.codex.conftest import codex_or_skip
from wardian_harness.models.scripted_model import Message, Response, ScriptedModel, ToolCall, Usage
from wardian_harness.providers.acp_home import acp_launch
from wardian_harness.providers.claude_home import ScriptedClaude, claude_overrides
from wardian_harness.providers.codex_home import ScriptedProvider, codex_overrides
from wardian_harness.providers.opencode_home import ScriptedOpenCode, opencode_overrides
from wardian_harness.providers.pi_home import pi_settings

# A hang guard, not a measure: starting a real agent and running two turns took up to 55 s on a loaded 2-core
# machine (OpenCode), too close to the suite's default 120 s under more load.
pytestmark = pytest.mark.timeout(300)
REPO = Path(__file__).resolve().parents[2]
FIRST = Usage(input=1200, output=34, cached=200)
SECOND = Usage(input=2300, output=56, cached=1100)


@dataclass
class World:
    app: AppHandle
    model: ScriptedModel
    provider: str


def _executable(provider: str) -> dict[str, str]:
    if provider == "codex":
        return {"WARDIAN_CODEX": str(codex_or_skip()), "WARDIAN_SCRIPTED_MODEL_KEY": "dummy-key"}
    path = pinned_npm_tool(REPO / "node_modules" / ".bin" / provider, f"{provider} CLI")
    return {f"WARDIAN_{provider.upper()}": str(path), "WARDIAN_SCRIPTED_MODEL_KEY": "dummy-key"}


@pytest.fixture(params=["codex", "claude", "opencode", "pi", "qwen", "gemini"])
def world(request: pytest.FixtureRequest) -> Iterator[World]:
    provider = str(request.param)
    with ScriptedModel() as model, app_on_root(short_home("wu"), _executable(provider)) as handle:
        yield World(handle, model, provider)


def _start(world: World, name: str) -> None:
    base_url = world.model.agent(name).base_url
    env: list[str] = []
    match world.provider:
        case "codex":
            config = codex_overrides(ScriptedProvider(base_url=base_url))
        case "claude":
            config = claude_overrides(ScriptedClaude(base_url))
        case "opencode":
            config = opencode_overrides(ScriptedOpenCode(base_url))
        case "pi":
            config = pi_settings(base_url)
        case _:
            config, env = acp_launch(world.provider, base_url)
    world.app.call("agent/start", {"agent": name, "config": config, "env": env}, timeout_s=300)


def _completed(app: AppHandle, rid: str) -> dict[str, Any]:
    for _ in range(2400):
        story = app.call("request/show", {"id": rid})
        if story["task"]["facts"]["state"] == "completed":
            return dict(story)
        threading.Event().wait(0.05)  # the interval of a bounded poll
    raise AssertionError(f"{rid} never completed")


def _overview(app: AppHandle, name: str) -> dict[str, Any]:
    return next(a for a in app.call("agent/overview")["agents"] if a["agent"]["name"] == name)


def _expected(usage: Usage, provider: str) -> dict[str, Any]:
    # Gemini CLI reports a prompt's input and output tokens only: its cache figure is unknown, not 0.
    return {"input": usage.input, "output": usage.output, "cached": None if provider == "gemini" else usage.cached}


def _status(world: World, tmp: Path) -> str:
    """`wardian status` of a team file naming the home and its one agent."""
    team = tmp / "wardian.toml"
    team.write_text(f"[team]\nhome = {json.dumps(str(world.app.home.root))}\n\n[agents.worker]\n"
                    f"provider = {json.dumps(world.provider)}\n", encoding="utf-8")
    done = world.app.cli("status", "-f", str(team))
    assert done.returncode == 0, done.stderr.decode()
    return done.stdout.decode()


def test_each_providers_turn_usage_is_recorded_with_its_task_and_summed_per_agent(world: World,
                                                                                   tmp_path: Path) -> None:
    app = world.app
    app.add_agent("worker", world.provider)
    script = world.model.agent("worker")
    script.add(Response([Message("first answer")], usage=FIRST), Response([Message("second answer")], usage=SECOND))
    _start(world, "worker")
    assert _overview(app, "worker")["usage"] is None  # no turn ended yet: unknown, never 0
    assert _status(world, tmp_path).splitlines()[-1].endswith(" unknown")

    first = app.call("operator/followup", {"target": "worker", "message": "First question?"})["request_id"]
    story = _completed(app, first)
    assert story["answer"]["text"] == "first answer"
    assert story["task"]["usage"] == _expected(FIRST, world.provider)
    second = app.call("operator/followup", {"target": "worker", "message": "Second question?"})["request_id"]
    assert _completed(app, second)["task"]["usage"] == _expected(SECOND, world.provider)

    both = _expected(Usage(FIRST.input + SECOND.input, FIRST.output + SECOND.output,
                           FIRST.cached + SECOND.cached), world.provider)
    assert _overview(app, "worker")["usage"] == {"turns": 2, "unknown_turns": 0, "tokens": both}
    cached = "cached unknown" if both["cached"] is None else f"{both['cached']} cached"
    assert f"input {both['input']} ({cached}), output {both['output']}" in _status(world, tmp_path)
    shown = app.cli("message", "show", first).stdout.decode()
    first_cached = "cached unknown" if world.provider == "gemini" else f"{FIRST.cached} cached"
    assert f"tokens     input {FIRST.input} ({first_cached}), output {FIRST.output}" in shown


def test_a_turn_of_several_model_requests_counts_them_all_and_the_console_shows_it() -> None:
    """A Codex turn that calls a tool makes two model requests: Codex reports each (`thread/tokenUsage/updated`),
    and the turn's usage is their sum, shown on the console's request page and agents page."""
    with ScriptedModel() as model, console_app_on_a_fresh_home("wu", _executable("codex")) as app:
        world, console = World(app, model, "codex"), ConsoleApp(app)
        app.add_agent("worker", "codex")
        model.agent("worker").add(Response([ToolCall("list_agents", {})], usage=FIRST),
                                  Response([Message("two requests")], usage=SECOND))
        _start(world, "worker")
        rid = app.call("operator/followup", {"target": "worker", "message": "List, then answer."})["request_id"]
        story = _completed(app, rid)
        assert story["answer"]["text"] == "two requests"
        used = {"input": FIRST.input + SECOND.input, "output": FIRST.output + SECOND.output,
                "cached": FIRST.cached + SECOND.cached}
        assert story["task"]["usage"] == used
        cookie = console.login_cookie()
        shown = f"input {used['input']} ({used['cached']} cached), output {used['output']}"
        for page in (f"/requests/{rid}", "/agents"):
            status, _, body = console.http("GET", page, {"Cookie": cookie})
            assert status == 200
            assert f'data-usage-input="{used["input"]}" data-usage-output="{used["output"]}"' in body.decode()
            assert shown in body.decode()
