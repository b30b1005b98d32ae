"""Starting a real `wardian app run` for a test, a benchmark or a harness run, and stopping it again.

One way for all of them: the product's own start helper (`wardian.app.spawn.start_app`, which waits for the app's
readiness line), an environment without the caller's `WARDIAN_*` variables, the app's stderr either drained into
memory (`AppProcess`) or written to a file the caller names, a startup failure raised with the end of what the app
said, and a bounded stop (SIGTERM, then SIGKILL) that checks the process really ended. `running_app()` wraps the
whole life of an app on a fresh (or given) home.
"""

from __future__ import annotations

import io
import os
import shutil
import signal
import subprocess
import tempfile
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, cast

from wardian.app.spawn import start_app
from wardian.errors import WardianError
from wardian.home import Home
from wardian_harness.processes import app_records

__all__ = ["AppDidNotStart", "AppProcess", "RunningApp", "app_env", "fresh_home", "running_app", "start", "stop"]

DEFAULT_START_TIMEOUT_S = 120.0
"""Far above a healthy start: a loaded 2-core machine starting a cold interpreter can take several seconds."""


class AppDidNotStart(RuntimeError):
    """The app reported a startup error, or neither became ready nor said why in time; `error` is what the start
    helper raised, and the message ends with the end of the app's stderr."""

    def __init__(self, error: WardianError, said: str) -> None:
        super().__init__(f"app did not start: {error.code}: {error.message} {said[-2000:]}".rstrip())
        self.error = error


class AppProcess(subprocess.Popen[bytes]):
    """A `wardian app run` whose stderr is a pipe read continuously into `stderr_data` by a thread of its own,
    never left unread: a chatty app (10,000 refused sessions log a line each) would block on a full pipe. The thread
    closes the pipe at EOF."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs, stderr=subprocess.PIPE)
        self.stderr_data = bytearray()
        self._drainer = threading.Thread(target=self._drain, name=f"app-stderr-{self.pid}", daemon=True)
        self._drainer.start()

    def _drain(self) -> None:
        # A binary Popen with the default bufsize gives a BufferedReader: read1 returns what is there now.
        stream = cast(io.BufferedReader, self.stderr)
        assert stream is not None
        try:
            with suppress(OSError, ValueError):
                while chunk := stream.read1(65536):
                    self.stderr_data += chunk
        finally:
            stream.close()

    def stderr_output(self, timeout_s: float = 30) -> bytes:
        """What the app wrote to stderr so far; all of it once the app has exited (then the rest is waited for, up
        to `timeout_s`: a child that inherited the pipe could keep it open)."""
        if self.poll() is not None:
            self._drainer.join(timeout_s)
        return bytes(self.stderr_data)


@dataclass
class RunningApp:
    """An app that accepts calls: its home and its process."""

    home: Home
    proc: subprocess.Popen[bytes]

    @property
    def socket_path(self) -> str:
        return str(self.home.socket_path)


def fresh_home(prefix: str = "wh") -> Path:
    """A new empty folder under /tmp: a test tool's own temporary paths can exceed a Unix socket's 108 bytes."""
    return Path(tempfile.mkdtemp(prefix=prefix, dir="/tmp"))


def app_env(extra: Mapping[str, str] | None = None, base: Mapping[str, str] | None = None) -> dict[str, str]:
    """`base` (default this process's environment) without its `WARDIAN_*` variables, then `extra`: the app under
    test must not inherit the caller's home, session or store."""
    env = {k: v for k, v in (os.environ if base is None else base).items() if not k.startswith("WARDIAN_")}
    env.update(extra or {})
    return env


def _new_session_popen(argv: Sequence[str], **kwargs: Any) -> subprocess.Popen[bytes]:
    # Never text mode (no `text`/`encoding` is passed), so its pipes, if any, are bytes.
    return cast("subprocess.Popen[bytes]", subprocess.Popen(list(argv), start_new_session=True, **kwargs))


def _drained_popen(argv: Sequence[str], **kwargs: Any) -> subprocess.Popen[bytes]:
    return AppProcess(list(argv), start_new_session=True, **kwargs)


def start(root: Path, *, env: Mapping[str, str] | None = None, command: Sequence[str] | None = None,
          stderr: IO[Any] | None = None, spawn: Callable[..., subprocess.Popen[bytes]] | None = None,
          store_url: str | None = None, host_name: str | None = None, extra_args: Sequence[str] = (),
          timeout_s: float = DEFAULT_START_TIMEOUT_S) -> subprocess.Popen[bytes]:
    """`wardian app run` on the home at `root` (`command`: how to run wardian, default this interpreter's), returned
    once it accepts calls; on a shared PostgreSQL store with `store_url`, serving `host_name`.

    `env` is the app's whole environment (default `app_env()`). Its stderr goes to the open file `stderr` when given,
    else into memory (an `AppProcess`); `spawn(argv, **popen_kwargs)` replaces how the process is made.

    Raises:
        AppDidNotStart: with the end of what the app wrote to stderr.
    """
    spawned: list[subprocess.Popen[bytes]] = []
    make = spawn or (_new_session_popen if stderr is not None else _drained_popen)

    def record(argv: list[str], **kwargs: Any) -> subprocess.Popen[bytes]:
        spawned.append(make(argv, **kwargs))
        app_records.remember(spawned[-1].pid)  # so a test that times out before `stop` still leaves none behind
        return spawned[-1]

    extra = [*(("--store", store_url) if store_url else ()), *(("--host-name", host_name) if host_name else ()),
             *extra_args]
    try:
        return start_app(root, command=command, env=app_env() if env is None else env, stderr=stderr, spawn=record,
                         timeout_s=timeout_s, extra_args=extra)
    except WardianError as exc:
        raise AppDidNotStart(exc, _said(spawned, stderr)) from None


def _said(spawned: list[subprocess.Popen[bytes]], stderr: IO[Any] | None) -> str:
    """The app's stderr so far, from wherever it went."""
    if spawned and isinstance(spawned[0], AppProcess):
        return spawned[0].stderr_output(10).decode(errors="replace")
    name = getattr(stderr, "name", None)
    if isinstance(name, str):
        with suppress(OSError):
            return Path(name).read_text(encoding="utf-8", errors="replace")[-3000:]
    return ""


def stop(proc: subprocess.Popen[bytes], timeout_s: float = 15) -> int:
    """SIGTERM, up to `timeout_s` for a clean exit, then SIGKILL; returns the exit status once the process has ended
    (and its drained stderr is read to EOF). Whatever is left of its process group then gets SIGKILL, and its record
    (`wardian_harness.processes.app_records`) is dropped.

    Raises:
        subprocess.TimeoutExpired: it survived even SIGKILL for 10 s.
    """
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)
    app_records.end_group(proc.pid)
    app_records.forget(proc.pid)
    if isinstance(proc, AppProcess):
        proc.stderr_output()  # read to EOF; the drainer closes the pipe
    elif proc.stderr is not None:
        proc.stderr.close()
    return proc.returncode


@contextmanager
def running_app(root: Path | None = None, *, prefix: str = "wh", env: Mapping[str, str] | None = None,
                extra_env: Mapping[str, str] | None = None, stderr_file: Path | None = None,
                stop_timeout_s: float = 15, **start_kwargs: Any) -> Iterator[RunningApp]:
    """An app on `root` (default: a fresh home under /tmp, removed afterwards) for the `with` block, stopped (and
    checked to have ended) on the way out.

    `extra_env` is added to `env` (default `app_env()`); with `stderr_file` the app's stderr goes to that file, else
    into memory.
    Every other keyword is `start`'s (`command`, `store_url`, `host_name`, `extra_args`, `timeout_s`, `spawn`).
    """
    home = fresh_home(prefix) if root is None else root
    try:
        full_env = {**(app_env() if env is None else env), **(extra_env or {})}
        if stderr_file is None:
            proc = start(home, env=full_env, **start_kwargs)
        else:
            with open(stderr_file, "wb") as err:
                proc = start(home, env=full_env, stderr=err, **start_kwargs)
        try:
            yield RunningApp(Home(home), proc)
        finally:
            stop(proc, stop_timeout_s)
    finally:
        if root is None:
            shutil.rmtree(home, ignore_errors=True)
