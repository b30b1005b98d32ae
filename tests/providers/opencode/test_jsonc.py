"""Round-trip JSONC edits (CFG-2): comments, formatting and other entries of a person's opencode.json survive."""

from __future__ import annotations

import json

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from wardian.providers.opencode import jsonc

USER = """{
  // my provider
  "$schema": "https://opencode.ai/config.json",
  "model": "anthropic/claude", /* keep me */
  "mcp": {
    "mine": { "type": "local", "command": ["x"], "enabled": false },
  },
}
"""


def test_setting_a_new_nested_value_keeps_every_other_byte() -> None:
    out = jsonc.set_value(USER, ("mcp", "wardian"), {"type": "local", "command": ["w", "mcp", "serve"]})
    assert "// my provider" in out
    assert "/* keep me */" in out
    assert '"mine": { "type": "local", "command": ["x"], "enabled": false }' in out
    value = jsonc.loads(out)
    assert value["mcp"]["wardian"] == {"type": "local", "command": ["w", "mcp", "serve"]}
    assert value["mcp"]["mine"]["enabled"] is False
    assert out.startswith(USER[:USER.index('"mine"')])


def test_replacing_a_value_changes_only_its_bytes() -> None:
    out = jsonc.set_value(USER, ("model",), "wardian/scripted")
    assert out == USER.replace('"anthropic/claude"', '"wardian/scripted"')


def test_creating_missing_objects_and_an_empty_file() -> None:
    assert jsonc.loads(jsonc.set_value("", ("a", "b"), 1)) == {"a": {"b": 1}}
    assert jsonc.loads(jsonc.set_value("{}", ("a",), [1, 2])) == {"a": [1, 2]}
    commented = jsonc.set_value("{\n  // only a comment\n}\n", ("k",), True)
    assert "// only a comment" in commented
    assert jsonc.loads(commented) == {"k": True}


def test_deleting_a_member_keeps_its_neighbours_and_comments() -> None:
    out = jsonc.delete(USER, ("model",))
    assert jsonc.loads(out) == {k: v for k, v in jsonc.loads(USER).items() if k != "model"}
    assert "// my provider" in out
    assert jsonc.delete(USER, ("absent",)) == USER
    inner = jsonc.delete(USER, ("mcp", "mine"))
    assert jsonc.loads(inner)["mcp"] == {}


@pytest.mark.parametrize("bad", ['{"a": }', '{"a" 1}', "[1, 2", '{"a": 1} x', "/* open", '{a: 1}', "{'a': 1}", ""])
def test_what_is_not_jsonc_is_an_error_with_a_position(bad: str) -> None:
    with pytest.raises(jsonc.JsoncError):
        jsonc.loads(bad)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-10**6, 10**6) | st.text(max_size=8),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=5), children, max_size=3),
    max_leaves=10)


@given(st.dictionaries(st.text(max_size=5), json_values, max_size=4), st.text(min_size=1, max_size=5), json_values)
def test_any_json_object_edited_reads_back_as_json_would(doc: dict, key: str, value: object) -> None:
    """Whatever JSON object a person wrote, setting then deleting a nested key reads back as plain JSON would."""
    assume(isinstance(doc.get("outer", {}), dict))
    text = json.dumps(doc, indent=2)
    assert jsonc.loads(text) == doc
    edited = jsonc.set_value(text, ("outer", key), value)
    outer = {**doc.get("outer", {}), key: value}
    assert jsonc.loads(edited) == {**doc, "outer": outer}
    remaining = {k: v for k, v in outer.items() if k != key}
    assert jsonc.loads(jsonc.delete(edited, ("outer", key))) == {**doc, "outer": remaining}


def test_setting_inside_a_value_that_is_not_an_object_is_an_error() -> None:
    with pytest.raises(jsonc.JsoncError):
        jsonc.set_value('{"a": 1}', ("a", "b"), 2)
