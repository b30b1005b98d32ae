"""harness/homes.py: one locked root per run, fixture git repositories, allowlisted environments."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from wardian_harness.acceptance.homes import HomeLocked, IsolatedRun
from wardian_harness.processes.proctree import RUN_MARKER_ENV

pytestmark = pytest.mark.fast  # the fast tier (scripts/check test-fast)


def test_a_second_runner_cannot_take_a_held_root_and_a_joiner_needs_a_holder(tmp_path: Path) -> None:
    """ACC-3: the runner owns the isolated home lock; two runners never share a home."""
    run = IsolatedRun.create()
    try:
        probe = ("import sys; from pathlib import Path\n"
                 "from wardian_harness.acceptance.homes import HomeLock, HomeLocked\n"
                 "try:\n    HomeLock(Path(sys.argv[1])).acquire()\nexcept HomeLocked:\n    sys.exit(7)\n")
        done = subprocess.run([sys.executable, "-c", probe, str(run.root / "run.lock")], check=False, timeout=60)
        assert done.returncode == 7
        assert IsolatedRun.join(run.root, run.run_id).root == run.root
    finally:
        run.close()
    assert not run.root.exists()
    (tmp_path / "run.lock").touch()
    with pytest.raises(HomeLocked):
        IsolatedRun.join(tmp_path, "x")


def test_each_workspace_is_its_own_empty_git_repository_and_children_get_private_homes() -> None:
    """ACC-5: each fixture workspace has its own empty Git repository; children never see the real home."""
    with IsolatedRun.create() as run:
        ws = run.workspace("lead")
        top = subprocess.run(["git", "-C", str(ws), "rev-parse", "--show-toplevel"], capture_output=True,
                             text=True, check=True, env=run.child_env()).stdout.strip()
        assert Path(top).resolve() == ws.resolve()
        assert [p.name for p in ws.iterdir()] == [".git"]
        env = run.child_env(parent={"PATH": "/bin", "HOME": "/home/real", "OPENAI_API_KEY": "k"})
        assert env["HOME"] == str(run.user_home)
        assert "OPENAI_API_KEY" not in env
        assert env[RUN_MARKER_ENV] == run.run_id


def test_only_the_auth_file_is_copied_from_an_auth_home(tmp_path: Path) -> None:
    """ACC-8: WARDIAN_E2E_CODEX_AUTH_HOME: copy only the needed auth file into the isolated homes."""
    auth_home = tmp_path / "auth"
    auth_home.mkdir()
    (auth_home / "auth.json").write_text(json.dumps({"k": "v"}), encoding="utf-8")
    (auth_home / "config.toml").write_text("model = 'x'\n", encoding="utf-8")
    (auth_home / "sessions").mkdir()
    with IsolatedRun.create() as run:
        target = run.codex_home("u")
        assert run.copy_auth(auth_home, target) == ["auth.json"]
        assert sorted(p.name for p in target.iterdir()) == ["auth.json"]
        assert target.joinpath("auth.json").stat().st_mode & 0o777 == 0o600
        with pytest.raises(FileNotFoundError):
            run.copy_auth(tmp_path / "empty", target)
