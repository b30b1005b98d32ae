"""A task steered into a Pi run that is already ending (docs/guide/pi.md#how-the-contract-maps-onto-pis-rpc-mode):
Pi keeps it for its next run, so only a run that showed it may answer it.

The window is made wide with the real Pi: an extension in the agent's own Pi directory (Pi loads every extension
there) parks Pi's `agent_end` until the test releases it. Pi's loop has then taken its last look at its steering
queue, but the app has not read the run's end yet, so it still sees the turn running and steers into it.
"""

from __future__ import annotations

import json
from pathlib import Path

from tests.providers.pi.conftest import PiApp, collect, settle
from wardian_harness.models.scripted_model import Message

PARK = """import * as fs from "node:fs";

// A test's gate: the first run's end waits (in Pi's event queue, after its loop ended) until released.
export default function (pi: any) {
  pi.on("agent_end", async () => {
    if (!fs.existsSync(%(armed)s)) return;
    fs.unlinkSync(%(armed)s);
    fs.writeFileSync(%(parked)s, "");
    while (!fs.existsSync(%(release)s)) await new Promise((resolve) => setTimeout(resolve, 10));
  });
}
"""


def park_first_run_end(world: PiApp, uuid: str, gate: Path) -> tuple[Path, Path]:
    """Install the gate into the agent's Pi directory; return (parked, release) marker paths."""
    armed, parked, release = gate / "armed", gate / "parked", gate / "release"
    armed.write_text("")
    extensions = world.app.home.root / "agents" / uuid / "pi" / "agent" / "extensions"
    extensions.mkdir(parents=True, exist_ok=True)
    paths = {"armed": json.dumps(str(armed)), "parked": json.dumps(str(parked)), "release": json.dumps(str(release))}
    (extensions / "park.ts").write_text(PARK % paths, encoding="utf-8")
    return parked, release


def wait_for(path: Path) -> None:
    for _ in range(2400):
        if path.exists():
            return
        settle()
    raise AssertionError(f"{path} never appeared")


def test_a_task_steered_while_the_run_ends_is_answered_by_the_next_run_that_saw_it(pi_app: PiApp,
                                                                                 tmp_path: Path) -> None:
    """A steer Pi queues after its run's last look is not answered by that run's end: the app starts the next run
    for it, and that run's end is its reply; the model sees the task once."""
    world = pi_app
    _, lead, _ = world.agent("lead", start=False)
    worker, _, script = world.agent("worker", start=False)
    parked, release = park_first_run_end(world, worker["uuid"], tmp_path)
    world.start("worker")
    script.add(Message("first done"), Message("second done"))
    first = world.app.call("task/followup", {"session": lead, "target": "worker", "message": "first"})
    wait_for(parked)
    world.wait_status("worker", "active")
    second = world.app.call("task/followup", {"session": lead, "target": "worker", "message": "second"})
    for _ in range(2400):
        if world.facts(second["request_id"]).get("turn_id"):
            break
        settle()
    assert world.facts(second["request_id"]).get("turn_id"), "the second task was never steered"
    release.write_text("")
    got = {r["request_id"]: (r["status"], r["text"]) for r in collect(world, lead, 2)}
    assert got == {first["request_id"]: ("done", "first done"), second["request_id"]: ("done", "second done")}
    assert len(script.requests) == 2
    first_body, second_body = (json.dumps(r.body, ensure_ascii=False) for r in script.requests)
    assert second["request_id"] not in first_body
    assert second_body.count(second["request_id"]) == 1
    *_, notice, task = (json.dumps(m, ensure_ascii=False) for m in script.requests[1].body["messages"])
    assert "wardian_notice" in notice  # the notice, then the queued task
    assert second["request_id"] in task
