"""The runtime of one Pi agent: one `pi --mode rpc` process, its one session, and what the app observes of it (a
`wardian.providers.base.ProviderRuntime`; docs/guide/pi.md).

```
pi --mode rpc -e <wardian's extension> [--session <file>]   (cwd: the workspace; its private home in its environment)
  out: get_state                  readiness (Pi prints nothing before its first command) and the session's id
       ... wait for wardian's extension to say its MCP server listed the tools (`LaunchSpec.mcp_connected`) ...
       prompt {message}           a task to an idle agent: one run, whose `agent_end` is the turn's end
       steer {message}            a task or information while a run is active (information also while idle: Pi
                                  keeps it for the next run and starts none). A steered task is the run's once Pi
                                  shows its user message (`message_start`); one the run ended without showing is
                                  still queued in Pi, and a short `prompt` starts the next run for it (`_end`)
       abort                      an interrupt: the run ends `aborted`
  in:  agent_start ... agent_end  the run; `auto_retry_start` after a failed one when retry is on (`turns`)
       extension_ui_request       a confirmation wardian's extension asks for: answered from the grants, or, for
                                  Pi's own bash/edit/write under an asking policy, by the app (`approvals`)
```

Error classification (what the app may do next): a command whose line certainly did not leave is
`ProviderUnavailable`; one whose write failed part-way, or whose acknowledgement never came, is `DeliveryUncertain`.
A prompt Pi acknowledged is a turn: its `agent_end` settles it; a process that ends first leaves it unsettled, and
the app marks it uncertain (never resent; `recovery` may settle it from the session file at the next app start).
"""

from __future__ import annotations

import contextlib
import logging
import uuid as uuids
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import anyio
import anyio.abc

from wardian import errors
from wardian.model import Interaction
from wardian.providers.asking import OpenAsks, secrets_of
from wardian.providers.base import ConversationReplaced, OutcomeStatus, Started, TaskDelivery, TurnOutcome
from wardian.providers.delivery import inbox_text, task_text
from wardian.providers.pi import approvals
from wardian.providers.pi.rpc import Gone, LineLost, NotSent, Peer, Pending, Refused
from wardian.providers.pi.spec import SESSION_FD, PiSpec
from wardian.providers.pi.timings import Timings
from wardian.providers.pi.turns import Turn
from wardian.providers.process import ProviderProcess, StopPolicy
from wardian.providers.turns import TurnState, single_error

log = logging.getLogger("wardian.pi")

# RPC mode exits once its input closes; a run still going is abandoned (its prompt is then uncertain).
STOP_POLICY = StopPolicy(polite_s=5.0, term_s=3.0, kill_s=3.0)
START_TIMEOUT_S = 120.0
"""For Pi's first answer (`get_state`), and then for wardian's extension to announce its MCP server."""
ACK_TIMEOUT_S = 30.0
"""For Pi to acknowledge a command (it does before the run it starts: a few milliseconds)."""
CONTINUE_ATTEMPTS = 50
"""For the prompt that starts the run of tasks Pi queued: Pi refuses one while it still winds its last run up."""
QUEUED_NOTICE = ("wardian_notice\nA message you were sent while your previous run was ending follows. Work on it "
                 "now; your final answer in this run is its reply.")
"""The prompt of that run: Pi gives the model its queued messages right after it, so nothing is delivered twice."""
class PiRuntime(TurnState):
    """Run with `await tg.start(runtime.run)`: returns once the session is ready and wardian's tools are up."""

    def __init__(self, spec: PiSpec) -> None:
        super().__init__(f"pi:{spec.name}", spec.previous_id)
        self.spec = spec
        self.capabilities = spec.capabilities
        self._stop = anyio.Event()
        self._child: ProviderProcess | None = None
        self._peer: Peer | None = None
        self._turn: Turn | None = None
        self._tg: anyio.abc.TaskGroup | None = None
        self._asks = OpenAsks(self.emit, secrets_of(spec.env))  # the agent's keys are in Pi's environment
        self._started = False
        self._timings = Timings.from_env(spec.name)  # off unless WARDIAN_PI_TIMINGS is set

    # --- lifecycle ------------------------------------------------------------------------------------

    async def run(self, *, task_status: anyio.abc.TaskStatus[str | None] = anyio.TASK_STATUS_IGNORED) -> None:
        spec = self.spec
        argv = [*spec.argv, *(["--session", str(spec.session_file)] if spec.session_file else [])]
        try:
            self._child = ProviderProcess(argv, name=spec.name, env=spec.env, cwd=spec.workspace,
                                          log_path=spec.stderr_path, pid_path=spec.pid_path,
                                          secret_fds={SESSION_FD: spec.session})
            process = await self._child.start()
            assert process.stdin is not None
            assert process.stdout is not None
            self._peer = Peer(spec.name, process.stdin, process.stdout, self._on_event, self._on_dialog)
            async with anyio.create_task_group() as tg:
                self._tg = tg
                tg.start_soon(self._read, self._peer)
                session_id = await self._open()
                self._started = True
                self.became_ready(session_id)
                task_status.started(session_id)
                await self._stop.wait()
                tg.cancel_scope.cancel()
        except BaseExceptionGroup as group:
            raise single_error(group) from None
        finally:
            with anyio.CancelScope(shield=True):
                await self._ended()

    async def _read(self, peer: Peer) -> None:
        await peer.read()
        log.info("%s: Pi's output ended", self.spec.name)
        self._stop.set()

    async def _open(self) -> str:
        """Pi's state (its session id), then wardian's tools up. Raises: ProviderError."""
        spec = self.spec
        assert self._peer is not None
        try:
            state = await self._peer.call("get_state", None, START_TIMEOUT_S)
        except (Gone, NotSent, LineLost, Refused, TimeoutError) as exc:
            raise errors.ProviderError(f"Pi of {spec.name} did not start ({type(exc).__name__}); see "
                                       f"{spec.stderr_path}") from None
        session_id = str(state.get("sessionId") or "") if isinstance(state, dict) else ""
        if not session_id:
            raise errors.ProviderError(f"Pi of {spec.name} named no session; see {spec.stderr_path}")
        if spec.previous_id is not None and spec.previous_id != session_id:
            self.emit(ConversationReplaced(spec.previous_id, session_id, "Pi has no file of the agent's session"))
        if spec.mcp_connected is not None:
            with anyio.move_on_after(START_TIMEOUT_S) as waited:
                await spec.mcp_connected.wait()
            if waited.cancelled_caught:
                raise errors.ProviderError(f"wardian's extension in Pi of {spec.name} did not start wardian's MCP "
                                           f"server within {START_TIMEOUT_S:g} s; see {spec.stderr_path}")
        return session_id

    async def _ended(self) -> None:
        """However `run` ends: the process group is gone; a run still going is left unsettled (the app marks its
        tasks uncertain); then the stream says OFF and ends."""
        self.stopping()
        self._asks.end()
        if self._child is not None:
            await self._child.stop(STOP_POLICY, polite=self._peer.close if self._peer is not None else None)
        if self._turn is not None:
            log.warning("%s: Pi ended during turn %s; its outcome is unknown", self.spec.name, self._turn.turn_id)
            self._turn = None
        self.ended()
        if not self._started:
            log.error("the Pi runtime of %s failed to start (see %s)", self.spec.name, self.spec.stderr_path)

    def stop(self) -> None:
        self._stop.set()

    # --- what Pi sends --------------------------------------------------------------------------------

    def _on_event(self, event: dict[str, Any]) -> None:
        turn, kind = self._turn, event.get("type")
        if turn is None:
            return
        if kind == "message_start":
            message = event.get("message")
            if isinstance(message, dict) and message.get("role") == "user":
                turn.show(message)
            return
        if kind == "agent_start":
            self._timings.mark(turn.turn_id, "started_ns")
            return
        if kind == "agent_end":
            self._timings.mark(turn.turn_id, "ended_ns")
            outcome = turn.ended(event)
            if outcome is None and self._tg is not None:
                self._tg.start_soon(self._probe, turn, turn.probes)
        elif kind == "auto_retry_start":
            turn.retrying()
            return
        elif kind == "auto_retry_end":
            outcome = turn.retries_over(event)
        else:
            return
        if outcome is not None:
            turn.outcome = outcome
            if turn.active:
                self._end(turn)

    async def _probe(self, turn: Turn, probe: int) -> None:
        """A failed run's end is the turn's unless Pi starts a retry first: Pi reports `auto_retry_start` right after
        the `agent_end`, before it answers a command sent after it (`turns`)."""
        assert self._peer is not None
        try:
            await self._peer.call("get_state", None, ACK_TIMEOUT_S)
        except (Gone, NotSent, LineLost, Refused, TimeoutError):
            return  # Pi is gone or stuck: `_ended` leaves the turn unsettled
        if self._turn is turn and turn.probes == probe and turn.held is not None:
            turn.outcome = turn.held
            if turn.active:
                self._end(turn)

    def _on_dialog(self, request: dict[str, Any]) -> dict[str, Any] | None:
        tool = approvals.native_tool(request)
        if tool is not None and self._tg is not None and self._peer is not None:
            ask = approvals.native_ask(request, tool, self.active_turn_id, str(self.spec.workspace))
            request_id = str(request.get("id"))
            # Handed to the app here, in the reader: the task that waits for the answer starts a loop turn later.
            asked = self._asks.open(ask, key=request_id)
            self._tg.start_soon(approvals.decide, self._asks, self._peer, request_id, asked)
            return None
        return approvals.answer(self.spec.name, request, self.spec.allowed)

    def _end(self, turn: Turn) -> None:
        """The run's end answers its turn and each steered task it showed. Tasks steered too late for it are still
        in Pi's queue: instead of going idle, the next run is started for them (`_continue`), under the turn id the
        first of them was bound to."""
        outcome = turn.outcome
        assert outcome is not None
        self._asks.turn_ended(turn.turn_id)
        self._timings.ended(turn.turn_id)
        after = Turn(next(iter(turn.steered.values())), retry=self.spec.retry, steered=dict(turn.steered),
                     active=True) if turn.steered else None
        self._turn = after
        if after is None:
            self.deactivate()
        self.emit(outcome)
        for turn_id in turn.shown:  # the run's tokens are counted once, on its own turn
            self.emit(replace(outcome, turn_id=turn_id, usage=None))
        if after is not None and self._tg is not None:
            self.activate(after.turn_id)
            self._tg.start_soon(self._continue, after)

    async def _continue(self, turn: Turn) -> None:
        """The prompt that starts the run of tasks Pi queued (`_end`). Pi gives the model its queued steering
        messages right after a prompt, so each task is shown once. A prompt Pi refuses (its last run is still being
        wound up) is sent again after a command Pi answers in order (bounded); one never taken leaves the tasks'
        outcome unknown: uncertain, never resent."""
        assert self._peer is not None
        for _ in range(CONTINUE_ATTEMPTS):
            try:
                pending = await self._command("prompt", {"message": QUEUED_NOTICE}, "the prompt", None)
                await self._acknowledged(pending, "the prompt", None)
            except Refused:
                try:
                    await self._peer.call("get_state", None, ACK_TIMEOUT_S)
                except (Gone, NotSent, LineLost, Refused, TimeoutError):
                    break
                continue
            except errors.WardianError:
                break
            if turn.cancelling:  # interrupted before its run began: Pi's `abort` while idle stops nothing
                with contextlib.suppress(errors.WardianError):  # Pi is gone: `_ended` settles the turn
                    await self._command("abort", {}, "the interrupt", None)
            return
        if self._turn is turn and turn.outcome is None:
            log.warning("%s: Pi did not start the run of its queued tasks; their outcome is unknown", self.spec.name)
            turn.shown.extend(t for t in turn.steered.values() if t != turn.turn_id)
            turn.steered.clear()
            turn.outcome = TurnOutcome(turn.turn_id, OutcomeStatus.UNKNOWN,
                                       error="Pi did not start the run of tasks it had queued")
            self._end(turn)

    # --- delivery -------------------------------------------------------------------------------------

    def plan_message_id(self) -> str | None:
        return f"turn_{uuids.uuid4().hex}"

    async def _command(self, command: str, fields: dict[str, Any], what: str, request_id: str | None) -> Pending:
        """Send one command. Raises: ProviderUnavailable (nothing sent), DeliveryUncertain (written part-way)."""
        if self._peer is None:
            raise errors.ProviderUnavailable(f"Pi of {self.spec.name} is not running; nothing was sent")
        try:
            return await self._peer.send(command, fields)
        except NotSent:
            raise errors.ProviderUnavailable(f"Pi of {self.spec.name} is not running; nothing was sent") from None
        except LineLost as exc:
            raise errors.DeliveryUncertain(f"writing {what} to Pi of {self.spec.name} failed ({exc}); do not resend",
                                           request_id=request_id) from None

    async def _acknowledged(self, pending: Pending, what: str, request_id: str | None) -> None:
        """Wait for Pi's acknowledgement. Raises: Refused (Pi refused it: nothing was taken), DeliveryUncertain."""
        try:
            with anyio.fail_after(ACK_TIMEOUT_S):
                await pending.result()
        except (Gone, TimeoutError) as exc:
            raise errors.DeliveryUncertain(f"Pi of {self.spec.name} did not acknowledge {what} "
                                           f"({type(exc).__name__}); do not resend", request_id=request_id) from None

    async def start_turn(self, task: TaskDelivery, message_id: str | None = None) -> Started:
        """The structured task as one `prompt`: a run, the turn `message_id`. Raises: ProviderUnavailable (nothing
        was taken: not ready, a run is going, or Pi refused), DeliveryUncertain."""
        if not self.ready or self._turn is not None:
            raise errors.ProviderUnavailable(f"Pi of {self.spec.name} is not ready for a turn; nothing was sent")
        turn = self._turn = Turn(message_id or self.plan_message_id() or "", retry=self.spec.retry)
        try:
            self._timings.mark(turn.turn_id, "written_ns")
            pending = await self._command("prompt", {"message": task_text(task)}, "the prompt", task.request_id)
            await self._acknowledged(pending, "the prompt", task.request_id)
            self._timings.mark(turn.turn_id, "acked_ns")
        except Refused as exc:
            self._turn = None
            raise errors.ProviderUnavailable(f"Pi of {self.spec.name} refused the prompt ({exc}); nothing was "
                                             "taken") from None
        except errors.WardianError:
            self._turn = None
            raise
        self.activate(turn.turn_id)
        turn.active = True
        if turn.outcome is not None:  # the whole run was read before this resumed
            self._end(turn)
        return Started(turn.turn_id)

    async def steer(self, task: TaskDelivery, expected_turn_id: str) -> str:
        """The task into the running run `expected_turn_id` (`steer`), under a turn id of its own: the end of the run
        that shows it answers it (`_end`). Raises: StaleTurn (not that turn, or Pi refused), DeliveryUncertain."""
        turn = self._turn
        if turn is None or not turn.active or turn.turn_id != expected_turn_id or turn.cancelling:
            raise errors.StaleTurn(f"turn {expected_turn_id} of {self.spec.name} is not running; nothing was sent",
                                   turn_id=expected_turn_id)
        text, turn_id = task_text(task), self.plan_message_id() or ""
        turn.steered[text] = turn_id  # before the write: Pi may show it before it acknowledges it
        try:
            pending = await self._command("steer", {"message": text}, "the task", task.request_id)
            await self._acknowledged(pending, "the task", task.request_id)
        except (Refused, errors.ProviderUnavailable) as exc:
            turn.steered.pop(text, None)
            raise errors.StaleTurn(f"Pi of {self.spec.name} did not take the task into turn {expected_turn_id} "
                                   f"({exc}); nothing was sent", turn_id=expected_turn_id) from None
        return turn_id

    async def push(self, records: Sequence[Interaction], *, timeout_s: float) -> None:
        """Each record as a `steer`: into the running run, or kept by Pi for its next run (it starts none).
        Raises: ProviderUnavailable (nothing sent), DeliveryUncertain."""
        if not self.ready:
            raise errors.ProviderUnavailable(f"Pi of {self.spec.name} is not ready; nothing was sent")
        for record in records:
            try:
                pending = await self._command("steer", {"message": inbox_text(record)}, "the record", None)
                await self._acknowledged(pending, "the record", None)
            except Refused as exc:
                raise errors.ProviderUnavailable(f"Pi of {self.spec.name} refused the record ({exc})") from None

    async def interrupt(self, turn_id: str) -> None:
        """`abort` while the turn `turn_id` runs; its run then ends `aborted`. Raises: NotActive,
        ProviderUnavailable."""
        turn = self._turn
        if not self.ready or turn is None or not turn.active or turn.turn_id != turn_id:
            raise errors.NotActive(f"turn {turn_id} is not a turn this app sees running; nothing was interrupted",
                                   field="target")
        turn.cancelling = True
        try:
            await self._command("abort", {}, "the interrupt", None)
        except errors.DeliveryUncertain as exc:
            raise errors.ProviderUnavailable(exc.message) from None

    def attach_info(self) -> dict[str, Any]:
        raise errors.NotActive(f"agent {self.spec.name!r} runs on Pi, which has no attached mode", field="agent")
