"""The home is private (HOME-2, decision 0006): with the common umask 022 (and 000), `wardian app start` used to create
the home 0755 and the store, its WAL, the logs and `app.out` 0644, readable by every local user. Now everything in a
home is owner-only (0700 directories, 0600 files) whatever the umask; an existing home open to others is refused with
the path and the fix, or tightened when an app made it."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import short_home, wardian_cmd
from tests.providers.codex.conftest import FAKE_CODEX
from wardian.cli import EXIT_HOME

pytestmark = pytest.mark.fast  # the fast tier (scripts/check test-fast)


def run_cli(home: Path, umask: int, *args: str, extra_env: dict[str, str] | None = None
            ) -> subprocess.CompletedProcess[bytes]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("WARDIAN_")}
    env.update({"WARDIAN_HOME": str(home), **(extra_env or {})})
    return subprocess.run(["/bin/sh", "-c", f'umask {umask:03o}; exec "$@"', "sh", *wardian_cmd(), *args], env=env,
                          capture_output=True, timeout=120)


def open_paths(root: Path) -> list[str]:
    """Every path under `root` (itself included) that the group or others may access at all."""
    found = []
    for path in [root, *root.rglob("*")]:
        st = os.lstat(path)
        if not stat.S_ISLNK(st.st_mode) and st.st_mode & 0o077:
            found.append(f"{path.relative_to(root)} {stat.S_IMODE(st.st_mode):o}")
    return found


@pytest.fixture
def fake_codex(tmp_path: Path) -> Path:
    exe = tmp_path / "codex"
    exe.write_text(f"#!/bin/sh\nexec {sys.executable} {FAKE_CODEX} \"$@\"\n", encoding="utf-8")
    exe.chmod(0o755)
    return exe


@pytest.mark.parametrize("umask", [0o022, 0o000], ids=["umask022", "umask000"])
def test_everything_the_app_creates_is_owner_only(umask: int, fake_codex: Path) -> None:
    parent = short_home("wp")
    home = parent / "newhome"  # does not exist yet: `app start` creates it
    env = {"WARDIAN_CODEX": str(fake_codex), "FAKE_CODEX_LOG": str(parent / "codex.jsonl")}
    try:
        assert run_cli(home, umask, "app", "start", extra_env=env).returncode == 0
        try:
            for name in ("lead", "worker"):
                assert run_cli(home, umask, "agent", "add", name, "--provider", "codex").returncode == 0
            assert run_cli(home, umask, "agent", "start", "worker").returncode == 0
            token = run_cli(home, umask, "agent", "env", "lead", "--json").stdout
            lead = token.decode().split('"WARDIAN_SESSION_ID": "')[1].split('"')[0]
            sent = run_cli(home, umask, "message", "send", "--to", "worker", "private", extra_env={
                "WARDIAN_SESSION_ID": lead})
            assert sent.returncode == 0, sent.stderr
            for must in ("wardian.db", "wardian.db-wal", "wardian.db-shm", "app.out", "logs/app.log", "run/app.pid",
                         "agents"):
                assert (home / must).exists(), must
            assert list((home / "agents").glob("*/codex/config.toml")), "the provider home was not prepared"
            assert open_paths(home) == []
        finally:
            assert run_cli(home, umask, "app", "stop").returncode == 0
        assert open_paths(home) == []
    finally:
        shutil.rmtree(parent, ignore_errors=True)


def test_a_home_open_to_others_that_no_app_made_is_refused() -> None:
    parent = short_home("wp")
    home = parent / "open"
    home.mkdir()
    home.chmod(0o755)
    try:
        out = run_cli(home, 0o022, "app", "start")
        assert out.returncode == EXIT_HOME
        assert b"insecure_home" in out.stderr
        assert f"chmod 700 {home}".encode() in out.stderr
        assert sorted(p.name for p in home.iterdir()) == ["app.out"]  # the CLI's own capture, private
        assert stat.S_IMODE(os.lstat(home / "app.out").st_mode) == 0o600
        assert stat.S_IMODE(os.lstat(home).st_mode) == 0o755  # not ours to change
    finally:
        shutil.rmtree(parent, ignore_errors=True)


def test_a_home_an_app_made_is_tightened() -> None:
    """A home an older wardian left open (its store exists) is made private again at the next start."""
    parent = short_home("wp")
    home = parent / "old"
    try:
        assert run_cli(home, 0o022, "app", "start").returncode == 0
        assert run_cli(home, 0o022, "app", "stop").returncode == 0
        for path, mode in ((home, 0o755), (home / "wardian.db", 0o644), (home / "logs", 0o755),
                           (home / "logs" / "app.log", 0o644), (home / "app.out", 0o644)):
            path.chmod(mode)
        assert run_cli(home, 0o022, "app", "start").returncode == 0
        try:
            assert open_paths(home) == []
            assert b"made these paths of the home private" in (home / "logs" / "app.log").read_bytes()
        finally:
            assert run_cli(home, 0o022, "app", "stop").returncode == 0
    finally:
        shutil.rmtree(parent, ignore_errors=True)
