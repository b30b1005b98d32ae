"""Starting one agent's `opencode serve`: what it is given (`ServeSpec`), its command line, the address it prints
once it listens, and the message ids wardian chooses for what it sends.

serve is started on a free loopback port (`--port 0`), in the agent's workspace, with private XDG homes, a Basic
auth password read from a 0600 file at each request and the agent's keys in its environment (never logged, never on
its command line).
"""

from __future__ import annotations

import base64
import itertools
import logging
import secrets
import time
from collections.abc import Mapping
from contextlib import suppress
from dataclasses import dataclass, field
from pathlib import Path

import anyio
import anyio.abc

from wardian import errors
from wardian.auth.model import Credential
from wardian.providers.base import Capabilities

log = logging.getLogger("wardian.opencode")

LISTEN_TIMEOUT_S = 180.0
"""How long serve may take to print its address. With wardian's placeholders in the agent's config dir (`plugin_deps`)
a fresh agent's serve listens within 3-6 s on two loaded cores; an agent whose settings list `plugin` packages gets no
placeholders, and OpenCode then fetches them from npm before it listens (over 20 s seen offline, more on a slow
registry), so the margin stays wide: a serve that never listens is still reported, only later."""
_LISTENING = "listening on "
_ALPHABET = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
_ids = itertools.count(1)


@dataclass(frozen=True, slots=True)
class ServeSpec:
    name: str
    opencode: str
    workspace: Path
    env: Mapping[str, str] = field(repr=False)
    """serve's whole environment: it holds the server password and the agent's keys (never logged)."""
    password_path: Path
    session_id: str | None
    capabilities: Capabilities
    stderr_path: Path
    pid_path: Path | None = None
    keys: Mapping[str, Credential] = field(default_factory=dict[str, Credential])
    """The agent's API keys by OpenCode provider id, in `env` as OPENCODE_AUTH_CONTENT (`signin`)."""
    data_dir: Path | None = None
    """The agent's XDG_DATA_HOME, where OpenCode would write an `auth.json`."""


def serve_command(spec: ServeSpec) -> list[str]:
    return [spec.opencode, "serve", "--port", "0", "--hostname", "127.0.0.1"]


def basic_auth(password_path: Path) -> str:
    """The Authorization header for the password `serve` was started with, read from its file now."""
    password = password_path.read_text(encoding="utf-8").strip()
    return "Basic " + base64.b64encode(f"opencode:{password}".encode()).decode()


def new_message_id() -> str:
    """A `msg_` id that sorts like OpenCode's own: (Unix ms * 4096 + a counter) as 12 hex digits (modulo 2**48, as
    OpenCode does), then 14 random base-62 characters. Later ids sort after earlier ones, OpenCode's and ours alike."""
    value = (time.time_ns() // 1_000_000 * 0x1000 + next(_ids) % 0x1000) & 0xFFFFFFFFFFFF
    return "msg_" + format(value, "012x") + "".join(secrets.choice(_ALPHABET) for _ in range(14))


async def listening_url(spec: ServeSpec, process: anyio.abc.Process) -> str:
    """The URL serve prints on stdout ("opencode server listening on http://127.0.0.1:PORT"); earlier lines
    (warnings) are skipped.

    Raises:
        ProviderUnavailable: serve exited first (a port taken, a broken config), or listens elsewhere.
        TimeoutError: no address within LISTEN_TIMEOUT_S.
    """
    assert process.stdout is not None
    buffer = b""
    with anyio.fail_after(LISTEN_TIMEOUT_S):
        while True:
            while b"\n" not in buffer:
                try:
                    buffer += await process.stdout.receive(4096)
                except anyio.EndOfStream:
                    code = await process.wait()
                    raise errors.ProviderUnavailable(
                        f"opencode serve exited ({code}) before it listened; see {spec.stderr_path}") from None
            raw, buffer = buffer.split(b"\n", 1)
            line = raw.decode("utf-8", "replace")
            if _LISTENING in line:
                break
            log.info("%s: opencode serve said %r", spec.name, line[:200])
    url = line.split(_LISTENING, 1)[1].strip()
    if not url.startswith("http://127.0.0.1:"):
        raise errors.ProviderUnavailable(f"opencode serve listens on {url[:80]!r}, not on 127.0.0.1")
    return url


async def drain(process: anyio.abc.Process) -> None:
    """Read and drop what serve prints after its address, so it never blocks on a full pipe."""
    assert process.stdout is not None
    with suppress(anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
        while True:
            await process.stdout.receive(65536)
