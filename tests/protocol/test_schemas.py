"""The checked-in JSON Schemas of the app methods and the MCP tools are what the method table and the tool table
give now: a change of the protocol shows in the schema files of the same change."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from wardian.protocol.methods import METHODS
from wardian.protocol.schemas.generate import REGENERATE, SCHEMA_DIR, drift, main, schemas, write
from wardian.protocol.tools import TOOLS

pytestmark = pytest.mark.fast  # the fast tier (scripts/check test-fast)


def test_the_checked_in_schemas_are_the_generated_ones() -> None:
    drifted = drift()
    assert not drifted, f"these schema files drifted from the protocol: {', '.join(drifted)}; regenerate with " \
                        f"`{REGENERATE}` and commit them"


def test_every_method_and_tool_has_its_schemas() -> None:
    names = set(schemas())
    for method in METHODS:
        stem = "method." + method.replace("/", ".")
        assert {f"{stem}.params.json", f"{stem}.result.json"} <= names, method
    for tool in TOOLS:
        assert {f"tool.{tool.name}.input.json", f"tool.{tool.name}.output.json"} <= names, tool.name
    assert len(names) == 2 * (len(METHODS) + len(TOOLS))


def test_a_tool_input_schema_is_the_one_tools_list_shows() -> None:
    for tool in TOOLS:
        document = json.loads((SCHEMA_DIR / f"tool.{tool.name}.input.json").read_text(encoding="utf-8"))
        assert {k: v for k, v in document.items() if not k.startswith("$")} == tool.definition()["inputSchema"]


def test_the_output_is_deterministic_sorted_and_ends_with_a_newline(tmp_path: Path) -> None:
    write(tmp_path)
    first = {p.name: p.read_bytes() for p in tmp_path.glob("*.json")}
    assert write(tmp_path) == []
    assert first == {p.name: p.read_bytes() for p in tmp_path.glob("*.json")}
    for name, data in first.items():
        text = data.decode("utf-8")
        assert text.endswith("}\n"), name
        assert text == json.dumps(json.loads(text), indent=2, sort_keys=True, ensure_ascii=False) + "\n", name


def test_check_exits_1_on_a_changed_a_missing_or_a_stale_file(tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    write(tmp_path)
    assert main(["--check", "--dir", str(tmp_path)]) == 0
    changed = tmp_path / "method.message.send.params.json"
    changed.write_text(changed.read_text(encoding="utf-8").replace("256", "257"), encoding="utf-8")
    (tmp_path / "tool.reply.output.json").unlink()
    (tmp_path / "method.message.ask.params.json").write_text("{}\n", encoding="utf-8")
    capsys.readouterr()
    assert main(["--check", "--dir", str(tmp_path)]) == 1
    out = capsys.readouterr().out
    for name in ("method.message.send.params.json", "tool.reply.output.json", "method.message.ask.params.json"):
        assert f"drifted: {name}" in out
    assert f"regenerate with: {REGENERATE}" in out
    assert main(["--dir", str(tmp_path)]) == 0
    assert drift(tmp_path) == []
