"""The conversation of one managed Codex agent (the state `CodexRuntime` builds on): which thread it delivers
into, and how that thread is opened, replaced and followed.

A start resumes the agent's thread. One Codex cannot resume (no turn, so no rollout; or its rollout was deleted) is
replaced by a fresh `thread/start` in background mode, and in attached mode by the thread the person's TUI opens
(`attached`); either way the change is reported (`ConversationReplaced`). A thread Codex says it no longer has
while the agent runs is replaced once, whichever delivery met it first, and the delivery raises `ConversationGone`.
"""

from __future__ import annotations

import logging
from typing import NoReturn

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream

from wardian import errors
from wardian.model import AgentStatus
from wardian.providers.base import ConversationReplaced, ProviderEvent, StateChange
from wardian.providers.codex import messages as m
from wardian.providers.codex import threads
from wardian.providers.codex.app_server import AppServerClient
from wardian.providers.codex.attached import TuiThreads
from wardian.providers.codex.launch import AppServerSpec
from wardian.providers.codex.turns import read_result
from wardian.providers.events import EventStream

log = logging.getLogger("wardian.codex.runtime")


class CodexConversation:
    """The agent's thread and observed state, and the events reporting them; the process, the observation of
    turns and delivery are `CodexRuntime`'s."""

    def __init__(self, spec: AppServerSpec) -> None:
        self.spec = spec
        self.thread_id: str | None = spec.thread_id
        self.active_turn_id: str | None = None
        self.ready = False
        self.subscribed = True
        self.client: AppServerClient | None = None
        self._events = EventStream(f"codex:{spec.name}")
        self._emit = self._events.emit
        self.events: MemoryObjectReceiveStream[ProviderEvent] = self._events.receive
        self.submit_lock = anyio.Lock(fast_acquire=True)  # uncontended: no yield between claim and write
        self._tui = TuiThreads()
        self.idle = anyio.Event()
        self._stop = anyio.Event()
        self._replace_lock = anyio.Lock()
        self._gone: tuple[str, str] | None = None  # attached: the thread the TUI's own replaces once adopted

    async def _open_conversation(self, client: AppServerClient) -> None:
        """Resume the agent's thread, or start one; attached, a thread that cannot be resumed (or none) waits for
        the TUI's own. No fixed deadline while Codex indexes history; each request itself stays bounded."""
        attached = self.spec.attached
        gone = await self._resume(client, self.thread_id) if self.thread_id else None
        if gone is not None:
            assert self.thread_id is not None
            log.warning("%s: Codex cannot resume thread %s (%s); it is replaced by a new one", self.spec.name,
                        self.thread_id, gone)
            if attached:
                self._gone, self.thread_id = (self.thread_id, gone), None
            else:
                await self._start_thread(client, replacing=(self.thread_id, gone))
        elif not self.thread_id and not attached:
            await self._start_thread(client)
        if not self.ready:
            # Attached, and no thread to resume: delivery waits until the TUI's own thread is observed.
            self._emit(StateChange(AgentStatus.STARTING, None, None))

    def _become_ready(self, thread_id: str) -> None:
        self.thread_id = thread_id
        self.ready = True
        self.idle.set()
        self._emit(StateChange(AgentStatus.IDLE, None, thread_id))

    async def _resume(self, client: AppServerClient, thread_id: str) -> str | None:
        """Resume the agent's thread at start-up; Codex's words when it has no such thread, else None."""
        thread = await threads.resume(client, thread_id)
        if isinstance(thread, str):
            return thread
        self.subscribed = True
        self._become_ready(thread.id)
        return None

    async def _start_thread(self, client: AppServerClient, *, replacing: tuple[str, str] | None = None) -> None:
        """A new thread in the workspace; `replacing` (the thread Codex no longer has, and its words) is reported
        as replaced by it."""
        result = read_result(m.ThreadStartResponse, await client.request(
            "thread/start", {"cwd": str(self.spec.workspace)}, timeout_s=600), "thread/start")
        self.subscribed = True
        self.active_turn_id = None
        if replacing is not None:
            self._emit(ConversationReplaced(replacing[0], result.thread.id, replacing[1]))
        self._become_ready(result.thread.id)

    async def _thread_gone(self, method: str, thread_id: str | None, exc: errors.AppServerError) -> NoReturn:
        """Codex has no thread `thread_id` (its answer to `method`): nothing was accepted. Start a fresh thread in its
        place (once, whichever delivery met it first), then raise ConversationGone so the work is offered again there.
        A fresh thread that cannot be started ends the runtime (the agent goes off; its next start tries again)."""
        async with self._replace_lock:
            if thread_id is not None and self.thread_id == thread_id:
                log.warning("%s: Codex has no thread %s (%s: %s); starting a new one", self.spec.name, thread_id,
                            method, exc.message)
                self.ready = False
                try:
                    await self._start_thread(self._client(ready=False), replacing=(thread_id, exc.message))
                except errors.WardianError as failure:
                    log.error("%s: no new thread could be started (%s); the runtime ends", self.spec.name,
                              failure.message)
                    self._stop.set()
        raise errors.ConversationGone(f"Codex has no thread {thread_id} ({exc.message}); nothing was accepted, and "
                                      f"the agent's conversation is now {self.thread_id}", method=method)

    async def _adopt(self, client: AppServerClient, thread_id: str) -> None:
        """Deliver into this thread from now on, subscribed to its turns if Codex can resume it yet (`threads.adopt`);
        else the first delivery subscribes right after its turn/start has created the rollout."""
        thread = await threads.adopt(client, thread_id)
        self.subscribed = thread is not None
        self._become_ready(thread_id if thread is None else thread.id)

    async def _follow_tui(self, client: AppServerClient) -> None:
        """Attached mode: adopt each thread the TUI starts (`attached`), once the current turn has ended."""
        async for thread_id in self._tui.receive:
            if thread_id == self.thread_id:
                continue
            if self.active_turn_id is not None:
                await self.idle.wait()  # never switch threads under a running turn
            async with self.submit_lock:
                log.info("%s: following the TUI to thread %s", self.spec.name, thread_id)
                if self._gone is not None:
                    (previous, reason), self._gone = self._gone, None
                    self._emit(ConversationReplaced(previous, thread_id, reason))
                await self._adopt(client, thread_id)

    def _client(self, *, ready: bool = True) -> AppServerClient:
        if self.client is None or (ready and not self.ready):
            raise errors.ProviderUnavailable(f"the Codex owner of {self.spec.name} is not running; nothing was sent")
        return self.client
