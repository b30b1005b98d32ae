"""What `wardian up` remembers in the home between runs (`team.json`, 0600, no secret in it): whether it started the
app, so that `wardian down` stops that app, and only that one. (An agent's tool grants are kept by the app with the
agent, beside its settings; a `grants` key an older `up` wrote here is ignored and dropped at the next write.)

A missing or unreadable file is an empty state: `up` then compares what the app shows, and `down` leaves the app
running (docs/guide/team-file.md).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

STATE_FILE = "team.json"


@dataclass(frozen=True, slots=True)
class AppMark:
    """The app `up` started: its pid and its `started_at` (`app/status`), which a reused pid does not share."""

    pid: int
    started_at: int


@dataclass(slots=True)
class TeamState:
    app: AppMark | None = None


def state_path(home_root: Path) -> Path:
    return home_root / STATE_FILE


def read_state(home_root: Path) -> TeamState:
    try:
        data: Any = json.loads(state_path(home_root).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return TeamState()
    if not isinstance(data, dict):
        return TeamState()
    state = TeamState()
    app = data.get("app")
    if isinstance(app, dict) and isinstance(app.get("pid"), int) and isinstance(app.get("started_at"), int):
        state.app = AppMark(app["pid"], app["started_at"])
    return state


def write_state(home_root: Path, state: TeamState) -> None:
    """Replace the file at once (a reader sees the old state or the new one, never a torn one)."""
    data = {"app": None if state.app is None else {"pid": state.app.pid, "started_at": state.app.started_at}}
    path = state_path(home_root)
    tmp = path.with_name(f".{STATE_FILE}.{os.getpid()}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with open(fd, "w", encoding="utf-8") as f:
        f.write(json.dumps(data, indent=2) + "\n")
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
