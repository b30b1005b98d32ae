"""Approvals on an ACP agent (docs/guide/approvals.md): the real Qwen Code, on the scripted model, asks to run its
shell tool (`session/request_permission`); the request becomes an `apr_…` approval the agent's policy routes. `deny`
(the default) denies it at once and shows it in `message log`, `wardian status` and the console; `person` waits for
`wardian approval allow|deny`, whose answer reaches the agent once; the deadline applies the default (deny); an app
restart withdraws what was pending, never answering it."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import app_on_a_fresh_home, pinned_npm_tool
from tests.console.conftest import ConsoleApp
from tests.providers.acp.conftest import REPO, AcpApp, collect, pending_approval
from wardian import errors
from wardian_harness.models.scripted_model import Message, ScriptedModel, ToolCall

SHELL = "run_shell_command"


@pytest.fixture(scope="module")
def qwen_console() -> Iterator[AcpApp]:
    cli = pinned_npm_tool(REPO / "node_modules" / ".bin" / "qwen", "qwen CLI")
    env = {"WARDIAN_QWEN": str(cli)}
    with ScriptedModel() as model, app_on_a_fresh_home(prefix="wqc", extra_env=env,
                                                       extra_args=("--console", "127.0.0.1:0")) as handle:
        yield AcpApp(handle, model, env, "qwen")


@pytest.fixture(scope="module")
def person(qwen_console: AcpApp) -> tuple[AcpApp, str]:
    """Qwen Code agent `asker`, whose approvals a person answers, and the lead's session that sends it tasks."""
    world = qwen_console
    _, lead, _ = world.agent("lead", start=False)
    world.agent("asker", approvals="person")
    return world, lead


def _shell_task(world: AcpApp, lead: str, agent: str, made: Path, *, runs: bool = True) -> str:
    """A task whose turn calls the shell tool; `runs`: then the model's final answer (Qwen Code asks the model
    again only after the tool ran: a refused call ends the turn)."""
    call = ToolCall(SHELL, {"command": f"mkdir {made}", "description": "make a directory"}, namespace=None)
    world.model.agent(agent).add(*((call, Message("done after the shell")) if runs else (call,)))
    task = world.app.call("task/followup", {"session": lead, "target": agent, "message": f"make {made}"})
    return str(task["request_id"])



def _told(world: AcpApp, agent: str) -> list[str]:
    """What the model was given back for its shell calls."""
    return [o.text for r in world.model.agent(agent).requests for o in r.function_call_outputs()
            if "shell_command" in (o.name or "")]


def test_a_request_under_the_deny_policy_is_denied_at_once_and_shown_in_the_log_the_console_and_status(
        qwen_console: AcpApp, tmp_path: Path) -> None:
    world = qwen_console
    _, lead, _ = world.agent("boss", start=False)
    world.agent("worker")
    made = tmp_path / "made-by-the-agent"
    request_id = _shell_task(world, lead, "worker", made, runs=False)
    (answer,) = collect(world, lead, 1)
    # Qwen Code ends the turn when a tool is refused: no final text, so the requester gets a `blocked` notice.
    assert (answer["kind"], answer["status"], answer["request_id"]) == ("notice", "blocked", request_id)
    assert not made.exists()  # the command never ran

    (asked,) = [a for a in world.app.call("mailbox/records", {"limit": 100})["approvals"]
                if a["request_id"] == request_id]
    assert (asked["agent"]["name"], asked["tool"], asked["kind"], asked["status"], asked["decided_by"],
            asked["policy"]) == ("worker", SHELL, "command", "denied", "policy", "deny")
    assert asked["approval_id"].startswith("apr_")
    assert str(made) in asked["summary"]
    assert asked["detail"]["command"] == f"mkdir {made}"
    assert {"allow_once", "reject_once"} <= {o["kind"] for o in asked["options"]}

    log = world.app.cli("message", "log", check=True).stdout.decode()
    assert f"[approval] {asked['approval_id']} worker asks to run `mkdir {made}`" in log
    assert f"re {request_id}: denied by policy" in log
    shown = world.app.cli("approval", "show", asked["approval_id"], check=True).stdout.decode()
    assert f"command: mkdir {made}" in shown

    team = tmp_path / "wardian.toml"
    team.write_text(f'[team]\nhome = "{world.app.home.root}"\n\n[agents.worker]\nprovider = "qwen"\n',
                    encoding="utf-8")
    status = world.app.cli("status", "-f", str(team), check=True).stdout.decode()
    assert "worker: 1 approval(s), 0 pending" in status
    assert f"{asked['approval_id']} worker asks to run" in status

    console = ConsoleApp(world.app)
    code, _, page = console.http("GET", "/agents", {"Cookie": console.login_cookie()})
    assert code == 200
    assert b'data-approvals="1"' in page
    assert f'data-approval-tool="{SHELL}"'.encode() in page
    assert f'href="/requests/{request_id}"'.encode() in page


def test_a_person_allows_and_the_command_runs_once_and_the_task_is_done(person: tuple[AcpApp, str],
                                                                         tmp_path: Path) -> None:
    world, lead = person
    made = tmp_path / "allowed"
    request_id = _shell_task(world, lead, "asker", made)
    asked = pending_approval(world, request_id)
    assert (asked["status"], asked["answerer"], asked["policy"]) == ("pending", None, "person")
    assert asked["deadline_at"] > asked["created_at"]
    assert not made.exists()  # nothing runs while the approval waits
    shown = world.app.cli("approval", "allow", asked["approval_id"], check=True).stdout.decode()
    assert "allowed by person" in shown
    (reply,) = collect(world, lead, 1)
    assert (reply["kind"], reply["status"], reply["request_id"], reply["text"]) == (
        "reply", "done", request_id, "done after the shell")
    assert made.is_dir()
    again = world.app.cli("approval", "deny", asked["approval_id"])
    assert again.returncode == 2
    assert b"approval_ended" in again.stderr
    assert world.app.call("approval/show", {"approval_id": asked["approval_id"]})["status"] == "allowed"


def test_a_person_denies_with_a_reason_and_the_command_never_runs_and_the_model_is_told(
        person: tuple[AcpApp, str], tmp_path: Path) -> None:
    world, lead = person
    made = tmp_path / "denied"
    request_id = _shell_task(world, lead, "asker", made, runs=False)
    asked = pending_approval(world, request_id)
    world.app.cli("approval", "deny", asked["approval_id"], "--reason", "not on this machine", check=True)
    (answer,) = collect(world, lead, 1)
    assert answer["request_id"] == request_id
    assert not made.exists()
    ended = world.app.call("approval/show", {"approval_id": asked["approval_id"]})
    assert (ended["status"], ended["decided_by"], ended["reason"]) == ("denied", "person", "not on this machine")
    # Qwen Code ends the turn at a refused call and tells the model with the conversation's next request.
    world.model.agent("asker").add(Message("noted"))
    world.app.call("task/followup", {"session": lead, "target": "asker", "message": "what happened?"})
    (noted,) = collect(world, lead, 1)
    assert noted["text"] == "noted"
    assert any(f'"{SHELL}" was canceled by the user' in t for t in _told(world, "asker"))


def test_of_two_answers_racing_exactly_one_reaches_the_agent(person: tuple[AcpApp, str], tmp_path: Path) -> None:
    """On an agent of its own: when the deny wins, the model's final answer stays in its script unused."""
    world, lead = person
    world.agent("racer", approvals="person")
    made = tmp_path / "raced"
    request_id = _shell_task(world, lead, "racer", made)
    approval_id = pending_approval(world, request_id)["approval_id"]
    outcomes: list[object] = []
    gate = threading.Barrier(2)

    def answer(decision: str) -> None:
        gate.wait(10)
        try:
            outcomes.append(world.app.call("approval/answer", {"approval_id": approval_id, "decision": decision}))
        except errors.ApprovalEnded as exc:
            outcomes.append(exc)

    threads = [threading.Thread(target=answer, args=(d,)) for d in ("allow", "deny")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    won = [o for o in outcomes if isinstance(o, dict)]
    assert len(won) == 1
    assert len([o for o in outcomes if isinstance(o, errors.ApprovalEnded)]) == 1
    (answer_record,) = collect(world, lead, 1)
    assert answer_record["request_id"] == request_id
    assert made.is_dir() is (won[0]["status"] == "allowed")


def test_an_unanswered_approval_expires_with_the_default_decision(qwen_console: AcpApp, tmp_path: Path) -> None:
    world = qwen_console
    _, lead, _ = world.agent("hurried-lead", start=False)
    agent, _, _ = world.agent("hurried", approvals="person", approval_timeout_ms=1000)
    # The policy and the deadline are kept with the agent, as `wardian up` compares them with the team file.
    managed = world.app.call("agent/list")["managed"][agent["uuid"]]
    assert (managed["approvals"], managed["approval_timeout_ms"]) == ("person", 1000)
    made = tmp_path / "expired"
    request_id = _shell_task(world, lead, "hurried", made, runs=False)
    (answer,) = collect(world, lead, 1)
    assert answer["request_id"] == request_id
    (asked,) = [a for a in world.app.call("approval/list", {"pending": False})["approvals"]
                if a["request_id"] == request_id]
    assert (asked["status"], asked["decided_by"]) == ("expired", "deadline")
    assert not made.exists()


def test_an_unknown_or_malformed_approval_id_is_a_clear_error(qwen_console: AcpApp) -> None:
    world = qwen_console
    with pytest.raises(errors.UnknownApproval):
        world.app.call("approval/answer", {"approval_id": "apr_0000000000000000000000000", "decision": "allow"})
    with pytest.raises(errors.InvalidArguments) as bad:
        world.app.call("approval/answer", {"approval_id": "ask_123", "decision": "allow"})
    assert bad.value.field == "approval_id"
    assert world.app.cli("approval", "show", "apr_nosuch").returncode == 4


def test_interrupting_the_turn_withdraws_its_pending_approval(person: tuple[AcpApp, str], tmp_path: Path) -> None:
    """ACP asks a client that cancels to answer its pending permission requests `cancelled`: the approval can take
    no answer after that, and says so."""
    world, lead = person
    made = tmp_path / "interrupted"
    request_id = _shell_task(world, lead, "asker", made, runs=False)
    asked = pending_approval(world, request_id)
    world.app.call("operator/interrupt", {"target": "asker"})
    (answer,) = collect(world, lead, 1)
    assert (answer["request_id"], answer["status"]) == (request_id, "blocked")
    ended = world.app.call("approval/show", {"approval_id": asked["approval_id"]})
    assert (ended["status"], ended["decided_by"]) == ("withdrawn", "provider")
    with pytest.raises(errors.ApprovalEnded):
        world.app.call("approval/answer", {"approval_id": asked["approval_id"], "decision": "allow"})
    assert not made.exists()


def test_an_app_restart_withdraws_a_pending_approval_and_never_answers_it(qwen_console: AcpApp,
                                                                          tmp_path: Path) -> None:
    world = qwen_console
    _, lead, _ = world.agent("restart-lead", start=False)
    world.agent("restarted", approvals="person")
    made = tmp_path / "restarted"
    request_id = _shell_task(world, lead, "restarted", made, runs=False)
    asked = pending_approval(world, request_id)
    world.restart_app()
    ended = world.app.call("approval/show", {"approval_id": asked["approval_id"]})
    assert (ended["status"], ended["decided_by"]) == ("withdrawn", "restart")
    refused = world.app.cli("approval", "allow", asked["approval_id"])
    assert (refused.returncode, b"approval_ended" in refused.stderr) == (2, True)
    assert world.app.call("approval/show", {"approval_id": asked["approval_id"]})["status"] == "withdrawn"
    assert not made.exists()
