"""`wardian up|down|status` with the real Codex, OpenCode and Claude Code on the scripted model: a team from a fresh
home, `up` again (nothing restarted), a changed setting (that agent alone restarted, the output names it and the
field), an agent of the home the file does not name (listed, kept, `--prune` removes it), one agent's failed start
(the others still start), `down` (nothing left running), and a broken file (exit 2, nothing created)."""

from __future__ import annotations

import json
import subprocess
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import unavailable, wardian_cmd
from wardian.home import Home
from wardian_harness.acceptance.homes import IsolatedRun
from wardian_harness.models.scripted_model import ScriptedModel
from wardian_harness.processes.proctree import ProcessTree
from wardian_harness.processes.terminal import open_terminal, wait_for_text
from wardian_harness.providers.claude_home import ClaudeNotFound, ScriptedClaude, claude_overrides, find_claude
from wardian_harness.providers.codex_home import DUMMY_API_KEY, ScriptedProvider, codex_overrides
from wardian_harness.providers.codex_install import CodexNotFound, discover_codex
from wardian_harness.providers.opencode_home import (
    OpenCodeNotFound,
    ScriptedOpenCode,
    find_opencode,
    opencode_overrides,
)

GRANTS = ("followup_task", "receive_messages", "reply")


@dataclass
class World:
    run: IsolatedRun
    tree: ProcessTree
    model: ScriptedModel
    env: dict[str, str]

    @property
    def file(self) -> Path:
        return self.run.root / "wardian.toml"

    @property
    def home(self) -> Home:
        return Home(self.run.wardian_home)

    def wardian(self, *args: str, timeout_s: float = 900) -> subprocess.CompletedProcess[str]:
        done = subprocess.run([*wardian_cmd(), *args], env=self.env, capture_output=True, text=True,
                              encoding="utf-8", timeout=timeout_s, check=False, stdin=subprocess.DEVNULL)
        # The settings carry a (dummy) key: no output, and nothing `up` keeps in the home, ever shows it.
        state = self.run.wardian_home / "team.json"
        for text in (done.stdout, done.stderr, state.read_text(encoding="utf-8") if state.exists() else ""):
            assert DUMMY_API_KEY not in text
        return done

    def up_json(self, *args: str) -> tuple[int, dict[str, Any]]:
        done = self.wardian("up", "-f", str(self.file), "--json", *args)
        return done.returncode, json.loads(done.stdout)

    def settings(self, name: str, provider: str) -> list[str]:
        base_url = self.model.agent(name).base_url
        if provider == "codex":
            return codex_overrides(ScriptedProvider(base_url=base_url))
        if provider == "opencode":
            return opencode_overrides(ScriptedOpenCode(base_url))
        return claude_overrides(ScriptedClaude(base_url))

    def write_team(self, agents: dict[str, dict[str, Any]], console: str | None = None) -> None:
        """A team file: `[team]` with the run's home, an `[agents.NAME]` table each, its settings as TOML (each
        `-c KEY=VALUE` of the harness is a dotted key and a TOML value already)."""
        lines = ["[team]", f"home = {json.dumps(str(self.run.wardian_home))}",
                 *([f'console = "{console}"'] if console else []), ""]
        for name, a in agents.items():
            lines += [f"[agents.{name}]", f'provider = "{a["provider"]}"',
                      f"workspace = {json.dumps(str(a.get('workspace') or self.run.workspace(name)))}"]
            if a.get("approve_tools"):
                lines.append(f"approve_tools = {json.dumps(list(a['approve_tools']))}")
            if a.get("auth"):
                lines.append(f'auth = "{a["auth"]}"')
            lines += ["", f"[agents.{name}.settings]", *a.get("settings", self.settings(name, a["provider"])), ""]
        self.file.write_text("\n".join(lines), encoding="utf-8")


@pytest.fixture
def world() -> Iterator[World]:
    try:
        codex = discover_codex()
        opencode, claude = find_opencode(), find_claude()
    except (CodexNotFound, OpenCodeNotFound, ClaudeNotFound) as exc:
        unavailable(str(exc))
    run = IsolatedRun.create(prefix="wup")
    tree = ProcessTree(run.run_id)
    try:
        with ScriptedModel() as model:
            env = run.child_env({"PATH": f"{codex.executable.parent}:/usr/bin:/bin",
                                 "WARDIAN_CODEX": str(codex.executable), "WARDIAN_OPENCODE": str(opencode.executable),
                                 "WARDIAN_CLAUDE": str(claude.executable),
                                 "WARDIAN_SCRIPTED_MODEL_KEY": DUMMY_API_KEY})
            yield World(run, tree, model, env)
    finally:
        left = tree.close()
        run.close()
        assert not left, f"processes left running: {[p.pid for p in left]}"


def _by_name(result: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {a["name"]: a for a in result["agents"]}


def test_up_makes_the_team_again_idempotently_restarts_what_changed_and_down_ends_it(world: World) -> None:
    team = {"lead": {"provider": "codex", "approve_tools": GRANTS},
            "worker": {"provider": "opencode"},
            "critic": {"provider": "claude", "approve_tools": ("reply",)}}
    world.write_team(team)
    code, first = world.up_json()
    assert code == 0, first
    assert first["app_started"] is True
    agents = _by_name(first)
    assert {n: a["action"] for n, a in agents.items()} == {"lead": "added", "worker": "added", "critic": "added"}
    assert all(a["status"] in ("idle", "starting") and a["thread_id"] and a["error"] is None
               for a in agents.values()), agents
    generations = {n: a["generation"] for n, a in agents.items()}

    # Again: every agent runs as the file says; none restarted, the generations are the same. An agent added by
    # hand is listed as not in the file, and kept.
    added = world.wardian("agent", "add", "extra", "--provider", "codex")
    assert added.returncode == 0, added.stderr
    again = world.wardian("up", "-f", str(world.file))
    assert again.returncode == 0, again.stderr
    assert "not in wardian.toml" in again.stdout
    assert "extra" in again.stdout
    code, second = world.up_json()
    assert code == 0
    assert second["app_started"] is False
    assert {n: (a["action"], a["generation"]) for n, a in _by_name(second).items()} == {
        n: ("unchanged", g) for n, g in generations.items()}
    assert [a["name"] for a in second["not_in_file"]] == ["extra"]

    # A changed setting restarts that agent alone, and says which setting; --prune removes the extra agent.
    renamed = ('name="Scripted model"', 'name="Scripted model, renamed"')
    team["worker"]["settings"] = [s.replace(*renamed) for s in world.settings("worker", "opencode")]
    world.write_team(team)
    changed = world.wardian("up", "-f", str(world.file), "--prune")
    assert changed.returncode == 0, changed.stderr
    assert "restarted worker: settings: provider.scripted.name changed" in changed.stdout
    assert "restarted lead" not in changed.stdout
    assert "restarted critic" not in changed.stdout
    code, third = world.up_json()
    after = _by_name(third)
    assert {n: a["action"] for n, a in after.items()} == {n: "unchanged" for n in team}
    assert after["worker"]["generation"] > generations["worker"]
    assert {n: after[n]["generation"] for n in ("lead", "critic")} == {n: generations[n] for n in ("lead", "critic")}
    assert third["not_in_file"] == []

    status = world.wardian("status", "-f", str(world.file), "--json")
    assert status.returncode == 0, status.stderr
    shown = json.loads(status.stdout)
    assert [(a["name"], a["status"] in ("idle", "starting"), a["pending"]) for a in shown["agents"]] == [
        ("lead", True, 0), ("worker", True, 0), ("critic", True, 0)]

    down = world.wardian("down", "-f", str(world.file))
    assert down.returncode == 0, down.stderr
    assert "app stopped" in down.stdout
    assert world.tree.members() == []
    assert world.wardian("status", "-f", str(world.file)).returncode == 3


def test_up_gives_the_app_the_team_s_task_deadline_and_message_task_takes_its_own(world: World) -> None:
    """[team] task_deadline is the deadline of a task given none; `message task --deadline` gives one of its own; a
    file that drops the key takes the default away again at the next `up` (docs/guide/teams.md)."""
    world.write_team({"lead": {"provider": "codex"}})
    plain = world.file.read_text(encoding="utf-8")
    world.file.write_text(plain.replace("[team]\n", '[team]\ntask_deadline = "45m"\nmax_task_depth = 3\n', 1),
                          encoding="utf-8")
    assert world.wardian("up", "-f", str(world.file)).returncode == 0

    def task(*args: str) -> dict[str, Any]:
        done = world.wardian("--home", str(world.home.root), "message", "task", "--operator", "--to", "lead",
                             "--json", *args, "work")
        assert done.returncode == 0, done.stderr
        return dict(json.loads(done.stdout))

    def due_in(receipt: dict[str, Any]) -> int | None:
        return None if receipt["deadline_at"] is None else receipt["deadline_at"] - receipt["created_at"]

    assert due_in(task()) == 45 * 60_000
    assert due_in(task("--deadline", "1h30m")) == 90 * 60_000
    bad = world.wardian("--home", str(world.home.root), "message", "task", "--operator", "--to", "lead",
                        "--deadline", "0s", "work")
    assert bad.returncode == 2
    assert "invalid_arguments" in bad.stderr
    assert "1s..7d" in bad.stderr
    world.file.write_text(plain, encoding="utf-8")
    assert world.wardian("up", "-f", str(world.file)).returncode == 0
    assert due_in(task()) is None
    assert world.wardian("down", "-f", str(world.file)).returncode == 0


def test_one_agent_s_failed_start_is_its_own_and_the_others_start(world: World) -> None:
    world.write_team({"lead": {"provider": "codex"}, "worker": {"provider": "opencode", "auth": "nobody"}})
    done = world.wardian("up", "-f", str(world.file))
    assert done.returncode == 9, done.stdout + done.stderr  # not_signed_in
    assert "worker: not_signed_in" in done.stderr
    assert "nobody" in done.stderr
    code, result = world.up_json()
    assert code == 9
    agents = _by_name(result)
    assert agents["lead"]["action"] == "unchanged"
    assert agents["lead"]["status"] in ("idle", "starting")
    assert agents["worker"]["action"] == "failed"
    assert agents["worker"]["error"]["code"] == "not_signed_in"

    # A workspace cannot change in place: refused with the fix, and the running agent is left as it was. A web
    # console the running app was started without is named as such.
    elsewhere = world.run.root / "elsewhere"
    elsewhere.mkdir()
    world.write_team({"lead": {"provider": "codex", "workspace": elsewhere}}, console="127.0.0.1:0")
    refused = world.wardian("up", "-f", str(world.file))
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert "workspace cannot change" in refused.stderr
    assert "`wardian agent remove lead`" in refused.stderr
    assert "the running app serves no web console" in refused.stderr
    code, result = world.up_json()
    assert code == 2
    assert _by_name(result)["lead"]["action"] == "refused"
    assert _by_name(result)["lead"]["generation"] == agents["lead"]["generation"]
    down = world.wardian("down", "-f", str(world.file))
    assert down.returncode == 0, down.stderr
    assert world.tree.members() == []


def test_on_a_terminal_each_agent_has_one_line_rewritten_in_place(world: World) -> None:
    world.write_team({"lead": {"provider": "codex"}, "worker": {"provider": "claude"}})
    terminal = open_terminal([*wardian_cmd(), "up", "-f", str(world.file)], {**world.env, "TERM": "xterm"},
                             rows=40, cols=150)
    def tick() -> None:
        threading.Event().wait(0.1)

    try:
        wait_for_text(terminal, "CONVERSATION", tick, rounds=6000)
        for _ in range(600):  # the table is the end: `up` exits right after it
            if not terminal.is_alive():
                break
            tick()
    finally:
        status = terminal.close()  # reads the pty to its end first
    screen = terminal.text()
    assert status == 0, screen
    lines = screen.splitlines()
    progress = lines[1:lines.index("")]  # after "app started for ...", up to the blank line before the table
    assert [line.split()[:2] for line in progress] == [["lead", "added"], ["worker", "added"]], screen
    assert "waiting" not in screen
    assert "starting" not in "\n".join(progress).replace("(starting", "")
    down = world.wardian("down", "-f", str(world.file))
    assert down.returncode == 0, down.stderr
    assert world.tree.members() == []


@pytest.mark.fast
def test_a_broken_file_changes_nothing_not_even_the_home(tmp_path: Path) -> None:
    home = tmp_path / "home"
    file = tmp_path / "wardian.toml"
    file.write_text(f'[team]\nhome = {json.dumps(str(home))}\n\n[agents.lead]\nprovider = "codex"\n'
                    'mode = "sideways"\n\n[agents.worker]\nprovider = "nope"\n', encoding="utf-8")
    for command in ("up", "down", "status"):
        done = subprocess.run([*wardian_cmd(), command, "-f", str(file)], capture_output=True, text=True,
                              encoding="utf-8", timeout=120, check=False)
        assert done.returncode == 2, done.stderr
        assert f"{file}:6: agents.lead.mode" in done.stderr, done.stderr
        assert f"{file}:9:" in done.stderr, done.stderr
        assert not home.exists()


@pytest.mark.fast
def test_status_and_down_without_an_app_say_so_and_create_nothing(tmp_path: Path) -> None:
    home = tmp_path / "home"
    file = tmp_path / "wardian.toml"
    file.write_text(f'[team]\nhome = {json.dumps(str(home))}\n\n[agents.lead]\nprovider = "codex"\n\n'
                    '[agents.worker]\nprovider = "claude"\nauth = "work"\n', encoding="utf-8")

    def wardian(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*wardian_cmd(), *args, "-f", str(file)], capture_output=True, text=True,
                              encoding="utf-8", timeout=120, check=False)

    status = wardian("status")
    assert status.returncode == 3, status.stderr
    assert f"app not running for {home}" in status.stdout
    assert [line.split()[:4] for line in status.stdout.splitlines()[2:]] == [
        ["lead", "codex", "-", "default"], ["worker", "claude", "-", "work"]]
    shown = json.loads(wardian("status", "--json").stdout)
    assert shown["running"] is False
    assert [(a["name"], a["status"], a["auth"]) for a in shown["agents"]] == [("lead", None, None),
                                                                          ("worker", None, "work")]
    down = wardian("down")
    assert down.returncode == 0, down.stderr
    assert "nothing to stop" in down.stdout
    assert not home.exists()
