"""The opt-in timing record of an ACP agent's start and turns (`WARDIAN_ACP_TIMINGS`, read by `scripts/bench.py
--only acp`; docs/benchmarks.md): one line per start and per turn of a real Qwen Code when on, nothing when off."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import app_on_root, pinned_npm_tool, short_home
from tests.providers.acp.conftest import REPO, AcpApp
from wardian.providers.acp.timings import ENV, START_STEPS, TURN_STEPS, Timings
from wardian_harness.models.scripted_model import Message, ScriptedModel


def test_a_real_qwen_codes_start_and_each_turn_get_one_line_of_their_steps_in_order(tmp_path: Path) -> None:
    path = tmp_path / "timings.jsonl"
    cli = pinned_npm_tool(REPO / "node_modules" / ".bin" / "qwen", "qwen CLI")
    env = {"WARDIAN_QWEN": str(cli), ENV: str(path)}
    with ScriptedModel() as model, app_on_root(short_home("wt"), env) as handle:
        world = AcpApp(handle, model, env, "qwen")
        _, lead, _ = world.agent("lead", start=False)
        _, _, script = world.agent("worker")
        script.add(Message("timed"))
        task = world.app.call("task/followup", {"session": lead, "target": "worker", "message": "time me"})
        (reply,) = world.app.records_for(lead)
        assert reply["text"] == "timed"
        turn = world.app.call("request/show", {"id": task["request_id"]})["task"]["facts"]["turn_id"]
    start, answered = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    assert start == {"agent": "worker", "kind": "start", **{step: start[step] for step in START_STEPS}}
    assert 0 < start["spawn_ns"] <= start["initialized_ns"] <= start["session_ns"] <= start["mcp_ns"]
    assert answered == {"agent": "worker", "kind": "turn", "turn": turn,
                        **{step: answered[step] for step in TURN_STEPS}}
    assert start["mcp_ns"] <= answered["written_ns"] <= answered["answered_ns"]


def test_it_is_off_unless_the_apps_environment_names_the_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv(ENV, raising=False)
    off = Timings.from_env("worker")
    off.mark("turn_1", "written_ns")
    off.answered("turn_1")
    off.started()
    assert list(tmp_path.iterdir()) == []
    broken = Timings("worker", str(tmp_path / "missing-dir" / "timings.jsonl"))
    broken.mark("turn_1", "written_ns")
    broken.answered("turn_1")  # no exception: a bench aid never disturbs delivery
    assert not (tmp_path / "missing-dir").exists()
