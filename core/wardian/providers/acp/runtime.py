"""The runtime of one ACP agent: one agent process speaking ACP on stdio, its one session, and what the app observes
of it (a `wardian.providers.base.ProviderRuntime`; docs/guide/acp.md).

```
<agent> <args>                                      (cwd: the workspace; its private directories in its environment)
  out: initialize                                   protocol version 1, no file system or terminal of ours
       session/load {sessionId, cwd, mcpServers}    the agent's session, kept with it (else session/new)
       ... wait for wardian's MCP server to say it listed its tools (`LaunchSpec.mcp_connected`) ...
       session/prompt {sessionId, prompt}           a task: one turn; its answer (`stopReason`) is the turn's end
       session/cancel {sessionId}                   an interrupt
  in:  session/update                               the turn's text and tool calls
       session/request_permission                   a granted wardian tool: allowed here (`permissions`); any other:
                                                    an approval the app decides (`ApprovalAsked`), answered later
       craft/drainMidTurnQueue                      Qwen Code, at each tool boundary: the tasks steered meanwhile
```

Steering (Qwen Code): a task for the running turn waits in a queue until the agent next asks for it at a tool
boundary, and is handed over in that answer: then it is in the turn, whose end answers it. Information pushed while
the turn runs takes the same way (`offer`), unless a receive took it first. One the agent does not
ask for within `STEER_WAIT_S`, or before its turn ends, is taken back out of the queue, certainly not handed over
(`StaleTurn`: the app offers it again once the turn has ended).

Error classification (what the app may do next): a prompt whose line certainly did not leave (the input closed, the
process gone) is `ProviderUnavailable`; one whose write failed part-way is `DeliveryUncertain`. A prompt written is
a turn: its answer settles it; a process that ends first leaves it unsettled, and the app marks it uncertain (never
resent). After a crash, the history `session/load` replays settles what it can (`replay`, `HistoryReplayed`).
"""

from __future__ import annotations

import logging
import uuid as uuids
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import anyio
import anyio.abc

from wardian import errors
from wardian.faults import crashpoint
from wardian.model import Interaction
from wardian.overrides import credential_name
from wardian.providers.acp import permissions, replay
from wardian.providers.acp.agents import AcpAgent
from wardian.providers.acp.rpc import Deferred, Gone, LineLost, MethodNotFound, NotSent, Peer, Pending, RpcError
from wardian.providers.acp.steering import DRAIN, SteeringQueue
from wardian.providers.acp.timings import START, Timings
from wardian.providers.acp.turns import Turn
from wardian.providers.base import Capabilities, ConversationReplaced, HistoryReplayed, Started, TaskDelivery
from wardian.providers.delivery import inbox_text, task_text
from wardian.providers.process import ProviderProcess, StopPolicy
from wardian.providers.turns import TurnState, single_error

log = logging.getLogger("wardian.acp")

# An ACP agent exits once its input closes; a turn still running is abandoned (its prompt is then uncertain).
STOP_POLICY = StopPolicy(polite_s=5.0, term_s=3.0, kill_s=3.0)
START_TIMEOUT_S = 120.0
"""For `initialize` and the session request each, and then for wardian's MCP server to announce itself."""
PROTOCOL_VERSION = 1
STEER_WAIT_S = 60.0
"""How long a steered task waits for the agent's next tool boundary (its drain request) before it is taken back."""
@dataclass(frozen=True, slots=True)
class AcpSpec:
    name: str
    agent: AcpAgent
    executable: str
    workspace: Path
    env: dict[str, str]
    """The process's whole environment: its private directories, the quiet variables, `-c env.*` settings and
    its sign-in (the agent reads its key from there, and from nowhere on disk)."""
    session_id: str | None
    """The agent's ACP session to load; None: a new one."""
    mcp_servers: list[dict[str, Any]]
    allowed: frozenset[str]
    """The wardian tools a permission request is granted for."""
    capabilities: Capabilities
    stderr_path: Path
    pid_path: Path
    mcp_connected: anyio.Event | None = None
    dirs: Mapping[str, Path] = field(default_factory=dict[str, Path])
    """The agent's private directories by the variable naming each (`agents.AcpAgent.dirs`)."""


class AcpRuntime(TurnState):
    """Run with `await tg.start(runtime.run)`: returns once the session is ready and wardian's MCP server is up."""

    def __init__(self, spec: AcpSpec) -> None:
        super().__init__(f"{spec.agent.name}:{spec.name}", spec.session_id)
        self.spec = spec
        self.capabilities = spec.capabilities
        self._stop = anyio.Event()
        self._child: ProviderProcess | None = None
        self._peer: Peer | None = None
        self._turn: Turn | None = None
        self._steering = SteeringQueue()
        self._asks = permissions.Asks([v for k, v in spec.env.items() if credential_name(k)])
        self._started = False
        self._replay: tuple[str, list[dict[str, Any]]] | None = None
        """While `session/load` runs: the session and the history it has replayed so far."""
        self._timings = Timings.from_env(spec.name)  # off unless WARDIAN_ACP_TIMINGS is set

    # --- lifecycle ------------------------------------------------------------------------------------

    async def run(self, *, task_status: anyio.abc.TaskStatus[str | None] = anyio.TASK_STATUS_IGNORED) -> None:
        spec = self.spec
        try:
            self._child = ProviderProcess([spec.executable, *spec.agent.args], name=spec.name, env=spec.env,
                                          cwd=spec.workspace, log_path=spec.stderr_path, pid_path=spec.pid_path)
            self._timings.mark(START, "spawn_ns")
            process = await self._child.start()
            assert process.stdin is not None
            assert process.stdout is not None
            self._peer = Peer(spec.name, process.stdin, process.stdout, self._on_request, self._on_notification)
            async with anyio.create_task_group() as tg:
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
        log.info("%s: the agent's output ended", self.spec.name)
        self._stop.set()

    async def _open(self) -> str:
        """`initialize`, the session (loaded, else new), then wardian's MCP server up. Raises: ProviderError."""
        spec = self.spec
        answer = await self._start_call("initialize", {
            "protocolVersion": PROTOCOL_VERSION, "clientInfo": {"name": "wardian", "version": "1"},
            "clientCapabilities": {"fs": {"readTextFile": False, "writeTextFile": False}, "terminal": False}})
        self._timings.mark(START, "initialized_ns")
        caps = answer.get("agentCapabilities")
        caps = caps if isinstance(caps, dict) else {}
        session_id = None
        if spec.session_id is not None and caps.get("loadSession"):
            session_id = await self._load(spec.session_id)
        if session_id is None:
            created = await self._start_call("session/new", {"cwd": str(spec.workspace),
                                                             "mcpServers": spec.mcp_servers})
            session_id = str(created.get("sessionId") or "")
            if not session_id:
                raise errors.ProviderError(f"the agent of {spec.name} answered session/new without a sessionId")
            if spec.session_id is not None:
                self.emit(ConversationReplaced(spec.session_id, session_id, "the agent could not load its session"))
        self._timings.mark(START, "session_ns")
        if spec.mcp_connected is not None:
            with anyio.move_on_after(START_TIMEOUT_S) as waited:
                await spec.mcp_connected.wait()
            if waited.cancelled_caught:
                raise errors.ProviderError(f"the agent of {spec.name} did not start wardian's MCP server within "
                                           f"{START_TIMEOUT_S:g} s; see {spec.stderr_path}")
        self._timings.started()
        return session_id

    async def _load(self, session_id: str) -> str | None:
        """Load the agent's session; None when the agent no longer has it. The history it replays first is told to
        the app (`HistoryReplayed`), which settles from it what a killed app lost (`replay`)."""
        replayed: list[dict[str, Any]] = []
        self._replay = (session_id, replayed)
        try:
            await self._start_call("session/load", {"sessionId": session_id, "cwd": str(self.spec.workspace),
                                                    "mcpServers": self.spec.mcp_servers})
        except errors.ProviderRefused as exc:
            log.warning("%s: the agent could not load session %s (%s); starting a new one", self.spec.name,
                        session_id, exc.message)
            return None
        finally:
            self._replay = None
        marks = self.spec.agent.finished
        finished = replay.never if marks is None else await anyio.to_thread.run_sync(marks, self.spec.dirs, session_id)
        self.emit(HistoryReplayed(session_id, replay.answers(replayed, finished)))
        return session_id

    async def _start_call(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """A request of the start. Raises: ProviderRefused (the agent answered with an error), ProviderError."""
        assert self._peer is not None
        try:
            return await self._peer.call(method, params, START_TIMEOUT_S)
        except RpcError as exc:
            raise errors.ProviderRefused(f"the agent of {self.spec.name} refused {method}: {exc}") from None
        except (Gone, NotSent, LineLost):
            raise errors.ProviderError(f"the agent of {self.spec.name} ended during {method}; see "
                                       f"{self.spec.stderr_path}") from None
        except TimeoutError:
            raise errors.ProviderError(f"the agent of {self.spec.name} did not answer {method} within "
                                       f"{START_TIMEOUT_S:g} s; see {self.spec.stderr_path}") from None

    async def _ended(self) -> None:
        """However `run` ends: the process group is gone; a turn still running is left unsettled (the app marks
        its task uncertain); then the stream says OFF and ends."""
        self.stopping()
        self._asks.withdraw_all()
        if self._child is not None:
            policy = STOP_POLICY if self.spec.agent.exits_at_eof else replace(STOP_POLICY, polite_s=0.0)
            await self._child.stop(policy, polite=self._peer.close if self._peer is not None else None)
        if self._turn is not None:
            log.warning("%s: the agent ended during turn %s; its outcome is unknown", self.spec.name,
                        self._turn.turn_id)
            self._turn = None
        self.ended()
        if not self._started:
            log.error("the ACP runtime of %s failed to start (see %s)", self.spec.name, self.spec.stderr_path)

    def stop(self) -> None:
        self._stop.set()

    # --- what the agent sends -------------------------------------------------------------------------

    def _on_notification(self, method: str, params: dict[str, Any]) -> None:
        update = params.get("update")
        if method != "session/update" or not isinstance(update, dict):
            return
        turn, loading = self._turn, self._replay
        if loading is not None and params.get("sessionId") == loading[0]:
            loading[1].append(update)
        elif turn is not None and params.get("sessionId") == self.thread_id:
            turn.update(update)

    async def _on_request(self, method: str, params: dict[str, Any]) -> dict[str, Any] | Deferred:
        if method == "session/request_permission":
            turn = self._turn
            cancelling = turn is None or turn.cancelling
            result = permissions.answer(self.spec.name, params, self.spec.allowed, cancelling=cancelling)
            if result is not None:
                return result
            assert turn is not None
            return self._asks.ask(params, turn.turn_id, self.emit)
        if method == DRAIN:
            # Only a running turn takes what is queued (a drain outside one hands nothing over).
            handed = await self._steering.drain() if self._turn is not None else []
            return {"messages": handed, "hasQueuedPrompt": False}
        raise MethodNotFound(method)

    # --- delivery -------------------------------------------------------------------------------------

    def plan_message_id(self) -> str | None:
        return f"turn_{uuids.uuid4().hex}"

    async def start_turn(self, task: TaskDelivery, message_id: str | None = None) -> Started:
        """The structured task as one `session/prompt`, a turn under `message_id`. Raises: ProviderUnavailable
        (nothing sent: not ready, a turn runs, or the input is closed), DeliveryUncertain (the write failed
        part-way)."""
        if not self.ready or self._peer is None or self.thread_id is None:
            raise errors.ProviderUnavailable(f"the ACP runtime of {self.spec.name} is not ready; nothing was sent")
        if self._turn is not None:
            # A second prompt would pre-empt the running turn (Qwen Code, Gemini CLI): never sent.
            raise errors.ProviderUnavailable(f"turn {self._turn.turn_id} of {self.spec.name} is still running; "
                                             "nothing was sent")
        turn = self._turn = Turn(message_id or self.plan_message_id() or "")
        prompt = {"sessionId": self.thread_id, "prompt": [{"type": "text", "text": task_text(task)}]}
        self._timings.mark(turn.turn_id, "written_ns")
        try:
            await self._peer.request("session/prompt", prompt, on_answer=self._answered)
        except NotSent:
            self._turn = None
            raise errors.ProviderUnavailable(f"the agent of {self.spec.name} is not running; nothing was sent"
                                             ) from None
        except LineLost as exc:
            self._turn = None
            raise errors.DeliveryUncertain(f"writing the prompt to the agent of {self.spec.name} failed ({exc}); "
                                           "do not resend", request_id=task.request_id) from None
        self.activate(turn.turn_id)
        turn.active = True
        if turn.outcome is not None:  # answered before the write returned
            self._end(turn)
        return Started(turn.turn_id)

    def _answered(self, pending: Pending) -> None:
        """The prompt's answer: the turn ended (called by the reader)."""
        turn = self._turn
        if turn is None or isinstance(pending.error, Gone):
            return  # no answer: `_ended` leaves the turn unsettled
        self._timings.answered(turn.turn_id)
        crashpoint("after_provider_answer_before_outcome")
        turn.outcome = (turn.refused(str(pending.error)) if pending.error is not None
                        else turn.ended(pending.value or {}))
        if turn.active:
            self._end(turn)

    def _end(self, turn: Turn) -> None:
        self._turn = None
        self._asks.withdraw_all()  # the turn that asked is over: nobody can answer it now
        self._steering.take_back()  # not handed over before the turn ended
        self.deactivate()
        assert turn.outcome is not None
        self.emit(turn.outcome)

    async def steer(self, task: TaskDelivery, expected_turn_id: str) -> str:
        """The task into the running turn `expected_turn_id` at its next tool boundary (module docstring); returns
        that turn's id. Raises: StaleTurn (not that turn, or not handed over in time: certainly not sent)."""
        turn = self._turn
        if not self.capabilities.steer or turn is None or turn.turn_id != expected_turn_id or turn.cancelling:
            raise errors.StaleTurn(f"turn {expected_turn_id} of {self.spec.name} is not running; nothing was sent",
                                   turn_id=expected_turn_id)
        if not await self._steering.hand_over(task_text(task), STEER_WAIT_S):
            raise errors.StaleTurn(f"turn {expected_turn_id} of {self.spec.name} reached no tool boundary that took "
                                   "the task; nothing was sent", turn_id=expected_turn_id)
        return expected_turn_id

    async def push(self, records: Sequence[Interaction], *, timeout_s: float) -> None:
        raise errors.ProviderUnavailable(f"{self.spec.agent.gate.label} takes no information without a turn; the "
                                         "records stay in the mailbox")

    async def offer(self, record: Interaction, claim: Callable[[], Awaitable[bool]], *, timeout_s: float) -> bool:
        """The record into the running turn at its next tool boundary, as a steered task is, if `claim` there says
        no receive took it first (`OffersAtBoundary`). False: never sent."""
        turn = self._turn
        if not self.capabilities.steer or turn is None or turn.cancelling:
            return False
        return await self._steering.hand_over(inbox_text(record), timeout_s, claim)

    async def interrupt(self, turn_id: str) -> None:
        """`session/cancel` while the turn `turn_id` runs; its prompt then ends `cancelled`. Raises: NotActive,
        ProviderUnavailable."""
        turn = self._turn
        if not self.ready or self._peer is None or turn is None or turn.turn_id != turn_id:
            raise errors.NotActive(f"turn {turn_id} is not a turn this app sees running; nothing was interrupted",
                                   field="target")
        turn.cancelling = True
        self._asks.withdraw_all()  # answered `cancelled`, as ACP asks of a client that cancels
        try:
            await self._peer.notify("session/cancel", {"sessionId": self.thread_id})
        except (NotSent, LineLost) as exc:
            raise errors.ProviderUnavailable(f"the agent of {self.spec.name} is not running ({exc})") from None

    def attach_info(self) -> dict[str, Any]:
        raise errors.NotActive(f"agent {self.spec.name!r} runs on {self.spec.agent.gate.label}, which has no "
                               "attached mode", field="agent")
