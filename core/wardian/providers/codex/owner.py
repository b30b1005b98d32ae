"""The owner of one managed Codex agent: its app-server process, its conversation and its observed state.

The owner never touches the store (STYLE.md §2): it reports what it observes (`StateChange`, `TurnOutcome`)
and returns the outcome of each delivery (a turn id, or a typed error); the app persists them.

Observed state comes only from Codex's notifications: `turn/started` makes the owner active with that exact
turn id; `turn/completed` makes it idle and yields the turn's outcome. A steer cancels the in-flight model
stream, so an agentMessage can start and never complete: only completed items count.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
from collections import deque
from collections.abc import Mapping, Sequence
from contextlib import suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import psutil
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from wardian import __version__, errors
from wardian.providers.codex.app_server import AppServerClient, Notification
from wardian.providers.codex.compat import Capabilities
from wardian.providers.codex.transport import MessageStream, NdjsonStream, connect_unix_websocket

log = logging.getLogger("wardian.codex.owner")

STALE_TURN_MARKERS = ("no active turn to steer", "expected active turn id")
TASK_ITEM_KIND = "wardian_task_delivery"
INBOX_ITEM_KIND = "wardian_inbox_delivery"


@dataclass(frozen=True, slots=True)
class OwnerSpec:
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


@dataclass(frozen=True, slots=True)
class TurnOutcome:
    turn_id: str
    status: str  # completed | interrupted | failed
    final_text: str | None
    error: str | None


@dataclass(frozen=True, slots=True)
class StateChange:
    status: str  # idle | active | off | errored
    active_turn_id: str | None
    thread_id: str | None


@dataclass
class _TurnItems:
    final: list[str] = field(default_factory=list)
    unknown_phase: list[str] = field(default_factory=list)


def is_stale_turn(exc: errors.AppServerError) -> bool:
    """A recognised stale-turn rejection: Codex confirms that nothing was admitted."""
    return any(marker in exc.message for marker in STALE_TURN_MARKERS)


def final_text_of(items: _TurnItems, summary: Sequence[Any]) -> str | None:
    """The turn's final answer: the last `final_answer` item, else the last completed item with an unknown
    phase; commentary never (seed: "Commentary is excluded")."""
    if items.final:
        return items.final[-1]
    if items.unknown_phase:
        return items.unknown_phase[-1]
    for item in reversed(summary):
        if isinstance(item, dict) and item.get("type") == "agentMessage" and item.get("phase") != "commentary":
            return str(item.get("text") or "")
    return None


class CodexOwner:
    """Run with `await tg.start(owner.run)`: returns once the conversation is ready (thread started/resumed)."""

    def __init__(self, spec: OwnerSpec) -> None:
        self.spec = spec
        self.thread_id: str | None = spec.thread_id
        self.active_turn_id: str | None = None
        self.ready = False
        self.subscribed = True
        self.client: AppServerClient | None = None
        self._process: anyio.abc.Process | None = None
        self._turns: dict[str, _TurnItems] = {}
        # Turns already seen to end: a `turn/start` answer read after its turn's own turn/completed (a turn that
        # ends at once) must not mark a finished turn active again.
        self._ended: deque[str] = deque(maxlen=64)
        self._outcome_send: MemoryObjectSendStream[TurnOutcome]
        self.outcomes: MemoryObjectReceiveStream[TurnOutcome]
        self._outcome_send, self.outcomes = anyio.create_memory_object_stream[TurnOutcome](1000)
        self._state_send: MemoryObjectSendStream[StateChange]
        self.states: MemoryObjectReceiveStream[StateChange]
        self._state_send, self.states = anyio.create_memory_object_stream[StateChange](1000)
        # Held while a submission's binding is being persisted; the completion observer takes it before
        # looking up a finished turn's tasks, so no completion is published before its binding exists.
        self.submit_lock = anyio.Lock()
        self._tui_send: MemoryObjectSendStream[str]
        self._tui_threads: MemoryObjectReceiveStream[str]
        self._tui_send, self._tui_threads = anyio.create_memory_object_stream[str](100)
        self.idle = anyio.Event()
        self._stop = anyio.Event()

    # --- lifecycle ------------------------------------------------------------------------------------

    async def run(self, *, task_status: anyio.abc.TaskStatus[str | None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Start the app-server and the conversation; `task_status` gets the thread id (None while an attached
        owner waits for its TUI's thread)."""
        spec = self.spec
        attached = spec.mode == "attached"
        cmd = [spec.codex, "app-server"]
        if attached:
            assert spec.socket_path is not None
            with suppress(FileNotFoundError):
                spec.socket_path.unlink()  # a link left by an earlier app-server of this agent
            cmd += ["--listen", f"unix://{spec.socket_path}"]
        for override in spec.overrides:
            cmd += ["-c", override]
        started = False
        with open(spec.stderr_path, "ab") as stderr:  # noqa: ASYNC230 (a local log file, opened once)
            process = await anyio.open_process(cmd, env=dict(spec.env), cwd=str(spec.workspace), stderr=stderr,
                                               stdout=stderr if attached else subprocess.PIPE,
                                               start_new_session=True)
        self._process = process
        if spec.pid_path is not None:
            spec.pid_path.write_text(f"{process.pid}\n", encoding="utf-8")
        try:
            if attached:
                assert spec.socket_path is not None
                stream: MessageStream = await _connect_when_listening(spec.socket_path, process)
            else:
                assert process.stdin is not None
                assert process.stdout is not None
                stream = NdjsonStream(process.stdin, process.stdout)
            client = AppServerClient(stream, name=f"codex:{spec.name}")
            self.client = client
            async with anyio.create_task_group() as tg:
                await tg.start(client.run)
                tg.start_soon(self._watch, client)
                await client.request("initialize", {
                    "clientInfo": {"name": "wardian", "title": "Wardian", "version": __version__},
                    "capabilities": {"experimentalApi": True}}, timeout_s=120)
                await client.notify("initialized")
                if attached:
                    tg.start_soon(self._follow_tui, client)
                # No fixed deadline while Codex indexes history (seed); the request itself stays bounded.
                if self.thread_id:
                    await self._adopt(client, self.thread_id)
                elif not attached:
                    result = await client.request("thread/start", {"cwd": str(spec.workspace)}, timeout_s=600)
                    self._become_ready(str(result["thread"]["id"]))
                else:
                    # Fresh attached agent: delivery waits until the TUI's own thread is observed (seed).
                    self._state(StateChange("starting", None, None))
                started = True
                task_status.started(self.thread_id)
                await self._stop.wait()
                tg.cancel_scope.cancel()
        finally:
            self.ready = False
            self.active_turn_id = None
            with anyio.CancelScope(shield=True):
                await self._terminate()
            self._state(StateChange("off", None, self.thread_id))
            self._outcome_send.close()
            self._state_send.close()
            if not started:
                log.error("Codex owner %s failed to start", spec.name)

    def _become_ready(self, thread_id: str) -> None:
        self.thread_id = thread_id
        self.ready = True
        self.idle.set()
        self._state(StateChange("idle", None, thread_id))

    async def _adopt(self, client: AppServerClient, thread_id: str) -> None:
        """Deliver into this thread from now on, subscribed to its turns (thread/resume).

        A TUI's brand-new thread has no rollout yet and cannot be resumed ("no rollout found"); it is adopted
        unsubscribed, and the first delivery subscribes right after its turn/start has created the rollout.
        """
        try:
            result = await client.request("thread/resume", {"threadId": thread_id}, timeout_s=600)
        except errors.AppServerError as exc:
            if "no rollout found" not in exc.message:
                raise
            # Right after the TUI creates it, the thread's metadata may not be readable yet, and a turn/start in
            # that window fails ("rollout ... is empty"). Deliver only once Codex can read the thread.
            for _ in range(100):
                try:
                    await client.request("thread/read", {"threadId": thread_id}, timeout_s=30)
                    break
                except errors.AppServerError:
                    await anyio.sleep(0.1)
            self.subscribed = False
            self._become_ready(thread_id)
            return
        self.subscribed = True
        self._become_ready(str(result["thread"]["id"]))

    async def _subscribe_after_first_turn(self, turn_id: str) -> None:
        client = self._client()
        for _ in range(300):
            try:
                result = await client.request("thread/resume", {"threadId": self.thread_id}, timeout_s=60)
            except errors.AppServerError as exc:
                # The new thread is still being set up: its rollout is being written ("no rollout found",
                # "rollout ... is empty") or its turn history is not listable yet ("list_turns is not
                # supported yet", seen on 0.171.0).
                if "rollout" not in exc.message and "not supported yet" not in exc.message:
                    raise
                await anyio.sleep(0.1)
                continue
            self.subscribed = True
            # The turn may have ended before the subscription: take its end from the resumed thread.
            for turn in (result.get("thread") or {}).get("turns") or []:
                if isinstance(turn, dict) and turn.get("id") == turn_id and turn.get("status") != "inProgress":
                    self._observe(Notification("turn/completed", {"threadId": self.thread_id, "turn": turn}))
            return
        raise errors.DeliveryUncertain(f"could not subscribe to thread {self.thread_id} after its first turn")

    async def _follow_tui(self, client: AppServerClient) -> None:
        """Attached mode: the TUI's thread is the latest non-ephemeral, user-started thread (codex-offline §7).
        When the TUI starts one (first attach, or /new), wait for the current turn to end, then adopt it."""
        async for thread_id in self._tui_threads:
            if thread_id == self.thread_id:
                continue
            if self.active_turn_id is not None:
                await self.idle.wait()  # never switch threads under a running turn
            async with self.submit_lock:
                log.info("%s: following the TUI to thread %s", self.spec.name, thread_id)
                await self._adopt(client, thread_id)

    async def _watch(self, client: AppServerClient) -> None:
        async for note in client.notifications:
            self._observe(note)
        # The reader ended: the app-server is gone. End the owner so the app sees it.
        self._stop.set()

    def stop(self) -> None:
        self._stop.set()

    async def _terminate(self) -> None:
        process = self._process
        if process is None:
            return
        if self.client is not None:
            with suppress(Exception):
                await self.client.aclose()
        with anyio.move_on_after(3):
            await process.wait()
        if process.returncode is None:
            _killpg(process.pid, signal.SIGTERM)
            with anyio.move_on_after(3):
                await process.wait()
        if process.returncode is None:
            _killpg(process.pid, signal.SIGKILL)
            with anyio.move_on_after(3):
                await process.wait()
        # The MCP servers Codex started share the group; a stray one must not outlive the owner.
        _killpg(process.pid, signal.SIGKILL)
        if self.spec.pid_path is not None:
            with suppress(OSError):
                self.spec.pid_path.unlink()

    # --- observation ----------------------------------------------------------------------------------

    def _state(self, change: StateChange) -> None:
        with suppress(anyio.WouldBlock, anyio.ClosedResourceError, anyio.BrokenResourceError):
            self._state_send.send_nowait(change)

    def _observe(self, note: Notification) -> None:
        p = note.params
        if note.method == "thread/started":
            thread = p.get("thread") or {}
            if thread.get("ephemeral") is False and thread.get("threadSource") == "user" and thread.get("id"):
                with suppress(anyio.WouldBlock, anyio.ClosedResourceError, anyio.BrokenResourceError):
                    self._tui_send.send_nowait(str(thread["id"]))
            return
        if p.get("threadId") not in (None, self.thread_id):
            return
        if note.method == "turn/started":
            turn = p.get("turn") or {}
            turn_id = str(turn.get("id"))
            self.active_turn_id = turn_id
            self._turns.setdefault(turn_id, _TurnItems())
            self.idle = anyio.Event()
            self._state(StateChange("active", turn_id, self.thread_id))
        elif note.method == "item/completed":
            item = p.get("item") or {}
            if item.get("type") == "agentMessage":
                items = self._turns.setdefault(str(p.get("turnId")), _TurnItems())
                phase = item.get("phase")
                text = str(item.get("text") or "")
                if phase == "final_answer":
                    items.final.append(text)
                elif phase is None:
                    items.unknown_phase.append(text)
        elif note.method == "turn/completed":
            turn = p.get("turn") or {}
            turn_id = str(turn.get("id"))
            items = self._turns.pop(turn_id, _TurnItems())
            self._ended.append(turn_id)
            status = str(turn.get("status"))
            error = turn.get("error") or {}
            outcome = TurnOutcome(
                turn_id=turn_id, status=status,
                final_text=final_text_of(items, turn.get("items") or []) if status == "completed" else None,
                error=str(error.get("message")) if isinstance(error, dict) and error.get("message") else None)
            if self.active_turn_id == turn_id:
                self.active_turn_id = None
                self.idle.set()
                self._state(StateChange("idle", None, self.thread_id))
            with suppress(anyio.WouldBlock, anyio.ClosedResourceError, anyio.BrokenResourceError):
                self._outcome_send.send_nowait(outcome)

    # --- delivery -------------------------------------------------------------------------------------

    def _client(self) -> AppServerClient:
        if self.client is None or not self.ready:
            raise errors.ProviderUnavailable(f"the Codex owner of {self.spec.name} is not running; nothing was sent")
        return self.client

    async def start_turn(self, payload: str, *, timeout_s: float = 30.0) -> str:
        """`turn/start` on the existing thread with one structured task item; returns the turn id.

        Raises:
            ProviderUnavailable, AppServerError, DeliveryUncertain.
        """
        result = await self._client().request("turn/start", {
            "threadId": self.thread_id, "input": [{"type": "text", "text": payload}]}, timeout_s=timeout_s)
        turn_id = str(result["turn"]["id"])
        if self.active_turn_id is None and turn_id not in self._ended:
            self.active_turn_id = turn_id
            self._turns.setdefault(turn_id, _TurnItems())
            self.idle = anyio.Event()
            self._state(StateChange("active", turn_id, self.thread_id))
        if not self.subscribed:
            # The turn was accepted; its outcome is only observable once subscribed. A failure here leaves the
            # task uncertain (the caller's error path), never resubmitted.
            await self._subscribe_after_first_turn(turn_id)
        return turn_id

    async def steer(self, text: str, expected_turn_id: str, context: str, *, timeout_s: float = 30.0) -> str:
        """`turn/steer` fenced by `expectedTurnId`: the literal peer text as input, routing in additionalContext.

        Raises:
            StaleTurn: Codex confirmed that no turn with that id is active (nothing was admitted).
            ProviderUnavailable, AppServerError, DeliveryUncertain.
        """
        try:
            result = await self._client().request("turn/steer", {
                "threadId": self.thread_id, "expectedTurnId": expected_turn_id,
                "input": [{"type": "text", "text": text}],
                "additionalContext": {TASK_ITEM_KIND: {"kind": "application", "value": context}},
            }, timeout_s=timeout_s)
        except errors.AppServerError as exc:
            if is_stale_turn(exc):
                raise errors.StaleTurn(exc.message, turn_id=expected_turn_id) from None
            raise
        return str(result.get("turnId", expected_turn_id))

    async def inject(self, items: list[dict[str, Any]], *, timeout_s: float = 30.0) -> None:
        """`thread/inject_items`: model-visible history, no turn started."""
        await self._client().request("thread/inject_items", {"threadId": self.thread_id, "items": items},
                                     timeout_s=timeout_s)

    async def interrupt(self, turn_id: str, *, timeout_s: float = 30.0) -> None:
        await self._client().request("turn/interrupt", {"threadId": self.thread_id, "turnId": turn_id},
                                     timeout_s=timeout_s)


async def _connect_when_listening(path: Path, process: anyio.abc.Process) -> MessageStream:
    """Connect once the attached app-server listens (each attempt bounded; the startup itself is not)."""
    while True:
        if process.returncode is not None:
            raise errors.ProviderUnavailable(f"the Codex app-server exited ({process.returncode}) before listening")
        try:
            with anyio.fail_after(10):
                return await connect_unix_websocket(str(path))
        except (errors.ProviderUnavailable, TimeoutError):
            await anyio.sleep(0.05)


def reap_stale_owner(pid_path: Path, codex_home: Path) -> bool:
    """End an app-server group a killed app left behind (its pid file survived). The group is ended only if its
    leader still runs with this agent's CODEX_HOME, so a reused pid is never touched."""
    try:
        pid = int(pid_path.read_text(encoding="utf-8").strip())
    except (OSError, ValueError):
        return False
    reaped = False
    with suppress(psutil.Error):
        if psutil.Process(pid).environ().get("CODEX_HOME") == str(codex_home):
            _killpg(pid, signal.SIGKILL)
            reaped = True
    with suppress(OSError):
        pid_path.unlink()
    return reaped


def _killpg(pid: int, sig: int) -> None:
    with suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, sig)


def codex_version(codex: str) -> str:
    """`codex --version` output (bounded)."""
    out = subprocess.run([codex, "--version"], capture_output=True, text=True, timeout=60, check=False)
    return out.stdout.strip() or out.stderr.strip()
