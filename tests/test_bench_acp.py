"""`scripts/bench.py --only acp` compares the app's Qwen Code turn with floors that give the agent the same turn
(docs/benchmarks.md#the-metrics): each floor prompts the text the app wrote for the same task, into a conversation
holding the same earlier turns. Read here from the scripted model's log, not from the bench's own check.

Figures are not checked: tests never assert wall-clock numbers.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from benchmarks import acp
from benchmarks.apps import add_agents, bench_app, new_home
from tests.conftest import pinned_npm_tool
from wardian.client import AppClient
from wardian.model import Party
from wardian_harness.models.scripted_model import ScriptedModel
from wardian_harness.models.scripted_model.agents import AgentScript
from wardian_harness.models.scripted_model.reading import content_texts

REPO = Path(__file__).resolve().parent.parent


def _turns(script: AgentScript) -> list[list[tuple[str, str]]]:
    """Each turn's first request (side requests left out) as its messages' roles and last texts, system aside."""
    requests = [r for r in script.requests if r.answered_by != "side"]
    return [[(str(m["role"]), (content_texts(m) or [""])[-1]) for m in r.body["messages"] if m["role"] != "system"]
            for r in requests]


@pytest.mark.timeout(600)
def test_the_floors_prompt_the_apps_envelope_into_the_same_conversation_as_the_apps_agent() -> None:
    qwen = str(pinned_npm_tool(REPO / "node_modules" / ".bin" / "qwen", "qwen CLI"))
    root = new_home()
    try:
        with ScriptedModel() as model, bench_app(root, {"WARDIAN_QWEN": qwen}) as app, AppClient(app.home) as client:
            (lead, token), = add_agents(client, "lead", 1)
            acp._start(client, model, "worker0")
            floors = [acp.RawAcp(qwen, model.agent(name).base_url, root / name) for name in ("raw", "raw2")]
            for floor, name in zip(floors, ("raw", "raw2"), strict=True):
                floor.script = model.agent(name)
            try:
                acp._interleaved(client, (token, Party(lead["name"], lead["uuid"])), model, floors[0], floors[1], 1)
            finally:
                for floor in floors:
                    floor.stop()
            app_turns = _turns(model.agent("worker0"))
            floor_turns = [_turns(model.agent(name)) for name in ("raw", "raw2")]
    finally:
        shutil.rmtree(root, ignore_errors=True)
    assert len(app_turns) == acp.WARM + 1
    for i, turn in enumerate(app_turns):
        role, prompt = turn[-1]
        assert role == "user"
        assert prompt.startswith("wardian_task_delivery\n")
        assert f'"text": "q{i}"' in prompt
        assert [role for role, _ in turn] == ["user", *["assistant", "user"] * i]
    assert floor_turns == [app_turns, app_turns]
