"""The home is private and wardian's own (HOME-2, HOME-4, decision 0006). With the common umask 022 (and 000),
`wardian app start` used to create the home 0755 and the store, its WAL, the logs and `app.out` 0644, readable by
every local user; and any folder holding `run/` or `wardian.db` was taken for one an app made and tightened (`/` as
root). Now everything in a home is owner-only whatever the umask; a folder is a home only by wardian's marker; an
empty folder open to others is refused with the path and the fix, and a home wardian made is tightened."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import short_home, wardian_cmd
from tests.providers.codex.conftest import FAKE_CODEX
from wardian import errors
from wardian.cli import EXIT_HOME
from wardian.home import Home
from wardian.home_setup import inspect_home

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


@pytest.fixture
def scratch() -> Iterator[Path]:
    """A fresh folder under /tmp (short enough for a socket path), removed afterwards."""
    parent = short_home("wp")
    try:
        yield parent
    finally:
        shutil.rmtree(parent, ignore_errors=True)


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
    """An empty folder others may enter is refused with the path and the fix, and nothing is written into it: not
    even the CLI's capture of the app's output (`app.out`)."""
    parent = short_home("wp")
    home = parent / "open"
    home.mkdir()
    home.chmod(0o755)
    try:
        out = run_cli(home, 0o022, "app", "start")
        assert out.returncode == EXIT_HOME
        assert b"insecure_home" in out.stderr
        assert f"chmod 700 {home}".encode() in out.stderr
        assert list(home.iterdir()) == []
        assert stat.S_IMODE(os.lstat(home).st_mode) == 0o755  # not ours to change
    finally:
        shutil.rmtree(parent, ignore_errors=True)


def test_a_home_an_app_made_is_tightened() -> None:
    """A home wardian made (its marker is there) that was left open is made private again at the next start; a link
    inside it is never followed: what it points at keeps its mode."""
    parent = short_home("wp")
    home = parent / "old"
    outside = parent / "outside.txt"
    try:
        assert run_cli(home, 0o022, "app", "start").returncode == 0
        assert run_cli(home, 0o022, "app", "stop").returncode == 0
        outside.write_text("not wardian's\n", encoding="utf-8")
        outside.chmod(0o644)
        (home / "logs" / "linked.log").symlink_to(outside)
        for path, mode in ((home, 0o755), (home / "wardian.db", 0o644), (home / "logs", 0o755),
                           (home / "logs" / "app.log", 0o644), (home / "app.out", 0o644)):
            path.chmod(mode)
        assert run_cli(home, 0o022, "app", "start").returncode == 0
        try:
            assert open_paths(home) == []
            assert b"made these paths of the home private" in (home / "logs" / "app.log").read_bytes()
            assert stat.S_IMODE(os.lstat(outside).st_mode) == 0o644
        finally:
            assert run_cli(home, 0o022, "app", "stop").returncode == 0
    finally:
        shutil.rmtree(parent, ignore_errors=True)


def test_a_home_an_older_wardian_made_is_recognised_by_its_store_tightened_and_marked() -> None:
    """A home from before the marker is wardian's by its own store (an SQLite file named wardian.db), not by the names
    of its folders: it is tightened and gets the marker."""
    parent = short_home("wp")
    home = parent / "older"
    try:
        assert run_cli(home, 0o022, "app", "start").returncode == 0
        assert run_cli(home, 0o022, "app", "stop").returncode == 0
        (home / "wardian-home").unlink()  # as an older wardian left it
        for path, mode in ((home, 0o755), (home / "wardian.db", 0o644)):
            path.chmod(mode)
        assert run_cli(home, 0o022, "app", "start").returncode == 0
        try:
            assert open_paths(home) == []
            assert (home / "wardian-home").is_file()
        finally:
            assert run_cli(home, 0o022, "app", "stop").returncode == 0
    finally:
        shutil.rmtree(parent, ignore_errors=True)


def modes(root: Path) -> dict[str, tuple[int, int, str]]:
    """Every path under `root` (itself included, links not followed): its mode, owner and, for a link, its target."""
    found = {}
    for path in [root, *root.rglob("*")]:
        st = os.lstat(path)
        target = os.readlink(path) if stat.S_ISLNK(st.st_mode) else ""
        found[str(path.relative_to(root))] = (st.st_mode, st.st_uid, target)
    return found


def fake_root(parent: Path, *, run_link: bool) -> tuple[Path, Path]:
    """A folder shaped like `/`: `run/` with `dbus/` and a sticky world-writable `lock/`, a 0644 file, `etc/`; with
    `run_link`, `run` is a link to `var/run` instead (as `/var/run` -> `/run`). Returns (the root, the tree to compare:
    the root's parent, so a link's target outside the root is compared too)."""
    root = parent / "root"
    run = parent / "elsewhere-run" if run_link else root / "run"
    root.mkdir(mode=0o755)
    root.chmod(0o755)
    for folder, mode in ((run, 0o755), (run / "dbus", 0o755), (run / "lock", 0o1777), (root / "etc", 0o755)):
        folder.mkdir()
        folder.chmod(mode)
    (root / "etc" / "motd").write_text("hello\n", encoding="utf-8")
    (root / "etc" / "motd").chmod(0o644)
    (run / "utmp").write_text("", encoding="utf-8")
    (run / "utmp").chmod(0o664)
    if run_link:
        (root / "run").symlink_to(run)
    return root, parent


@pytest.mark.parametrize("run_link", [False, True], ids=["run", "run_link"])
@pytest.mark.parametrize("root_mode", [0o755, 0o700], ids=["open", "private"])
def test_a_folder_wardian_did_not_make_is_refused_and_nothing_in_it_changes(run_link: bool, root_mode: int,
                                                                           scratch: Path) -> None:
    """A team file's `home = "/"` as root made `/`, `/run` and everything in `/run` private and started an app in `/`.
    Now a folder that holds other files and no marker is refused (`foreign_home`, exit 7) by every command that makes
    a home, open or private, and every mode, owner and link of the tree is as it was; nothing is written."""
    root, tree = fake_root(scratch, run_link=run_link)
    root.chmod(root_mode)
    team = scratch / "team" / "wardian.toml"
    team.parent.mkdir()
    team.write_text(f'[team]\nhome = "{root}"\n\n[agents.lead]\nprovider = "codex"\n', encoding="utf-8")
    before = modes(tree)
    for command in (("app", "start"), ("app", "run"), ("up", "-f", str(team))):
        out = run_cli(root, 0o022, *command)
        assert out.returncode == EXIT_HOME, (command, out.stderr)
        assert b"foreign_home" in out.stderr, (command, out.stderr)
        assert str(root).encode() in out.stderr
        assert modes(tree) == before, command
    login = subprocess.run([*wardian_cmd(), "auth", "login", "codex", "--with-api-key"], input=b"sk-canary-1\n",
                           env={**os.environ, "WARDIAN_HOME": str(root), "WARDIAN_CREDENTIAL_STORE": "file"},
                           capture_output=True, timeout=120)
    assert login.returncode == EXIT_HOME, login.stderr
    assert b"foreign_home" in login.stderr
    assert modes(tree) == before


def test_a_team_file_home_of_tilde_is_refused(scratch: Path) -> None:
    """`home = "~"` names the person's own home: it holds their files, so it is refused and nothing in it changes."""
    person = scratch / "person"
    person.mkdir(mode=0o700)
    (person / ".profile").write_text("export X=1\n", encoding="utf-8")
    (person / ".profile").chmod(0o644)
    team = scratch / "wardian.toml"
    team.write_text('[team]\nhome = "~"\n\n[agents.lead]\nprovider = "codex"\n', encoding="utf-8")
    before = modes(person)
    out = run_cli(person, 0o022, "up", "-f", str(team), extra_env={"HOME": str(person)})
    assert out.returncode == EXIT_HOME, out.stderr
    assert b"foreign_home" in out.stderr
    assert modes(person) == before


@pytest.mark.parametrize("path", ["/", "/etc", "/var", "/run", "/tmp"])
def test_system_folders_are_never_a_home(path: str) -> None:
    """`/`, `/etc`, `/var`, `/run` and `/tmp` are not wardian homes. Checked with the inspection alone, which writes
    nothing by construction (the command path is the fake root's test above)."""
    with pytest.raises(errors.InsecureHome) as refused:
        inspect_home(Home(Path(path)))
    assert refused.value.code in ("foreign_home", "insecure_home")
    assert path in refused.value.message


def test_a_marker_that_is_a_link_is_refused(scratch: Path) -> None:
    """The marker only counts as a regular file of this user's: a link named like it (pointing anywhere) is refused,
    and the home is left as it was."""
    home = scratch / "home"
    home.mkdir(mode=0o700)
    (scratch / "target").write_text("", encoding="utf-8")
    (home / "wardian-home").symlink_to(scratch / "target")
    before = modes(scratch)
    out = run_cli(home, 0o022, "app", "start")
    assert out.returncode == EXIT_HOME
    assert b"insecure_home" in out.stderr
    assert modes(scratch) == before


def test_an_empty_private_folder_becomes_a_home_and_gets_the_marker(scratch: Path) -> None:
    """An empty folder of this user's that only its owner may enter is taken: the marker is written first."""
    home = scratch / "home"
    home.mkdir(mode=0o700)
    assert run_cli(home, 0o022, "app", "start").returncode == 0
    try:
        marker = home / "wardian-home"
        assert marker.is_file()
        assert stat.S_IMODE(os.lstat(marker).st_mode) == 0o600
    finally:
        assert run_cli(home, 0o022, "app", "stop").returncode == 0
