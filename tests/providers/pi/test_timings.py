"""The opt-in timing record of Pi's turns (`WARDIAN_PI_TIMINGS`, read by `scripts/bench.py --only pi`;
docs/benchmarks.md): one line per turn of a real Pi when on, nothing when off."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import app_on_root, pinned_npm_tool, short_home
from tests.providers.pi.conftest import REPO, PiApp
from wardian.providers.pi.timings import ENV, STEPS, Timings
from wardian_harness.models.scripted_model import Message, ScriptedModel


def test_each_turn_of_a_real_pi_gets_one_line_of_its_steps_in_order(tmp_path: Path) -> None:
    path = tmp_path / "timings.jsonl"
    cli = pinned_npm_tool(REPO / "node_modules" / ".bin" / "pi", "Pi CLI")
    env = {"WARDIAN_PI": str(cli), ENV: str(path)}
    with ScriptedModel() as model, app_on_root(short_home("wt"), env) as handle:
        world = PiApp(handle, model, env)
        _, lead, _ = world.agent("lead", start=False)
        _, _, script = world.agent("worker")
        script.add(Message("timed"))
        task = world.app.call("task/followup", {"session": lead, "target": "worker", "message": "time me"})
        (reply,) = world.app.records_for(lead)
        assert reply["text"] == "timed"
        turn = world.facts(task["request_id"])["turn_id"]
    (record,) = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    assert set(record) == {"agent", "turn", *STEPS}
    assert (record["agent"], record["turn"]) == ("worker", turn)
    assert 0 < record["written_ns"] <= record["acked_ns"] <= record["ended_ns"]
    assert record["written_ns"] <= record["started_ns"] <= record["ended_ns"]


def test_it_is_off_unless_the_apps_environment_names_the_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv(ENV, raising=False)
    off = Timings.from_env("worker")
    off.mark("turn_1", "written_ns")
    off.ended("turn_1")
    assert list(tmp_path.iterdir()) == []
    broken = Timings("worker", str(tmp_path / "missing-dir" / "timings.jsonl"))
    broken.mark("turn_1", "written_ns")
    broken.ended("turn_1")  # no exception: a bench aid never disturbs delivery
    assert not (tmp_path / "missing-dir").exists()
