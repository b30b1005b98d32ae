"""A Pi agent's private home and settings (docs/guide/pi.md#settings): everything Pi keeps for the agent under its
agent dir, `-c` keys in its settings.json and models.json, checked before anything changes, and the generation's
session in no file, no environment of Pi and none of its bash tool."""

from __future__ import annotations

import json
from pathlib import Path

import psutil
import pytest

from tests.providers.pi.conftest import PiApp
from wardian import errors
from wardian_harness.models.scripted_model import Message, ToolCall


def _serve_child(pi_pid: int) -> psutil.Process:
    for child in psutil.Process(pi_pid).children(recursive=True):
        if "mcp" in child.cmdline() and "serve" in child.cmdline():
            return child
    raise AssertionError("Pi runs no wardian mcp serve")


def test_pi_runs_in_a_private_home_and_the_session_reaches_only_the_mcp_server(pi_app: PiApp) -> None:
    world = pi_app
    _, lead, _ = world.agent("lead", start=False)
    agent, _, script = world.agent("worker", config=['env.PROBE="visible"'])
    script.add(ToolCall("bash", {"command": "env"}, namespace=None, call_id="call_env"), Message("done"))
    world.app.call("task/followup", {"session": lead, "target": "worker", "message": "show env"})
    assert [r["text"] for r in world.app.records_for(lead)] == ["done"]
    root = world.app.home.agent_dir(agent["uuid"]) / "pi"
    pid = int(world.app.home.provider_pid_path("pi", agent["uuid"]).read_text())
    env = psutil.Process(pid).environ()
    assert (env["PI_CODING_AGENT_DIR"], env["PI_CODING_AGENT_SESSION_DIR"]) == (str(root / "agent"),
                                                                              str(root / "sessions"))
    assert (env["PI_OFFLINE"], env["PI_TELEMETRY"], env["PROBE"]) == ("1", "0", "visible")
    session = _serve_child(pid).environ()["WARDIAN_SESSION_ID"]
    assert session
    assert "WARDIAN_SESSION_ID" not in env
    assert all(session not in value for value in env.values())
    (bash,) = [o.text for r in script.requests for o in r.function_call_outputs() if o.call_id == "call_env"]
    assert "PROBE=visible" in bash
    assert session not in bash
    assert "WARDIAN_SESSION_ID" not in bash
    assert "WARDIAN_HOME=" not in bash
    for path in Path(root).rglob("*"):
        if path.is_file():
            assert session not in path.read_text(encoding="utf-8", errors="replace"), path
    settings = json.loads((root / "agent" / "settings.json").read_text(encoding="utf-8"))
    assert (settings["retry"]["enabled"], settings["defaultProvider"]) == (False, "scripted")
    models = json.loads((root / "agent" / "models.json").read_text(encoding="utf-8"))
    assert models["providers"]["scripted"]["api"] == "openai-completions"


@pytest.mark.parametrize("bad", ["models=5", "env.A.B=\"x\"", "env.A=5", "not a setting"])
def test_a_bad_setting_is_refused_and_changes_nothing(pi_app: PiApp, bad: str) -> None:
    world = pi_app
    agent, _, _ = world.agent("worker", start=False)
    with pytest.raises(errors.WardianError) as caught:
        world.start("worker", config=[bad])
    assert (caught.value.code, caught.value.field) == ("invalid_arguments", "config")
    assert not (world.app.home.agent_dir(agent["uuid"]) / "pi" / "agent" / "settings.json").exists()
