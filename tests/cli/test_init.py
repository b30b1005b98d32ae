"""`wardian init`: writes a team file that loads, refuses to overwrite one without --force, and refuses unknown
providers; nothing is written when it refuses."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import wardian
from wardian.team import load_team
from wardian.team.schema import SCHEMA_FILE

pytestmark = pytest.mark.fast


def init(cwd: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("WARDIAN_")}
    return subprocess.run([sys.executable, "-m", "wardian.cli", *argv], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=60, check=False)


def test_init_writes_wardian_toml_here_with_a_codex_lead_and_worker(tmp_path: Path) -> None:
    proc = init(tmp_path, "init")
    assert proc.returncode == 0, proc.stderr
    path = tmp_path / "wardian.toml"
    assert proc.stdout == f"wrote {path}: lead (codex), worker (codex); edit it, then `wardian up`\n"
    team = load_team(path, environ={})
    assert [(a.name, a.provider) for a in team.agents] == [("lead", "codex"), ("worker", "codex")]
    assert team.agents[0].workspace == tmp_path.resolve()
    assert team.home == tmp_path / ".wardian"
    assert not team.home.exists()  # writing the file starts and creates nothing else
    assert sorted(p.name for p in tmp_path.iterdir()) == ["wardian.toml"]


def test_init_writes_the_notify_command_commented_and_uncommented_it_loads(tmp_path: Path) -> None:
    """docs/guide/approvals.md#notifications: the file shows the key, off until the person turns it on."""
    assert init(tmp_path, "init").returncode == 0
    path = tmp_path / "wardian.toml"
    text = path.read_text(encoding="utf-8")
    assert '\n# notify = ["notify-send", "wardian"]\n' in text
    assert load_team(path, environ={}).notify is None
    path.write_text(text.replace('# notify = ["notify-send"', 'notify = ["notify-send"'), encoding="utf-8")
    assert load_team(path, environ={}).notify == ("notify-send", "wardian")


def test_two_providers_make_a_lead_of_the_first_and_a_worker_of_the_second(tmp_path: Path) -> None:
    proc = init(tmp_path, "--json", "init", "--providers", "claude,opencode", "team.toml")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == {"path": str(tmp_path / "team.toml"), "agents": [
        {"name": "lead", "provider": "claude"}, {"name": "worker", "provider": "opencode"}]}
    team = load_team(tmp_path / "team.toml", environ={})
    assert [(a.name, a.provider, a.approve_tools) for a in team.agents] == [
        ("lead", "claude", ("followup_task", "reply", "send_message")), ("worker", "opencode", ())]


def test_an_existing_file_is_kept_unless_force(tmp_path: Path) -> None:
    path = tmp_path / "wardian.toml"
    path.write_text("# mine\n", encoding="utf-8")
    proc = init(tmp_path, "init")
    assert proc.returncode == 2
    assert proc.stderr == (f"wardian: invalid_arguments: {path} already exists; nothing was changed (pass --force to "
                           "overwrite it) (allowed: a new file, or --force)\n")
    assert path.read_text(encoding="utf-8") == "# mine\n"
    assert init(tmp_path, "init", "--force").returncode == 0
    assert load_team(path, environ={}).agents
    assert sorted(p.name for p in tmp_path.iterdir()) == ["wardian.toml"]  # no temporary file left


def test_a_dangling_symlink_is_not_followed_or_replaced(tmp_path: Path) -> None:
    (tmp_path / "wardian.toml").symlink_to(tmp_path / "elsewhere.toml")
    assert init(tmp_path, "init").returncode == 2
    assert not (tmp_path / "elsewhere.toml").exists()


@pytest.mark.parametrize(("argv", "message"), [
    (("init", "--providers", "codex,goose"),
     "wardian: invalid_arguments: --providers names no provider: 'goose' (allowed: one to 7 of codex, opencode, "
     "claude, qwen, gemini, pi, acp, comma-separated (the first is the lead's))\n"),
    (("init", "--providers", ""),
     "wardian: invalid_arguments: --providers names no provider: '' (allowed: one to 7 of codex, opencode, claude, "
     "qwen, gemini, pi, acp, comma-separated (the first is the lead's))\n"),
    (("init", "--providers", "codex,codex,codex,codex,codex,codex,codex,codex"),
     "wardian: invalid_arguments: --providers names 8 agents' providers; at most 7 (allowed: one to 7 of codex, "
     "opencode, claude, qwen, gemini, pi, acp, comma-separated (the first is the lead's))\n"),
])
def test_unknown_providers_are_refused_and_nothing_is_written(tmp_path: Path, argv: tuple[str, ...],
                                                             message: str) -> None:
    proc = init(tmp_path, *argv)
    assert (proc.returncode, proc.stderr) == (2, message)
    assert list(tmp_path.iterdir()) == []


def test_a_directory_or_a_missing_parent_is_refused(tmp_path: Path) -> None:
    (tmp_path / "d").mkdir()
    proc = init(tmp_path, "init", "d")
    assert proc.returncode == 2
    assert f"{tmp_path / 'd'} is a directory" in proc.stderr
    proc = init(tmp_path, "init", "nowhere/wardian.toml")
    assert proc.returncode == 2
    assert f"the directory {tmp_path / 'nowhere'} does not exist" in proc.stderr
    assert [p.name for p in tmp_path.iterdir()] == ["d"]


def test_the_team_file_names_no_path_of_the_machine_that_wrote_it(tmp_path: Path) -> None:
    """The first line was `#:schema file:///…/site-packages/…`, one machine's path, in a file people commit. Now the
    file holds no path of this machine (nor of the installed package) and says how to get the schema."""
    assert init(tmp_path, "init", "--providers", "codex,opencode,claude").returncode == 0
    text = (tmp_path / "wardian.toml").read_text(encoding="utf-8")
    for machine_path in ("file://", str(tmp_path), sys.prefix, "site-packages", str(Path(wardian.__file__).parent)):
        assert machine_path not in text, machine_path
    assert "wardian init --schema" in text
    assert sorted(p.name for p in tmp_path.iterdir()) == ["wardian.toml"]


def test_schema_writes_the_schema_beside_the_file_and_points_at_it_relatively(tmp_path: Path) -> None:
    """`--schema`: `wardian.schema.json` beside the team file, whose first line is `#:schema ./wardian.schema.json`
    (taplo reads a relative path from the file's folder), so the pair works on any machine that checks it out."""
    proc = init(tmp_path, "--json", "init", "--schema")
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert (result["schema"], result["written"]) == (str(tmp_path / "wardian.schema.json"), True)
    text = (tmp_path / "wardian.toml").read_text(encoding="utf-8")
    assert text.splitlines()[0] == "#:schema ./wardian.schema.json"
    assert (tmp_path / "wardian.schema.json").read_text(encoding="utf-8") == SCHEMA_FILE.read_text(encoding="utf-8")
    assert load_team(tmp_path / "wardian.toml", environ={}).agents
    # Again on the existing file: the team file is kept, the schema brought up to date.
    (tmp_path / "wardian.schema.json").write_text('{"title": "wardian team file (wardian.toml)"}', encoding="utf-8")
    again = init(tmp_path, "init", "--schema")
    assert again.returncode == 0, again.stderr
    assert (tmp_path / "wardian.toml").read_text(encoding="utf-8") == text
    assert (tmp_path / "wardian.schema.json").read_text(encoding="utf-8") == SCHEMA_FILE.read_text(encoding="utf-8")
    assert "kept" in again.stdout


def test_schema_never_replaces_a_file_of_that_name_that_is_not_wardian_s(tmp_path: Path) -> None:
    (tmp_path / "wardian.schema.json").write_text('{"mine": true}\n', encoding="utf-8")
    proc = init(tmp_path, "init", "--schema")
    assert proc.returncode == 2
    assert "is not a wardian team file's schema" in proc.stderr
    assert (tmp_path / "wardian.schema.json").read_text(encoding="utf-8") == '{"mine": true}\n'
    assert sorted(p.name for p in tmp_path.iterdir()) == ["wardian.schema.json"]  # nor the team file


def test_the_help_of_providers_names_every_provider_init_takes(tmp_path: Path) -> None:
    """`wardian init --help` lists what `--providers` accepts (wardian.model.PROVIDERS), none left out."""
    from wardian.model import PROVIDERS

    proc = init(tmp_path, "init", "--help")
    listed = " ".join(proc.stdout.split("--providers P[,P...]", 2)[-1].split("--force")[0].split())
    assert proc.returncode == 0
    assert [p for p in PROVIDERS if f"{p}," not in listed and f"{p})" not in listed] == []
