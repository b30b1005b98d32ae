"""Starting a `codex app-server`: which Codex (`resolve_codex`), what one agent's is given (`AppServerSpec`,
`app_server_env`), its command line, and the message stream to it (its stdio in background mode; a Unix-socket
WebSocket in attached mode, which a person's Codex TUI joins with `--remote`)."""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Mapping
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import anyio.abc

from wardian import errors
from wardian.auth.model import ChatGPTTokenSource, Credential
from wardian.providers.base import Capabilities
from wardian.providers.codex.compat import GATE
from wardian.providers.codex.transport import MessageStream, NdjsonStream, connect_unix_websocket
from wardian.providers.probe import find_executable, version_output
from wardian.providers.process import child_env

log = logging.getLogger("wardian.codex")

RUST_LOG = "RUST_LOG"
_LEVEL = re.compile(r"(?i:trace|debug|info|warn|error|off|[0-5])")
_CAPPED = {"trace": "debug", "5": "4"}
"""Levels above `debug` and what they become (EnvFilter's level names, any case, and its numbers 0-5)."""


@dataclass(frozen=True, slots=True)
class AppServerSpec:
    name: str
    codex: str
    codex_home: Path
    workspace: Path
    overrides: tuple[str, ...]
    env: Mapping[str, str]
    thread_id: str | None
    capabilities: Capabilities
    stderr_path: Path
    pid_path: Path | None = None  # where the app-server's process group is recorded while it runs
    mode: str = "background"  # background: stdio app-server; attached: --listen unix:// for a Codex TUI
    socket_path: Path | None = None  # attached mode: where the app-server listens (the TUI's --remote)
    config: tuple[str, ...] = ()  # the agent's own -c settings, as `agent attach` gives them to the TUI
    credentials: tuple[Credential, ...] = ()  # signed in over the app-server (`signin`), never in env or argv
    chatgpt: ChatGPTTokenSource | None = None  # the agent signs in with wardian's ChatGPT session (`chatgpt`)

    @property
    def attached(self) -> bool:
        return self.mode == "attached"


def clamp_rust_log(value: str) -> str:
    """`value` (an EnvFilter directive list, as in RUST_LOG) with no directive above `debug`.

    At `trace` the crates under Codex write what goes over the wire, headers included (0.171.0 logs its Responses
    WebSocket handshake, `authorization: Bearer <key>` among it, under `tungstenite::handshake::client`), and the
    app keeps Codex's stderr in the agent's log; at `debug` and below it was seen to write none of the agent's
    credentials (docs/providers/codex.md#logs). Every directive keeps its targets and spans and only loses `trace`,
    which makes the filter's highest level `debug` whatever the directives' order or precedence: a directive that
    names no level (it means `trace`) is given `=debug`, and one EnvFilter cannot parse stays unparseable (it is
    ignored either way). EnvFilter splits directives at every comma, and so does this.
    """
    out: list[str] = []
    for directive in value.split(","):
        if not directive:
            continue
        if _LEVEL.fullmatch(directive):
            out.append(_CAPPED.get(directive.lower(), directive))
            continue
        target, sep, level = directive.rpartition("=")
        if sep and _LEVEL.fullmatch(level):
            out.append(f"{target}={_CAPPED.get(level.lower(), level)}")
        else:  # no level (or an empty one): every level of its target, trace included
            out.append(f"{directive.removesuffix('=')}=debug")
    return ",".join(out)


def app_server_env(codex_home: Path) -> dict[str, str]:
    """The environment of a Codex app-server whose home is `codex_home` (an agent's, or the one holding wardian's
    ChatGPT session): the app's own, with that home, and the app's RUST_LOG with every directive at `debug` at
    most (`clamp_rust_log`); RUST_BACKTRACE passes unchanged (a backtrace lists code locations, not values)."""
    env = child_env({"CODEX_HOME": str(codex_home)}, drop=("CODEX_HOME", RUST_LOG))
    given = os.environ.get(RUST_LOG, "")
    clamped = clamp_rust_log(given)
    if clamped:
        env[RUST_LOG] = clamped
    if clamped != given:
        log.info("Codex gets RUST_LOG=%s (the app's RUST_LOG with no directive above debug)", clamped or "(unset)")
    return env


def app_server_command(spec: AppServerSpec) -> list[str]:
    """The app-server's argv. Attached, it listens on the agent's socket, whose link an earlier app-server of this
    agent may have left behind: it is removed first."""
    cmd = [spec.codex, "app-server"]
    if spec.attached:
        assert spec.socket_path is not None
        with suppress(FileNotFoundError):
            spec.socket_path.unlink()
        cmd += ["--listen", f"unix://{spec.socket_path}"]
    for override in spec.overrides:
        cmd += ["-c", override]
    return cmd


async def open_stream(spec: AppServerSpec, process: anyio.abc.Process) -> MessageStream:
    """The message stream to the started app-server."""
    if spec.attached:
        assert spec.socket_path is not None
        return await connect_when_listening(spec.socket_path, process)
    assert process.stdin is not None
    assert process.stdout is not None
    return NdjsonStream(process.stdin, process.stdout)


async def connect_when_listening(path: Path, process: anyio.abc.Process) -> MessageStream:
    """Connect once the attached app-server listens (each attempt bounded; the startup itself is not)."""
    while True:
        if process.returncode is not None:
            raise errors.ProviderUnavailable(f"the Codex app-server exited ({process.returncode}) before listening")
        try:
            with anyio.fail_after(10):
                return await connect_unix_websocket(str(path))
        except (errors.ProviderUnavailable, TimeoutError):
            await anyio.sleep(0.05)


def attach_info(spec: AppServerSpec, thread_id: str | None) -> dict[str, Any]:
    """How a Codex TUI attaches to this app-owned app-server (`wardian agent attach`). Raises: NotActive (the agent
    runs in background mode)."""
    if not spec.attached:
        raise errors.NotActive(f"agent {spec.name!r} has no attached-mode owner; start it with "
                               f"`wardian agent start {spec.name} --mode attached`", field="agent")
    return {"socket": str(spec.socket_path), "workspace": str(spec.workspace), "codex": spec.codex,
            "codex_home": str(spec.codex_home), "thread_id": thread_id, "config": list(spec.config)}


def resolve_codex() -> str:
    """The Codex executable: WARDIAN_CODEX, else `codex` on PATH (beside `app_server_env` so that wardian's own ChatGPT
    sign-in, which starts a Codex of its own, does not import the provider that holds it).

    Raises:
        Unsupported: none found.
    """
    return find_executable(GATE)


codex_version = version_output  # the harness and Codex's ChatGPT sign-in read a Codex's version by this name
