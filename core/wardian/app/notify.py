"""Notifications (docs/guide/approvals.md#notifications): the person's own command (`wardian app run --notify-command`,
the team file's `notify`), run with one JSON event on its stdin when an approval waits for a person
(`approval_waiting`) and when a task a person sent ends (`task_ended`).

Rules, each for a reason:
- Never in the way: an event is handed over without waiting (`send`: a bounded queue; past it the event is dropped and
  logged), and each command runs in a task of its own, at most MAX_RUNNING at once, so a slow or hung command delays
  no reply, approval or delivery.
- Bounded: a command still running after NOTIFY_TIMEOUT_S is killed with its process group.
- Quiet: its stdout and stderr go nowhere. A failure (not found, non-zero exit, timeout) is logged with the command's
  name only, never its arguments: a webhook URL there may hold a token.
- Nothing secret: an event carries what `approval show` and `message show` show a person (an approval's summary is
  already redacted by its provider runtime, `wardian.providers.approvals.redact`) and never a reply's text, which is
  the agent's words unredacted and could reach a third party (a chat webhook).
- No shell unless the person wrote one: the command is an argv list; a string is split with `shlex`.
- Only a person's tasks: `task_ended` is for tasks the operator sent (`message task --operator`, the console) and
  answered by an agent of this host (on a shared store each host's app tells of its own agents' tasks), never
  agent-to-agent traffic; the notifier follows the operator's mailbox signal, reading ends past the last one it told.
"""

from __future__ import annotations

import logging
import os
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import orjson
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from wardian import errors
from wardian.app.signals import MailboxSignals
from wardian.app.writer import StoreWriter
from wardian.approvals import Approval
from wardian.home import ENV_HOME
from wardian.model import OPERATOR_UUID
from wardian.notifications import NOTIFY_TIMEOUT_S, approval_event, task_event
from wardian.providers.process import child_env, end_tree
from wardian.providers.tree import SPAWN_OPTIONS, Tree
from wardian.store import history

log = logging.getLogger("wardian.app.notify")

MAX_RUNNING = 4
"""Notify commands running at once; more events wait in the queue."""
MAX_QUEUED = 256
"""Events waiting for a command to run; past it an event is dropped (and logged)."""
ENDS_PER_READ = 100


class Notifier:
    """Runs the person's notify command for each event, in the background (module docstring)."""

    def __init__(self, argv: Sequence[str], home: Path, writer: StoreWriter, signals: MailboxSignals) -> None:
        self.argv = tuple(argv)
        self.name = os.path.basename(self.argv[0])
        self._env = child_env({ENV_HOME: str(home)})
        self._writer = writer
        self._signals = signals
        self._send: MemoryObjectSendStream[dict[str, Any]]
        self._receive: MemoryObjectReceiveStream[dict[str, Any]]
        self._send, self._receive = anyio.create_memory_object_stream[dict[str, Any]](MAX_QUEUED)

    def approval_waiting(self, approval: Approval) -> None:
        """An approval waits for a person (the hook `Approvals.on_waiting`)."""
        self.send(approval_event(approval))

    def send(self, event: dict[str, Any]) -> None:
        """Queue an event without waiting; dropped (and logged) when the queue is full."""
        try:
            self._send.send_nowait(event)
        except anyio.WouldBlock:
            log.warning("notify command %s: %d events wait already; %s dropped", self.name, MAX_QUEUED,
                        event["event"])

    async def run(self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Until cancelled: follow the person's task ends and run the command for each queued event."""
        after = await self._writer.call(history.last_interaction_id)  # ends from before this app are not news
        running = anyio.Semaphore(MAX_RUNNING)
        async with anyio.create_task_group() as tg:
            tg.start_soon(self._follow_ends, after)
            task_status.started()
            async for event in self._receive:
                await running.acquire()  # waits here, not in the sender: the queue absorbs a burst
                tg.start_soon(self._run_one, event, running)

    async def _follow_ends(self, after: int) -> None:
        """Subscribe, then read: an end committed between the read and the wait still wakes the next round."""
        while True:
            with self._signals.subscribe(OPERATOR_UUID) as waiter:
                try:
                    ends = await self._writer.call(history.person_task_ends, after, ENDS_PER_READ)
                except errors.WardianError as exc:
                    log.warning("notify command %s: could not read ended tasks (%s)", self.name, exc.code)
                    ends = []
                for end in ends:
                    after = max(after, end.seq)
                    self.send(task_event(end))
                if len(ends) < ENDS_PER_READ:
                    await waiter.wait()

    async def _run_one(self, event: dict[str, Any], running: anyio.Semaphore) -> None:
        try:
            await self._run_command(orjson.dumps(event) + b"\n", event["event"])
        except Exception:  # a notification never takes the app down
            log.exception("notify command %s failed on %s", self.name, event["event"])
        finally:
            running.release()

    async def _run_command(self, data: bytes, what: str) -> None:
        try:
            process = await anyio.open_process(self.argv, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                                               stderr=subprocess.DEVNULL, env=self._env, **SPAWN_OPTIONS)
        except OSError as exc:
            log.warning("notify command %s could not start (%s) for %s", self.name, exc.strerror or exc, what)
            return
        tree = Tree(process.pid)
        code: int | None = None
        try:
            with anyio.move_on_after(NOTIFY_TIMEOUT_S) as scope:
                assert process.stdin is not None
                try:
                    await process.stdin.send(data)
                    await process.stdin.aclose()
                except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                    pass  # it did not read its event; its exit status says the rest
                code = await process.wait()
            if scope.cancelled_caught:
                log.warning("notify command %s still ran after %.0f s on %s: killed", self.name, NOTIFY_TIMEOUT_S,
                            what)
            elif code:
                log.warning("notify command %s exited with status %d on %s", self.name, code, what)
        finally:
            with anyio.CancelScope(shield=True), anyio.move_on_after(NOTIFY_TIMEOUT_S):
                if process.returncode is None:
                    await end_tree(tree)
                await process.aclose()
            tree.close()
