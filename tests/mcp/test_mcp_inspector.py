"""A third-party client: the MCP Inspector CLI (npm `@modelcontextprotocol/inspector`, pinned in package.json).

docs/guide/development.md#test-tiers: `mcp-inspector --cli wardian mcp serve --method tools/list` lists the eight tools,
and calls list_agents and send_message successfully against a running app. `npm ci` installs it; without
node_modules the tests fail under CI and are skipped elsewhere.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import orjson
import pytest

from tests.conftest import AppHandle, pinned_npm_tool
from tests.mcp.mcp_harness import serve_command
from wardian.protocol.tools import TOOL_NAMES

pytestmark = pytest.mark.fast  # the fast tier (scripts/check test-fast)

REPO = Path(__file__).resolve().parents[2]
INSPECTOR = REPO / "node_modules" / ".bin" / "mcp-inspector"


@pytest.fixture
def inspector() -> Path:
    return pinned_npm_tool(INSPECTOR, "MCP Inspector")


def run_inspector(inspector: Path, home: Path, *args: str, env: dict[str, str] | None = None) -> Any:
    """Run the Inspector CLI against `wardian mcp serve`; its JSON output."""
    options: list[str] = []
    for key, value in (env or {}).items():
        options += ["-e", f"{key}={value}"]
    # HOME points at a scratch directory: the Inspector keeps a catalog under ~/.mcp-inspector.
    child_env = {k: v for k, v in os.environ.items() if not k.startswith("WARDIAN_")}
    child_env["HOME"] = str(home)
    proc = subprocess.run([str(inspector), "--cli", *options, *args, "--", *serve_command()], env=child_env,
                          capture_output=True, timeout=120, cwd=home)
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")[-2000:]
    return orjson.loads(proc.stdout)


def test_the_inspector_lists_the_eight_tools_with_no_schema_portability_problem(
        inspector: Path, tmp_path: Path) -> None:
    """TOOL-1: the Inspector's tools/list shows the eight tools; `--strict` reports no portability error."""
    listed = run_inspector(inspector, tmp_path, "--method", "tools/list", "--strict")
    assert sorted(t["name"] for t in listed["tools"]) == sorted(TOOL_NAMES)
    assert all(t["inputSchema"]["additionalProperties"] is False for t in listed["tools"])


def test_the_inspector_calls_list_agents_and_send_message_against_a_running_app(
        inspector: Path, tmp_path: Path, app: AppHandle) -> None:
    """TOOL-3: list_agents and send_message succeed through the Inspector; the app attributes the message."""
    alice, token = app.add_agent("alice")
    bob, _ = app.add_agent("bob")
    env = {"WARDIAN_HOME": str(app.home.root), "WARDIAN_SESSION_ID": token}
    listed = run_inspector(inspector, tmp_path, "--method", "tools/call", "--tool-name", "list_agents", env=env)
    assert not listed.get("isError")
    assert {a["name"] for a in listed["structuredContent"]["agents"]} == {"alice", "bob"}
    assert listed["structuredContent"]["caller"]["uuid"] == alice["uuid"]
    sent = run_inspector(inspector, tmp_path, "--method", "tools/call", "--tool-name", "send_message",
                         "--tool-arg", "target=bob", "--tool-arg", "message=hello from the inspector", env=env)
    assert not sent.get("isError")
    receipt = sent["structuredContent"]
    assert receipt["delivery"] == "admitted"
    [record] = [r for r in app.call("mailbox/records")["records"] if r["id"] == receipt["interaction_id"]]
    assert (record["sender"]["uuid"], record["recipient"]["uuid"]) == (alice["uuid"], bob["uuid"])
    assert record["text"] == "hello from the inspector"
