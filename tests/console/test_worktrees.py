"""The web console's agents page shows an agent's worktree: its branch, commits ahead of its base, and whether it
holds changes (docs/guide/teams.md#seeing-what-each-agent-did)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.console.conftest import ConsoleApp
from tests.worktrees.test_worktrees import git, new_repo

pytestmark = pytest.mark.fast


def test_the_agents_page_shows_each_worktrees_branch_commits_ahead_and_changes(console_app: ConsoleApp,
                                                                              tmp_path: Path) -> None:
    repo = new_repo(tmp_path)
    agent = console_app.app.call("agent/add", {"name": "lead", "provider": "codex", "worktree": {"repo": str(repo)}})
    tree = Path(agent["workspace"])
    (tree / "a.txt").write_text("a\n", encoding="utf-8")
    git(tree, "add", "a.txt")
    git(tree, "commit", "-q", "-m", "a")
    (tree / "b.txt").write_text("b\n", encoding="utf-8")
    cookie = console_app.login_cookie()
    status, _, body = console_app.http("GET", "/agents", {"Cookie": cookie})
    assert status == 200
    found = re.search(rb'<div class="worktree" data-worktree="([a-z]+)" data-branch="([^"]+)" data-ahead="(\d*)"',
                      body)
    assert found is not None, body
    assert found.groups() == (b"dirty", b"wardian/lead", b"1")
    assert b"dirty (1 changed)" in body
