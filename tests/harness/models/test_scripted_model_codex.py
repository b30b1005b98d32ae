"""The scripted model against the real Codex CLI over `codex app-server` stdio (docs/providers/codex.md).

Each test spawns one app-server in its own session on a fresh CODEX_HOME; `app_server` kills and reaps the whole
process group on exit and asserts nothing outlived it.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import tomlkit

from tests.harness.appserver import AppServer, app_server
from tests.harness.conftest import AgentHome, make_agent_home
from wardian_harness.models.scripted_model import (
    EXHAUSTED_TEXT,
    Disconnect,
    Fail,
    Hold,
    HttpError,
    Message,
    Response,
    ScriptedModel,
    Step,
    ToolCall,
    function_call_outputs,
)
from wardian_harness.providers.codex_home import codex_override_args
from wardian_harness.providers.codex_install import CodexInstall

pytestmark = pytest.mark.codex

ECHO_SERVER = Path(__file__).parents[1] / "echo_mcp_server.py"


@contextmanager
def started(codex: CodexInstall, agent: AgentHome, args: list[str] | None = None) -> Iterator[tuple[AppServer, str]]:
    """An initialized app-server with one thread started in the agent's workspace."""
    with app_server(codex.executable, agent.env, agent.workspace, args or [], stderr=agent.stderr) as server:
        server.initialize()
        yield server, server.start_thread(agent.workspace)


def agent_messages(server: AppServer, turn_id: str) -> list[tuple[str, str | None]]:
    return [(i["text"], i.get("phase")) for i in server.items_completed(turn_id) if i["type"] == "agentMessage"]


def test_a_one_message_turn_completes_with_the_scripted_text(codex: CodexInstall, agent_home: AgentHome) -> None:
    """CMP-1 needs a turn whose final agentMessage is exactly the scripted text (docs/providers/codex.md)."""
    agent_home.script.add(Message("hello from the script"))
    with started(codex, agent_home) as (server, thread_id):
        turn_id = server.start_turn(thread_id, "hello there")
        turn = server.wait_turn_completed(turn_id)
    assert turn["status"] == "completed"
    assert [(i["type"], i["text"]) for i in turn["items"]] == [("agentMessage", "hello from the script")]


def test_the_request_log_shows_the_user_input_and_the_turn(codex: CodexInstall, agent_home: AgentHome) -> None:
    """Tests read what Codex sent from the log; the turn id comes from `x-codex-turn-metadata`."""
    agent_home.script.add(Message("ok"))
    with started(codex, agent_home) as (server, thread_id):
        turn_id = server.start_turn(thread_id, "hello there")
        server.wait_turn_completed(turn_id)
    (request,) = agent_home.script.requests
    assert request.user_texts()[-1] == "hello there"
    assert request.turn_id == turn_id
    assert request.has_authorization
    assert "authorization" not in request.headers
    assert request.body["stream"] is True


def test_phases_pass_through_as_two_agent_messages(codex: CodexInstall, agent_home: AgentHome) -> None:
    """A commentary and a final_answer item in one response become two agentMessage items with those phases."""
    agent_home.script.add(Response([Message("looking", phase="commentary"), Message("done", phase="final_answer")]))
    with started(codex, agent_home) as (server, thread_id):
        turn_id = server.start_turn(thread_id, "go")
        turn = server.wait_turn_completed(turn_id)
        messages = agent_messages(server, turn_id)
    assert turn["status"] == "completed"
    assert messages == [("looking", "commentary"), ("done", "final_answer")]


@pytest.mark.parametrize(("step", "expected_error"), [
    (Fail("scripted boom"), {"message": "stream disconnected before completion: scripted boom"}),
    (Disconnect("partial"), {"message": "stream disconnected before completion: stream closed before "
                                        "response.completed"}),
    (HttpError(500), {"codexErrorInfo": "internalServerError"}),
], ids=["response.failed", "closed-before-completed", "http-500"])
def test_a_failed_model_stream_fails_the_turn(codex: CodexInstall, agent_home: AgentHome, step: Step,
                                              expected_error: dict[str, str]) -> None:
    """docs/providers/codex.md, failures with retries 0: each failure form ends the turn `failed`."""
    agent_home.script.add(step)
    with started(codex, agent_home) as (server, thread_id):
        turn_id = server.start_turn(thread_id, "fail please")
        turn = server.wait_turn_completed(turn_id)
    assert turn["status"] == "failed"
    assert {k: turn["error"][k] for k in expected_error} == expected_error


def test_a_hold_keeps_the_turn_active_until_it_is_interrupted(codex: CodexInstall, agent_home: AgentHome) -> None:
    """INT-1: the test sees the active turn, interrupts it, and Codex drops the held stream."""
    hold = Hold("working on it")
    agent_home.script.add(hold)
    with started(codex, agent_home) as (server, thread_id):
        turn_id = server.start_turn(thread_id, "take your time")
        assert hold.wait_started().turn_id == turn_id
        delta = server.wait_for("item/agentMessage/delta", lambda p: p["turnId"] == turn_id)
        assert delta["delta"] == "working on it"
        assert server.request("turn/interrupt", {"threadId": thread_id, "turnId": turn_id}) == {}
        turn = server.wait_turn_completed(turn_id)
        outcome = hold.wait_finished()
    assert turn["status"] == "interrupted"
    assert outcome == "disconnected"


def test_a_released_hold_completes_the_message(codex: CodexInstall, agent_home: AgentHome) -> None:
    """After `release()` the held message is completed with its full text and the turn completes."""
    hold = Hold("half", text="half and the rest", phase="final_answer")
    agent_home.script.add(hold)
    with started(codex, agent_home) as (server, thread_id):
        turn_id = server.start_turn(thread_id, "go")
        hold.wait_started()
        hold.release()
        turn = server.wait_turn_completed(turn_id)
        messages = agent_messages(server, turn_id)
    assert turn["status"] == "completed"
    assert messages == [("half and the rest", "final_answer")]
    assert hold.outcome == "released"


def test_a_steer_cancels_the_held_stream_and_the_next_step_answers(codex: CodexInstall,
                                                                    agent_home: AgentHome) -> None:
    """DLV-5, docs/providers/codex.md: steering cancels the in-flight stream and re-samples with the steer input."""
    hold = Hold("busy")
    agent_home.script.add(hold, Message("steered answer", phase="final_answer"))
    with started(codex, agent_home) as (server, thread_id):
        turn_id = server.start_turn(thread_id, "first")
        hold.wait_started()
        steer = server.request("turn/steer", {"threadId": thread_id, "expectedTurnId": turn_id,
                                              "input": [{"type": "text", "text": "STEER"}]})
        turn = server.wait_turn_completed(turn_id)
    assert steer == {"turnId": turn_id}
    assert hold.wait_finished() == "disconnected"
    assert turn["status"] == "completed"
    assert [i["text"] for i in turn["items"]] == ["steered answer"]
    assert agent_home.script.last_request.user_texts()[-2:] == ["first", "STEER"]


def test_an_exhausted_script_answers_with_the_default_message(codex: CodexInstall, agent_home: AgentHome) -> None:
    """Running out of steps is visible (a default message, recorded) instead of a hang."""
    with started(codex, agent_home) as (server, thread_id):
        turn_id = server.start_turn(thread_id, "anyone there?")
        turn = server.wait_turn_completed(turn_id)
    assert [i["text"] for i in turn["items"]] == [EXHAUSTED_TEXT]
    assert [r.index for r in agent_home.script.exhausted_requests] == [0]


def test_a_namespace_tool_call_runs_the_mcp_tool_and_a_callable_step_reads_its_output(
        codex: CodexInstall, agent_home: AgentHome) -> None:
    """docs/providers/codex.md: the namespace-form call runs the MCP tool; the next request carries its output."""
    config_path = agent_home.codex_home / "config.toml"
    config = tomlkit.parse(config_path.read_text(encoding="utf-8"))
    # required = true makes thread/start wait until the server is ready, so the first request offers its tools.
    config["mcp_servers"] = {"echo": {"command": sys.executable, "args": [str(ECHO_SERVER)], "required": True}}
    config_path.write_text(tomlkit.dumps(config), encoding="utf-8")

    def answer_with_tool_output(body: dict[str, object]) -> Step:
        return Message(f"tool said: {function_call_outputs(body)[-1].text}", phase="final_answer")

    agent_home.script.add(ToolCall("shout", {"text": "quiet words"}, namespace="mcp__echo"), answer_with_tool_output)
    with started(codex, agent_home) as (server, thread_id):
        turn_id = server.start_turn(thread_id, "use the tool")
        turn = server.wait_turn_completed(turn_id)
        tool_items = [i for i in server.items_completed(turn_id) if i["type"] == "mcpToolCall"]
    first, second = agent_home.script.requests
    assert set(first.offered_tools("mcp__echo")) == {"shout"}
    assert first.offered_tools("mcp__echo")["shout"]["parameters"]["required"] == ["text"]
    (output,) = second.function_call_outputs()
    assert (output.namespace, output.name) == ("mcp__echo", "shout")
    assert "QUIET WORDS" in output.text
    assert [(i["server"], i["tool"], i["status"]) for i in tool_items] == [("echo", "shout", "completed")]
    assert turn["status"] == "completed"
    assert turn["items"][-1]["text"] == f"tool said: {output.text}"


def test_config_overrides_alone_select_the_scripted_model(codex: CodexInstall, model: ScriptedModel,
                                                          tmp_path: Path) -> None:
    """`codex app-server -c key=value …` with no config.toml is enough (the form `wardian agent start -c` takes)."""
    agent = make_agent_home(model, tmp_path, "bob", write_config=False)
    agent.script.add(Message("via overrides"))
    with started(codex, agent, codex_override_args(agent.provider)) as (server, thread_id):
        turn_id = server.start_turn(thread_id, "hi")
        turn = server.wait_turn_completed(turn_id)
    assert not (agent.codex_home / "config.toml").exists()
    assert [i["text"] for i in turn["items"]] == ["via overrides"]


def test_two_agents_on_one_server_get_their_own_scripts(codex: CodexInstall, model: ScriptedModel,
                                                        tmp_path: Path) -> None:
    """Per-agent base URLs: one server plays a separate script and log for each Codex home."""
    alice, bob = (make_agent_home(model, tmp_path, name) for name in ("alice", "bob"))
    alice.script.add(Message("from alice's script"))
    bob.script.add(Message("from bob's script"))
    answers = {}
    for agent in (alice, bob):
        with started(codex, agent) as (server, thread_id):
            turn_id = server.start_turn(thread_id, f"hi {agent.script.name}")
            answers[agent.script.name] = [i["text"] for i in server.wait_turn_completed(turn_id)["items"]]
    assert answers == {"alice": ["from alice's script"], "bob": ["from bob's script"]}
    assert [r.user_texts()[-1] for r in bob.script.requests] == ["hi bob"]
