"""The CLI: thin over the app, exact --json, byte-exact --stdin, documented exit codes."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import AppHandle, short_home, wardian_cmd
from wardian import cli, errors
from wardian.model import PROVIDERS

pytestmark = pytest.mark.fast  # the fast tier (scripts/check test-fast)


def j(result: subprocess.CompletedProcess[bytes]) -> dict:
    return json.loads(result.stdout)


def test_message_commands_round_trip_a_task_and_its_reply(app: AppHandle) -> None:
    """docs/reference/cli.md: send, task, receive, wait, reply through the CLI, acting for WARDIAN_SESSION_ID."""
    lead, tl = app.add_agent("lead")
    _, tr = app.add_agent("reviewer")
    sent = app.cli("message", "task", "--to", "reviewer", "--json", "please review", token=tl)
    assert sent.returncode == 0, sent.stderr
    rid = j(sent)["request_id"]
    assert app.cli("message", "wait", "--timeout-ms", "0", token=tr).returncode == 0
    page = j(app.cli("message", "receive", "--json", token=tr))
    assert [(r["id"], r["new_work"]) for r in page["records"]] == [(rid, True)]
    acked = j(app.cli("message", "receive", "--ack-cursor", page["cursor"], "--json", token=tr))
    assert acked["acked"] == 1
    replied = app.cli("message", "reply", rid, "--status", "done", "looks good", token=tr)
    assert replied.returncode == 0, replied.stderr
    got = j(app.cli("message", "receive", "--json", "--timeout-ms", "1000", token=tl))
    assert [(r["kind"], r["request_id"], r["text"]) for r in got["records"]] == [("reply", rid, "looks good")]
    assert got["records"][0]["recipient"]["uuid"] == lead["uuid"]


def test_json_prints_the_apps_result_exactly(app: AppHandle) -> None:
    """docs/reference/cli.md: --json prints the app's result exactly."""
    _, ta = app.add_agent()
    _b, _ = app.add_agent()
    out = j(app.cli("agent", "list", "--json", token=ta))
    assert out == app.call("agent/list", {"session": ta})


def test_stdin_text_is_taken_byte_exact(app: AppHandle) -> None:
    """TXT-1: message text retains Unicode, line breaks, and punctuation (--stdin, trailing newline kept)."""
    _, ta = app.add_agent()
    b, tb = app.add_agent()
    text = "line one\r\nline two ✓\n\n\ttabbed\n"
    r = app.cli("message", "send", "--to", b["name"], "--stdin", token=ta, input=text.encode("utf-8"))
    assert r.returncode == 0, r.stderr
    rec = app.call("mailbox/receive", {"session": tb})["records"][0]
    assert rec["text"].encode("utf-8") == text.encode("utf-8")


def test_a_command_line_text_that_is_not_utf8_is_invalid_text_and_nothing_is_sent(app: AppHandle) -> None:
    """Bad input gets a clear error: an argument that is not UTF-8 (a lone surrogate once decoded) is `invalid_text`,
    exit 2, with nothing admitted, rather than a traceback from the client's framing."""
    _, ta = app.add_agent()
    b, tb = app.add_agent()
    r = app.cli("message", "send", "--to", b["name"], "caf" + os.fsdecode(b"\xff"), token=ta)
    assert r.returncode == 2, r.stderr
    assert b"invalid_text" in r.stderr
    assert b"Traceback" not in r.stderr
    assert app.call("mailbox/receive", {"session": tb})["records"] == []


def test_agent_env_prints_evaluable_exports(app: AppHandle) -> None:
    """SES-2: `wardian agent env NAME` prints shell exports of WARDIAN_HOME and WARDIAN_SESSION_ID."""
    agent, _ = app.add_agent()
    out = app.cli("agent", "env", agent["name"]).stdout.decode()
    env = dict(line.removeprefix("export ").split("=", 1) for line in out.splitlines())
    assert set(env) == {"WARDIAN_HOME", "WARDIAN_SESSION_ID"}
    token = shlex.split(env["WARDIAN_SESSION_ID"])[0]
    assert shlex.split(env["WARDIAN_HOME"])[0] == str(app.home.root)
    assert app.call("agent/list", {"session": token})["caller"]["uuid"] == agent["uuid"]


def test_agent_add_validates_names_and_providers(app: AppHandle) -> None:
    """Bad input gets a clear error naming what is allowed, and nothing is added."""
    for name in ("all", "bad name", "_under", "x" * 65, "wardian", "a,b", "3f1c6f0e-0000-4000-8000-000000000000"):
        r = app.cli("agent", "add", name, "--provider", "codex")
        assert r.returncode == 2
        assert b"invalid_agent_name" in r.stderr
    r = app.cli("agent", "add", "ok", "--provider", "goose")
    assert r.returncode == 2
    assert b"invalid_provider" in r.stderr
    assert b"(allowed: codex, opencode, claude, qwen, gemini, pi, acp)" in r.stderr
    assert app.call("agent/list")["agents"] == []


@pytest.mark.parametrize(("args", "code", "needle"), [
    (["message", "send", "--to", "nobody", "x"], cli.EXIT_NOT_FOUND, b"unknown_target"),
    (["message", "send", "--to", "*", "x"], cli.EXIT_USAGE, b"broadcast_not_allowed"),
    (["message", "send", "--to", "peer"], cli.EXIT_USAGE, b"empty_message"),
    (["message", "send", "--to", "peer", "x", "--stdin"], cli.EXIT_USAGE, b"invalid_arguments"),
    (["message", "receive", "--limit", "0"], cli.EXIT_USAGE, b"invalid_limit"),
    (["message", "receive", "--limit", "ten"], cli.EXIT_USAGE, b"invalid int value"),
    (["message", "wait", "--timeout-ms", "60001"], cli.EXIT_USAGE, b"invalid_timeout"),
    (["message", "reply", "ask_nope", "--status", "done", "x"], cli.EXIT_NOT_FOUND, b"unknown_request"),
    (["message", "reply", "ask_nope", "--status", "DONE", "x"], cli.EXIT_USAGE, b"invalid_status"),
    (["message", "interrupt", "peer"], cli.EXIT_NOTHING, b"not_active"),
    (["message", "wait", "--timeout-ms", "0"], cli.EXIT_NOTHING, b""),
    (["send", "--to", "peer", "x"], cli.EXIT_USAGE, b"retired_operation"),
    (["ask", "peer", "x"], cli.EXIT_USAGE, b"retired_operation"),
    (["message", "bogus"], cli.EXIT_USAGE, b"invalid choice"),
])
def test_exit_codes_are_documented_and_distinct(app: AppHandle, args: list[str], code: int, needle: bytes) -> None:
    """docs/reference/exit-codes.md: documented exit codes (0 ok, distinct codes for bad input, app not running, not
    found)."""
    _, token = app.add_agent()
    app.add_agent("peer")
    r = app.cli(*args, token=token)
    assert r.returncode == code, r.stderr
    assert needle in r.stderr


def test_missing_session_and_missing_app_have_their_own_codes(app: AppHandle) -> None:
    """docs/reference/exit-codes.md: a missing WARDIAN_SESSION_ID is bad input (2); no app running is 3."""
    r = app.cli("message", "receive")
    assert r.returncode == cli.EXIT_USAGE
    assert b"missing_session" in r.stderr
    assert b"WARDIAN_SESSION_ID" in r.stderr
    empty = short_home("wn")
    env = {k: v for k, v in os.environ.items() if not k.startswith("WARDIAN_")}
    env.update(WARDIAN_HOME=str(empty), WARDIAN_SESSION_ID="wsn1_x_1_y")
    r = subprocess.run([*wardian_cmd(), "message", "wait", "--timeout-ms", "0", "--json"], env=env,
                       capture_output=True, timeout=60)
    assert r.returncode == cli.EXIT_APP
    assert json.loads(r.stdout)["error"]["code"] == "app_not_running"
    assert list(Path(empty).iterdir()) == []  # a client creates nothing in the home
    os.rmdir(empty)


def test_no_home_is_a_clear_error() -> None:
    """The home comes from --home or WARDIAN_HOME; neither is a clear error."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("WARDIAN_")}
    r = subprocess.run([*wardian_cmd(), "app", "status"], env=env, capture_output=True, timeout=60)
    assert r.returncode == cli.EXIT_USAGE
    assert b"WARDIAN_HOME" in r.stderr


def test_every_error_class_maps_to_one_exit_code() -> None:
    """Each branch of the error tree has its documented exit code."""
    assert cli.exit_code_for(errors.InvalidLimit("x")) == 2
    assert cli.exit_code_for(errors.AppNotRunning("x")) == 3
    assert cli.exit_code_for(errors.AppIncompatible("x")) == 3
    assert cli.exit_code_for(errors.UnknownTarget("x")) == 4
    assert cli.exit_code_for(errors.DeliveryUncertain("x")) == 5
    assert cli.exit_code_for(errors.StorageFull("x")) == 6
    assert cli.exit_code_for(errors.AlreadyRunning("x")) == 7
    assert cli.exit_code_for(errors.AddressInUse("x")) == 7
    assert cli.exit_code_for(errors.NotActive("x")) == 8
    assert cli.exit_code_for(errors.InternalError("x")) == 1


def test_the_cli_does_not_import_mcp_pydantic_or_anyio() -> None:
    """docs/benchmarks.md: the CLI never imports mcp; cold start keeps pydantic and anyio out of client commands too."""
    code = ("import sys; from wardian import cli, client; "
            "print(sorted(m for m in ('mcp', 'pydantic', 'anyio') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.strip() == "[]"


def test_help_lists_no_retired_command() -> None:
    """`wardian --help` shows no `==SUPPRESS==` lines; the retired `send`/`ask` stay retired but unlisted."""
    out = subprocess.run([*wardian_cmd(), "--help"], capture_output=True, text=True, timeout=60, check=True).stdout
    assert "SUPPRESS" not in out
    commands = [line.split()[0] for line in out.splitlines() if line.startswith("    ") and line.split()]
    assert "send" not in commands
    assert "ask" not in commands
    assert {"app", "agent", "message", "mcp", "codex"} <= set(commands)


def test_agent_adds_help_names_every_provider() -> None:
    """The help is a literal (the CLI's cold start imports no model module): it must still name each provider."""
    text = subprocess.run([*wardian_cmd(), "agent", "add", "--help"], capture_output=True, check=True).stdout.decode()
    assert all(name in " ".join(text.split()) for name in PROVIDERS), text
