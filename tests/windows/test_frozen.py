"""The frozen Windows build, `dist/windows/` as scripts/windows.sh makes it with PyInstaller: contract rule CFG-5
(docs/design/contract.md) and docs/guide/windows.md. `wardian-cli.exe` is a console program; `wardian-mcp.exe` is a
GUI-subsystem launcher that starts it with CREATE_NO_WINDOW, stdio passed through, its exit code returned, and its
server ended when the launcher goes."""

from __future__ import annotations

import os
import subprocess
import tempfile

import anyio
import psutil
import pytest
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from tests.windows.conftest import DEADLINE_S, DIST, alive, image_name, pe_subsystem, poll
from wardian.protocol.tools import TOOL_NAMES

GUI, CONSOLE = 2, 3
CLI, LAUNCHER = DIST / "wardian-cli.exe", DIST / "wardian-mcp.exe"


@pytest.fixture(autouse=True)
def _built() -> None:
    if not LAUNCHER.exists():
        pytest.fail(f"{LAUNCHER} is missing: scripts/windows.sh builds it before the tests run")


def clean_env() -> dict[str, str]:
    """The server's environment without the test process's own WARDIAN_* settings."""
    return {k: v for k, v in os.environ.items() if not k.startswith("WARDIAN_")}


def test_the_cli_is_a_console_program_and_the_launcher_a_gui_one() -> None:
    """CFG-5: `wardian-cli.exe` stays console-backed; `wardian-mcp.exe` has no console of its own."""
    assert (pe_subsystem(CLI), pe_subsystem(LAUNCHER)) == (CONSOLE, GUI)


def test_the_launcher_answers_as_the_cli_does_exit_code_and_streams_included() -> None:
    """CFG-5: whatever the CLI prints and returns reaches the launcher's caller unchanged."""
    for args in (["--version"], ["no-such-command"]):
        direct = subprocess.run([str(CLI), *args], stdin=subprocess.DEVNULL, capture_output=True,
                                timeout=DEADLINE_S, check=False)
        launched = subprocess.run([str(LAUNCHER), *args], stdin=subprocess.DEVNULL, capture_output=True,
                                  timeout=DEADLINE_S, check=False)
        assert (launched.returncode, launched.stdout, launched.stderr) == (
            direct.returncode, direct.stdout, direct.stderr)
    assert direct.returncode == 2  # argparse's usage error: a non-zero code did travel


async def _initialize_and_list(env: dict[str, str]) -> tuple[str, list[str]]:
    params = StdioServerParameters(command=str(LAUNCHER), args=["mcp", "serve"], env=env)
    with tempfile.TemporaryFile("w+", encoding="utf-8") as errlog, anyio.fail_after(DEADLINE_S * 2):
        async with stdio_client(params, errlog=errlog) as (read, write), ClientSession(read, write) as session:
            init = await session.initialize()
            tools = await session.list_tools()
    return init.server_info.name, [t.name for t in tools.tools]


def test_the_official_mcp_client_talks_to_the_server_through_the_launcher() -> None:
    """MCP-1 and CFG-5: the SDK's stdio client (its Windows process code, Job Object included) initializes the
    server behind `wardian-mcp.exe mcp serve` and lists the eight tools; every frame crossed the launcher."""
    assert anyio.run(_initialize_and_list, clean_env()) == ("wardian", list(TOOL_NAMES))


def test_closing_the_launcher_ends_its_server(reaper: list[subprocess.Popen[bytes]], strays: list[int]) -> None:
    """CFG-5: "closing the launcher also closes its server process". Our end of the server's stdin stays open,
    so the server cannot stop on EOF: only the launcher's job can end it."""
    proc = subprocess.Popen([str(LAUNCHER), "mcp", "serve"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, env=clean_env())
    reaper.append(proc)
    servers: list[psutil.Process] = []

    def server_started() -> bool:
        servers[:] = [p for p in psutil.Process(proc.pid).children() if image_name(p.pid) == CLI.name]
        return bool(servers)

    poll(server_started, "the launcher started wardian-cli.exe")
    [server] = servers
    strays.append(server.pid)
    assert alive(server.pid)
    proc.kill()
    proc.wait(DEADLINE_S)
    poll(lambda: not alive(server.pid), "the server ended with its launcher")
