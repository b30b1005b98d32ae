"""The console's agents page names a Claude Code agent's conversation as the Claude Code session it is (its id is
the name of the session's transcript), beside Codex threads and OpenCode sessions."""

from __future__ import annotations

import uuid
from typing import Any

from tests.conftest import AppHandle
from wardian.console import render


def test_a_claude_agents_row_shows_its_session(app: AppHandle) -> None:
    """The overview is the app's own (`agent/overview`); its conversation is set as a started Claude agent's is
    (the session id the app chose)."""
    app.add_agent("reviewer", "claude")
    app.add_agent("builder", "codex")
    rows: Any = render.environment().get_template("_rows.j2").module  # the row macros, as the console uses them
    session = str(uuid.uuid4())
    shown = {}
    for overview in app.call("agent/overview")["agents"]:
        assert overview["managed"] is not None
        overview["managed"]["thread_id"] = session
        shown[overview["agent"]["provider"]] = str(rows.agent_row(overview, 0, "csrf-token"))
    assert f'data-thread="{session}" title="Claude Code session' in shown["claude"]
    assert f"session {session}</span>" in shown["claude"]
    assert f'data-thread="{session}" title="Codex thread">{session}</span>' in shown["codex"]
