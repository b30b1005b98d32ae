"""An agent's provider process tree on Windows (core/wardian/providers/process.py, `wardian.providers.tree`): it lives
in a kill-on-close Job Object the app holds, so stopping the agent ends the whole tree and an app killed outright
leaves nothing running (docs/guide/windows.md). `holder.py` stands in for a provider that starts a child of its own
(as Codex starts its MCP servers), here a DETACHED_PROCESS one."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import anyio
import pytest

from tests.windows.conftest import DEADLINE_S, alive, poll, program, read_pid
from wardian import errors
from wardian.providers.process import ProviderProcess, StopPolicy


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.mark.anyio
async def test_stopping_a_provider_process_ends_its_whole_tree(tmp_path: Path, strays: list[int]) -> None:
    """`ProviderProcess.stop` returns only once no process of the tree runs, the detached grandchild included; the
    provider still reads an open stdin, so nothing but the stop ends it."""
    child = ProviderProcess([sys.executable, program("holder.py"), str(tmp_path), "wait"], name="stand-in",
                            env=dict(os.environ), cwd=tmp_path, log_path=tmp_path / "provider.log",
                            pid_path=tmp_path / "provider.pid")
    process = await child.start()
    assert (tmp_path / "provider.pid").read_text(encoding="utf-8").strip() == str(process.pid)
    leader, grandchild = await anyio.to_thread.run_sync(lambda: (read_pid(tmp_path / "child.pid"),
                                                                 read_pid(tmp_path / "grandchild.pid")))
    strays += [leader, grandchild]
    assert alive(grandchild)
    with anyio.fail_after(DEADLINE_S):
        await child.stop(StopPolicy(polite_s=0.0, term_s=5.0, kill_s=5.0))
    assert process.returncode is not None
    assert not alive(leader)
    assert not alive(grandchild)
    assert not (tmp_path / "provider.pid").exists()


def test_an_app_killed_outright_leaves_no_provider_process_running(tmp_path: Path, strays: list[int],
                                                                   reaper: list[subprocess.Popen[bytes]]) -> None:
    """The app's job handle closes with the app, so Windows ends the agent's whole tree, however the app died."""
    app = subprocess.Popen([sys.executable, program("app_standin.py"), str(tmp_path)], stdin=subprocess.DEVNULL,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    reaper.append(app)
    leader, grandchild = read_pid(tmp_path / "child.pid"), read_pid(tmp_path / "grandchild.pid")
    strays += [leader, grandchild]
    assert alive(leader)
    assert alive(grandchild)
    app.kill()
    app.wait(DEADLINE_S)
    poll(lambda: not alive(leader) and not alive(grandchild), "the agent's tree ended with the app")


@pytest.mark.anyio
async def test_a_provider_that_takes_a_secret_in_a_pipe_is_refused_having_started_nothing(tmp_path: Path) -> None:
    """Claude Code's credential travels in an inherited pipe (`secret_fds`), which Windows' subprocess cannot pass:
    the start is refused with a typed error naming the gap, and no process ran (holder.py never wrote its pid)."""
    child = ProviderProcess([sys.executable, program("holder.py"), str(tmp_path), "exit"], name="stand-in",
                            env=dict(os.environ), cwd=tmp_path, log_path=tmp_path / "provider.log",
                            pid_path=tmp_path / "provider.pid", secret_fds={"SECRET_FD": "not-a-real-token"})
    with pytest.raises(errors.Unsupported) as refused:
        await child.start()
    assert refused.value.field == "auth"
    assert not (tmp_path / "child.pid").exists()
    assert not (tmp_path / "provider.pid").exists()
