"""Smoke tests of the frozen CLI (docs/guide/frozen-builds.md): the PyInstaller build itself, every kind of subcommand,
the MCP server.

The binary under test is `WARDIAN_FROZEN_CLI` when set (CI builds once with `python build/freeze.py` and points
here); otherwise the tests build one with `build/freeze.py` into `build/work/pytest-dist/`, once per source
state (pytest-xdist workers share it through a lock), and reuse it while the sources are unchanged.
"""

from __future__ import annotations

import hashlib
import http.client
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import orjson
import pytest
import tomlkit
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from wardian import __version__
from wardian.protocol.tools import TOOL_NAMES

try:
    import fcntl
except ImportError:  # Windows: build once first and point WARDIAN_FROZEN_CLI at it
    fcntl = None  # type: ignore[assignment]

REPO = Path(__file__).resolve().parents[2]
WORK = REPO / "build" / "work"
EXE_NAME = "wardian-cli.exe" if os.name == "nt" else "wardian"

pytestmark = pytest.mark.timeout(900)  # the first test may wait for a build


def _source_digest() -> str:
    """What a build depends on: the package, the build files and the locked dependencies."""
    digest = hashlib.sha256()
    # Python, and the console's templates and static files and the team file's schema, which the build bundles as
    # data.
    files = sorted(p for p in (REPO / "core").rglob("*") if p.suffix in {".py", ".j2", ".css", ".js", ".svg", ".json"}
                   and "__pycache__" not in p.parts) + sorted((REPO / "build").glob("*.py"))
    for path in [*files, REPO / "build" / "wardian.spec", REPO / "uv.lock"]:
        digest.update(str(path.relative_to(REPO)).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def _build_for_tests() -> Path:
    WORK.mkdir(parents=True, exist_ok=True)
    dist = WORK / "pytest-dist"
    stamp = dist / "source.sha256"
    exe = dist / "wardian" / EXE_NAME
    with open(WORK / "pytest-dist.lock", "w", encoding="utf-8") as lock:
        if fcntl is not None:
            fcntl.flock(lock, fcntl.LOCK_EX)  # one worker builds; the others wait and reuse its result
        digest = _source_digest()
        if exe.exists() and stamp.exists() and stamp.read_text(encoding="utf-8") == digest:
            return exe
        shutil.rmtree(dist, ignore_errors=True)
        proc = subprocess.run([sys.executable, str(REPO / "build" / "freeze.py"), "--distpath", str(dist)],
                              cwd=REPO, capture_output=True, timeout=840, check=False)
        assert proc.returncode == 0, (proc.stdout + proc.stderr).decode("utf-8", "replace")[-6000:]
        stamp.write_text(digest, encoding="utf-8")
        return exe


@pytest.fixture(scope="session")
def frozen_cli() -> Path:
    given = os.environ.get("WARDIAN_FROZEN_CLI")
    exe = Path(given).absolute() if given else _build_for_tests()
    assert exe.is_file(), f"no frozen CLI at {exe}"
    return exe


def clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("WARDIAN_")}
    env.update(extra)
    return env


class Frozen:
    """Run the frozen CLI on one home."""

    def __init__(self, exe: Path, home: Path) -> None:
        self.exe = exe
        self.home = home

    def run(self, *args: str, session: str | None = None, input: bytes | None = None,
            expect: int | None = 0) -> subprocess.CompletedProcess[bytes]:
        env = clean_env(WARDIAN_HOME=str(self.home), **({"WARDIAN_SESSION_ID": session} if session else {}))
        proc = subprocess.run([str(self.exe), *args], env=env, input=input, capture_output=True, timeout=90,
                              check=False)
        if expect is not None:
            assert proc.returncode == expect, (args, proc.returncode, proc.stderr.decode("utf-8", "replace"))
        return proc

    def json(self, *args: str, session: str | None = None, input: bytes | None = None) -> Any:
        return orjson.loads(self.run(*args, "--json", session=session, input=input).stdout)

    def session(self, agent: str) -> str:
        return str(self.json("agent", "env", agent)["WARDIAN_SESSION_ID"])


@pytest.fixture
def frozen_app(frozen_cli: Path) -> Iterator[Frozen]:
    """An app started by the frozen `wardian app start` on a fresh short home under /tmp; stopped after."""
    home = Path(tempfile.mkdtemp(prefix="wfz", dir="/tmp"))
    cli = Frozen(frozen_cli, home)
    cli.run("app", "start")
    try:
        yield cli
    finally:
        if cli.run("app", "stop", expect=None).returncode != 0:
            pid_file = home / "run" / "app.pid"
            if pid_file.exists():
                os.kill(int(pid_file.read_text(encoding="utf-8").split()[0]), signal.SIGKILL)
        shutil.rmtree(home, ignore_errors=True)


def test_the_frozen_cli_prints_its_version(frozen_cli: Path) -> None:
    """Decision 0011: the build starts and is this version of wardian."""
    proc = subprocess.run([str(frozen_cli), "--version"], env=clean_env(), capture_output=True, timeout=60,
                          check=False)
    assert proc.returncode == 0
    assert proc.stdout.decode().strip() == f"wardian {__version__}"


def test_the_frozen_init_writes_the_schema_the_build_bundles(frozen_cli: Path, tmp_path: Path) -> None:
    """`wardian init --schema` of a frozen build writes the schema it bundles beside the file, and the file's first line
    points at it relatively (never at a path inside the build)."""
    proc = subprocess.run([str(frozen_cli), "init", "--schema", str(tmp_path / "wardian.toml")], env=clean_env(),
                          capture_output=True, timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr
    text = (tmp_path / "wardian.toml").read_text(encoding="utf-8")
    assert text.splitlines()[0] == "#:schema ./wardian.schema.json"
    assert str(frozen_cli.parent) not in text
    schema = json.loads((tmp_path / "wardian.schema.json").read_text(encoding="utf-8"))
    assert schema["title"] == "wardian team file (wardian.toml)"


def test_app_start_status_and_stop_run_the_frozen_executable(frozen_cli: Path) -> None:
    """Decision 0011: `app start` re-executes the frozen binary itself (not a Python interpreter) as `app run`."""
    home = Path(tempfile.mkdtemp(prefix="wfz", dir="/tmp"))
    cli = Frozen(frozen_cli, home)
    try:
        started = cli.json("app", "start")
        status = cli.json("app", "status")
        assert status["pid"] == started["pid"]
        assert status["home"] == str(home)
        if sys.platform.startswith("linux"):
            assert Path(f"/proc/{status['pid']}/exe").resolve() == frozen_cli.resolve()
        assert cli.json("app", "stop")["stopped"] is True
        assert cli.run("app", "status", expect=3).returncode == 3
    finally:
        cli.run("app", "stop", expect=None)
        shutil.rmtree(home, ignore_errors=True)


def test_a_message_and_a_task_make_the_round_trip_through_the_frozen_cli(frozen_app: Frozen) -> None:
    """Decision 0011: send, wait, receive, task and reply work frozen; text round-trips byte for byte."""
    cli = frozen_app
    cli.run("agent", "add", "lead", "--provider", "codex")
    cli.run("agent", "add", "reviewer", "--provider", "codex")
    lead, reviewer = cli.session("lead"), cli.session("reviewer")
    assert cli.run("message", "wait", "--timeout-ms", "0", session=reviewer, expect=8).returncode == 8
    text = "Grüße ✓\n\ttabs, \"quotes\" and 🙂\r\nend"
    sent = cli.json("message", "send", "--to", "reviewer", "--stdin", session=lead, input=text.encode())
    task = cli.json("message", "task", "--to", "reviewer", "Review the retry loop", session=lead)
    assert cli.run("message", "wait", "--timeout-ms", "0", session=reviewer).returncode == 0
    page = cli.json("message", "receive", session=reviewer)
    assert [r["id"] for r in page["records"]] == [sent["interaction_id"], task["interaction_id"]]
    assert page["records"][0]["text"] == text
    cli.json("message", "receive", "--ack-cursor", page["cursor"], session=reviewer)
    reply = cli.json("message", "reply", task["request_id"], "--status", "done", "Looks right", session=reviewer)
    [back] = cli.json("message", "receive", session=lead)["records"]
    assert back["id"] == reply["reply_id"]
    assert back["request_id"] == task["request_id"]
    assert back["text"] == "Looks right"


def test_codex_register_writes_the_frozen_executable(frozen_app: Frozen, tmp_path: Path) -> None:
    """CFG-1, CFG-5: frozen, registration names the frozen binary (its launcher on Windows), never an interpreter."""
    frozen_app.run("agent", "add", "worker", "--provider", "codex")
    summary = frozen_app.json("codex", "register", "--codex-home", str(tmp_path / "codex"), "--agent", "worker")
    entry = tomlkit.parse((tmp_path / "codex" / "config.toml").read_text(encoding="utf-8")).unwrap()
    command = Path(entry["mcp_servers"]["wardian"]["command"])
    assert command == Path(summary["command"])
    expected = frozen_app.exe.with_name("wardian-mcp.exe") if os.name == "nt" else frozen_app.exe
    assert command.resolve() == expected.resolve()


async def _initialize_and_list(exe: Path, env: dict[str, str]) -> tuple[str, list[str]]:
    params = StdioServerParameters(command=str(exe), args=["mcp", "serve"], env=env)
    with tempfile.TemporaryFile("w+", encoding="utf-8") as errlog, anyio.fail_after(120):
        async with stdio_client(params, errlog=errlog) as (read, write), ClientSession(read, write) as session:
            init = await session.initialize()
            tools = await session.list_tools()
    return init.server_info.name, [t.name for t in tools.tools]


def test_the_frozen_mcp_server_initializes_and_lists_its_tools_for_the_sdk_client(frozen_cli: Path) -> None:
    """MCP-1: `wardian mcp serve` frozen (mcp SDK and pydantic bundled) serves the official SDK client."""
    name, tools = anyio.run(_initialize_and_list, frozen_cli, clean_env())
    assert name == "wardian"
    assert tools == list(TOOL_NAMES)


def test_the_frozen_app_serves_the_web_console_and_wardian_console_logs_in(frozen_cli: Path) -> None:
    """Decision 0018: frozen, `app start --console` serves the console (templates and static files bundled) and `wardian
    console --no-open` prints a one-time login URL that logs in; a form posted there reaches the operator's path."""
    home = Path(tempfile.mkdtemp(prefix="wfz", dir="/tmp"))
    cli = Frozen(frozen_cli, home)
    cli.run("app", "start", "--console", "127.0.0.1:0")
    try:
        cli.run("agent", "add", "worker", "--provider", "codex")
        url = urllib.parse.urlsplit(cli.json("console", "--no-open")["url"])
        assert url.hostname == "127.0.0.1"
        assert url.port
        printed = cli.run("console", "--no-open").stdout
        assert b"/login?token=wcl1_" in printed

        def get(path: str, cookie: str | None = None, method: str = "GET", body: bytes | None = None,
                **headers: str) -> tuple[int, dict[str, str], bytes]:
            conn = http.client.HTTPConnection("127.0.0.1", url.port, timeout=30)
            try:
                conn.request(method, path, body=body, headers={**({"Cookie": cookie} if cookie else {}), **headers})
                response = conn.getresponse()
                return response.status, {k.lower(): v for k, v in response.getheaders()}, response.read()
            finally:
                conn.close()

        status, headers, _ = get(f"{url.path}?{url.query}")
        assert status == 200
        cookie = headers["set-cookie"].split(";")[0]
        assert get(f"{url.path}?{url.query}")[0] == 401  # once
        for path, needle in (("/agents", b"worker"), ("/exchange", b"Exchange"), ("/act", b"Act as the operator"),
                             ("/static/console.js", b"EventSource"), ("/static/console.css", b"--brand")):
            status, _, body = get(path, cookie)
            assert status == 200, path
            assert needle in body, path
        csrf = get("/act", cookie)[2].split(b'name="csrf" value="')[1].split(b'"')[0].decode()
        form = urllib.parse.urlencode({"csrf": csrf, "target": "worker", "kind": "task", "text": "frozen"}).encode()
        origin = f"http://127.0.0.1:{url.port}"
        status, headers, _ = get("/act/send", cookie, "POST", form, Origin=origin,
                                 **{"Content-Type": "application/x-www-form-urlencoded"})
        assert status == 303
        assert headers["location"].startswith("/requests/ask_")
        [record] = cli.json("message", "log")["records"]
        assert (record["text"], record["sender"]["name"]) == ("frozen", "operator")
    finally:
        cli.run("app", "stop", expect=None)
        shutil.rmtree(home, ignore_errors=True)
