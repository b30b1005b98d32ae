"""`worktree = true` in a team file, with the real Codex on the scripted model (docs/guide/teams.md): `wardian up`
makes the agent's worktree of the file's repository and starts Codex in it; `status` shows its branch, commits ahead
and changes; `down` keeps it; `up` again reuses it; `down --remove-worktree` keeps a worktree with changes and
removes a clean one; the next `up` makes it again."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import unavailable, wardian_cmd
from tests.worktrees.test_worktrees import git, new_repo
from wardian import errors
from wardian.client import AppClient
from wardian.home import Home
from wardian_harness.acceptance.homes import IsolatedRun
from wardian_harness.models.scripted_model import ScriptedModel
from wardian_harness.processes.proctree import ProcessTree
from wardian_harness.providers.codex_home import DUMMY_API_KEY, ScriptedProvider, codex_overrides
from wardian_harness.providers.codex_install import CodexNotFound, discover_codex


class Team:
    def __init__(self, run: IsolatedRun, env: dict[str, str], repo: Path) -> None:
        self.run, self.env, self.repo = run, env, repo
        self.file = repo / "wardian.toml"
        self.tree = run.wardian_home / "worktrees" / "lead"

    def wardian(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*wardian_cmd(), *args, "-f", str(self.file)], env=self.env, capture_output=True,
                              text=True, encoding="utf-8", timeout=600, check=False, stdin=subprocess.DEVNULL)

    def json(self, *args: str) -> tuple[int, dict[str, Any]]:
        done = self.wardian(*args, "--json")
        return done.returncode, json.loads(done.stdout)

    def codex_cwd(self) -> str:
        """The folder the agent's Codex app-server runs in (its process group's leader, from the pid record)."""
        pid_file = next((self.run.wardian_home / "run").glob("codex-*.pid"))
        return os.readlink(f"/proc/{int(pid_file.read_text(encoding='utf-8').split()[0])}/cwd")


@pytest.fixture
def team(tmp_path: Path) -> Iterator[Team]:
    try:
        codex = discover_codex()
    except CodexNotFound as exc:
        unavailable(str(exc))
    run = IsolatedRun.create(prefix="wwt")
    tree = ProcessTree(run.run_id)
    try:
        with ScriptedModel() as model:
            env = run.child_env({"PATH": f"{codex.executable.parent}:/usr/bin:/bin",
                                 "WARDIAN_CODEX": str(codex.executable), "WARDIAN_SCRIPTED_MODEL_KEY": DUMMY_API_KEY})
            repo = new_repo(tmp_path)
            settings = codex_overrides(ScriptedProvider(base_url=model.agent("lead").base_url))
            (repo / "wardian.toml").write_text("\n".join([
                "[team]", f"home = {json.dumps(str(run.wardian_home))}", "",
                "[agents.lead]", 'provider = "codex"', "worktree = true", "", "[agents.lead.settings]", *settings,
                ""]), encoding="utf-8")
            yield Team(run, env, repo)
    finally:
        left = tree.close()
        run.close()
        assert not left, f"processes left running: {[p.pid for p in left]}"


@pytest.mark.timeout(300)  # three starts of Codex: ~30 s alone, ~90 s on a loaded 2-core machine
def test_up_starts_codex_in_its_worktree_down_keeps_it_and_remove_worktree_keeps_work(team: Team) -> None:
    code, up = team.json("up")
    assert code == 0, up
    assert up["agents"][0]["action"] == "added"
    assert git(team.tree, "rev-parse", "--abbrev-ref", "HEAD") == "wardian/lead"
    assert team.codex_cwd() == str(team.tree)
    with AppClient(Home(team.run.wardian_home)) as app, pytest.raises(errors.InvalidArguments):
        app.call("worktree/remove", {"agent": "lead"})  # it runs there: refused, nothing removed
    assert team.codex_cwd() == str(team.tree)
    (team.tree / "new.txt").write_text("work\n", encoding="utf-8")
    status = team.wardian("status")
    assert status.returncode == 0, status.stderr
    assert f"lead: worktree {team.tree} on wardian/lead, 0 commit(s) ahead of main, dirty (1 changed file(s))" \
        in status.stdout

    code, down = team.json("down", "--remove-worktree")
    assert code == 2, down  # the worktree has a change: kept, and said
    assert down["worktrees"][0]["error"]["code"] == "worktree_dirty"
    assert (team.tree / "new.txt").exists()

    code, again = team.json("up")
    assert code == 0, again
    assert again["agents"][0]["action"] == "started"
    assert team.codex_cwd() == str(team.tree)
    assert (team.tree / "new.txt").exists()

    (team.tree / "new.txt").unlink()
    code, down = team.json("down", "--remove-worktree")
    assert code == 0, down
    assert not team.tree.exists()
    assert git(team.repo, "branch", "--list", "wardian/lead") == ""

    code, third = team.json("up")
    assert code == 0, third
    assert third["agents"][0]["action"] == "started"
    assert git(team.tree, "rev-parse", "--abbrev-ref", "HEAD") == "wardian/lead"
    assert team.codex_cwd() == str(team.tree)
    code, _ = team.json("down")
    assert code == 0
    assert team.tree.exists()
