"""`wardian status` shows the team's task policy in one line: the deadline a task given none gets, and the loop
guard's limits, as the app applies them (`app/status`' `task_policy`, docs/guide/teams.md)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from tests.conftest import app_on_a_fresh_home, wardian_cmd
from wardian.protocol import methods as proto


def test_status_shows_the_task_policy_the_app_applies_in_one_line(tmp_path: Path) -> None:
    with app_on_a_fresh_home() as app:
        file = tmp_path / "wardian.toml"
        file.write_text(f'[team]\nhome = {json.dumps(str(app.home.root))}\n\n[agents.lead]\nprovider = "codex"\n',
                        encoding="utf-8")

        def status() -> list[str]:
            done = subprocess.run([*wardian_cmd(), "status", "-f", str(file)], capture_output=True, text=True,
                                  encoding="utf-8", timeout=120, check=False)
            assert done.returncode == 0, done.stderr
            return [line for line in done.stdout.splitlines() if line.startswith("task policy:")]

        assert status() == ["task policy: task_deadline none, max_task_depth 8, max_chain_tasks 64"]
        app.call("team/policy", {"task_deadline_ms": 90 * 60_000, "max_task_depth": 3, "max_chain_tasks": 20})
        assert status() == ["task policy: task_deadline 1h30m, max_task_depth 3, max_chain_tasks 20"]
        shown = app.call("app/status")
        proto.validate_result("app/status", shown)
        assert shown["task_policy"] == {"task_deadline_ms": 90 * 60_000, "max_task_depth": 3, "max_chain_tasks": 20}
