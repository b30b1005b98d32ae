"""The conversation of one managed Codex agent, which its `CodexRuntime` holds: which thread deliveries go to, and how
that thread is opened, replaced and followed.

A start resumes the agent's thread. One Codex cannot resume (no turn, so no rollout; or its rollout was deleted) is
replaced by a fresh `thread/start` in background mode, and in attached mode by the thread the person's TUI opens
(`attached`); either way the change is reported (`ConversationReplaced`). A thread Codex says it no longer has
while the agent runs is replaced once, whichever delivery met it first.

What the runtime owns stays there: the process and its client (handed to each call here), the observation of turns
and delivery. The conversation is handed the runtime's `TurnState` (`wardian.providers.turns`), which keeps the thread
and whether it is ready: it says there when a thread is ready for deliveries (`became_ready`, which on another thread
leaves no turn active), and reports its replacements on the same event stream.
"""

from __future__ import annotations

import logging

import anyio

from wardian import errors
from wardian.model import AgentStatus
from wardian.providers.base import ConversationReplaced, StateChange
from wardian.providers.codex import messages as m
from wardian.providers.codex import threads
from wardian.providers.codex.app_server import AppServerClient
from wardian.providers.codex.launch import AppServerSpec
from wardian.providers.codex.turns import read_result
from wardian.providers.turns import TurnState

log = logging.getLogger("wardian.codex.runtime")


class CodexConversation:
    """How the agent's thread (`state.thread_id`, `state.ready`) is opened, replaced and followed, and whether this
    connection is `subscribed` to its turns (a TUI's brand-new thread is not, until its first turn)."""

    def __init__(self, spec: AppServerSpec, state: TurnState) -> None:
        self.spec = spec
        self.subscribed = True
        self._state = state
        self._replace_lock = anyio.Lock()
        self._gone: tuple[str, str] | None = None  # attached: the thread the TUI's own replaces once adopted

    async def open(self, client: AppServerClient) -> None:
        """Resume the agent's thread, or start one; attached, a thread that cannot be resumed (or none) waits for
        the TUI's own. No fixed deadline while Codex indexes history; each request itself stays bounded."""
        attached, state = self.spec.attached, self._state
        gone = await self._resume(client, state.thread_id) if state.thread_id else None
        if gone is not None:
            assert state.thread_id is not None
            log.warning("%s: Codex cannot resume thread %s (%s); it is replaced by a new one", self.spec.name,
                        state.thread_id, gone)
            if attached:
                self._gone, state.thread_id = (state.thread_id, gone), None
            else:
                await self._start_thread(client, replacing=(state.thread_id, gone))
        elif not state.thread_id and not attached:
            await self._start_thread(client)
        if not state.ready:
            # Attached, and no thread to resume: delivery waits until the TUI's own thread is observed.
            state.emit(StateChange(AgentStatus.STARTING, None, None))

    async def replace(self, client: AppServerClient, method: str, thread_id: str | None, reason: str) -> bool:
        """Codex has no thread `thread_id` (`reason`, its answer to `method`): start a fresh thread in its place, once,
        whichever delivery met it first. False when no fresh thread could be started: the conversation is lost (the
        runtime then ends, the agent goes off, and its next start tries again)."""
        async with self._replace_lock:
            if thread_id is None or self._state.thread_id != thread_id:
                return True  # another delivery has replaced it already
            log.warning("%s: Codex has no thread %s (%s: %s); starting a new one", self.spec.name, thread_id,
                        method, reason)
            self._state.ready = False
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
            self._state.emit(ConversationReplaced(previous, thread_id, reason))
        thread = await threads.adopt(client, thread_id)
        self.subscribed = thread is not None
        self._state.became_ready(thread_id if thread is None else thread.id)

    async def subscribe(self, client: AppServerClient) -> m.Thread:
        """Subscribe to the thread followed unsubscribed, once its first turn has set it up; the thread as the resume
        lists it. Raises: DeliveryUncertain (it never became resumable), WardianError."""
        thread = await threads.resume_after_first_turn(client, self._state.thread_id)
        self.subscribed = True
        return thread

    async def _resume(self, client: AppServerClient, thread_id: str) -> str | None:
        """Resume the agent's thread at start-up; Codex's words when it has no such thread, else None."""
        thread = await threads.resume(client, thread_id)
        if isinstance(thread, str):
            return thread
        self.subscribed = True
        self._state.became_ready(thread.id)
        return None

    async def _start_thread(self, client: AppServerClient, *, replacing: tuple[str, str] | None = None) -> None:
        """A new thread in the workspace; `replacing` (the thread Codex no longer has, and its words) is reported
        as replaced by it."""
        result = read_result(m.ThreadStartResponse, await client.request(
            "thread/start", {"cwd": str(self.spec.workspace)}, timeout_s=600), "thread/start")
        self.subscribed = True
        if replacing is not None:
            self._state.emit(ConversationReplaced(replacing[0], result.thread.id, replacing[1]))
        self._state.became_ready(result.thread.id)
