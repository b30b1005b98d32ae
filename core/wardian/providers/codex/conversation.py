"""The conversation of one managed Codex agent, which its `CodexRuntime` holds: which thread deliveries go to, and how
that thread is opened, replaced and followed.

A start resumes the agent's thread. One Codex cannot resume (no turn, so no rollout; or its rollout was deleted) is
replaced by a fresh `thread/start` in background mode, and in attached mode by the thread the person's TUI opens
(`attached`); either way the change is reported (`ConversationReplaced`). A thread Codex says it no longer has
while the agent runs is replaced once, whichever delivery met it first.

What the runtime owns stays there: the process and its client (handed to each call here), the observation of turns
and delivery. The conversation reports its replacements on the runtime's event stream (`emit`) and tells the runtime
when a thread is ready for deliveries (`on_ready`), so that the runtime's turn state follows it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import anyio

from wardian import errors
from wardian.model import AgentStatus
from wardian.providers.base import ConversationReplaced, ProviderEvent, StateChange
from wardian.providers.codex import messages as m
from wardian.providers.codex import threads
from wardian.providers.codex.app_server import AppServerClient
from wardian.providers.codex.launch import AppServerSpec
from wardian.providers.codex.turns import read_result

log = logging.getLogger("wardian.codex.runtime")

ReadyHook = Callable[[str, bool], None]
"""Called with the thread deliveries go to from now on, and whether it is a new thread (on which no turn runs)."""


class CodexConversation:
    """The agent's thread (`thread_id`), whether it is `ready` for deliveries, and whether this connection is
    `subscribed` to its turns (a TUI's brand-new thread is not, until its first turn)."""

    def __init__(self, spec: AppServerSpec, *, emit: Callable[[ProviderEvent], None], on_ready: ReadyHook) -> None:
        self.spec = spec
        self.thread_id: str | None = spec.thread_id
        self.ready = False
        self.subscribed = True
        self._emit = emit
        self._on_ready = on_ready
        self._replace_lock = anyio.Lock()
        self._gone: tuple[str, str] | None = None  # attached: the thread the TUI's own replaces once adopted

    async def open(self, client: AppServerClient) -> None:
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

    async def replace(self, client: AppServerClient, method: str, thread_id: str | None, reason: str) -> bool:
        """Codex has no thread `thread_id` (`reason`, its answer to `method`): start a fresh thread in its place, once,
        whichever delivery met it first. False when no fresh thread could be started: the conversation is lost (the
        runtime then ends, the agent goes off, and its next start tries again)."""
        async with self._replace_lock:
            if thread_id is None or self.thread_id != thread_id:
                return True  # another delivery has replaced it already
            log.warning("%s: Codex has no thread %s (%s: %s); starting a new one", self.spec.name, thread_id,
                        method, reason)
            self.ready = False
            try:
                await self._start_thread(client, replacing=(thread_id, reason))
            except errors.WardianError as failure:
                log.error("%s: no new thread could be started (%s); the runtime ends", self.spec.name,
                          failure.message)
                return False
            return True

    async def follow(self, client: AppServerClient, thread_id: str) -> None:
        """Attached mode: deliver into `thread_id`, a thread the TUI started, from now on (the runtime calls it between
        turns); subscribed to its turns if Codex can resume it yet (`threads.adopt`), else the first delivery
        subscribes right after its turn/start has created the rollout (`subscribe`)."""
        log.info("%s: following the TUI to thread %s", self.spec.name, thread_id)
        if self._gone is not None:
            (previous, reason), self._gone = self._gone, None
            self._emit(ConversationReplaced(previous, thread_id, reason))
        thread = await threads.adopt(client, thread_id)
        self.subscribed = thread is not None
        self._become_ready(thread_id if thread is None else thread.id)

    async def subscribe(self, client: AppServerClient) -> m.Thread:
        """Subscribe to the thread followed unsubscribed, once its first turn has set it up; the thread as the resume
        lists it. Raises: DeliveryUncertain (it never became resumable), WardianError."""
        thread = await threads.resume_after_first_turn(client, self.thread_id)
        self.subscribed = True
        return thread

    def _become_ready(self, thread_id: str, *, new_thread: bool = False) -> None:
        self.thread_id = thread_id
        self.ready = True
        self._on_ready(thread_id, new_thread)

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
        if replacing is not None:
            self._emit(ConversationReplaced(replacing[0], result.thread.id, replacing[1]))
        self._become_ready(result.thread.id, new_thread=True)
