"""`wardian demo` loads the harness's demo by entry point; core never imports the harness (issue #5)."""

from __future__ import annotations

import importlib.metadata

import pytest

from wardian import cli


def test_the_demo_entry_point_is_declared_and_loads_the_harness_demo() -> None:
    (ep,) = importlib.metadata.entry_points(group="wardian.plugins", name="demo")
    assert ep.value == "wardian_harness.demo:main"


def test_without_the_entry_point_the_demo_is_a_clear_error(monkeypatch: pytest.MonkeyPatch,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(importlib.metadata, "entry_points", lambda **_: [])
    assert cli.main(["demo"]) == cli.EXIT_INTERNAL
    assert "demo_unavailable" in capsys.readouterr().err
