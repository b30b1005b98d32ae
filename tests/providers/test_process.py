"""The one child-process lifecycle of every provider (`wardian.providers.process.ProviderProcess`) and the one event
stream (`wardian.providers.events.EventStream`), on real processes."""

from __future__ import annotations

import ctypes
import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import anyio
import psutil
import pytest

from wardian.model import AgentStatus
from wardian.providers._tree_posix import group_alive
from wardian.providers.base import StateChange
from wardian.providers.events import EventStream
from wardian.providers.process import ProviderProcess, StopPolicy, secret_pipe

pytestmark = pytest.mark.fast  # the fast tier (scripts/check test-fast)

# A provider that ignores SIGTERM and leaves a child of its own in its group (as Codex's MCP servers are).
STUBBORN = """
import os, signal, subprocess, sys, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
child = subprocess.Popen([sys.executable, "-c", "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
                          "time.sleep(600)"])
print(child.pid, flush=True)
time.sleep(600)
"""
# A provider that exits as soon as its input closes (as the Codex app-server does).
POLITE = "import sys; sys.stdin.read()"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _process(tmp_path: Path, code: str, **kw: object) -> ProviderProcess:
    return ProviderProcess([sys.executable, "-c", code], name="test", env=dict(os.environ), cwd=tmp_path,
                           log_path=tmp_path / "provider.log", pid_path=tmp_path / "provider.pid", **kw)  # type: ignore[arg-type]


@pytest.mark.anyio
async def test_a_stop_ends_the_whole_group_even_when_sigterm_is_ignored(tmp_path: Path) -> None:
    """SIGTERM ignored by the leader and its child: the stop goes on to SIGKILL the group and returns only once no
    member is left; the pid record is gone."""
    child = _process(tmp_path, STUBBORN)
    process = await child.start()
    assert (tmp_path / "provider.pid").read_text(encoding="utf-8").strip() == str(process.pid)
    assert process.stdout is not None
    with anyio.fail_after(30):
        grandchild = int((await process.stdout.receive()).split()[0])
    with anyio.fail_after(30):
        await child.stop(StopPolicy(polite_s=0.0, term_s=0.2, kill_s=5.0))
    assert process.returncode is not None
    assert not group_alive(process.pid)
    assert not psutil.pid_exists(grandchild) or psutil.Process(grandchild).status() == psutil.STATUS_ZOMBIE
    assert not (tmp_path / "provider.pid").exists()


PR_SET_CHILD_SUBREAPER = 36  # linux/prctl.h


@contextmanager
def adopting_orphans() -> Iterator[None]:
    """This process as the subreaper of its descendants (Linux's PR_SET_CHILD_SUBREAPER): an orphan is reparented here,
    not to init, and stays a zombie until this process reaps it."""
    prctl = ctypes.CDLL(None, use_errno=True).prctl
    if prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "PR_SET_CHILD_SUBREAPER")
    try:
        yield
    finally:
        prctl(PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0)


@pytest.mark.anyio
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the orphan's reaper is held by a Linux subreaper")
async def test_a_stop_does_not_wait_for_a_zombie_member_to_be_reaped(tmp_path: Path) -> None:
    """A member whose parent was killed first is a zombie until its new parent reaps it (init, which on some machines
    takes a second or more): it runs nothing, so the stop is over without it. The test holds that reaping back (as this
    process's subreaper) until the stop has returned."""
    with adopting_orphans():
        child = _process(tmp_path, STUBBORN)
        process = await child.start()
        assert process.stdout is not None
        with anyio.fail_after(30):
            grandchild = int((await process.stdout.receive()).split()[0])
        try:
            with anyio.fail_after(30):
                await child.stop(StopPolicy(polite_s=0.0, term_s=0.2, kill_s=5.0))
            assert psutil.Process(grandchild).status() == psutil.STATUS_ZOMBIE  # not reaped: still in the group
            assert not group_alive(process.pid)
        finally:
            await anyio.to_thread.run_sync(os.waitpid, grandchild, 0)
    with pytest.raises(ProcessLookupError):
        os.kill(grandchild, 0)


@pytest.mark.anyio
async def test_the_polite_step_comes_first_and_no_signal_follows_a_child_that_obeys(tmp_path: Path) -> None:
    """Closing the input ends a provider that exits on EOF: it exits 0, not by a signal."""
    child = _process(tmp_path, POLITE)
    process = await child.start()

    async def close_input() -> None:
        assert process.stdin is not None
        await process.stdin.aclose()

    with anyio.fail_after(30):
        await child.stop(StopPolicy(polite_s=20.0, term_s=1.0, kill_s=5.0), polite=close_input)
    assert process.returncode == 0


@pytest.mark.anyio
async def test_an_event_stream_keeps_every_event_in_order_and_ends_after_them() -> None:
    events = EventStream("test")
    sent = [StateChange(AgentStatus.IDLE if i % 2 else AgentStatus.ACTIVE, str(i), "t") for i in range(1000)]
    for event in sent:
        events.emit(event)  # never blocks: nothing is read yet
    events.close()
    events.emit(StateChange(AgentStatus.OFF, None, "t"))  # after the end: logged, not raised
    async with events.receive:
        got = [event async for event in events.receive]
    assert got == sent


def test_importing_the_provider_boundary_loads_no_concrete_provider() -> None:
    """`wardian.providers` (and the app's runtime) import neither Codex's nor OpenCode's package until an app runs
    them."""
    code = ("import sys, wardian.providers, wardian.app.runtime; "
            "print(sorted(m for m in sys.modules if m.startswith(('wardian.providers.codex', "
            "'wardian.providers.opencode'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    assert out.stdout.strip() == "[]"


READ_FD = ("import os, sys; fd = int(os.environ['SECRET_FD']); "
           "print(os.read(fd, 4096).decode(), os.read(fd, 4096) == b'', flush=True)")


@pytest.mark.anyio
async def test_a_secret_pipe_reaches_only_the_child_it_is_passed_to_and_holds_the_secret_once(tmp_path: Path) -> None:
    """Our choice (docs/providers/claude.md#private-directories-and-environment): a provider child gets its sign-in
    on a descriptor its variable names, not in its environment; a child started meanwhile without it does not inherit
    the descriptor."""
    secret = "sk-pipe-test-5b3e9d1c7a"
    reader = ProviderProcess([sys.executable, "-c", READ_FD], name="test", env=dict(os.environ), cwd=tmp_path,
                             log_path=tmp_path / "provider.log", pid_path=None, secret_fds={"SECRET_FD": secret})
    process = await reader.start()
    assert process.stdout is not None
    with anyio.fail_after(30):
        said = b"".join([chunk async for chunk in process.stdout]).decode()
        await process.wait()
    assert said == f"{secret} True\n"  # all of it, then end of file: the write end is closed
    other = ProviderProcess([sys.executable, "-c", READ_FD], name="other", env={**os.environ, "SECRET_FD": "3"},
                            cwd=tmp_path, log_path=tmp_path / "other.log", pid_path=None)
    stranger = await other.start()
    with anyio.fail_after(30):
        assert await stranger.wait() != 0  # no such descriptor in a child it was not passed to
    assert "Bad file descriptor" in (tmp_path / "other.log").read_text(encoding="utf-8")
    assert secret not in str(reader.argv)  # only a descriptor's number is given, in a variable


def test_a_secret_larger_than_a_pipe_is_refused() -> None:
    with pytest.raises(ValueError, match="does not fit in a pipe"):
        secret_pipe("k" * (1 << 20))
