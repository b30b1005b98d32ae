"""A Claude Code agent's `-c` settings (docs/guide/claude.md#settings): keys of its private settings.json (dotted
keys, TOML or JSON values), undone at the next start unless the person edited them since; secret `env.*` values go
to the process's environment, never to the file, and are masked wherever settings are shown."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from wardian import errors
from wardian.overrides import masked_setting
from wardian.providers.claude import settings
from wardian.providers.claude.provider import check_root_rule, shadowing

pytestmark = pytest.mark.fast

BASE_URL = "http://127.0.0.1:4010/agents/lead"


def apply(config_dir: Path, *overrides: str) -> settings.Settings:
    parsed = settings.parse(list(overrides))
    settings.apply(config_dir, parsed)
    return parsed


def read(config_dir: Path) -> dict[str, object]:
    return json.loads((config_dir / "settings.json").read_text(encoding="utf-8"))


def test_dotted_keys_with_toml_and_json_values_land_in_settings_json(tmp_path: Path) -> None:
    apply(tmp_path, 'model="claude-sonnet-5-5"', f'env.ANTHROPIC_BASE_URL="{BASE_URL}"',
          'permissions.allow=["Bash(git:*)", "mcp__wardian__send_message"]', 'permissions.deny=["Bash(rm:*)"]',
          'cleanupPeriodDays=7', 'hooks={"Stop": []}', 'includeCoAuthoredBy=false')
    assert read(tmp_path) == {
        "model": "claude-sonnet-5-5", "env": {"ANTHROPIC_BASE_URL": BASE_URL},
        "permissions": {"allow": ["Bash(git:*)", "mcp__wardian__send_message"], "deny": ["Bash(rm:*)"]},
        "cleanupPeriodDays": 7, "hooks": {"Stop": []}, "includeCoAuthoredBy": False}
    assert oct((tmp_path / "settings.json").stat().st_mode & 0o777) == "0o600"


def test_the_next_start_undoes_what_the_last_one_set_and_keeps_the_persons_own(tmp_path: Path) -> None:
    (tmp_path / "settings.json").write_text(json.dumps({"model": "opus", "theme": "dark"}), encoding="utf-8")
    apply(tmp_path, 'model="haiku"', 'env.ANTHROPIC_BASE_URL="http://127.0.0.1:1/x"', "permissions.allow=[]")
    assert read(tmp_path)["model"] == "haiku"
    apply(tmp_path, 'model="sonnet"')  # the base URL and the allow list are no longer the agent's settings
    assert read(tmp_path) == {"model": "sonnet", "theme": "dark"}
    apply(tmp_path)
    assert read(tmp_path) == {"model": "opus", "theme": "dark"}
    assert not (tmp_path / settings.JOURNAL).exists()


def test_a_value_the_person_edited_since_keeps_their_edit(tmp_path: Path) -> None:
    apply(tmp_path, 'model="haiku"', 'effortLevel="high"')
    doc = read(tmp_path)
    doc["model"] = "their-model"
    (tmp_path / "settings.json").write_text(json.dumps(doc), encoding="utf-8")
    apply(tmp_path)
    assert read(tmp_path) == {"model": "their-model"}


def test_a_secret_env_setting_goes_to_the_environment_not_the_file(tmp_path: Path) -> None:
    secret = "sk-ant-api03-settings-secret-0123456789"
    parsed = apply(tmp_path, f'env.ANTHROPIC_API_KEY="{secret}"', f'env.ANTHROPIC_BASE_URL="{BASE_URL}"',
                   'env={"CLAUDE_CODE_OAUTH_TOKEN": "tok-0123456789abcdef", "MCP_TIMEOUT": "60000"}')
    assert parsed.env == {"ANTHROPIC_API_KEY": secret, "CLAUDE_CODE_OAUTH_TOKEN": "tok-0123456789abcdef"}
    assert read(tmp_path) == {"env": {"MCP_TIMEOUT": "60000"}}  # the later whole-object `env` replaced the first
    for path in tmp_path.iterdir():
        assert secret not in path.read_text(encoding="utf-8")
        assert "tok-0123456789abcdef" not in path.read_text(encoding="utf-8")


@pytest.mark.parametrize("setting", ['env.ANTHROPIC_API_KEY="sk-ant-0123456789"',
                                     'env={"ANTHROPIC_AUTH_TOKEN": "tok-0123456789", "X": "1"}'])
def test_secret_settings_are_masked_where_settings_are_shown(setting: str) -> None:
    shown = masked_setting(setting)
    assert "0123456789" not in shown
    assert "********" in shown


@pytest.mark.parametrize(("setting", "says"), [
    ("model", "is not key=value"),
    ("model=sonnet}", "neither TOML nor JSON"),
    ("permissions.allow=[Bash(git:*)]", "neither TOML nor JSON"),
    ("env.ANTHROPIC_API_KEY=5", "must be a string"),
    ('env={"ANTHROPIC_API_KEY": ["a"]}', "must be a string"),
])
def test_bad_settings_are_refused_and_nothing_changes(tmp_path: Path, setting: str, says: str) -> None:
    apply(tmp_path, 'model="haiku"')
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    with pytest.raises(errors.InvalidArguments) as exc:
        apply(tmp_path, 'model="sonnet"', setting)
    assert says in exc.value.message
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before


def test_a_key_through_a_value_that_is_not_an_object_is_refused(tmp_path: Path) -> None:
    (tmp_path / "settings.json").write_text('{"model": "opus"}', encoding="utf-8")
    with pytest.raises(errors.InvalidArguments) as exc:
        apply(tmp_path, 'model.name="x"')
    assert "model is not an object" in exc.value.message
    assert read(tmp_path) == {"model": "opus"}


@pytest.mark.parametrize("text", ["{ not json", "[1, 2]"])
def test_a_settings_file_that_is_not_a_json_object_is_refused(tmp_path: Path, text: str) -> None:
    (tmp_path / "settings.json").write_text(text, encoding="utf-8")
    with pytest.raises(errors.InvalidArguments) as exc:
        apply(tmp_path, 'model="x"')
    assert "fix it first, nothing was changed" in exc.value.message
    assert (tmp_path / "settings.json").read_text(encoding="utf-8") == text


@pytest.mark.parametrize(("settings_json", "euid", "refused"), [
    ({"permissions": {"defaultMode": "bypassPermissions"}}, 0, True),
    ({"permissions": {"defaultMode": "bypassPermissions"}, "env": {"IS_SANDBOX": "1"}}, 0, False),
    ({"permissions": {"defaultMode": "bypassPermissions"}}, 1000, False),
    ({"permissions": {"defaultMode": "acceptEdits"}}, 0, False),
    ({"permissions": "bypassPermissions"}, 0, False),
])
def test_bypass_permissions_as_root_needs_is_sandbox(settings_json: dict[str, object], euid: int,
                                                     refused: bool) -> None:
    """Claude Code run as root exits at once under bypassPermissions unless IS_SANDBOX=1: said before the start."""
    if refused:
        with pytest.raises(errors.InvalidArguments) as exc:
            check_root_rule(settings_json, {}, euid)
        assert "env.IS_SANDBOX" in exc.value.message
    else:
        check_root_rule(settings_json, {}, euid)


def test_settings_that_bring_their_own_credential_are_named_never_shown() -> None:
    secret = "sk-ant-from-a-setting-0001"
    assert shadowing({}, {}) == []
    assert shadowing({"env": {"MCP_TIMEOUT": "1"}}, {}) == []
    named = shadowing({"env": {"ANTHROPIC_AUTH_TOKEN": "x"}, "apiKeyHelper": "pass show k"},
                      {"ANTHROPIC_API_KEY": secret})
    assert named == ["env.ANTHROPIC_API_KEY", "env.ANTHROPIC_AUTH_TOKEN", "apiKeyHelper"]
    assert secret not in " ".join(named)
