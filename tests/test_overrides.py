"""Launch-setting overrides (`-c key=value`), parsed in one place for every provider (decision 0014)."""

from __future__ import annotations

import pytest

from wardian import errors
from wardian.overrides import MAX_OVERRIDE_CHARS, Override, ValueSyntax, check_override, parse_override
from wardian.protocol.methods import parse_params

pytestmark = pytest.mark.fast  # the fast tier (scripts/check test-fast)


def test_overrides_parse_like_codex_c() -> None:
    """`codex -c`: a dotted path (segments may be quoted) and a TOML value, else a literal string."""
    assert parse_override('model="o3"') == Override(("model",), "o3")
    assert parse_override('projects."/a.b/c".trust_level="trusted"') == Override(
        ("projects", "/a.b/c", "trust_level"), "trusted")
    assert parse_override("x.y=5") == Override(("x", "y"), 5)
    assert parse_override("flag = true".replace(" = ", "=")) == Override(("flag",), True)
    assert parse_override("list=[1, 2]") == Override(("list",), [1, 2])
    assert parse_override("raw=not toml at all") == Override(("raw",), "not toml at all")
    assert parse_override("empty=") == Override(("empty",), "")


@pytest.mark.parametrize("bad", ["novalue", '"unterminated.key=1', ".x=1", "x..y=1", 'x.""=1', "sp ace=1",
                                 "=1", "a.b.=1", "x" * (MAX_OVERRIDE_CHARS + 1) + "=1"])
def test_a_malformed_override_is_a_clear_error(bad: str) -> None:
    """Bad input gets a clear error naming the field and what is allowed."""
    with pytest.raises(errors.InvalidArguments) as exc:
        parse_override(bad)
    assert exc.value.field == "config"
    assert "key=value" in (exc.value.allowed or "")


def test_the_app_validates_overrides_with_the_same_parser() -> None:
    """One parser: what `agent/start` refuses is exactly what `parse_override` refuses."""
    assert check_override('model="o3"') == 'model="o3"'
    with pytest.raises(errors.InvalidArguments) as exc:
        parse_params("agent/start", {"agent": "a", "config": ["novalue"]})
    assert exc.value.field == "config"
    params = parse_params("agent/start", {"agent": "a", "config": ['projects."/w".trust_level="trusted"']})
    assert list(params.config) == ['projects."/w".trust_level="trusted"']  # type: ignore[attr-defined]


def test_for_opencode_a_value_that_is_not_toml_is_json() -> None:
    """OpenCode's config is JSON, so what its users paste is JSON: an object stays an object (previously it was
    passed on as a string, and OpenCode refused its config)."""
    got = parse_override('provider={"mock": {"npm": "@ai-sdk/openai-compatible", "models": {"m": {}}}}',
                         ValueSyntax.TOML_OR_JSON)
    assert got == Override(("provider",), {"mock": {"npm": "@ai-sdk/openai-compatible", "models": {"m": {}}}})
    assert parse_override('x=["a", 1, true, null]', ValueSyntax.TOML_OR_JSON).value == ["a", 1, True, None]
    assert parse_override("x=-1.5e3", ValueSyntax.TOML_OR_JSON).value == -1500.0
    assert parse_override('x={ a = 1 }', ValueSyntax.TOML_OR_JSON).value == {"a": 1}  # TOML stays TOML
    assert parse_override('x="text"', ValueSyntax.TOML_OR_JSON).value == "text"


@pytest.mark.parametrize("raw", ["gpt-4", "not toml at all", "{'single': 1}", "NaN", "[1,", ""])
def test_for_opencode_a_value_that_is_neither_toml_nor_json_is_refused_naming_the_key(raw: str) -> None:
    with pytest.raises(errors.InvalidArguments) as exc:
        parse_override(f"provider.x.options.baseURL={raw}", ValueSyntax.TOML_OR_JSON)
    assert exc.value.field == "config"
    assert "provider.x.options.baseURL" in exc.value.message
    assert "TOML" in (exc.value.allowed or "")
    assert "JSON" in (exc.value.allowed or "")


def test_for_codex_a_value_that_is_not_toml_stays_a_string_as_codex_takes_it() -> None:
    assert parse_override("model=gpt-4").value == "gpt-4"
    assert parse_override('provider={"a": 1}').value == '{"a": 1}'  # `codex -c` does the same
