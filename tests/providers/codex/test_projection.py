"""Launch-settings projection for attached agents (ATT-3; decision 0009)."""

from __future__ import annotations

from pathlib import Path

import tomlkit

from wardian.providers.codex import projection

USER_CONFIG = '''# my settings
model = "user-model"

[projects."/keep"]
trust_level = "trusted"
'''


def test_projection_is_restored_keeping_user_edits(tmp_path: Path) -> None:
    """ATT-3: after attachment checks, Wardian restores unchanged projected values while preserving user edits."""
    config = tmp_path / "config.toml"
    config.write_text(USER_CONFIG, encoding="utf-8")
    projection.project(tmp_path, ['model="projected"', 'projects."/ws".trust_level="trusted"', "sandbox_mode=\"x\""])
    doc = tomlkit.parse(config.read_text(encoding="utf-8"))
    assert doc["model"] == "projected"
    assert doc["projects"]["/ws"]["trust_level"] == "trusted"
    doc["sandbox_mode"] = "user-edit"  # the person edits a projected key meanwhile
    config.write_text(tomlkit.dumps(doc), encoding="utf-8")
    assert projection.recover(tmp_path) is True
    text = config.read_text(encoding="utf-8")
    restored = tomlkit.parse(text)
    assert restored["model"] == "user-model"
    assert "/ws" not in restored["projects"]
    assert restored["projects"]["/keep"]["trust_level"] == "trusted"
    assert restored["sandbox_mode"] == "user-edit"
    assert "# my settings" in text
    assert projection.recover(tmp_path) is False  # nothing left to restore


def test_an_interrupted_projection_is_recovered_at_the_next_preparation(tmp_path: Path) -> None:
    """ATT-3: an interrupted projection is recovered on the next managed preparation; removed settings must not
    remain enabled merely because an earlier launch used them."""
    config = tmp_path / "config.toml"
    config.write_text(USER_CONFIG, encoding="utf-8")
    projection.project(tmp_path, ['projects."/old".trust_level="trusted"'])
    # The app died here. The next launch no longer asks for /old:
    projection.project(tmp_path, ['model="next"'])
    doc = tomlkit.parse(config.read_text(encoding="utf-8"))
    assert "/old" not in doc["projects"]
    assert doc["model"] == "next"
    projection.recover(tmp_path)
    assert tomlkit.parse(config.read_text(encoding="utf-8"))["model"] == "user-model"
