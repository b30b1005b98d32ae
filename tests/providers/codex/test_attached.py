"""Attached mode: a Codex TUI on the app-owned app-server shows the exchange while the app delivers."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import psutil

from tests.conftest import wardian_cmd
from tests.providers.codex.conftest import CodexWorld
from tests.providers.codex.test_runtime import agent_row, wait_reply
from wardian_harness.models.scripted_model import Message
from wardian_harness.processes.terminal import open_terminal, wait_for_text
from wardian_harness.providers.codex_home import ScriptedProvider, codex_overrides


def _diagnostics(world: CodexWorld, screen: str) -> str:
    home = world.app.home
    parts = [(home.log_dir / "app.log").read_text(encoding="utf-8"), "--- the attached TUI's screen ---", screen]
    for log in sorted(home.log_dir.glob("codex-*.log")):
        text = log.read_text(encoding="utf-8", errors="replace")
        marked = [line[:400] for line in text.splitlines() if "interrupt" in line.lower() or "abort" in line.lower()]
        parts += [f"--- {log.name}: lines naming an interrupt or abort ---", *marked[-60:],
                  f"--- {log.name} (end) ---", text[-3000:]]
    for rollout in sorted((home.root / "agents").glob("*/codex/sessions/**/*.jsonl")):
        aborts = [line[:400] for line in rollout.read_text(encoding="utf-8", errors="replace").splitlines()
                  if "abort" in line]
        parts += [f"--- {rollout.name}: lines naming an abort ---", *aborts]
    return "\n".join(parts)


def test_an_attached_tui_shows_the_exchange_on_the_agents_own_conversation(codex_world: CodexWorld,
                                                                         tmp_path: Path) -> None:
    """ATT-1, ACC-7: Wardian observes the TUI's selected thread before enabling delivery; the attached terminal stays on
    the same owned provider session and displays the exchange; no terminal paste is involved."""
    world = codex_world
    workspace = tmp_path / "ws"
    workspace.mkdir()
    subprocess.run(["git", "init", "-q", str(workspace)], check=True)
    _, lead_token = world.app.add_agent("lead")
    world.app.call("agent/add", {"name": "worker", "provider": "codex", "workspace": str(workspace)})
    script = world.model.agent("worker")
    script.add(Message("attached answer 42", phase="final_answer"))
    overrides = [*codex_overrides(ScriptedProvider(base_url=script.base_url)),
                 f'projects."{workspace}".trust_level="trusted"']
    world.app.call("agent/start", {"agent": "worker", "mode": "attached", "config": overrides}, timeout_s=120)
    assert agent_row(world, "worker")["status"] == "starting"  # no delivery before the TUI's thread is seen
    env = {**world.app.env(), "TERM": "xterm-256color"}
    tui = open_terminal([*wardian_cmd(), "agent", "attach", "worker"], env)
    try:
        for _ in range(500):
            if agent_row(world, "worker")["status"] == "idle":
                break
            world.app.call("mailbox/wait", {"session": lead_token, "timeout_ms": 20})
        row = agent_row(world, "worker")
        assert row["status"] == "idle", tui.text()
        task = world.app.call("task/followup", {"session": lead_token, "target": "worker",
                                                "message": "attached question"})
        replies = wait_reply(world, lead_token)
        # On failure: the app's log, the person's screen (an interruption the TUI reports shows there), Codex's
        # own log and the abort reasons its rollouts recorded (interrupted vs replaced: who ended the turn).
        assert [(r["request_id"], r["text"]) for r in replies] == [(task["request_id"], "attached answer 42")], (
            _diagnostics(world, tui.text()))
        wait_for_text(tui, "attached answer 42",
                      lambda: world.app.call("mailbox/wait", {"session": lead_token, "timeout_ms": 20}))
        assert task["request_id"] in tui.text()  # the structured delivery item, shown in the person's terminal
        assert script.requests[0].body["prompt_cache_key"] == row["thread_id"] if "thread_id" in row else True
        descendants = [p.pid for p in psutil.Process(tui.pid).children(recursive=True)]
    finally:
        tui.sendcontrol("c")
        tui.sendcontrol("c")
        tui.close()
    assert not tui.is_alive()
    assert [p for p in descendants if psutil.pid_exists(p) and psutil.Process(p).status() != "zombie"] == []
    assert os.path.exists(world.app.home.root)


def test_an_attached_app_server_left_by_a_killed_app_is_ended_at_the_next_start(codex_world: CodexWorld) -> None:
    """Reliability: kill -9 of the app leaves its listening Codex app-server running (own session, no stdin
    EOF to notice); the next start of that agent ends it (still running with this agent's CODEX_HOME)."""
    world = codex_world
    world.app.add_agent("worker")
    script = world.model.agent("worker")
    overrides = codex_overrides(ScriptedProvider(base_url=script.base_url))
    world.app.call("agent/start", {"agent": "worker", "mode": "attached", "config": overrides}, timeout_s=120)
    pid_file = next((world.app.home.run_dir).glob("codex-*.pid"))
    orphan = int(pid_file.read_text().strip())
    world.app.proc.kill()
    world.app.proc.wait(30)
    assert psutil.pid_exists(orphan)
    assert psutil.Process(orphan).status() != "zombie"
    app = world.restart_app()  # the agent is desired on: started again, after ending the orphan
    _, probe = app.add_agent()
    for _ in range(500):
        if not psutil.pid_exists(orphan) or psutil.Process(orphan).status() == "zombie":
            break
        app.call("mailbox/wait", {"session": probe, "timeout_ms": 20})
    assert not psutil.pid_exists(orphan) or psutil.Process(orphan).status() == "zombie"
