"""The plain client commands start light: `wardian message wait` and `message send` import neither the app's stack
(pydantic, anyio, psutil), nor the credential store's (keyring), nor `mcp`, httpx, orjson or a provider; and the
parser they build for one command parses and reads exactly as the whole one (docs/benchmarks.md, the cold start)."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import AppHandle, short_home
from wardian import cli
from wardian.model import PROVIDERS
from wardian.team.init import team_file

pytestmark = pytest.mark.fast

# orjson too: its import loads dataclasses, inspect, datetime and uuid, more than the rest of the command; the
# client speaks the stdlib's json, and only `--json` output loads orjson. typing: its import alone is a tenth of
# what the command adds to the interpreter's start (annotations are never evaluated at run time).
HEAVY = ("pydantic", "anyio", "psutil", "keyring", "mcp", "httpx", "wardian.providers", "wardian.app",
         "wardian.auth.store", "orjson", "dataclasses", "typing")

# Runs the CLI in this interpreter, then prints the heavy modules it loaded: the exit code of the command does not
# matter here, only what it imported on the way.
PROBE = """
import sys
from wardian.cli import main
try:
    code = main(sys.argv[1:])
except SystemExit as exc:
    code = exc.code
heavy = sorted(m for m in sys.modules if any(m == h or m.startswith(h + ".") for h in {heavy!r}))
print(code, ",".join(heavy))
"""


def loaded(env: dict[str, str], *argv: str, heavy: tuple[str, ...] = HEAVY) -> tuple[str, list[str]]:
    proc = subprocess.run([sys.executable, "-c", PROBE.format(heavy=heavy), *argv], env=env, capture_output=True,
                          text=True, timeout=60, check=True)
    code, _, mods = proc.stdout.strip().rpartition("\n")[2].partition(" ")
    return code, [m for m in mods.split(",") if m]


def plain_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("WARDIAN_")}
    return {**env, **extra}


@pytest.mark.parametrize("argv", [("message", "wait", "--timeout-ms", "0"), ("message", "send", "--to", "x", "hi")])
def test_message_commands_without_an_app_import_nothing_heavy(argv: tuple[str, ...]) -> None:
    env = plain_env(WARDIAN_HOME=str(short_home("cold")), WARDIAN_SESSION_ID="not-a-session")
    code, heavy = loaded(env, *argv)
    assert code == "3"  # the app is not running: the client was imported and tried to connect
    assert heavy == []


def test_message_wait_and_send_against_a_running_app_import_nothing_heavy(app: AppHandle) -> None:
    _, token = app.add_agent("coldlead")
    app.add_agent("coldpeer")
    env = app.env(token)
    assert loaded(env, "message", "wait", "--timeout-ms", "0") == ("8", [])  # 8: timed out, the mailbox is empty
    assert loaded(env, "message", "send", "--to", "coldpeer", "hello") == ("0", [])


# `wardian init` reads what each provider can do (an attached mode, tool grants) from the providers' version gates
# alone: not their runtimes, the provider boundary (anyio) or the registry of implementations.
INIT_HEAVY = ("anyio", "pydantic", "psutil", "keyring", "mcp", "httpx", "wardian.app", "wardian.auth",
              "wardian.providers.base", "wardian.providers.registry", "wardian.providers.codex.runtime",
              "wardian.providers.opencode.runtime", "wardian.providers.claude.runtime")


def test_init_with_every_provider_imports_no_runtime(tmp_path: Path) -> None:
    target = tmp_path / "wardian.toml"
    env = plain_env(WARDIAN_HOME=str(short_home("coldinit")))
    code, heavy = loaded(env, "init", "--providers", ",".join(PROVIDERS), str(target), heavy=INIT_HEAVY)
    assert (code, heavy) == ("0", [])
    assert target.read_text(encoding="utf-8") == team_file(PROVIDERS)  # the capabilities were read, as in-process


def test_the_groups_table_names_every_command_in_the_order_help_lists_them() -> None:
    root = next(a for a in cli.build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    assert list(root.choices) == [name for _, names in cli.GROUPS for name in names]


@pytest.mark.parametrize("command", sorted(cli.COMMANDS))
def test_a_single_command_parser_reads_as_the_whole_one(command: str) -> None:
    def sub(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
        root = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        return root.choices[command]

    whole, single = sub(cli.build_parser()), sub(cli.build_parser(command))
    assert single.format_help() == whole.format_help()
    assert single.format_usage() == whole.format_usage()


@pytest.mark.parametrize(("argv", "command"), [
    (["message", "wait"], "message"),
    (["--home", "/h", "--json", "message", "send"], "message"),
    (["--home=/h", "send", "x"], "send"),
    (["message", "--help"], None),
    (["--version"], None),
    (["bogus"], None),
    ([], None),
    (["--home"], None),
])
def test_the_command_is_found_past_the_root_options(argv: list[str], command: str | None) -> None:
    assert cli.command_of(argv) == command


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    found = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(found[0].choices) if found else {}


def _actions() -> list[tuple[str, str]]:
    whole = _subparsers(cli.build_parser())
    return [(command, action) for command in sorted(cli.COMMANDS) for action in _subparsers(whole[command])]


@pytest.mark.parametrize(("command", "action"), _actions())
def test_a_single_action_parser_reads_as_the_whole_one(command: str, action: str) -> None:
    whole = _subparsers(_subparsers(cli.build_parser())[command])[action]
    built = _subparsers(cli.build_parser(command, action))[command]
    assert list(_subparsers(built)) == [action]  # that action alone was built
    single = _subparsers(built)[action]
    assert single.format_help() == whole.format_help()
    assert single.format_usage() == whole.format_usage()


def test_an_action_the_command_does_not_have_builds_the_whole_command(capsys: pytest.CaptureFixture[str]) -> None:
    built = _subparsers(cli.build_parser("message", "bogus"))["message"]
    assert list(_subparsers(built)) == list(_subparsers(_subparsers(cli.build_parser())["message"]))
    with pytest.raises(SystemExit) as exc:
        cli.main(["message", "bogus"])
    assert exc.value.code == cli.EXIT_USAGE
    err = capsys.readouterr().err
    assert "invalid choice: 'bogus'" in err
    assert "'wait'" in err
    assert "'send'" in err


@pytest.mark.parametrize(("argv", "route"), [
    (["message", "wait", "--timeout-ms", "0"], ("message", "wait")),
    (["--home", "/h", "--json", "message", "send", "--to", "x"], ("message", "send")),
    (["message", "--json", "wait"], ("message", None)),
    (["message"], ("message", None)),
    (["send", "x"], ("send", "x")),
    (["message", "wait", "--help"], (None, None)),
    (["bogus", "wait"], (None, None)),
])
def test_the_action_is_the_word_after_the_command(argv: list[str], route: tuple[str | None, str | None]) -> None:
    assert cli.route(argv) == route
