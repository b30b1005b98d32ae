"""Launch-setting overrides (`-c key=value`), parsed in one place for every provider (#12)."""

from __future__ import annotations

import pytest

from wardian import errors
from wardian.overrides import MAX_OVERRIDE_CHARS, Override, check_override, parse_override
from wardian.protocol.app import parse_params


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
