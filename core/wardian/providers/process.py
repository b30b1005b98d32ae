"""Provider processes: the one lifecycle of a provider's child (`ProviderProcess`), the environment it gets, and
ending a process group the app left behind.

Every provider runtime runs its executable through `ProviderProcess`: as the root of a process tree of its own
(`wardian.providers.tree`: on POSIX a process group, `start_new_session=True`; on Windows a kill-on-close Job Object
the app holds), with the leader's pid recorded under the home's `run/` while it runs, and ended by one bounded
sequence when it stops: the provider's own polite step (closing its input, say), a wait, SIGTERM to the group (on
Windows the job's end: there is no polite signal), a wait, SIGKILL to the group, and a bounded wait until no
process of the tree is left (the MCP servers the provider started share it), then the pid record goes. A killed
app leaves that record behind; the next start of the agent ends the group only if its leader still runs with the
agent's own private provider home in its environment, so a reused pid is never touched (`reap_left_behind`, through
`homes.end_left_behind`). On Windows a killed app's jobs end with it. Verified on Linux; the Windows tree under
Wine (tests/windows/test_providers.py).

What a provider does with it (every provider does exactly this; a new provider needs nothing else):

```
Provider.prepare(spec, info)   private = ProviderHome(<agent dir>/<provider>, {"<ITS_HOME_VAR>": ...}); private.make()
                               end_left_behind(spec.pid_path, "<ITS_HOME_VAR>", <that dir>, agent=..., label=...)
                               build the runtime with env=child_env(private.env())
ProviderRuntime.run()          child = ProviderProcess(argv, name=..., env=..., cwd=spec.workspace,
                                                       log_path=spec.log_path, pid_path=spec.pid_path)
                               process = await child.start()      # talk to it over process.stdin/stdout or a socket
                               ... finally, shielded: await child.stop(ITS_STOP_POLICY, polite=<its own first step>)
```
`StopPolicy` holds the provider's own bounds; `polite` is optional (OpenCode has none, Codex and Claude Code close
the input).
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from collections.abc import Awaitable, Callable, Mapping, Sequence
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path

import anyio
import anyio.abc
import psutil

from wardian import errors
from wardian.home import ENV_HOME, ENV_SESSION
from wardian.providers.tree import SPAWN_OPTIONS, Tree, end_left_behind

log = logging.getLogger("wardian.providers.process")


def child_env(extra: Mapping[str, str], *, drop: tuple[str, ...] = ()) -> dict[str, str]:
    """This process's environment for a provider child, without wardian's own identity (the agent's MCP server gets
    its WARDIAN_HOME and WARDIAN_SESSION_ID from its registration, never ours), with `extra` on top."""
    env = {k: v for k, v in os.environ.items() if k not in (ENV_HOME, ENV_SESSION, *drop)}
    if getattr(sys, "frozen", False):
        # PyInstaller points LD_LIBRARY_PATH at its own bundle; the provider and the shells it runs need the user's.
        original = env.pop("LD_LIBRARY_PATH_ORIG", None)
        if original is not None:
            env["LD_LIBRARY_PATH"] = original
        else:
            env.pop("LD_LIBRARY_PATH", None)
    env.update(extra)
    return env


def secret_pipe(secret: str) -> int:
    """A pipe that holds `secret` and nothing else, its write end closed: the read end, not inheritable (hand it to
    one child in `pass_fds`, then close it, as `ProviderProcess(secret_fds=...)` does). A child that reads it once
    has it in memory only: not in its environment or command line, where every process of the same user could read
    it, nor on disk.

    Raises:
        ValueError: the secret does not fit in the pipe's buffer (64 KiB on Linux; no credential comes near it).
    """
    data = secret.encode()
    read_end, write_end = os.pipe()
    try:
        os.set_blocking(write_end, False)  # a write that would not fit fails instead of waiting for a reader
        written = os.write(write_end, data) if data else 0
    except BlockingIOError:
        written = -1
    except BaseException:
        os.close(read_end)
        raise
    finally:
        os.close(write_end)
    if written != len(data):
        os.close(read_end)
        raise ValueError(f"a secret of {len(data)} bytes does not fit in a pipe")
    return read_end


async def end_tree(tree: Tree, *, grace_s: float = 3.0) -> bool:
    """Kill what is left of a provider's process tree and wait (bounded) until none of it runs, so a caller that
    stops an agent returns only once its processes are gone (none outlives the agent it served). True when the tree
    is gone."""
    tree.kill()
    with anyio.move_on_after(grace_s):
        # Polled: the tree's members are not our children (the leader was reaped), so no event tells their end.
        while tree.alive():  # noqa: ASYNC110
            await anyio.sleep(0.01)
        return True
    return not tree.alive()


def record_pid(pid_path: Path, pid: int) -> None:
    pid_path.write_text(f"{pid}\n", encoding="utf-8")


def reap_left_behind(pid_path: Path, env_key: str, env_value: str) -> bool:
    """End the process group recorded in `pid_path` if its leader still runs with `env_key=env_value` in its
    environment (the agent's private provider home), then forget the record. True when a group was ended."""
    try:
        pid = int(pid_path.read_text(encoding="utf-8").strip())
    except (OSError, ValueError):
        return False
    reaped = False
    with suppress(psutil.Error):
        if psutil.Process(pid).environ().get(env_key) == env_value:
            end_left_behind(pid)
            reaped = True
    with suppress(OSError):
        pid_path.unlink()
    return reaped


@dataclass(frozen=True, slots=True)
class StopPolicy:
    """How long each step of a provider's stop may take (seconds); each is a bound, not a pause."""

    polite_s: float = 3.0
    """After the provider's own polite step (e.g. its input closed), before SIGTERM."""
    term_s: float = 3.0
    """After SIGTERM to the group, before SIGKILL."""
    kill_s: float = 3.0
    """After SIGKILL to the group, for the leader to be reaped and every member gone."""


class ProviderProcess:
    """One provider child, from spawn to a bounded end: `await start()`, then `await stop()` (shielded by the
    caller's cleanup). The leader's pid is recorded at `pid_path` while it runs; `stdout` is a pipe unless
    `stdout_to_log`, where it joins stderr in the agent's provider log. `secret_fds` (variable -> secret) hands each
    secret over in a `secret_pipe` of its own at every start: the child's variable names the descriptor, and the
    secret is in neither its environment nor its command line."""

    def __init__(self, argv: Sequence[str], *, name: str, env: Mapping[str, str], cwd: Path, log_path: Path,
                 pid_path: Path | None, stdin: int | None = subprocess.PIPE, stdout_to_log: bool = False,
                 secret_fds: Mapping[str, str] | None = None) -> None:
        self.argv = list(argv)
        self.name = name
        self._env = dict(env)
        self._secret_fds = dict(secret_fds or {})
        self._cwd = cwd
        self._log_path = log_path
        self._pid_path = pid_path
        self._stdin = stdin
        self._stdout_to_log = stdout_to_log
        self._process: anyio.abc.Process | None = None
        self._tree: Tree | None = None

    @property
    def process(self) -> anyio.abc.Process:
        """The running child. Raises: RuntimeError before `start`."""
        if self._process is None:
            raise RuntimeError(f"the provider process of {self.name} was not started")
        return self._process

    @property
    def returncode(self) -> int | None:
        return None if self._process is None else self._process.returncode

    async def start(self) -> anyio.abc.Process:
        """Spawn the child as the root of a process tree of its own (`wardian.providers.tree`) and record its pid.

        Raises:
            OSError: the child could not be started, or (Windows) not contained; nothing is left running.
            Unsupported: (Windows) it is to be handed a secret in a pipe; nothing was started.
        """
        if self._secret_fds and sys.platform == "win32":
            # subprocess passes no descriptor but the standard three on Windows (no pass_fds), and a secret never
            # goes into the environment or the command line instead.
            raise errors.Unsupported(
                f"the provider of {self.name} takes its credential in an inherited pipe, which wardian does not hand "
                "over on Windows yet (docs/guide/windows.md#what-remains-on-windows); nothing was started",
                field="auth")
        fds = {variable: secret_pipe(secret) for variable, secret in self._secret_fds.items()}
        try:
            with open(self._log_path, "ab") as log_file:  # noqa: ASYNC230 (a local log file, opened once)
                self._process = await anyio.open_process(
                    self.argv, env={**self._env, **{v: str(fd) for v, fd in fds.items()}}, cwd=str(self._cwd),
                    stdin=self._stdin, stderr=log_file, stdout=log_file if self._stdout_to_log else subprocess.PIPE,
                    pass_fds=tuple(fds.values()), **SPAWN_OPTIONS)
        finally:
            for fd in fds.values():
                os.close(fd)  # the child holds its own copy; the secret leaves this process with the pipe
        try:
            self._tree = Tree(self._process.pid)
        except OSError:
            # Uncontained, the agent's tree could outlive a stop or the app: do not run on.
            self._process.kill()
            with anyio.move_on_after(StopPolicy().kill_s), anyio.CancelScope(shield=True):
                await self._process.wait()
            raise
        if self._pid_path is not None:
            record_pid(self._pid_path, self._process.pid)
        return self._process

    async def stop(self, policy: StopPolicy | None = None,
                   polite: Callable[[], Awaitable[None]] | None = None) -> None:
        """End the child and its whole group, each step bounded (module docstring), then forget its pid record.
        `polite` is the provider's own first step; its failure only moves on to the signals."""
        process = self._process
        if process is None:
            return
        policy = policy or StopPolicy()
        if polite is not None and process.returncode is None:
            with suppress(Exception):
                await polite()
            with anyio.move_on_after(policy.polite_s):
                await process.wait()
        tree = self._tree
        assert tree is not None  # set with the process
        if process.returncode is None:
            tree.terminate()
            with anyio.move_on_after(policy.term_s):
                await process.wait()
        # Kill the tree even when the leader is gone: the MCP servers it started share it, and a stop returns only
        # once none of them is left.
        if not await end_tree(tree, grace_s=policy.kill_s):
            log.warning("%s: processes of the provider's tree (leader %d) outlived the kill", self.name, process.pid)
        tree.close()
        with anyio.move_on_after(policy.kill_s):
            await process.wait()
        if self._pid_path is not None:
            with suppress(OSError):
                self._pid_path.unlink()
