"""One app per home, the private runtime directory and socket, and who may connect (docs/reliability.md rows S1-S3)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import stat
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from tests.conftest import AppHandle, short_home, start_app, stop_app, wardian_cmd
from wardian import errors
from wardian.client import AppClient
from wardian.home import Home
from wardian.home_setup import adopt_home

pytestmark = pytest.mark.fast  # the fast tier (scripts/check test-fast)


def run_cli(*args: str, home: Path, env_extra: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("WARDIAN_")}
    env.update(env_extra or {})
    return subprocess.run([*wardian_cmd(), *args, "--home", str(home)], env=env, capture_output=True,
                          text=True, timeout=60)


def test_a_second_app_on_the_same_home_refuses(app: AppHandle) -> None:
    """HOME-1: one app per home; a second `wardian app run` exits non-zero saying it is running."""
    r = run_cli("app", "run", home=app.home.root)
    assert r.returncode == 7
    assert "already_running" in r.stderr
    assert str(app.pid) in r.stderr
    assert app.call("app/status")["pid"] == app.pid  # the first app is untouched


def test_runtime_dir_and_socket_are_private_even_with_umask_000() -> None:
    """S1: run/ is 0700 and owned by us, the socket 0600, whatever the umask."""
    root = short_home()
    old = os.umask(0)
    try:
        proc = start_app(root)
    finally:
        os.umask(old)
    try:
        home = Home(root)
        st = os.lstat(home.run_dir)
        assert stat.S_ISDIR(st.st_mode)
        assert stat.S_IMODE(st.st_mode) == 0o700
        assert st.st_uid == os.geteuid()
        assert stat.S_IMODE(os.stat(home.socket_path).st_mode) == 0o600
        assert stat.S_ISSOCK(os.stat(home.socket_path).st_mode)
    finally:
        stop_app(proc)
        shutil.rmtree(root, ignore_errors=True)


@pytest.mark.parametrize("kind", ["world_writable", "symlink", "not_a_dir"])
def test_an_insecure_runtime_dir_is_refused(kind: str, tmp_path: Path) -> None:
    """S2 (a, b): a wardian home whose run/ was pre-created open to others, or as a symlink, refuses to start."""
    root = short_home()
    try:
        adopt_home(Home(root))
        run_dir = root / "run"
        if kind == "world_writable":
            run_dir.mkdir()
            os.chmod(run_dir, 0o777)
        elif kind == "symlink":
            (tmp_path / "elsewhere").mkdir(mode=0o700)
            run_dir.symlink_to(tmp_path / "elsewhere")
        else:
            run_dir.write_text("x")
        r = run_cli("app", "run", home=root)
        assert r.returncode == 7
        assert "insecure_runtime_dir" in r.stderr
        assert not (root / "wardian.db").exists()
    finally:
        shutil.rmtree(root, ignore_errors=True)


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to chown the directory to another uid")
def test_a_runtime_dir_owned_by_another_uid_is_refused() -> None:
    """S2 (a): a wardian home whose run/ was pre-created by another uid refuses to start."""
    root = short_home()
    try:
        adopt_home(Home(root))
        (root / "run").mkdir(mode=0o700)
        os.chown(root / "run", 65534, 65534)
        r = run_cli("app", "run", home=root)
        assert r.returncode == 7
        assert "insecure_runtime_dir" in r.stderr
    finally:
        shutil.rmtree(root, ignore_errors=True)


def test_a_stale_socket_is_replaced_after_kill_9() -> None:
    """S2 (d): a socket file left by a killed app is replaced by the next app."""
    root = short_home()
    try:
        proc = start_app(root)
        proc.kill()
        stop_app(proc)
        home = Home(root)
        assert home.socket_path.exists()
        with pytest.raises(errors.AppNotRunning):
            AppClient(home).call("app/status")
        proc2 = start_app(root)
        try:
            with AppClient(home) as client:
                assert client.call("app/status")["pid"] == proc2.pid
        finally:
            stop_app(proc2)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def test_sigterm_stops_the_app_cleanly() -> None:
    """The app stops on SIGTERM: exit 0, socket and pid file removed, the lock released."""
    root = short_home()
    try:
        proc = start_app(root)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(15) == 0
        stop_app(proc)
        assert not Home(root).socket_path.exists()
        assert not Home(root).pid_path.exists()
        proc2 = start_app(root)
        stop_app(proc2)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def test_start_status_stop_from_the_cli() -> None:
    """`wardian app start` returns once the app accepts calls; status and stop report it."""
    root = short_home()
    try:
        started = run_cli("app", "start", "--json", home=root)
        assert started.returncode == 0, started.stderr
        pid = json.loads(started.stdout)["pid"]
        status = run_cli("app", "status", "--json", home=root)
        assert json.loads(status.stdout)["pid"] == pid
        stopped = run_cli("app", "stop", home=root)
        assert stopped.returncode == 0, stopped.stderr
        # `app stop` returns only once the process has ended (a script may `rm -rf` the home right after).
        assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
        after = run_cli("app", "status", "--json", home=root)
        assert after.returncode == 3
        assert json.loads(after.stdout)["running"] is False
        # Gone, or a zombie waiting for whoever inherited it (the CLI that started it has exited).
        assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    finally:
        run_cli("app", "stop", home=root)
        shutil.rmtree(root, ignore_errors=True)


def test_a_client_of_another_protocol_version_is_told_so(tmp_path: Path) -> None:
    """M4: version skew is app_incompatible, reported before any byte is written."""
    root = short_home()
    try:
        run_dir = root / "run"
        run_dir.mkdir(mode=0o700)
        s = socket.socket(socket.AF_UNIX)
        s.bind(str(run_dir / "app.v999.sock"))
        try:
            with pytest.raises(errors.AppIncompatible):
                AppClient(Home(root)).call("app/status")
        finally:
            s.close()
        (run_dir / "app.v999.sock").unlink()
        with pytest.raises(errors.AppNotRunning):
            AppClient(Home(root)).call("app/status")
    finally:
        shutil.rmtree(root, ignore_errors=True)


def test_a_home_path_too_long_for_a_socket_is_refused(tmp_path: Path) -> None:
    """A home whose socket path would not fit a sockaddr_un fails with a clear error, not a traceback."""
    root = tmp_path / ("x" * 120)
    r = run_cli("app", "run", home=root)
    assert r.returncode == 7
    assert "home_path_too_long" in r.stderr


def _peer(cmd: list[str]) -> dict[str, object]:
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=30, cwd="/")
    assert out.stdout.strip(), f"peer failed: rc={out.returncode} {out.stderr[-2000:]}"
    return dict(json.loads(out.stdout))


# The peer runs as nobody, who cannot read root's pyenv: use a system interpreter.
PEER_PYTHON = shutil.which("python3", path="/usr/bin:/bin") or sys.executable
_PEER_SCRIPT = r"""
import json, socket, sys
s = socket.socket(socket.AF_UNIX)
try:
    s.connect(sys.argv[1])
except OSError as e:
    print(json.dumps({"connect": "refused", "errno": e.errno})); sys.exit(0)
try:
    s.sendall(b'{"jsonrpc":"2.0","id":1,"method":"agent/add","params":{"name":"intruder","provider":"codex"}}\n')
except OSError:
    pass  # the app may already have dropped the connection: that is the rejection
s.settimeout(10)
try:
    data = s.recv(65536)
except OSError as e:
    data = b""
print(json.dumps({"connect": "ok", "answer": data.decode("utf-8", "replace")}))
"""


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("setpriv") is None, reason="needs root and setpriv")
def test_another_uid_is_rejected_before_any_request_is_read(app: AppHandle) -> None:
    """S3: by default another uid cannot connect; with the socket opened up it is dropped
    by SO_PEERCRED before its request is parsed, and nothing changes."""
    cmd = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", PEER_PYTHON, "-c", _PEER_SCRIPT,
           str(app.home.socket_path)]
    default = _peer(cmd)
    assert default["connect"] == "refused"
    root_mode = stat.S_IMODE(os.stat(app.home.root).st_mode)
    os.chmod(app.home.root, 0o711)
    os.chmod(app.home.run_dir, 0o711)
    os.chmod(app.home.socket_path, 0o666)
    try:
        opened = _peer(cmd)
    finally:
        os.chmod(app.home.socket_path, 0o600)
        os.chmod(app.home.run_dir, 0o700)
        os.chmod(app.home.root, root_mode)
    assert opened == {"connect": "ok", "answer": ""}
    assert all(a["name"] != "intruder" for a in app.call("agent/list")["agents"])
    log = (app.home.log_dir / "app.log").read_text(encoding="utf-8")
    assert "rejected a control connection from uid 65534" in log


def test_an_unwritable_home_is_a_clear_storage_error(tmp_path: Path) -> None:
    """Bad input gets a clear error: a home whose directory cannot be created is storage_unavailable (exit 6),
    not a traceback."""
    blocker = tmp_path / "file"
    blocker.write_text("x")
    r = run_cli("app", "run", home=blocker / "home")
    assert r.returncode == 6
    assert "storage_unavailable" in r.stderr
    assert "Traceback" not in r.stderr
