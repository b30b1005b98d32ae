"""The scripted model's Messages dialect as the real Claude Code (pinned, from npm) speaks it: a plain turn, a
deferred MCP tool loaded through ToolSearch and then run, its structured result read back, and the side requests
(`count_tokens`, the model check) answered without taking a step."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from tests.providers.claude.conftest import REPO, ClaudeWorld
from wardian_harness.models.scripted_model import Message, ToolCall

ECHO_SERVER = REPO / "tests" / "harness" / "echo_mcp_server.py"


def write(stdin: IO[bytes], message: dict[str, Any]) -> None:
    stdin.write(json.dumps(message).encode() + b"\n")
    stdin.flush()


def lines(stdout: IO[bytes]) -> Iterator[dict[str, Any]]:
    for raw in stdout:
        yield json.loads(raw)


def test_claude_code_runs_a_deferred_mcp_tool_through_toolsearch_on_the_scripted_model(
        claude_world: ClaudeWorld) -> None:
    script = claude_world.model.agent("solo", ToolCall("shout", {"text": "hey"}, namespace="mcp__echo"),
                                      Message("shouted"))
    spec = claude_world.spec("solo", script, allowed_tools=("mcp__echo__shout",),
                             mcp_servers={"echo": {"type": "stdio", "command": sys.executable,
                                                   "args": [str(ECHO_SERVER)]}})
    argv = [spec.executable, "-p", "--input-format", "stream-json", "--output-format", "stream-json", "--verbose",
            "--mcp-config", str(spec.mcp_config), "--strict-mcp-config", "--allowedTools", "mcp__echo__shout"]
    with Path(spec.stderr_path).open("wb") as log, subprocess.Popen(
            argv, env=spec.env, cwd=spec.workspace, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=log) as proc:
        assert proc.stdin is not None
        assert proc.stdout is not None
        try:
            write(proc.stdin, {"type": "control_request", "request_id": "usage",
                               "request": {"subtype": "get_context_usage"}})
            write(proc.stdin, {"type": "control_request", "request_id": "model",
                               "request": {"subtype": "set_model", "model": "claude-sonnet-5-5"}})
            answered: set[str] = set()
            result: dict[str, Any] = {}
            for line in lines(proc.stdout):
                if line.get("type") == "control_response":
                    answered.add(line["response"]["request_id"])
                    if answered == {"usage", "model"}:
                        write(proc.stdin, {"type": "user", "message": {"role": "user", "content": "shout hey"},
                                           "parent_tool_use_id": None, "session_id": "", "uuid": str(uuid.uuid4())})
                elif line.get("type") == "result":
                    result = line
                    break
        finally:
            proc.stdin.close()
            proc.wait(30)
    assert (result["is_error"], result["result"], result["num_turns"]) == (False, "shouted", 3)
    requests = script.requests
    assert [r.answered_by.split("(")[0] for r in requests] == ["ToolCall", "ToolCall", "Message"]
    assert "mcp__echo__shout" not in [t["name"] for t in requests[0].body["tools"]]  # deferred at first
    assert "shout" in requests[1].offered_tools("mcp__echo")
    outputs = requests[2].function_call_outputs()
    assert [(o.namespace, o.name, o.text) for o in outputs][-1] == ("mcp__echo", "shout", '{"result":"HEY"}')
    assert {r.answered_by for r in script.title_requests} == {"side"}
    assert any("/v1/messages/count_tokens" in r.path for r in script.title_requests)
    assert any(r.body.get("max_tokens") == 1 and not r.body.get("stream") for r in script.title_requests)
