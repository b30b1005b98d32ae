"""The scripted-model Codex settings as config.toml and as `-c` overrides, and the allowlisted child env."""

from __future__ import annotations

import stat
import sys
from pathlib import Path

import pytest
import tomlkit

from wardian_harness.providers.codex_home import (
    DUMMY_API_KEY,
    ScriptedProvider,
    codex_env,
    codex_override_args,
    codex_overrides,
    write_codex_config,
)

pytestmark = pytest.mark.fast  # the fast tier (scripts/check test-fast)

PROVIDER = ScriptedProvider("http://127.0.0.1:9/agents/alice/v1")


def test_the_config_holds_the_verified_provider_settings(tmp_path: Path) -> None:
    """docs/providers/codex.md#running-offline-against-a-scripted-model: the config that works."""
    path = write_codex_config(tmp_path / "codex", PROVIDER)
    config = tomlkit.parse(path.read_text(encoding="utf-8")).unwrap()
    assert config == {
        "model": "mock-model", "model_provider": "mock", "approval_policy": "never", "sandbox_mode": "read-only",
        "model_providers": {"mock": {
            "name": "Wardian scripted model", "base_url": "http://127.0.0.1:9/agents/alice/v1",
            "wire_api": "responses", "env_key": "WARDIAN_SCRIPTED_MODEL_KEY", "requires_openai_auth": False,
            "request_max_retries": 0, "stream_max_retries": 0, "stream_idle_timeout_ms": 30_000}},
        "features": {"plugins": False, "apps": False},
    }


def test_the_codex_home_is_private(tmp_path: Path) -> None:
    write_codex_config(tmp_path / "codex", PROVIDER)
    assert stat.S_IMODE((tmp_path / "codex").stat().st_mode) == 0o700


def test_writing_keeps_tables_it_does_not_own(tmp_path: Path) -> None:
    """Core writes `[mcp_servers.wardian]` (and trust entries) into the same file; those must survive."""
    home = tmp_path / "codex"
    home.mkdir()
    (home / "config.toml").write_text(
        'model = "gpt-old"\n\n[mcp_servers.wardian]\ncommand = "/bin/wardian"\nargs = ["mcp", "serve"]\n\n'
        '[projects."/w"]\ntrust_level = "trusted"\n\n[features]\nother = true\n', encoding="utf-8")
    write_codex_config(home, PROVIDER)
    write_codex_config(home, ScriptedProvider("http://127.0.0.1:10/agents/alice/v1"))
    config = tomlkit.parse((home / "config.toml").read_text(encoding="utf-8")).unwrap()
    assert config["mcp_servers"] == {"wardian": {"command": "/bin/wardian", "args": ["mcp", "serve"]}}
    assert config["projects"] == {"/w": {"trust_level": "trusted"}}
    assert config["features"] == {"other": True, "plugins": False, "apps": False}
    assert config["model"] == "mock-model"
    assert config["model_providers"]["mock"]["base_url"] == "http://127.0.0.1:10/agents/alice/v1"


def test_the_overrides_carry_the_same_settings_as_the_config(tmp_path: Path) -> None:
    """Each `-c key=value` is a dotted TOML key and a TOML value; together they equal the config file."""
    as_toml = "\n".join(codex_overrides(PROVIDER))
    written = write_codex_config(tmp_path / "codex", PROVIDER).read_text(encoding="utf-8")
    assert tomlkit.parse(as_toml).unwrap() == tomlkit.parse(written).unwrap()


def test_override_args_put_c_before_each_override() -> None:
    args = codex_override_args(PROVIDER)
    assert args[0::2] == ["-c"] * len(codex_overrides(PROVIDER))
    assert 'model="mock-model"' in args
    assert "model_providers.mock.requires_openai_auth=false" in args


def test_the_child_env_is_an_allowlist_with_private_homes(tmp_path: Path) -> None:
    """ACC-5, ACC-8: never inherit the developer's real homes or auth."""
    parent = {"PATH": "/usr/bin", "LANG": "C.UTF-8", "HOME": "/home/dev", "CODEX_HOME": "/home/dev/.codex",
              "OPENAI_API_KEY": "sk-real", "WARDIAN_HOME": "/home/dev/.wardian", "SSH_AUTH_SOCK": "/tmp/agent"}
    env = codex_env(tmp_path / "codex", home=tmp_path / "home", provider=PROVIDER, parent=parent,
                    extra={"RUST_LOG": "warn"})
    expected = {"PATH": "/usr/bin", "LANG": "C.UTF-8", "HOME": str(tmp_path / "home"),
                "CODEX_HOME": str(tmp_path / "codex"), "WARDIAN_SCRIPTED_MODEL_KEY": DUMMY_API_KEY, "RUST_LOG": "warn"}
    if sys.platform == "win32":
        expected["USERPROFILE"] = str(tmp_path / "home")
    assert env == expected
