"""Every app method's actual result satisfies the result type `METHODS` declares for it, on a real app with real
Codex agents (decision 0014: one method table; the copies that drifted, `mailbox/records` failing its own model, are
gone)."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

from tests.conftest import stop_app
from tests.console.conftest import start_console_app
from tests.providers.codex.conftest import CodexWorld
from tests.providers.codex.test_runtime import wait_active
from wardian.protocol import methods as proto
from wardian_harness.models.scripted_model import Hold
from wardian_harness.providers.codex_home import ScriptedProvider, codex_overrides

# Methods whose result needs an agent's live permission request: checked where a real Codex asks one.
CHECKED_ELSEWHERE = {"approval/show": "tests/providers/codex/test_approvals.py",
                     "approval/answer": "tests/providers/codex/test_approvals.py"}


def test_every_method_returns_its_declared_result(codex_world: CodexWorld, tmp_path: Path) -> None:
    world = codex_world
    app = world.app
    # The same home, served with the web console, so that `console/login` has a console to log in to.
    stop_app(app.proc)
    app.proc = start_console_app(app.home.root, world.env)
    seen: set[str] = set()

    def call(method: str, params: dict[str, Any], **kw: Any) -> Any:
        result = app.call(method, params, **kw)
        proto.validate_result(method, result)
        seen.add(method)
        return result

    lead = call("agent/add", {"name": "lead", "provider": "codex"})
    call("agent/add", {"name": "worker", "provider": "codex"})
    call("agent/add", {"name": "tui", "provider": "codex"})
    lead_token = call("agent/session", {"agent": lead["uuid"]})["session_id"]
    worker_token = app.call("agent/session", {"agent": "worker"})["session_id"]
    call("agent/list", {"session": lead_token})
    # An MCP server's announcement for a generation this app does not run (the worker is not started): answered, and
    # it changes nothing (docs/guide/acp.md).
    call("session/announce", {"session": worker_token})
    call("message/send", {"session": lead_token, "target": "worker", "message": "FYI"})
    task = call("task/followup", {"session": lead_token, "target": "worker", "message": "Do it"})
    call("mailbox/wait", {"session": worker_token, "timeout_ms": 0})
    page = call("mailbox/receive", {"session": worker_token, "limit": 10})
    call("mailbox/receive", {"session": worker_token, "ack_cursor": page["cursor"], "timeout_ms": 1})
    call("task/reply", {"session": worker_token, "request_id": task["request_id"], "status": "done",
                        "message": "Done"})
    call("request/show", {"id": task["request_id"]})
    call("request/status", {"session": lead_token, "request_id": task["request_id"]})
    records = call("mailbox/records", {"limit": 100})["records"]
    assert {r["kind"] for r in records} == {"information", "task", "reply"}
    assert next(r for r in records if r["kind"] == "task")["task"]["reply_status"] == "done"

    # The operator and the console (docs/guide/console.md).
    assert call("console/login", {})["url"].startswith(app.call("app/status")["console"] + "/login?token=")
    call("operator/send", {"target": "worker", "message": "FYI from the operator"})
    ask = call("operator/followup", {"target": "worker", "message": "Operator task"})
    got = app.call("mailbox/receive", {"session": worker_token, "limit": 10})
    app.call("mailbox/receive", {"session": worker_token, "ack_cursor": got["cursor"]})
    app.call("task/reply", {"session": worker_token, "request_id": ask["request_id"], "status": "done",
                            "message": "Done for the operator"})
    assert [r["request_id"] for r in call("operator/receive", {"timeout_ms": 1})["records"]] == [ask["request_id"]]
    call("agent/overview", {})
    page = call("exchange/page", {"limit": 3})
    assert page["older"] is not None
    call("exchange/page", {"agent": "operator", "kind": "task", "before": page["older"]})
    call("exchange/page", {"uncertain": True})
    trace = call("request/trace", {"id": ask["request_id"]})
    assert trace["answer"] is not None
    assert trace["answer"]["sender_kind"] == "agent"

    # A started agent in a held turn, for agent/start and agent/interrupt; an attached one for agent/attach.
    script = world.model.agent("worker")
    hold = Hold("working")
    script.add(hold)
    call("agent/start", {"agent": "worker", "config": codex_overrides(ScriptedProvider(base_url=script.base_url))},
         timeout_s=300)
    app.call("task/followup", {"session": lead_token, "target": "worker", "message": "Long job"})
    hold.wait_started()
    wait_active(world, "worker")
    call("agent/interrupt", {"session": lead_token, "target": "worker"})
    assert hold.wait_finished() == "disconnected"
    # The console's start: the agent's saved settings (its scripted model), then an operator's interrupt.
    call("agent/start", {"agent": "worker", "keep_settings": True}, timeout_s=300)
    hold = Hold("working again")
    script.add(hold)
    app.call("operator/followup", {"target": "worker", "message": "Another long job"})
    hold.wait_started()
    wait_active(world, "worker")
    call("operator/interrupt", {"target": "worker"})
    assert hold.wait_finished() == "disconnected"
    tui_script = world.model.agent("tui")
    call("agent/start", {"agent": "tui", "mode": "attached",
                         "config": codex_overrides(ScriptedProvider(base_url=tui_script.base_url))}, timeout_s=300)
    call("agent/attach", {"agent": "tui"})
    call("agent/stop", {"agent": "tui"}, timeout_s=60)
    # The team's task policy, the approvals (none pending here) and a worktree agent's worktree removed.
    call("team/policy", {"task_deadline_ms": 600_000, "max_task_depth": 8, "max_chain_tasks": 64})
    call("approval/list", {"pending": False})
    repo = tmp_path / "repo"
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@example.invalid", "-C", str(repo)]
    repo.mkdir()
    subprocess.run([*git, "init", "-q"], check=True, timeout=30)
    subprocess.run([*git, "commit", "-q", "--allow-empty", "-m", "first"], check=True, timeout=30)
    call("agent/add", {"name": "tree", "provider": "codex", "worktree": {"repo": str(repo)}})
    call("worktree/remove", {"agent": "tree"})
    call("agent/revoke", {"agent": "lead", "all": True})
    call("agent/remove", {"agent": "worker"}, timeout_s=60)
    call("app/status", {})
    call("app/stop", {})
    missed = set(proto.METHODS) - seen - set(CHECKED_ELSEWHERE)
    assert not missed, f"methods whose result no test checks: {missed}"
