"""The runtime of one managed Codex agent: its app-server process, its conversation and its observed state
(a `wardian.providers.base.ProviderRuntime`). It never touches the store: it reports what it observes as `events`
(state changes and turn outcomes, in order, never dropped) and returns the outcome of each delivery (a turn id, or a
typed error); the app persists them. Observed state comes only from Codex's notifications: `turn/started` makes the
runtime active with that exact turn id; `turn/completed` makes it idle and yields the turn's outcome (`turns`).

Error classification (what the app may do next) follows the one table of `rejections` (`as_error`): a thread Codex
does not have is `ConversationGone`, raised once a fresh thread replaced it (`ConversationReplaced`); an unwritten
request is `ProviderUnavailable`; anything else after a byte left is an unknown outcome; a stale turn is `NotActive`
for an interrupt. Sign-in (`signin`): the key goes after `initialize`; no sign-in, no start; a rejected key ends a turn.

The runtime is a `TurnState` (`wardian.providers.turns`: the thread, whether it is ready, the turn observed active,
the submit lock, idleness and the event stream, kept as every provider keeps them) and holds the agent's
conversation (`conversation`: how the thread is opened, replaced and followed, saying so on that state; a start
resumes the agent's thread, one Codex cannot resume is replaced, and the change reported). What is the runtime's own:
the process and its client, the observation of turns (which notification starts and ends a turn, each turn's items
and outcome, the TUI's threads and their status) and delivery, under its submit lock.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any, NoReturn

import anyio
import anyio.abc
import pydantic

from wardian import __version__, errors
from wardian.model import Interaction
from wardian.providers.approvals import ApprovalAsk
from wardian.providers.asking import OpenAsks, secrets_of
from wardian.providers.base import Started, TaskDelivery
from wardian.providers.codex import approvals, chatgpt, projection, signin, threads
from wardian.providers.codex import messages as m
from wardian.providers.codex.app_server import AppServerClient, Notification
from wardian.providers.codex.attached import TuiThreads
from wardian.providers.codex.conversation import CodexConversation
from wardian.providers.codex.items import TASK_ITEM_KIND, inbox_items, steer_context, task_payload
from wardian.providers.codex.launch import AppServerSpec, app_server_command, attach_info, open_stream
from wardian.providers.codex.rejections import Verdict, as_error, classify
from wardian.providers.codex.turns import TurnBook, read_result
from wardian.providers.process import ProviderProcess, StopPolicy
from wardian.providers.turns import TurnState

log = logging.getLogger("wardian.codex.runtime")
# The app-server exits once its input closes; SIGTERM and SIGKILL only for one that does not, within these bounds.
STOP_POLICY = StopPolicy(polite_s=3.0, term_s=3.0, kill_s=3.0)


class CodexRuntime(TurnState):
    """Run with `await tg.start(runtime.run)`: returns once the conversation is ready (thread started/resumed)."""

    def __init__(self, spec: AppServerSpec) -> None:
        super().__init__(f"codex:{spec.name}", spec.thread_id)
        self.spec = spec
        self.capabilities = spec.capabilities
        self.client: AppServerClient | None = None
        self.conversation = CodexConversation(spec, self)
        self._stop = anyio.Event()
        self._child: ProviderProcess | None = None
        self._tui = TuiThreads()
        self._turns = TurnBook()
        self._rejected = signin.RejectedTurns(spec.credentials, agent=spec.name)
        self._asks = OpenAsks(self.emit, secrets_of(spec.env, *(c.secret for c in spec.credentials)))
        self._files = approvals.FileChanges()

    # --- lifecycle ------------------------------------------------------------------------------------

    async def run(self, *, task_status: anyio.abc.TaskStatus[str | None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Start the app-server and the conversation; `task_status` gets the thread id (None while an attached
        runtime waits for its TUI's thread)."""
        spec = self.spec
        started = False
        try:
            self._child = ProviderProcess(app_server_command(spec), name=spec.name, env=spec.env, cwd=spec.workspace,
                                          log_path=spec.stderr_path, pid_path=spec.pid_path,
                                          stdout_to_log=spec.attached)
            process = await self._child.start()
            client = AppServerClient(await open_stream(spec, process), name=f"codex:{spec.name}", tap=self._tapped)
            self.client = client
            client.handle(approvals.COMMAND, self._command_asked)
            client.handle(approvals.FILE_CHANGE, self._file_change_asked)
            client.handle(approvals.ELICITATION, self._elicited)
            async with anyio.create_task_group() as tg:
                await tg.start(client.run)
                tg.start_soon(self._watch, client)
                tg.start_soon(self._rejected.interrupting, self.interrupt)
                await client.request("initialize", {
                    "clientInfo": {"name": "wardian", "title": "Wardian", "version": __version__},
                    "capabilities": {"experimentalApi": True}}, timeout_s=120)
                await client.notify("initialized")
                await signin.sign_in(client, spec.credentials, agent=spec.name)
                await chatgpt.sign_in(client, spec)
                if spec.attached:
                    tg.start_soon(self._follow_tui, client)
                await signin.require_signed_in(client, agent=spec.name, env=spec.env, cwd=spec.workspace)
                await self.conversation.open(client)
                started = True
                task_status.started(self.thread_id)
                await self._stop.wait()
                tg.cancel_scope.cancel()
        finally:
            await self._ended(started)

    async def _ended(self, started: bool) -> None:
        """However `run` ends: the app-server and its group are gone, and the stream says OFF, then ends."""
        self.stopping()
        self._asks.end()
        with anyio.CancelScope(shield=True):
            if self._child is not None:
                await self._child.stop(STOP_POLICY, polite=self._close_input)
            if self.spec.attached:
                # The launch settings were projected into config.toml for the TUI; put back what was there.
                await anyio.to_thread.run_sync(projection.recover, self.spec.codex_home)
        self.ended()
        self._tui.close()
        if not started:
            log.error("Codex runtime %s failed to start", self.spec.name)

    async def _follow_tui(self, client: AppServerClient) -> None:
        """Attached mode: the conversation follows each thread the TUI starts (`attached`), once the current turn has
        ended: never switch threads under a running turn, nor while a submission is in flight. A turn/completed names
        its thread, so a turn left running on the thread left would never be seen to end."""
        async for thread_id in self._tui.receive:
            if thread_id == self.thread_id:
                continue
            while True:
                if self.active_turn_id is not None:
                    await self.wait_idle()
                async with self.submit_lock:
                    # The submission this waited for may have started a turn: then that turn's end comes first.
                    if self.active_turn_id is None:
                        await self.conversation.follow(client, thread_id)
                        break

    async def _subscribe_after_first_turn(self, turn_id: str) -> None:
        thread = await self.conversation.subscribe(self._client())
        # A turn that ended before the subscription ends from the listing; else its turn/completed comes now.
        turn = threads.ended_turn(thread, turn_id, stopped=self._tui.ran_and_stopped(thread.id), agent=self.spec.name)
        if turn is not None and turn.status != "completed":
            turn = await threads.settled_end(self._client(), thread.id, turn)
        if turn is not None:
            self._turn_completed(m.TurnCompletedNotification(thread_id=self.thread_id, turn=turn))

    async def _watch(self, client: AppServerClient) -> None:
        async for note in client.notifications:
            self._observe(note)
        # The reader ended: the app-server is gone. End the runtime so the app sees it.
        self._stop.set()

    def stop(self) -> None:
        self._stop.set()

    async def _close_input(self) -> None:
        """The polite first step of a stop: the app-server exits once its input closes."""
        if self.client is not None:
            await self.client.aclose()

    # --- observation ----------------------------------------------------------------------------------

    def _observe(self, note: Notification) -> None:
        try:
            self._observe_typed(note)
        except pydantic.ValidationError as exc:
            # A turn whose end cannot be read is never guessed: its tasks become uncertain when the runtime ends.
            log.error("%s: skipped a %s notification wardian cannot read (%d problems)", self.spec.name,
                      note.method, exc.error_count())

    def _observe_typed(self, note: Notification) -> None:
        p = note.params
        if note.method == "thread/started":
            self._tui.announced(m.ThreadStartedNotification.model_validate(p).thread)
            return
        if p.get("threadId") not in (None, self.thread_id):
            return
        if note.method == "turn/started":
            self._turn_started(m.TurnStartedNotification.model_validate(p).turn.id)
        elif note.method == "item/completed":
            done = m.ItemCompletedNotification.model_validate(p)
            if done.item.type == "agentMessage":
                self._turns.completed_item(str(done.turn_id), done.item)
        elif note.method == "thread/tokenUsage/updated":
            self._turns.used(p)
        elif note.method == "turn/completed":
            self._turn_completed(m.TurnCompletedNotification.model_validate(p))
        elif note.method == "error":
            self._rejected.observed(p, self.active_turn_id)  # a 401 ends its turn at once, not after retries

    def _turn_started(self, turn_id: str) -> None:
        self._turns.started(turn_id)
        self.activate(turn_id)

    def _turn_completed(self, note: m.TurnCompletedNotification) -> None:
        turn = note.turn
        self._asks.turn_ended(turn.id)
        outcome = self._rejected.outcome(self._turns.ended(turn))
        if self.active_turn_id == turn.id:
            self.deactivate()
        self.emit(outcome)

    # --- approvals (`approvals`: what Codex asks, and its answers) -------------------------------------

    def _tapped(self, note: Notification) -> None:
        self._tui.saw(note)
        self._files.saw(note.method, note.params)

    async def _command_asked(self, params: dict[str, Any]) -> dict[str, Any] | None:
        ask = approvals.command_ask(params)
        decision = await self._asks.ask(ask)
        return approvals.command_answer(decision, params) if decision or self._still_asking(ask) else None

    async def _file_change_asked(self, params: dict[str, Any]) -> dict[str, Any] | None:
        ask = approvals.file_change_ask(params, self._files.of(str(params.get("itemId"))))
        decision = await self._asks.ask(ask)
        return approvals.file_change_answer(decision) if decision or self._still_asking(ask) else None

    async def _elicited(self, params: dict[str, Any]) -> dict[str, Any] | None:
        ask = approvals.elicitation_ask(params)
        if ask is None:
            log.info("%s: declined an MCP server's elicitation (nobody can fill in its form here)", self.spec.name)
            return approvals.elicitation_answer(None)
        decision = await self._asks.ask(ask)
        return approvals.elicitation_answer(decision) if decision or self._still_asking(ask) else None

    def _still_asking(self, ask: ApprovalAsk) -> bool:
        """A withdrawn approval is refused only while its turn runs: once the turn ended, Codex has resolved the
        request itself and takes no answer."""
        return ask.turn_id is None or ask.turn_id == self.active_turn_id

    # --- delivery -------------------------------------------------------------------------------------

    async def _deliver(self, method: str, params: dict[str, Any], timeout_s: float, **details: Any) -> Any:
        """`method` on the agent's thread; Codex's answer. A thread Codex does not have is replaced first
        (`_thread_gone`); any other error answer is raised as what it proves (`rejections.as_error`)."""
        thread_id = self.thread_id
        client = self._client()
        try:
            return await client.request(method, {"threadId": thread_id, **params}, timeout_s=timeout_s)
        except errors.AppServerError as exc:
            if classify(method, exc) is Verdict.THREAD_GONE:
                await self._thread_gone(client, method, thread_id, exc)
            raise as_error(method, exc, **details) from None

    async def _thread_gone(self, client: AppServerClient, method: str, thread_id: str | None,
                           exc: errors.AppServerError) -> NoReturn:
        """Codex has no thread `thread_id` (its answer to `method`): nothing was accepted. The conversation replaces
        it, then ConversationGone has the work offered again there; a conversation left with no thread ends the
        runtime."""
        if not await self.conversation.replace(client, method, thread_id, exc.message):
            self._stop.set()
        raise errors.ConversationGone(f"Codex has no thread {thread_id} ({exc.message}); nothing was accepted, and "
                                      f"the agent's conversation is now {self.thread_id}", method=method)

    def plan_message_id(self) -> str | None:
        return None  # Codex names the turn in its answer to turn/start

    async def start_turn(self, task: TaskDelivery, message_id: str | None = None, *,
                         timeout_s: float = 30.0) -> Started:
        """`turn/start` on the existing thread with one structured task item; returns the turn id.

        Raises:
            ConversationGone: Codex has no such thread; a fresh one replaced it (nothing was accepted).
            ProviderRefused: Codex refused the request as invalid, or has no such method (nothing was
                accepted).
            ProviderBusy: Codex cannot admit work now (nothing was accepted).
            ProviderUnavailable, AppServerError, DeliveryUncertain.
        """
        self._tui.turn_sent(self.thread_id)  # a first turn on a TUI's thread: whether it ran is seen from here on
        raw = await self._deliver("turn/start", {"input": [{"type": "text", "text": task_payload(task)}]}, timeout_s)
        turn_id = read_result(m.TurnStartResponse, raw, "turn/start").turn.id
        if self.active_turn_id is None and not self._turns.has_ended(turn_id):
            self._turn_started(turn_id)
        if not self.conversation.subscribed:
            # The turn was accepted; its outcome is only observable once subscribed. A failure here leaves the
            # task uncertain (the caller's error path), never resubmitted.
            await self._subscribe_after_first_turn(turn_id)
        return Started(turn_id)

    async def steer(self, task: TaskDelivery, expected_turn_id: str, *, timeout_s: float = 30.0) -> str:
        """`turn/steer` fenced by `expectedTurnId`: the literal peer text as input, routing in additionalContext.

        Raises:
            StaleTurn: Codex confirmed that no turn with that id is active (nothing was admitted).
            ConversationGone, ProviderRefused, ProviderBusy: as for `start_turn`.
            ProviderUnavailable, AppServerError, DeliveryUncertain.
        """
        raw = await self._deliver("turn/steer", {
            "expectedTurnId": expected_turn_id, "input": [{"type": "text", "text": task.text}],
            "additionalContext": {TASK_ITEM_KIND: {"kind": "application", "value": steer_context(task)}},
        }, timeout_s, turn_id=expected_turn_id)
        return read_result(m.TurnSteerResponse, raw, "turn/steer").turn_id or expected_turn_id

    async def push(self, records: Sequence[Interaction], *, timeout_s: float = 30.0) -> None:
        """`thread/inject_items`: model-visible history, no turn started.

        Raises:
            ConversationGone, ProviderRefused, ProviderBusy: nothing was pushed (the records go to the receive
                path).
            ProviderUnavailable, AppServerError, DeliveryUncertain.
        """
        await self._deliver("thread/inject_items", {"items": inbox_items(records)}, timeout_s)

    async def interrupt(self, turn_id: str, *, timeout_s: float = 30.0) -> None:
        """`turn/interrupt` of the exact turn. Raises: NotActive (Codex says it is not active), WardianError."""
        try:
            await self._client().request("turn/interrupt", {"threadId": self.thread_id, "turnId": turn_id},
                                         timeout_s=timeout_s)
        except errors.AppServerError as exc:
            if classify("turn/interrupt", exc) in (Verdict.STALE_TURN, Verdict.THREAD_GONE):
                raise errors.NotActive(f"turn {turn_id} is no longer active; nothing was interrupted",
                                       field="target") from None
            raise as_error("turn/interrupt", exc) from None

    def attach_info(self) -> dict[str, Any]:
        return attach_info(self.spec, self.thread_id)

    def _client(self) -> AppServerClient:
        if self.client is None or not self.ready:
            raise errors.ProviderUnavailable(f"the Codex owner of {self.spec.name} is not running; nothing was sent")
        return self.client
