"""`wardian demo` loads the harness's demo by entry point; core never imports the harness
(docs/design/architecture.md)."""

from __future__ import annotations

import importlib.metadata
import subprocess
import sys

import pytest

from wardian import cli

pytestmark = pytest.mark.fast  # the fast tier (scripts/check test-fast)


def test_the_demo_entry_point_is_declared_and_loads_the_harness_demo() -> None:
    (ep,) = importlib.metadata.entry_points(group="wardian.plugins", name="demo")
    assert ep.value == "wardian_harness.acceptance.demo:main"


def test_without_the_entry_point_the_demo_is_a_clear_error(monkeypatch: pytest.MonkeyPatch,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(importlib.metadata, "entry_points", lambda **_: [])
    assert cli.main(["demo"]) == cli.EXIT_INTERNAL
    assert "demo_unavailable" in capsys.readouterr().err


def test_the_demo_options_reach_the_demo(monkeypatch: pytest.MonkeyPatch) -> None:
    """`wardian demo --providers … --evidence …` hands both to the harness's demo unchanged."""
    seen: list[list[str]] = []

    class Entry:
        def load(self) -> object:
            return lambda argv: seen.append(argv) or 0

    monkeypatch.setattr(importlib.metadata, "entry_points", lambda **_: [Entry()])
    assert cli.main(["demo", "--providers", "opencode,codex", "--evidence", "/tmp/x"]) == 0
    assert cli.main(["demo"]) == 0
    assert seen == [["--providers", "opencode,codex", "--evidence", "/tmp/x"], ["--providers", "codex,codex"]]


def test_the_background_demo_loads_without_the_harness_extra() -> None:
    """The terminal packages (pyte, pexpect: `wardian[harness]`) are needed only for attached mode."""
    code = ("import sys; sys.modules['pyte'] = None; sys.modules['pexpect'] = None\n"
            "import wardian_harness.acceptance.demo, wardian_harness.acceptance.native\n"
            "assert 'wardian_harness.processes.terminal' not in sys.modules\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr


def test_a_harness_without_its_extra_is_a_clear_error_naming_the_extra(monkeypatch: pytest.MonkeyPatch,
                                                                         capsys: pytest.CaptureFixture[str]) -> None:
    class Entry:
        def load(self) -> object:
            raise ModuleNotFoundError("No module named 'pyte'", name="pyte")

    monkeypatch.setattr(importlib.metadata, "entry_points", lambda **_: [Entry()])
    assert cli.main(["demo"]) == cli.EXIT_INTERNAL
    err = capsys.readouterr().err
    assert "demo_unavailable" in err
    assert "'pyte'" in err
    assert "wardian[harness]" in err


@pytest.mark.parametrize("value", ["codex,goose", "opencode", "codex,opencode,codex"])
def test_a_team_the_demo_cannot_run_is_a_usage_error_naming_the_allowed_providers(
        value: str, capsys: pytest.CaptureFixture[str]) -> None:
    from wardian_harness.acceptance import demo

    with pytest.raises(SystemExit) as exc:
        demo.main(["--providers", value])
    assert exc.value.code == 2
    assert "allowed: codex, opencode, claude, qwen, gemini, acp, pi" in capsys.readouterr().err
