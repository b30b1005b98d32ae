"""`wardian opencode register` and managed registration in an agent's opencode.json
(docs/guide/opencode.md#registration), with the same rules as Codex registration: user entries, comments (JSONC) and
`enabled: false` kept; a `wardian` entry that is not ours is `registration_conflict` and nothing changes; no permission
setting is written."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import orjson
import pytest

from tests.conftest import AppHandle
from wardian import errors
from wardian.home import Home
from wardian.providers.opencode import jsonc, registration

USER_CONFIG = """{
  // My OpenCode settings: keep this comment.
  "$schema": "https://opencode.ai/config.json",
  "model": "anthropic/claude-sonnet", /* trailing comment */
  "mcp": {
    // the docs server is off for now
    "docs": { "type": "local", "command": ["docs-mcp", "--stdio"], "enabled": false },
  },
  "permission": { "bash": "ask" },
}
"""


def register(app: AppHandle, config_dir: Path, agent: str, *extra: str) -> Any:
    return app.cli("opencode", "register", "--config-dir", str(config_dir), "--agent", agent, *extra)


def test_register_writes_our_entry_and_keeps_every_user_line(app: AppHandle, tmp_path: Path) -> None:
    agent, _ = app.add_agent("reviewer", "opencode")
    config_dir = tmp_path / "oc"
    config_dir.mkdir()
    (config_dir / "opencode.json").write_text(USER_CONFIG, encoding="utf-8")
    out = register(app, config_dir, "reviewer", "--json")
    assert out.returncode == 0, out.stderr
    summary = orjson.loads(out.stdout)
    assert summary["created"] is True
    text = (config_dir / "opencode.json").read_text(encoding="utf-8")
    for line in USER_CONFIG.splitlines()[:7]:  # everything up to the docs entry, byte for byte
        assert line in text, line
    assert '"permission": { "bash": "ask" }' in text
    entry = jsonc.loads(text)["mcp"]["wardian"]
    assert entry["type"] == "local"
    assert Path(entry["command"][0]).is_absolute()
    assert os.access(entry["command"][0], os.X_OK)
    assert entry["command"][1:] == ["mcp", "serve"]
    assert entry["environment"]["WARDIAN_HOME"] == str(app.home.root)
    assert "permission" not in entry
    assert jsonc.loads(text)["permission"] == {"bash": "ask"}  # no permission or approval setting written
    listed = app.call("agent/list", {"session": entry["environment"]["WARDIAN_SESSION_ID"]})
    assert listed["caller"]["uuid"] == agent["uuid"]
    assert oct((config_dir / "opencode.json").stat().st_mode & 0o777) == "0o600"
    # The secret is never printed; the equivalent block names where it comes from.
    assert entry["environment"]["WARDIAN_SESSION_ID"].encode() not in out.stdout + out.stderr
    plain = register(app, config_dir, "reviewer")
    assert b"agent env reviewer" in plain.stdout


def test_our_disabled_entry_stays_disabled_and_keeps_its_extra_settings(app: AppHandle, tmp_path: Path) -> None:
    app.add_agent("reviewer", "opencode")
    config_dir = tmp_path / "oc"
    assert register(app, config_dir, "reviewer").returncode == 0
    path = config_dir / "opencode.json"
    text = jsonc.set_value(path.read_text(encoding="utf-8"), ("mcp", "wardian", "enabled"), False)
    text = jsonc.set_value(text, ("mcp", "wardian", "environment", "EXTRA"), "1")
    path.write_text(text, encoding="utf-8")
    out = register(app, config_dir, "reviewer", "--json")
    assert out.returncode == 0, out.stderr
    assert orjson.loads(out.stdout)["enabled"] is False
    entry = jsonc.loads(path.read_text(encoding="utf-8"))["mcp"]["wardian"]
    assert entry["enabled"] is False
    assert entry["environment"]["EXTRA"] == "1"


def test_an_occupied_entry_is_a_conflict_and_nothing_changes(app: AppHandle, tmp_path: Path) -> None:
    app.add_agent("reviewer", "opencode")
    config_dir = tmp_path / "oc"
    config_dir.mkdir()
    theirs = json.dumps({"mcp": {"wardian": {"type": "remote", "url": "https://example.invalid/mcp"}}}, indent=2)
    (config_dir / "opencode.json").write_text(theirs, encoding="utf-8")
    out = register(app, config_dir, "reviewer")
    assert out.returncode == 2
    assert b"registration_conflict" in out.stderr
    assert (config_dir / "opencode.json").read_text(encoding="utf-8") == theirs


def test_bad_input_is_a_clear_error_and_nothing_changes(app: AppHandle, tmp_path: Path) -> None:
    app.add_agent("reviewer", "opencode")
    config_dir = tmp_path / "oc"
    config_dir.mkdir()
    (config_dir / "opencode.json").write_text("{ not json", encoding="utf-8")
    out = register(app, config_dir, "reviewer")
    assert out.returncode == 2
    assert b"not valid JSONC" in out.stderr
    assert (config_dir / "opencode.json").read_text(encoding="utf-8") == "{ not json"
    missing = register(app, tmp_path / "other", "nobody")
    assert missing.returncode == 4
    assert b"unknown_agent" in missing.stderr
    assert not (tmp_path / "other" / "opencode.json").exists()
    home = Path.home() / ".config" / "opencode"
    refused = register(app, home, "reviewer")
    assert refused.returncode == 2
    assert b"global OpenCode config" in refused.stderr


def test_a_tool_grant_is_refused_not_ignored_and_nothing_is_written(tmp_path: Path) -> None:
    """OpenCode asks before no tool, so a grant would mean nothing: refused, as `Capabilities.tool_grants` says of a
    provider without an approval step (every provider's registration takes grants: wardian.providers.registration).
    """
    with pytest.raises(errors.InvalidArguments) as refused:
        registration.register_session(tmp_path / "oc", Home(tmp_path / "home"), "a-session", {"name": "r"},
                                      ("reply",))
    assert refused.value.field == "approve_tools"
    assert not (tmp_path / "oc").exists()
