"""Codex version eligibility (VER-2)."""

from __future__ import annotations

import pytest

from wardian import errors
from wardian.providers.codex.compat import CodexVersion, capabilities, parse_codex_version


@pytest.mark.parametrize(("text", "steering"), [
    ("codex-cli 0.154.0", False),
    ("codex-cli 0.154.0-alpha.6", False),
    ("codex-cli 0.159.1", False),
    ("codex-cli 0.159.2", True),
    ("codex-cli 0.171.0", True),
    ("codex-cli 1.0.0", True),
])
def test_eligible_versions_and_their_steering(text: str, steering: bool) -> None:
    """VER-2, DLV-5: stable 0.154.0 or later, the 0.154.0-alpha.6 exception; structured steering from 0.159.2."""
    caps = capabilities(parse_codex_version(text))
    assert caps.inject
    assert caps.interrupt
    assert caps.exact_completion
    assert caps.steer is steering


@pytest.mark.parametrize("text", ["codex-cli 0.153.9", "codex-cli 0.154.0-alpha.5", "codex-cli 0.171.0-beta.1",
                                  "codex-cli 0.1.0"])
def test_ineligible_versions_are_a_clear_error(text: str) -> None:
    """VER-2: an explicit compatibility exception for the tested 0.154.0-alpha.6, nothing wider."""
    with pytest.raises(errors.Unsupported) as exc:
        capabilities(parse_codex_version(text))
    assert "0.154.0" in exc.value.message


def test_unreadable_version_output_is_an_error() -> None:
    with pytest.raises(errors.Unsupported):
        parse_codex_version("command not found")


def test_versions_order_by_number() -> None:
    assert CodexVersion.parse("0.159.2") > CodexVersion.parse("0.154.0")
    assert str(CodexVersion.parse("codex-cli 0.154.0-alpha.6")) == "0.154.0-alpha.6"
