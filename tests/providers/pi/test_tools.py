"""Wardian's eight tools inside Pi, through wardian's extension and its `wardian mcp serve` child
(docs/guide/pi.md#the-tools): the same tools, results and attribution as the MCP server's, and the approval hook
answered from the agent's `--approve-tools`."""

from __future__ import annotations

from collections.abc import Sequence

from tests.providers.pi.conftest import PiApp
from wardian.protocol.tools import TOOLS
from wardian_harness.models.scripted_model import Message, RecordedRequest, ToolCall


def _outputs(requests: Sequence[RecordedRequest], call: str) -> list[str]:
    return [o.text for r in requests for o in r.function_call_outputs() if o.call_id == call]


def test_the_model_is_offered_the_eight_tools_as_the_mcp_server_lists_them(pi_app: PiApp) -> None:
    world = pi_app
    _, lead, _ = world.agent("lead", start=False)
    _, _, script = world.agent("worker")
    script.add(Message("ok"))
    world.app.call("task/followup", {"session": lead, "target": "worker", "message": "hello"})
    assert world.app.records_for(lead)
    offered = {t["function"]["name"]: t["function"] for t in script.requests[0].body["tools"]}
    for tool in TOOLS:
        assert (offered[tool.name]["description"], offered[tool.name]["parameters"]) == (
            tool.description, tool.input_schema)


def test_a_tool_call_acts_for_the_agent_and_returns_the_servers_result(pi_app: PiApp) -> None:
    world = pi_app
    _, lead, _ = world.agent("lead", start=False)
    _, _, script = world.agent("worker")
    script.add(ToolCall("list_agents", {}, namespace=None, call_id="call_list"), Message("I see my peers."))
    task = world.app.call("task/followup", {"session": lead, "target": "worker", "message": "Look around."})
    (reply,) = world.app.records_for(lead)
    assert (reply["request_id"], reply["status"], reply["text"]) == (task["request_id"], "done", "I see my peers.")
    (output,) = _outputs(script.requests, "call_list")
    assert '"lead"' in output
    assert '"worker"' in output


def test_an_ungranted_tool_is_refused_and_a_granted_one_runs_as_the_agent(pi_app: PiApp) -> None:
    """The extension's hook asks before `send_message`; the app answers from `--approve-tools`."""
    world = pi_app
    _, lead, _ = world.agent("lead", start=False)
    _, _, denied = world.agent("denied")
    _, _, granted = world.agent("granted", approve=["send_message"])
    for name, script in (("denied", denied), ("granted", granted)):
        script.add(ToolCall("send_message", {"target": "lead", "message": f"hi from {name}"}, namespace=None,
                            call_id="call_send"), Message(f"{name} finished"))
        world.app.call("task/followup", {"session": lead, "target": name, "message": "Say hi to lead."})
    records = world.app.records_for(lead)
    while len(records) < 3:
        records += world.app.records_for(lead)
    infos = [(r["sender"]["name"] if r.get("sender") else None, r["text"]) for r in records
             if r["kind"] == "information"]
    assert infos == [("granted", "hi from granted")]
    assert "not approved" in _outputs(denied.requests, "call_send")[0]
    assert "hi from granted" not in _outputs(denied.requests, "call_send")[0]
