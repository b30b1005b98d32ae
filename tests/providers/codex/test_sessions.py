"""Stale sessions are refused (SES-3, row S10): a start mints a managed session for its generation, and every earlier
managed session of that agent stops speaking for it; operator-minted sessions (`wardian agent env`) stay valid until
`wardian agent revoke` revokes them. Driven through real `wardian mcp serve` processes, on the fake Codex (the
managed session is what the app registers in the agent's private Codex home)."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

from tests.conftest import AppHandle, stop_app
from tests.mcp.mcp_harness import mcp_server, server_env
from tests.providers.codex.test_runtime_faults import run
from wardian import errors
from wardian.cli import EXIT_NOT_FOUND


def managed_session(app: AppHandle, name: str) -> str:
    """The session the app registered for the agent's current generation, read from its private Codex home."""
    agent = next(a for a in app.call("agent/list")["agents"] if a["name"] == name)
    config = app.home.agent_dir(agent["uuid"]) / "codex" / "config.toml"
    return str(tomllib.loads(config.read_text(encoding="utf-8"))["mcp_servers"]["wardian"]["env"]["WARDIAN_SESSION_ID"])


def tool_errors(app: AppHandle, token: str, worker_task: str) -> dict[str, dict[str, Any]]:
    """What an MCP server holding `token` (the worker's) gets for send, receive and reply."""
    with mcp_server(server_env(str(app.home.root), token)) as server:
        return {
            "send_message": server.error("send_message", {"target": "lead", "message": "hello"}),
            "receive_messages": server.error("receive_messages", {}),
            "reply": server.error("reply", {"request_id": worker_task, "status": "done", "message": "x"}),
        }


def test_an_mcp_server_of_the_previous_generation_can_no_longer_speak(fake_world: tuple[Path, Path, Path]) -> None:
    root, exe, log = fake_world
    app = run(root, exe, log, "normal")
    try:
        _, lead = app.add_agent("lead")
        app.add_agent("worker")
        first = app.call("agent/start", {"agent": "worker"}, timeout_s=60)
        old = managed_session(app, "worker")
        task = app.call("task/followup", {"session": lead, "target": "worker", "message": "later"})
        second = app.call("agent/start", {"agent": "worker"}, timeout_s=60)  # a new generation
        assert second["generation"] == first["generation"] + 1
        new = managed_session(app, "worker")
        assert new != old

        refused = tool_errors(app, old, task["request_id"])
        for tool, error in refused.items():
            assert error["code"] == "stale_session", (tool, error)
            assert error["delivery"] == "not_admitted"
            assert (error["agent"], error["generation"], error["current_generation"]) == (
                "worker", first["generation"], second["generation"])
        assert not [r for r in app.call("mailbox/records", {"limit": 100})["records"] if r["text"] == "hello"]

        with mcp_server(server_env(str(app.home.root), new)) as server:
            assert server.ok("send_message", {"target": "lead", "message": "from the new generation"})[
                "delivery"] in ("admitted", "provider_visible")
            assert "records" in server.ok("receive_messages", {})
    finally:
        stop_app(app.proc)


def test_operator_sessions_stay_valid_until_revoked(fake_world: tuple[Path, Path, Path]) -> None:
    root, exe, log = fake_world
    app = run(root, exe, log, "normal")
    try:
        app.add_agent("lead")
        _, operator = app.add_agent("worker")  # `agent/session`: what `wardian agent env` mints
        app.call("agent/start", {"agent": "worker"}, timeout_s=60)
        app.call("agent/start", {"agent": "worker"}, timeout_s=60)
        managed = managed_session(app, "worker")
        assert app.call("mailbox/wait", {"session": operator, "timeout_ms": 0})["timed_out"] is True

        out = app.cli("agent", "revoke", "worker", "--json")
        assert out.returncode == 0, out.stderr
        assert b'"revoked": 1' in out.stdout
        gone = app.cli("message", "receive", token=operator)
        assert gone.returncode == EXIT_NOT_FOUND
        assert b"unknown_session" in gone.stderr
        assert app.call("mailbox/wait", {"session": managed, "timeout_ms": 0})["timed_out"] is True  # untouched

        assert app.cli("agent", "revoke", "worker", "--all").returncode == 0
        try:
            app.call("mailbox/wait", {"session": managed, "timeout_ms": 0})
            raise AssertionError("a revoked managed session still authenticates")
        except errors.UnknownSession:
            pass
    finally:
        stop_app(app.proc)
