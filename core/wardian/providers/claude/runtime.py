"""The runtime of one Claude Code agent: one long-lived `claude -p` stream-json process, its one session, and what
the app observes of it (a `wardian.providers.base.ProviderRuntime`; docs/providers/claude.md).

```
claude -p --input-format stream-json --output-format stream-json --verbose --mcp-config FILE --strict-mcp-config
       [--allowedTools a,b] [--permission-prompt-tool stdio] (--session-id=<new uuid> | --resume=<id>)
       (cwd: the workspace; private dirs)
  in:  control_request initialize         the answer is the readiness signal (`system/init` comes only per turn)
       user {uuid}                         a task: a new turn when idle, folded into the running one (steer) else
       user {uuid, shouldQuery: false}     information: into the conversation, no model request
       control_request interrupt           the running turn
  out: command_lifecycle queued/started    a message taken / begun;  result {user_message_uuids}  a turn's end
       control_request can_use_tool        a tool call asked of the app (`approvals`), answered in a task of its own
```

The stream's facts are `turns`'; its lines `wire`'s; what the stream lost is settled in the transcript (`transcript`).

Error classification (what the app may do next): a line that certainly did not leave (the input closed, the process
gone) is `ProviderUnavailable`; one whose acknowledgement did not come (the process died, the pipe broke, no `queued`
in time) is looked up by its uuid: found, it was taken (`Started(confirmed_by_lookup=...)`), else `DeliveryUncertain`.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

import anyio
import anyio.abc

from wardian import errors
from wardian.model import Interaction
from wardian.providers.asking import OpenAsks, secrets_of
from wardian.providers.base import OutcomeStatus, Started, TaskDelivery
from wardian.providers.claude import approvals, transcript
from wardian.providers.claude.launch import check_signed_in, command, new_uuid
from wardian.providers.claude.spec import ClaudeSpec
from wardian.providers.claude.timings import Timings
from wardian.providers.claude.turns import Kind, Turns
from wardian.providers.claude.wire import Controls, LineLost, NotSent, StdinWriter, StdoutReader, user_line
from wardian.providers.delivery import inbox_text, task_text
from wardian.providers.process import ProviderProcess, StopPolicy
from wardian.providers.turns import TurnState, single_error

__all__ = ["ClaudeRuntime", "command"]

log = logging.getLogger("wardian.claude")

# Claude Code exits about a second after its input closes (it finishes a running turn first).
STOP_POLICY = StopPolicy(polite_s=5.0, term_s=3.0, kill_s=3.0)
INITIALIZE_TIMEOUT_S = 120.0
ACK_TIMEOUT_S = 30.0
"""How long a written message may wait for its `queued` (Claude Code acknowledges at once, even mid-turn)."""
CONTROL_TIMEOUT_S = 30.0
LOOKUP_PAUSES_S = (0.0, 0.5, 2.0)
"""Before each transcript lookup of a message whose acknowledgement was lost (Claude Code writes a message it
started at once; these pauses cover a loaded machine)."""


class ClaudeRuntime(TurnState):
    """Run with `await tg.start(runtime.run)`: returns once Claude Code answered `initialize`."""

    def __init__(self, spec: ClaudeSpec) -> None:
        super().__init__(f"claude:{spec.name}", spec.session_id or new_uuid())
        self.spec = spec
        self.capabilities = spec.capabilities
        self._stop = anyio.Event()
        self._gone = anyio.Event()  # the process's output ended: no acknowledgement will come
        self._child: ProviderProcess | None = None
        self._writer: StdinWriter | None = None
        self._reader: StdoutReader | None = None
        self._turns = Turns()
        self._acks: dict[str, anyio.Event] = {}
        self._controls = Controls()
        self._asks = OpenAsks(self.emit, secrets_of(spec.env, spec.credential.secret if spec.credential else None))
        self._desk = approvals.PermissionDesk(str(spec.workspace), self._asks, self._send,
                                              lambda: self.active_turn_id, self._gone.is_set)
        self._tg: anyio.abc.TaskGroup | None = None
        self._started = False
        self._timings = Timings.from_env(spec.name)  # off unless WARDIAN_CLAUDE_TIMINGS is set

    # --- lifecycle ------------------------------------------------------------------------------------

    async def run(self, *, task_status: anyio.abc.TaskStatus[str | None] = anyio.TASK_STATUS_IGNORED) -> None:
        spec = self.spec
        assert self.thread_id is not None
        resume = spec.session_id is not None and self._transcript() is not None
        try:
            process = await self._spawn(resume)
            assert process.stdin is not None
            assert process.stdout is not None
            self._writer = StdinWriter(process.stdin)
            self._reader = StdoutReader(spec.name, process.stdout)
            await self._serve(task_status)
        except BaseExceptionGroup as group:
            raise single_error(group) from None
        finally:
            with anyio.CancelScope(shield=True):
                await self._ended()

    async def _spawn(self, resume: bool) -> anyio.abc.Process:
        """Start the process; the agent's sign-in goes over a pipe whose read end only the child keeps."""
        spec = self.spec
        assert self.thread_id is not None
        secrets = {spec.credential.variable: spec.credential.secret} if spec.credential is not None else {}
        self._child = ProviderProcess(command(spec, self.thread_id, resume=resume), name=spec.name, env=spec.env,
                                      cwd=spec.workspace, log_path=spec.stderr_path, pid_path=spec.pid_path,
                                      secret_fds=secrets)
        return await self._child.start()

    async def _serve(self, task_status: anyio.abc.TaskStatus[str | None]) -> None:
        """Read the output, initialize, report ready, and run until stopped or the process ends."""
        async with anyio.create_task_group() as tg:
            self._tg = tg
            tg.start_soon(self._read)
            answer = await self._initialize()
            check_signed_in(self.spec.name, answer.get("account"))
            self._started = True
            self.became_ready(self.thread_id)
            task_status.started(self.thread_id)
            await self._stop.wait()
            await self._close_input()
            with anyio.move_on_after(STOP_POLICY.polite_s):
                await self._gone.wait()  # a turn still running is finished first, and its result read
            tg.cancel_scope.cancel()

    async def _initialize(self) -> dict[str, Any]:
        """`initialize`, answered once Claude Code is ready for messages (MCP servers may still be connecting: the
        first turn waits for them). Raises: ProviderError (refused, ended, or no answer in time)."""
        try:
            with anyio.fail_after(INITIALIZE_TIMEOUT_S):
                return await self._control({"subtype": "initialize", "hooks": None})
        except TimeoutError:
            raise errors.ProviderError(f"Claude Code did not answer initialize within {INITIALIZE_TIMEOUT_S:g} s; "
                                       f"see {self.spec.stderr_path}") from None

    async def _ended(self) -> None:
        """However `run` ends: the process and its group are gone, what was left unread is read, in-flight turns are
        settled from the transcript, then the stream says OFF and ends."""
        self.ready = False
        self._asks.end()
        if self._child is not None:
            await self._child.stop(STOP_POLICY, polite=self._close_input)
        if self._reader is not None:
            with anyio.move_on_after(3.0):
                while (line := await self._reader.next()) is not None:
                    self._take(line)
        self._wake_all()
        with anyio.move_on_after(ACK_TIMEOUT_S):
            async with self.submit_lock:  # a submission in flight settles (found or uncertain) before OFF
                pass
        self._settle_in_flight()
        self.ended()
        if not self._started:
            log.error("Claude Code runtime %s failed to start (see %s)", self.spec.name, self.spec.stderr_path)

    def _settle_in_flight(self) -> None:
        """The process ended with tasks taken and unanswered: each one's answer from the transcript (its result was
        lost), else an unknown outcome (never resent)."""
        tasks = self._turns.tasks_in_flight()
        for outcome in transcript.settle(self._transcript(), tasks, self._child.returncode if self._child else None):
            self._turns.forget(outcome.turn_id)
            if outcome.status is OutcomeStatus.DONE:
                log.warning("%s: the result of turn %s was lost; its answer was read from the transcript",
                            self.spec.name, outcome.turn_id)
            self.emit(outcome)

    async def _close_input(self) -> None:
        if self._writer is not None:
            await self._writer.close()

    def stop(self) -> None:
        self._stop.set()

    def _transcript(self) -> Any:
        assert self.thread_id is not None
        return transcript.transcript_path(self.spec.config_dir, self.spec.workspace, self.thread_id)

    # --- what Claude Code prints -----------------------------------------------------------------------

    async def _read(self) -> None:
        assert self._reader is not None
        while (line := await self._reader.next()) is not None:
            self._take(line)
            if line.get("type") == "control_request" and self._writer is not None:
                request = line.get("request") or {}
                if request.get("subtype") == approvals.CAN_USE_TOOL and self._tg is not None:
                    self._tg.start_soon(self._desk.asked, str(line.get("request_id")), request)
                else:
                    await self._writer.refuse(self.spec.name, line)
        log.info("%s: Claude Code's output ended", self.spec.name)
        self._wake_all()
        self._stop.set()

    def _wake_all(self) -> None:
        """The output ended: whoever waits for an acknowledgement or an answer stops waiting."""
        self._gone.set()
        for event in self._acks.values():
            event.set()
        self._controls.end()

    def _take(self, line: dict[str, Any]) -> None:
        kind = line.get("type")
        if kind == "command_lifecycle":
            self._lifecycle(str(line.get("command_uuid")), str(line.get("state")))
        elif kind == "system" and line.get("subtype") == "init":
            turn = self._turns.on_init([str(u) for u in line.get("user_message_uuids") or []]
                                       or [str(line.get("uuid"))])
            if turn is not None:
                self._begin(turn)
        elif kind == "result":
            ends, outcomes = self._turns.on_result(line)
            if ends:
                self._asks.turn_ended(self.active_turn_id)
                self.deactivate()
            for outcome in outcomes:
                self.emit(outcome)
        elif kind == "control_response":
            self._controls.answered(line.get("response") or {})
        elif kind == "control_cancel_request":
            self._desk.cancelled(str(line.get("request_id")))

    def _lifecycle(self, uuid: str, state: str) -> None:
        if state == "queued":
            self._turns.on_queued(uuid)
            ack = self._acks.get(uuid)
            if ack is not None:
                ack.set()
            self._timings.queued(uuid)
        elif state == "started" and self._turns.on_started(uuid):
            self._begin(uuid)

    def _begin(self, turn_id: str) -> None:
        self._turns.begin(turn_id)
        self.activate(turn_id)

    async def _control(self, request: dict[str, Any]) -> dict[str, Any]:
        """A control request and its answer's `response`. Raises: ProviderUnavailable (not sent), ProviderError
        (refused, or no answer: the process ended)."""
        request_id, line = self._controls.new(request)
        try:
            await self._send(line)
        except BaseException:
            self._controls.forget(request_id)
            raise
        return await self._controls.wait(request_id, request["subtype"])

    async def _send(self, line: bytes) -> None:
        """Raises: ProviderUnavailable (certainly not sent); LineLost (as `StdinWriter.send`)."""
        if self._writer is None or self._gone.is_set():
            raise errors.ProviderUnavailable(f"the Claude Code process of {self.spec.name} is not running; nothing "
                                             "was sent")
        try:
            await self._writer.send(line)
        except NotSent as exc:
            raise errors.ProviderUnavailable(f"{exc}; nothing was sent") from None

    # --- delivery -------------------------------------------------------------------------------------

    def _check_ready(self) -> None:
        if not self.ready:
            raise errors.ProviderUnavailable(f"the Claude Code runtime of {self.spec.name} is not ready; nothing sent")

    def plan_message_id(self) -> str | None:
        return new_uuid()

    async def start_turn(self, task: TaskDelivery, message_id: str | None = None) -> Started:
        """The structured task as one user message under `message_id` (the turn id). Raises: ProviderUnavailable
        (not sent), DeliveryUncertain (not acknowledged, and not found in the transcript: `looked_up`)."""
        self._check_ready()
        uuid = message_id or new_uuid()
        lost = await self._deliver(uuid, "task", task_text(task), ACK_TIMEOUT_S)
        return Started(uuid, confirmed_by_lookup=lost)

    async def steer(self, task: TaskDelivery, expected_turn_id: str) -> str:
        """The same message while turn `expected_turn_id` runs: Claude Code folds it in at the turn's next tool
        boundary, else runs it next; its own uuid is its turn id. Raises: StaleTurn (that turn is not running:
        nothing sent), as `start_turn` otherwise."""
        if self.active_turn_id != expected_turn_id:
            raise errors.StaleTurn(f"turn {expected_turn_id} of {self.spec.name} is no longer running; nothing was "
                                   "sent", turn_id=expected_turn_id)
        uuid = new_uuid()
        await self._deliver(uuid, "task", task_text(task), ACK_TIMEOUT_S)
        return uuid

    async def push(self, records: Sequence[Interaction], *, timeout_s: float) -> None:
        """Each record as a `shouldQuery: false` message: no model request when idle, folded into a running turn.
        Raises: ProviderUnavailable (not sent), DeliveryUncertain."""
        for record in records:
            self._check_ready()
            await self._deliver(new_uuid(), "note", inbox_text(record), timeout_s)

    async def _deliver(self, uuid: str, kind: Kind, text: str, timeout_s: float) -> str | None:
        """Write a message and wait for its `queued`; None once acknowledged, else why the acknowledgement was lost
        when the transcript then shows the message. Raises: ProviderUnavailable, DeliveryUncertain."""
        ack = self._acks[uuid] = anyio.Event()
        self._turns.written(uuid, kind)
        try:
            line = user_line(text, uuid, should_query=kind == "task")
            self._timings.written(uuid)
            try:
                await self._send(line)
            except errors.ProviderUnavailable:
                self._turns.forget(uuid)
                raise
            except LineLost as exc:
                why = f"writing it to Claude Code failed ({exc})"
            else:
                with anyio.move_on_after(timeout_s):
                    await ack.wait()
                if uuid in self._turns.queued or uuid in self._turns.answered:
                    return None
                why = ("Claude Code ended before it acknowledged it" if self._gone.is_set()
                       else f"Claude Code did not acknowledge it within {timeout_s:g} s")
        finally:
            self._acks.pop(uuid, None)
        return await self._look_up(uuid, why)

    async def _look_up(self, uuid: str, why: str) -> str:
        """Settle a message whose acknowledgement was lost by its uuid. Raises: DeliveryUncertain."""
        try:
            return await transcript.confirm(self._transcript, uuid, why, self._turns.seen, LOOKUP_PAUSES_S)
        except errors.DeliveryUncertain:
            self._turns.forget(uuid)
            raise
        finally:
            if uuid in self._turns.open:
                self._turns.started.add(uuid)

    async def interrupt(self, turn_id: str) -> None:
        """The `interrupt` control request, only while the turn `turn_id` (a message of ours in it) runs. Raises:
        NotActive, ProviderUnavailable, ProviderError."""
        if not self.ready or turn_id not in self._turns.running:
            raise errors.NotActive(f"turn {turn_id} is not a turn this app sees running; nothing was interrupted",
                                   field="target")
        with anyio.fail_after(CONTROL_TIMEOUT_S):
            await self._control({"subtype": "interrupt"})

    def attach_info(self) -> dict[str, Any]:
        raise errors.NotActive(f"agent {self.spec.name!r} runs on Claude Code, which has no attached mode",
                               field="agent")
