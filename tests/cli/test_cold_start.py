"""The plain client commands start light: `wardian message wait` and `message send` import neither the app's stack
(pydantic, anyio, psutil), nor the credential store's (keyring), nor `mcp`, httpx, orjson or a provider; the other
commands load only their own stack, and the whole parser (`--help`) none; and the parser they build for one command
parses and reads exactly as the whole one (docs/benchmarks.md, the cold start)."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import AppHandle, short_home
from wardian import cli
from wardian.cli.common import handler
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
                          text=True, timeout=60, check=True, stdin=subprocess.DEVNULL)
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
# alone: not their runtimes, the provider boundary (anyio) or the registry of implementations; nor what carries a
# team file out (`wardian up`: the client, its threads).
INIT_HEAVY = ("anyio", "pydantic", "psutil", "keyring", "mcp", "httpx", "wardian.app", "wardian.auth",
              "wardian.providers.base", "wardian.providers.registry", "wardian.providers.codex.runtime",
              "wardian.providers.opencode.runtime", "wardian.providers.claude.runtime", "wardian.client",
              "wardian.cli.up", "concurrent")


def test_init_with_every_provider_imports_no_runtime(tmp_path: Path) -> None:
    target = tmp_path / "wardian.toml"
    env = plain_env(WARDIAN_HOME=str(short_home("coldinit")))
    code, heavy = loaded(env, "init", "--providers", ",".join(PROVIDERS), str(target), heavy=INIT_HEAVY)
    assert (code, heavy) == ("0", [])
    assert target.read_text(encoding="utf-8") == team_file(PROVIDERS)  # the capabilities were read, as in-process


# The handlers named by where they are (wardian.cli.common.Handler): each command's own stack.
HANDLER_MODULES = ("wardian.cli.app_run", "wardian.cli.auth_chatgpt", "wardian.cli.console_login",
                   "wardian.cli.credentials", "wardian.cli.init", "wardian.cli.register", "wardian.cli.up")
# The whole parser (`--help`, `--version`, an unknown command) imports every group's module, and no command's stack.
WHOLE_PARSER_HEAVY = ("pydantic", "anyio", "psutil", "keyring", "mcp", "httpx", "tomlkit", "orjson", "wardian.app",
                      "wardian.store", "wardian.team", "wardian.auth.store", "wardian.console", "wardian.client",
                      "wardian.protocol.tools", "wardian.providers", *HANDLER_MODULES)


@pytest.mark.parametrize("argv", [("--help",), ("up", "--help"), ("--version",), ("bogus",)])
def test_the_whole_parser_imports_no_command_s_stack(argv: tuple[str, ...]) -> None:
    env = plain_env(WARDIAN_HOME=str(short_home("coldhelp")))
    code, heavy = loaded(env, *argv, heavy=WHOLE_PARSER_HEAVY)
    assert code in ("0", "2")
    assert heavy == []


# A client command of the app's or the agents' groups: the app's answer printed, as `message wait` does; `agent start`
# adds the tool table (its dataclasses) and `agent attach` psutil, not the group's other commands.
CLIENT_HEAVY = ("pydantic", "anyio", "psutil", "keyring", "mcp", "httpx", "wardian.providers", "wardian.app",
                "wardian.auth.store", "orjson", "dataclasses", "wardian.console", *HANDLER_MODULES)


def test_agent_list_and_app_status_import_nothing_heavy(app: AppHandle) -> None:
    env = app.env()
    app.add_agent("coldlisted")
    assert loaded(env, "agent", "list", heavy=CLIENT_HEAVY) == ("0", [])
    assert loaded(env, "app", "status", heavy=CLIENT_HEAVY) == ("0", [])


# `wardian auth` opens the home's credential store (and the keyring it may use), never the app's stack or a provider:
# Codex's ChatGPT sign-in (anyio, its app-server client) loads only when it is asked for.
AUTH_HEAVY = ("pydantic", "anyio", "psutil", "mcp", "httpx", "tomlkit", "wardian.app", "wardian.providers",
              "wardian.cli.auth_chatgpt", "wardian.team", "wardian.console")


@pytest.mark.parametrize("argv", [("auth", "status"), ("auth", "login", "opencode", "--with-api-key", "--provider",
                                                       "openai"), ("auth", "logout", "claude")])
def test_auth_commands_import_the_credential_store_alone(argv: tuple[str, ...]) -> None:
    env = plain_env(WARDIAN_HOME=str(short_home("coldauth")), WARDIAN_CREDENTIAL_STORE="file")
    code, heavy = loaded(env, *argv, heavy=AUTH_HEAVY)
    assert code in ("0", "2", "4")  # listed; an empty key refused; nothing to sign out of
    assert heavy == []


# `wardian <provider> register`: its handler's module and that provider's registration, never Codex's stack (tomlkit)
# for another provider, nor another command's.
REGISTER_HEAVY = ("pydantic", "anyio", "psutil", "keyring", "mcp", "tomlkit", "wardian.app", "wardian.providers.codex",
                  *(m for m in HANDLER_MODULES if m != "wardian.cli.register"))


@pytest.mark.parametrize("provider", ["claude", "opencode"])
def test_a_registration_imports_its_provider_s_stack_alone(provider: str, tmp_path: Path) -> None:
    env = plain_env(WARDIAN_HOME=str(short_home("coldreg")))
    code, heavy = loaded(env, provider, "register", "--agent", "x", "--config-dir", str(tmp_path),
                         heavy=REGISTER_HEAVY)
    assert code == "3"  # the app is not running: everything was checked, and the app was asked
    assert heavy == []


def test_the_mcp_server_starts_without_pydantic_the_sdk_the_client_or_the_records() -> None:
    """`wardian mcp serve` answers the handshake from constant data before any of them loads (wardian.mcp.server);
    its tool table reads the protocol's limits from `wardian.limits`, not the records' dataclasses (`wardian.model`)."""
    probe = ("import sys; from wardian import cli; cli.build_parser('mcp', 'serve'); import wardian.mcp.server; "
             "print(sorted(m for m in sys.modules if m.split('.')[0] in {'pydantic', 'mcp', 'anyio', 'psutil'} "
             "or m in {'wardian.client', 'wardian.mcp._calls', 'wardian.mcp._sdk', 'wardian.model'}))")
    proc = subprocess.run([sys.executable, "-c", probe], env=plain_env(), capture_output=True, text=True, timeout=60,
                          check=True)
    assert proc.stdout.strip() == "[]"


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


def _handlers() -> list[tuple[str, str | None, object]]:
    """Each command's handler as its parser holds it, with its action (None: a command without actions)."""
    found: list[tuple[str, str | None, object]] = []
    for command, parser in _subparsers(cli.build_parser()).items():
        actions: dict[str | None, argparse.ArgumentParser] = {**_subparsers(parser)} or {None: parser}
        found += [(command, action, p.get_default("func")) for action, p in actions.items()]
    return found


@pytest.mark.parametrize(("command", "action", "func"), _handlers())
def test_every_command_s_handler_is_found(command: str, action: str | None, func: object) -> None:
    """A handler named by where it is (`module:name`) is a function of one of the CLI's handler modules, imported when
    its command runs."""
    if isinstance(func, str):
        assert func.partition(":")[0] in HANDLER_MODULES
        func = handler(func)
    assert callable(func)
