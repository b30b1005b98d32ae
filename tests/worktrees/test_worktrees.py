"""A git worktree per agent (docs/guide/teams.md#a-worktree-per-agent), with the real `git` and a real app: an agent
added with `--worktree` works in a worktree of the repository under the home, on `wardian/NAME` or the branch named;
adding it again reuses it; each refusal (not a repository, a branch checked out elsewhere, a path that exists, no git)
creates nothing; `agent/overview` shows its branch, commits ahead and changes, and a missing one as missing; removal
keeps worktree and branch unless asked, and then refuses a worktree with changes."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import AppHandle, app_on_a_fresh_home
from wardian import errors

pytestmark = pytest.mark.fast  # the fast tier (scripts/check test-fast): app and git only

IDENTITY = ["-c", "user.name=Test", "-c", "user.email=test@example.invalid", "-c", "commit.gpgsign=false"]


def git(cwd: Path, *args: str) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    done = subprocess.run(["git", "-C", str(cwd), *IDENTITY, *args], capture_output=True, text=True,
                          encoding="utf-8", timeout=60, check=True, env=env)
    return done.stdout.strip()


def new_repo(root: Path, name: str = "repo") -> Path:
    repo = root / name
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    (repo / "README").write_text("hello\n", encoding="utf-8")
    git(repo, "add", "README")
    git(repo, "commit", "-q", "-m", "init")
    return repo


def add(app: AppHandle, name: str, repo: Path, *extra: str, cwd: Path | None = None) -> tuple[int, Any]:
    """`wardian agent add NAME --provider codex --worktree ... --json`: its exit code and its JSON (or stderr)."""
    args = ["agent", "add", name, "--provider", "codex", "--json", "--workspace", str(repo), "--worktree", *extra]
    done = app.cli(*args)
    text = done.stdout.decode() if done.returncode == 0 else done.stderr.decode()
    return done.returncode, (json.loads(text) if done.returncode == 0 else text)


def call_error(app: AppHandle, method: str, params: dict[str, Any]) -> dict[str, Any]:
    """The error the app answers `method` with, as data (the typed error the client rebuilds)."""
    with pytest.raises(errors.WardianError) as caught:
        app.call(method, params)
    return caught.value.to_data()


def error_of(app: AppHandle, params: dict[str, Any]) -> dict[str, Any]:
    return call_error(app, "agent/add", params)


def overview(app: AppHandle, name: str) -> dict[str, Any]:
    return next(r for r in app.call("agent/overview")["agents"] if r["agent"]["name"] == name)


def names(app: AppHandle) -> list[str]:
    return [a["name"] for a in app.call("agent/list")["agents"]]


@pytest.fixture
def world(tmp_path: Path) -> Iterator[tuple[AppHandle, Path]]:
    with app_on_a_fresh_home() as app:
        yield app, new_repo(tmp_path)


def test_an_agent_added_with_a_worktree_works_in_it_and_adding_it_again_reuses_it(
        world: tuple[AppHandle, Path]) -> None:
    """Point 1 of the worktree design: the workspace is `<home>/worktrees/NAME` on `wardian/NAME`; removing the
    agent keeps worktree, branch and work; the same name added again finds them."""
    app, repo = world
    code, agent = add(app, "lead", repo)
    assert code == 0, agent
    tree = app.home.root / "worktrees" / "lead"
    assert agent["workspace"] == str(tree)
    assert git(tree, "rev-parse", "--abbrev-ref", "HEAD") == "wardian/lead"
    assert git(tree, "rev-parse", "--git-common-dir") == str(repo / ".git")
    (tree / "work.txt").write_text("mine\n", encoding="utf-8")
    git(tree, "add", "work.txt")
    git(tree, "commit", "-q", "-m", "work")

    removed = app.cli("agent", "remove", "lead", "--json")
    assert removed.returncode == 0, removed.stderr
    assert json.loads(removed.stdout)["worktree"] is None
    assert (tree / "work.txt").read_text(encoding="utf-8") == "mine\n"
    assert "wardian/lead" in git(repo, "branch", "--list", "wardian/lead")

    code, again = add(app, "lead", repo)
    assert code == 0, again
    assert again["workspace"] == str(tree)
    assert (tree / "work.txt").read_text(encoding="utf-8") == "mine\n"
    assert overview(app, "lead")["worktree"]["ahead"] == 1


def test_a_named_branch_is_used_and_made_from_the_current_commit(world: tuple[AppHandle, Path]) -> None:
    app, repo = world
    code, agent = add(app, "critic", repo, "review/one")
    assert code == 0, agent
    tree = Path(agent["workspace"])
    assert git(tree, "rev-parse", "--abbrev-ref", "HEAD") == "review/one"
    assert git(tree, "rev-parse", "HEAD") == git(repo, "rev-parse", "HEAD")


def test_each_refusal_creates_nothing(world: tuple[AppHandle, Path], tmp_path: Path) -> None:
    """Not a repository, a branch checked out elsewhere, a path that exists, a bad branch name: each a typed error,
    no agent, no worktree, no branch."""
    app, repo = world
    plain = tmp_path / "plain"
    plain.mkdir()
    code, said = add(app, "a1", plain)
    assert code == 2
    assert "not_a_git_repository" in said
    assert error_of(app, {"name": "a1", "provider": "codex", "worktree": {"repo": str(plain)}})["code"] == \
        "not_a_git_repository"

    assert error_of(app, {"name": "a2", "provider": "codex", "worktree": {"repo": str(repo), "branch": "main"}}) \
        ["code"] == "branch_checked_out"
    git(repo, "worktree", "add", "-q", "-b", "theirs", str(tmp_path / "theirs"))
    taken = error_of(app, {"name": "a3", "provider": "codex", "worktree": {"repo": str(repo), "branch": "theirs"}})
    assert (taken["code"], taken["where"]) == ("branch_checked_out", str(tmp_path / "theirs"))

    squatted = app.home.root / "worktrees" / "a4"
    squatted.mkdir(parents=True)
    (squatted / "keep.txt").write_text("not yours\n", encoding="utf-8")
    assert error_of(app, {"name": "a4", "provider": "codex", "worktree": {"repo": str(repo)}})["code"] == \
        "worktree_path_taken"
    assert [p.name for p in squatted.iterdir()] == ["keep.txt"]

    bad = error_of(app, {"name": "a5", "provider": "codex", "worktree": {"repo": str(repo), "branch": "a..b"}})
    assert (bad["code"], bad["field"]) == ("invalid_arguments", "worktree.branch")
    assert error_of(app, {"name": "a..b", "provider": "codex", "worktree": {"repo": str(repo)}})["code"] == \
        "invalid_arguments"

    assert names(app) == []
    assert sorted(p.name for p in (app.home.root / "worktrees").iterdir()) == ["a4"]
    assert git(repo, "branch", "--format=%(refname:short)").split() == ["main", "theirs"]


def test_a_second_agent_of_the_same_name_cannot_share_the_worktree(world: tuple[AppHandle, Path]) -> None:
    app, repo = world
    assert add(app, "twin", repo)[0] == 0
    assert error_of(app, {"name": "twin", "provider": "codex", "worktree": {"repo": str(repo)}})["code"] == \
        "worktree_path_taken"
    assert names(app) == ["twin"]


def test_no_git_on_the_apps_path_is_a_clear_error_and_the_persons_git_dir_does_not_leak_in(
        tmp_path: Path) -> None:
    repo, other = new_repo(tmp_path), new_repo(tmp_path, "other")
    bare_path = tmp_path / "bin"
    bare_path.mkdir()
    with app_on_a_fresh_home(extra_env={"PATH": str(bare_path)}) as app:
        assert error_of(app, {"name": "lead", "provider": "codex", "worktree": {"repo": str(repo)}})["code"] == \
            "git_not_found"
        assert names(app) == []
        assert not (app.home.root / "worktrees").exists()
    git_dir = str(other / ".git")
    with app_on_a_fresh_home(extra_env={"GIT_DIR": git_dir, "GIT_WORK_TREE": str(other)}) as app:
        agent = app.call("agent/add", {"name": "lead", "provider": "codex", "worktree": {"repo": str(repo)}})
        assert git(Path(agent["workspace"]), "rev-parse", "--git-common-dir") == str(repo / ".git")
        assert git(other, "branch", "--format=%(refname:short)") == "main"


def test_the_overview_shows_branch_commits_ahead_changes_and_a_missing_worktree(
        world: tuple[AppHandle, Path]) -> None:
    app, repo = world
    _, agent = add(app, "lead", repo)
    tree = Path(agent["workspace"])
    shown = overview(app, "lead")["worktree"]
    assert shown == {"path": str(tree), "repo": str(repo), "branch": "wardian/lead", "base": "main",
                     "state": "clean", "ahead": 0, "changed": 0, "reason": None}
    (tree / "a.txt").write_text("a\n", encoding="utf-8")
    git(tree, "add", "a.txt")
    git(tree, "commit", "-q", "-m", "a")
    (tree / "b.txt").write_text("b\n", encoding="utf-8")
    (tree / "README").write_text("changed\n", encoding="utf-8")
    shown = overview(app, "lead")["worktree"]
    assert (shown["state"], shown["ahead"], shown["changed"]) == ("dirty", 1, 2)
    shutil.rmtree(tree)
    shown = overview(app, "lead")["worktree"]
    assert (shown["state"], shown["ahead"], shown["changed"]) == ("missing", None, None)
    # A worktree git cannot read (its link to the repository broken) is unknown, with git's reason; the rest of
    # the overview is unaffected.
    _, broken = add(app, "broken", repo)
    (Path(broken["workspace"]) / ".git").write_text("gitdir: /nonexistent\n", encoding="utf-8")
    shown = overview(app, "broken")["worktree"]
    assert (shown["state"], shown["ahead"], shown["changed"]) == ("unknown", None, None)
    assert shown["reason"]
    assert overview(app, "lead")["worktree"]["state"] == "missing"


def test_remove_worktree_refuses_a_dirty_one_and_removes_a_clean_one(world: tuple[AppHandle, Path]) -> None:
    """Never deletes work: changes refuse the whole removal (listing them); a clean worktree goes, and the branch
    wardian made goes only when its base holds all its commits."""
    app, repo = world
    _, agent = add(app, "lead", repo)
    _, other = add(app, "worker", repo)
    tree = Path(agent["workspace"])
    (tree / "draft.txt").write_text("wip\n", encoding="utf-8")
    refused = app.cli("agent", "remove", "lead", "--remove-worktree")
    assert refused.returncode == 2
    dirty = call_error(app, "agent/remove", {"agent": "lead", "remove_worktree": True})
    assert (dirty["code"], dirty["changed"], dirty["count"]) == ("worktree_dirty", ["draft.txt"], 1)
    assert names(app) == ["lead", "worker"]
    assert (tree / "draft.txt").exists()

    git(tree, "add", "draft.txt")
    git(tree, "commit", "-q", "-m", "draft")
    done = app.cli("agent", "remove", "lead", "--remove-worktree", "--json")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)["worktree"]
    assert (result["removed"], result["branch_deleted"]) == (True, False)
    assert not tree.exists()
    assert git(repo, "log", "-1", "--format=%s", "wardian/lead") == "draft"  # the commit is kept on its branch

    done = app.cli("agent", "remove", "worker", "--remove-worktree", "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["worktree"]["branch_deleted"] is True
    assert not Path(other["workspace"]).exists()
    assert git(repo, "branch", "--list", "wardian/worker") == ""
    assert names(app) == []


def test_worktree_remove_removes_a_stopped_agents_clean_worktree_and_keeps_the_agent(
        world: tuple[AppHandle, Path]) -> None:
    app, repo = world
    _, agent = add(app, "lead", repo)
    tree = Path(agent["workspace"])
    done = app.call("worktree/remove", {"agent": "lead"})["worktree"]
    assert (done["removed"], done["branch_deleted"]) == (True, True)
    assert not tree.exists()
    assert overview(app, "lead")["worktree"]["state"] == "missing"
    assert names(app) == ["lead"]
    app.call("agent/add", {"name": "plain", "provider": "codex"})
    assert app.cli("agent", "remove", "plain", "--remove-worktree").returncode == 2
    no_tree = call_error(app, "agent/remove", {"agent": "plain", "remove_worktree": True})
    assert (no_tree["code"], no_tree["field"]) == ("invalid_arguments", "remove_worktree")
    assert names(app) == ["lead", "plain"]
