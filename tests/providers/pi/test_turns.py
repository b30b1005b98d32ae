"""Pi driven over its RPC mode by a real `wardian app run` home (docs/guide/pi.md): a task is one `prompt`, the run's
`agent_end` its end."""

from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import app_on_root, pinned_npm_tool, short_home
from tests.providers.pi.conftest import REPO, PiApp
from wardian.providers.pi.rpc import IGNORED
from wardian_harness.models.scripted_model import Message, ScriptedModel, ToolCall


def test_a_task_is_one_prompt_and_the_runs_final_text_is_the_reply(pi_app: PiApp) -> None:
    world = pi_app
    _, lead, _ = world.agent("lead", start=False)
    _, _, script = world.agent("worker")
    script.add(Message("Forty-two."))
    task = world.app.call("task/followup", {"session": lead, "target": "worker", "message": "Six times seven?"})
    (reply,) = world.app.records_for(lead)
    assert (reply["kind"], reply["status"], reply["request_id"], reply["text"]) == (
        "reply", "done", task["request_id"], "Forty-two.")
    (request,) = script.requests
    assert task["request_id"] in json.dumps(request.body)
    assert world.row("worker")["status"] == "idle"


def test_pis_streaming_events_are_dropped_undecoded_and_the_turn_is_read_as_before(tmp_path: Path) -> None:
    """The reader drops Pi's `message_update` and `tool_execution_update` lines by their start, undecoded: every one
    the real Pi writes starts so (a tee between Pi and the app keeps what Pi wrote), and the turn is read as before."""
    cli = pinned_npm_tool(REPO / "node_modules" / ".bin" / "pi", "Pi CLI")
    written = tmp_path / "pi-stdout.jsonl"
    tee = tmp_path / "pi"
    tee.write_text(f'#!/bin/sh\n"{cli}" "$@" | tee -a "{written}"\n', encoding="utf-8")
    tee.chmod(0o755)
    env = {"WARDIAN_PI": str(tee)}
    with ScriptedModel() as model, app_on_root(short_home("wp"), env) as handle:
        world = PiApp(handle, model, env)
        _, lead, _ = world.agent("lead", start=False)
        _, _, script = world.agent("worker")
        script.add(ToolCall("bash", {"command": "echo streamed"}, namespace=None), Message("Forty-two."))
        task = world.app.call("task/followup", {"session": lead, "target": "worker", "message": "Six times seven?"})
        (reply,) = world.app.records_for(lead)
    assert (reply["status"], reply["request_id"], reply["text"]) == ("done", task["request_id"], "Forty-two.")
    assert "streamed" in json.dumps(script.requests[1].body)  # the tool ran, and the model read its output
    lines = [line for line in written.read_bytes().splitlines() if line.strip()]
    streaming = [line for line in lines if json.loads(line).get("type") in ("message_update", "tool_execution_update")]
    assert any(json.loads(line)["type"] == "message_update" for line in streaming)
    assert all(line.startswith(IGNORED) for line in streaming)
    assert not any(line.startswith(IGNORED) for line in lines if line not in streaming)
