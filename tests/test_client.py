"""The client never writes a byte to a control socket it cannot trust (contract rule HOME-5, docs/design/contract.md;
reliability row S12, docs/reliability.md): a `run/` or socket that is not the user's alone, or a listener of another
uid, is `untrusted_socket`, and the listener receives nothing, neither the session secret nor the message."""

from __future__ import annotations

import json
import os
import secrets
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import AppHandle, short_home, wardian_cmd
from tests.mcp.mcp_harness import mcp_server, server_env
from tests.squatter import AS_ROOT, NOBODY, Listener
from wardian import errors
from wardian.client import AppClient
from wardian.home import Home

pytestmark = pytest.mark.fast


@contextmanager
def squatted_home(uid: int | None = None) -> Iterator[tuple[Home, Listener]]:
    """A home laid out as an app makes it (run/ 0700, the socket 0600, both this user's), a listener of `uid` (None:
    this user) on its socket; removed after."""
    root = short_home("wt")
    home = Home(root)
    os.mkdir(home.run_dir, 0o700)
    listener = Listener(home.socket_path, uid)
    try:
        yield home, listener
    finally:
        listener.kill()
        shutil.rmtree(root, ignore_errors=True)


def send_through_cli(home: Home, secret: str, text: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("WARDIAN_")}
    env.update({"WARDIAN_HOME": str(home.root), "WARDIAN_SESSION_ID": secret})
    return subprocess.run([*wardian_cmd(), "--json", "message", "send", "--to", "peer", text], env=env,
                          capture_output=True, text=True, timeout=60)


def refused(proc: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    """The `untrusted_socket` error the CLI printed (exit 3, as every transport error)."""
    assert proc.returncode == 3, (proc.returncode, proc.stdout, proc.stderr)
    error = dict(json.loads(proc.stdout)["error"])
    assert error["code"] == "untrusted_socket"
    assert error["delivery"] == "not_admitted"
    return error


@AS_ROOT
def test_the_cli_sends_nothing_to_a_socket_another_uid_listens_on(app: AppHandle) -> None:
    """A real session's secret and text, with WARDIAN_HOME pointing at a home whose socket another uid listens on
    (the files are all this user's: only the listener's credentials tell): nothing is sent."""
    _, secret = app.add_agent()
    text = f"private text {secrets.token_hex(8)}"
    with squatted_home(NOBODY) as (home, listener):
        proc = send_through_cli(home, secret, text)
        seen = listener.stop()
    assert seen["received"] == ""
    assert seen["accepted"] == 1  # the client did connect: the peer's credentials refused it, not a file check
    error = refused(proc)
    assert (error["path"], error["owner_uid"], error["owner"], error["expected_uid"]) == (
        str(home.socket_path), NOBODY, "nobody", 0)
    assert str(home.socket_path) in proc.stderr  # the message names the path and who listens there
    assert "uid 65534 (nobody)" in proc.stderr
    assert secret not in proc.stdout + proc.stderr


@AS_ROOT
def test_the_mcp_server_sends_nothing_to_a_socket_another_uid_listens_on(app: AppHandle) -> None:
    """The same through `wardian mcp serve`, driven by the official MCP SDK client: `send_message` is a tool error
    `untrusted_socket`, and the listener receives nothing."""
    _, secret = app.add_agent()
    text = f"private text {secrets.token_hex(8)}"
    with squatted_home(NOBODY) as (home, listener):
        with mcp_server(server_env(str(home.root), secret)) as conn:
            error = conn.error("send_message", {"target": "peer", "message": text})
            again = conn.error("send_message", {"target": "peer", "message": text})  # and on a second call
        seen = listener.stop()
    assert error["code"] == again["code"] == "untrusted_socket"
    assert (error["path"], error["owner_uid"], error["delivery"]) == (str(home.socket_path), NOBODY, "not_admitted")
    assert seen["accepted"] == 2
    assert seen["received"] == ""


@AS_ROOT
def test_the_client_refuses_a_listener_of_another_uid_before_its_first_byte() -> None:
    """`AppClient` (the CLI's, the MCP server's and the harness's one connect path) raises the typed error, and a
    later call on the same client is refused the same way."""
    with squatted_home(NOBODY) as (home, listener):
        client = AppClient(home)
        for _ in range(2):
            with pytest.raises(errors.UntrustedSocket) as caught:
                client.call("app/status")
            assert isinstance(caught.value, errors.TransportError)
            assert not isinstance(caught.value, errors.AppNotRunning)  # never taken for "start an app here"
        assert client.requests_written == 0
        seen = listener.stop()
    assert (seen["accepted"], seen["received"]) == (2, "")


def _run_dir_of_another_uid(home: Home) -> Path:
    os.chown(home.run_dir, NOBODY, NOBODY)
    return home.run_dir


def _socket_of_another_uid(home: Home) -> Path:
    os.chown(home.socket_path, NOBODY, NOBODY)
    return home.socket_path


def _open_run_dir(mode: int) -> Any:
    def arrange(home: Home) -> Path:
        os.chmod(home.run_dir, mode)
        return home.run_dir
    return arrange


def _open_socket(home: Home) -> Path:
    os.chmod(home.socket_path, 0o666)
    return home.socket_path


def _run_dir_symlink(home: Home) -> Path:
    """run/ is a link to a good run/ elsewhere (this user's, 0700, the socket inside)."""
    elsewhere = home.root / "elsewhere"
    home.run_dir.rename(elsewhere)
    home.run_dir.symlink_to(elsewhere)
    return home.run_dir


def _socket_symlink(home: Home) -> Path:
    """The socket is a link to a good socket elsewhere in run/."""
    real = home.run_dir / "real.sock"
    home.socket_path.rename(real)
    home.socket_path.symlink_to(real)
    return home.socket_path


@pytest.mark.parametrize(("arrange", "owner"), [
    (_run_dir_of_another_uid, NOBODY),
    (_socket_of_another_uid, NOBODY),
    (_open_run_dir(0o777), None),
    (_open_run_dir(0o755), None),
    (_open_socket, None),
    (_run_dir_symlink, None),
    (_socket_symlink, None),
], ids=["run_dir_of_another_uid", "socket_of_another_uid", "run_dir_0777", "run_dir_0755", "socket_0666",
        "run_dir_symlink", "socket_symlink"])
def test_a_run_dir_or_socket_not_private_to_this_user_is_refused_before_connecting(
        arrange: Any, owner: int | None) -> None:
    """Each way the files differ from what the app makes (run/ 0700 and the socket 0600, this user's, no link) is
    refused before connecting: a listener of this very user receives no connection at all; the error names the
    path and its owner (`owner` None: this user)."""
    if owner is not None and os.geteuid() != 0:
        pytest.skip("needs root to chown to another uid")
    owner = os.geteuid() if owner is None else owner
    with squatted_home() as (home, listener):
        path = arrange(home)
        proc = send_through_cli(home, "wsn_secret-that-must-not-leave", "private text")
        seen = listener.stop()
    assert (seen["accepted"], seen["received"]) == (0, "")
    error = refused(proc)
    assert (error["path"], error["owner_uid"], error["expected_uid"]) == (str(path), owner, os.geteuid())
    assert str(path) in proc.stderr


def test_a_missing_home_or_socket_is_still_app_not_running() -> None:
    """The checks change nothing for a home without an app: no run/, or a run/ without a socket."""
    root = short_home("wt")
    try:
        with pytest.raises(errors.AppNotRunning):
            AppClient(Home(root / "absent")).call("app/status")
        os.mkdir(Home(root).run_dir, 0o700)
        with pytest.raises(errors.AppNotRunning):
            AppClient(Home(root)).call("app/status")
    finally:
        shutil.rmtree(root, ignore_errors=True)
