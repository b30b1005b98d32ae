"""Approvals on Gemini CLI (docs/guide/approvals.md): the real Gemini CLI, on the scripted model's Gemini dialect,
asks to run its shell tool (`session/request_permission`, default mode); under `--approvals person` the request
waits as an `apr_…` approval until `wardian approval allow|deny`, and the answer reaches the agent once: allowed, the
command runs and the task's reply is `done`; denied, it never runs and the model is told. The same cases on Qwen Code
are in test_approvals.py."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import pinned_npm_tool
from tests.providers.acp.conftest import REPO, AcpApp, app_on_root, collect, pending_approval, short_home
from wardian_harness.models.scripted_model import Message, ScriptedModel, ToolCall

SHELL = "run_shell_command"


@pytest.fixture(scope="module")
def gemini() -> Iterator[tuple[AcpApp, str]]:
    cli = pinned_npm_tool(REPO / "node_modules" / ".bin" / "gemini", "gemini CLI")
    env = {"WARDIAN_GEMINI": str(cli)}
    with ScriptedModel() as model, app_on_root(short_home("wga"), env) as handle:
        world = AcpApp(handle, model, env, "gemini")
        _, lead, _ = world.agent("lead", start=False)
        world.agent("asker", approvals="person")
        yield world, lead


def _shell_task(world: AcpApp, lead: str, made: Path, then: str) -> str:
    call = ToolCall(SHELL, {"command": f"mkdir {made}", "description": "make a directory"}, namespace=None)
    world.model.agent("asker").add(call, Message(then))
    task = world.app.call("task/followup", {"session": lead, "target": "asker", "message": f"make {made}"})
    return str(task["request_id"])



def _told(world: AcpApp) -> list[str]:
    """What the model was given back for its shell calls."""
    return [o.text for r in world.model.agent("asker").requests for o in r.function_call_outputs()
            if SHELL in (o.name or "")]


def test_a_person_allows_one_command_and_denies_the_next_on_gemini_cli(gemini: tuple[AcpApp, str],
                                                                      tmp_path: Path) -> None:
    world, lead = gemini
    made = tmp_path / "allowed"
    request_id = _shell_task(world, lead, made, "done after the shell")
    asked = pending_approval(world, request_id)
    # Gemini CLI names no tool in its request: the kind (`execute`) and the command line, which it titles the call with.
    assert (asked["status"], asked["policy"], asked["kind"], asked["tool"]) == ("pending", "person", "command", None)
    assert asked["detail"]["command"] == f"mkdir {made}"
    assert not made.exists()  # nothing runs while the approval waits
    assert "allowed by person" in world.app.cli("approval", "allow", asked["approval_id"], check=True).stdout.decode()
    (reply,) = collect(world, lead, 1)
    assert (reply["kind"], reply["status"], reply["request_id"], reply["text"]) == (
        "reply", "done", request_id, "done after the shell")
    assert made.is_dir()

    refused = tmp_path / "denied"
    request_id = _shell_task(world, lead, refused, "the shell was refused")
    asked = pending_approval(world, request_id)
    world.app.cli("approval", "deny", asked["approval_id"], "--reason", "not in this repository", check=True)
    (answer,) = collect(world, lead, 1)
    # Gemini CLI tells the model the call was refused and goes on with the turn (Qwen Code ends it instead); ACP's
    # answer carries no reason, only the option chosen.
    assert (answer["kind"], answer["status"], answer["request_id"], answer["text"]) == (
        "reply", "done", request_id, "the shell was refused")
    assert not refused.exists()  # the command never ran
    assert "was canceled by the user" in _told(world)[-1]
    assert world.app.call("approval/show", {"approval_id": asked["approval_id"]})["status"] == "denied"
