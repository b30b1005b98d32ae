"""Pi driven over its RPC mode by a real `wardian app run` home (docs/guide/pi.md): a task is one `prompt`, the run's
`agent_end` its end."""

from __future__ import annotations

import json

from tests.providers.pi.conftest import PiApp
from wardian_harness.models.scripted_model import Message


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
