"""A permission request nobody may answer (a tool no grant covers, in an app-owned agent) is rejected and recorded
where the person sees it: `wardian message log`, the console's agents page and `wardian status`
(docs/guide/acp.md#permissions). Against the real Qwen Code asking for its own shell tool."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import app_on_a_fresh_home, pinned_npm_tool
from tests.console.conftest import ConsoleApp
from tests.providers.acp.conftest import REPO, AcpApp, collect
from wardian_harness.models.scripted_model import Message, ScriptedModel, ToolCall

SHELL = "run_shell_command"


@pytest.fixture
def qwen_console() -> Iterator[AcpApp]:
    cli = pinned_npm_tool(REPO / "node_modules" / ".bin" / "qwen", "qwen CLI")
    env = {"WARDIAN_QWEN": str(cli)}
    with ScriptedModel() as model, app_on_a_fresh_home(prefix="wqc", extra_env=env,
                                                       extra_args=("--console", "127.0.0.1:0")) as handle:
        yield AcpApp(handle, model, env, "qwen")


def test_a_request_nobody_may_answer_is_rejected_and_shown_in_the_log_the_console_and_status(
        qwen_console: AcpApp, tmp_path: Path) -> None:
    world = qwen_console
    _, lead, _ = world.agent("lead", start=False)
    _, _, script = world.agent("worker")
    made = tmp_path / "made-by-the-agent"
    script.add(ToolCall(SHELL, {"command": f"mkdir {made}", "description": "make a directory"}, namespace=None),
               Message("after the shell"))
    task = world.app.call("task/followup", {"session": lead, "target": "worker", "message": "run echo"})
    (answer,) = collect(world, lead, 1)
    # Qwen Code ends the turn when a tool is refused: no final text, so the requester gets a `blocked` notice.
    assert (answer["kind"], answer["status"], answer["request_id"]) == ("notice", "blocked", task["request_id"])
    assert not made.exists()  # the command never ran

    (asked,) = world.app.call("mailbox/records", {"limit": 100})["permissions"]
    assert (asked["agent"]["name"], asked["request_id"], asked["tool"], asked["answer"]) == (
        "worker", task["request_id"], SHELL, "rejected")
    assert str(made) in asked["title"]
    assert {"allow_once", "reject_once"} <= {o["kind"] for o in asked["options"]}

    log = world.app.cli("message", "log", check=True).stdout.decode()
    assert f"[permission] {asked['id']} worker asked to run {SHELL} re {task['request_id']}: rejected" in log

    team = tmp_path / "wardian.toml"
    team.write_text(f'[team]\nhome = "{world.app.home.root}"\n\n[agents.worker]\nprovider = "qwen"\n',
                    encoding="utf-8")
    status = world.app.cli("status", "-f", str(team), check=True).stdout.decode()
    assert "worker: 1 permission request(s) refused" in status
    assert f"worker asked to run {SHELL} re {task['request_id']}: rejected" in status

    console = ConsoleApp(world.app)
    code, _, page = console.http("GET", "/agents", {"Cookie": console.login_cookie()})
    assert code == 200
    assert b'data-permissions="1"' in page
    assert f'data-permission-tool="{SHELL}"'.encode() in page
    assert f'href="/requests/{task["request_id"]}"'.encode() in page
