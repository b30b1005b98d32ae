"""The runtime of one OpenCode agent: an app-owned `opencode serve`, its one session, and what the app observes of it
(a `wardian.providers.base.ProviderRuntime`). Facts it relies on were verified against OpenCode 1.18.33 and are
pinned by tests/providers/opencode against the real binary.

```
opencode serve --port 0 --hostname 127.0.0.1   (cwd: the workspace; private XDG dirs; Basic auth password)
   GET  /event                        session.status busy/idle, session.idle, message.updated, session.error
   POST /session                      the agent's one session (ses_...), created once, resumed by later starts
   POST /session/{id}/prompt_async    a task: a new loop, our chosen msg_ id (204 at once)
   POST /session/{id}/message         information: {noReply: true}, our chosen msg_ id (no loop)
   GET  /session/{id}/message/{msg}   looks up a submission whose answer was lost
   POST /session/{id}/abort           interrupts the running loop
   POST /permission/{id}/reply        answers a `permission.asked` of /event (`approvals`)
```

Starting serve is `launch`'s; its requests and lookups are `wire`'s; what `/event` says of the session and how a
loop's outcome is read are `session`'s. A turn is one loop, rooted at the user message that started it.

Error classification (what the app may do next): a request that could not be sent, or that OpenCode refused with
401, is `ProviderUnavailable` (certainly not admitted); a submission whose answer was lost is looked up by the
msg_ id we chose, found → accepted, else `DeliveryUncertain` (never resent).
"""

from __future__ import annotations

import json
import logging
import subprocess
from collections.abc import Sequence
from contextlib import suppress
from typing import Any

import anyio
import anyio.abc
import httpx2

from wardian import errors
from wardian.model import Interaction
from wardian.providers.asking import OpenAsks, secrets_of
from wardian.providers.base import Started, TaskDelivery
from wardian.providers.delivery import inbox_text, task_text
from wardian.providers.opencode import approvals, signin
from wardian.providers.opencode.launch import ServeSpec, drain, listening_url, new_message_id, serve_command
from wardian.providers.opencode.session import UNKNOWN_ROOT, SessionEvents, outcome_of
from wardian.providers.opencode.wire import REQUEST_TIMEOUT_S, NotSent, ServeClient
from wardian.providers.process import ProviderProcess, StopPolicy
from wardian.providers.turns import TurnState

__all__ = ["OpenCodeRuntime", "ServeSpec", "new_message_id"]

log = logging.getLogger("wardian.opencode")

# serve has been seen ignoring SIGTERM: nothing polite to try, and the group is killed soon after it.
STOP_POLICY = StopPolicy(polite_s=0.0, term_s=5.0, kill_s=3.0)


class OpenCodeRuntime(TurnState):
    """Run with `await tg.start(runtime.run)`: returns once the session is ready (created or resumed)."""

    def __init__(self, spec: ServeSpec) -> None:
        super().__init__(f"opencode:{spec.name}", spec.session_id)
        self.spec = spec
        self.capabilities = spec.capabilities
        self._stop = anyio.Event()
        self._idle_checks = anyio.Event()
        self._client: ServeClient | None = None
        self._child: ProviderProcess | None = None
        self._ours: set[str] = set()  # loops we started (our msg_ ids): only these may be interrupted
        self._session = SessionEvents()
        self._asks = OpenAsks(self.emit, secrets_of(spec.env, *(c.secret for c in spec.keys.values())))
        self._desk = approvals.PermissionDesk(spec.name, str(spec.workspace), self._asks, self._request,
                                              lambda: self.active_turn_id)
        self._tg: anyio.abc.TaskGroup | None = None
        self.warnings: list[str] = []  # for a person: a key the config overrides, a stale auth.json (no secret)

    # --- lifecycle ------------------------------------------------------------------------------------

    async def run(self, *, task_status: anyio.abc.TaskStatus[str | None] = anyio.TASK_STATUS_IGNORED) -> None:
        spec = self.spec
        started = False
        try:
            self._child = ProviderProcess(serve_command(spec), name=spec.name, env=spec.env, cwd=spec.workspace,
                                          log_path=spec.stderr_path, pid_path=spec.pid_path, stdin=subprocess.DEVNULL)
            process = await self._child.start()
            async with anyio.create_task_group() as tg:
                self._tg = tg
                url = await listening_url(spec, process)
                tg.start_soon(drain, process)
                self._client = ServeClient(spec.name, url, spec.password_path, self._stop.set)
                for warning in await signin.check_start(self._client, spec.name, spec.keys):
                    self.warn(warning)
                await tg.start(self._follow_events)  # subscribed before the session is read: no lost idle
                session = await self._open_session()
                tg.start_soon(self._watch_process, process)
                tg.start_soon(self._check_idles)
                self.became_ready(session)
                started = True
                task_status.started(session)
                await self._stop.wait()
                tg.cancel_scope.cancel()
        finally:
            self.stopping()
            self._asks.end()
            with anyio.CancelScope(shield=True):
                if self._client is not None:
                    with suppress(Exception):
                        await self._client.aclose()
                if self._child is not None:
                    await self._child.stop(STOP_POLICY)
                if spec.keys and spec.data_dir is not None:
                    # Copies of the injected keys a `PUT /auth` made OpenCode write (`signin`) go with serve.
                    await anyio.to_thread.run_sync(signin.scrub_auth_file, spec.data_dir, spec.keys)
            self.ended()
            if not started:
                log.error("OpenCode runtime %s failed to start", spec.name)

    async def _watch_process(self, process: anyio.abc.Process) -> None:
        await process.wait()
        log.warning("opencode serve of %s exited (%s)", self.spec.name, process.returncode)
        self._stop.set()

    async def _open_session(self) -> str:
        """The agent's one session: the one it had (resumed), else a new one.

        Raises:
            ProviderUnavailable: OpenCode refused or could not be reached.
        """
        try:
            if self.thread_id:
                response = await self._request("GET", f"/session/{self.thread_id}")
                if response.status_code == 200:
                    return self.thread_id
                log.warning("OpenCode session %s of %s is gone (%s); starting a new one", self.thread_id,
                            self.spec.name, response.status_code)
            # A title avoids OpenCode's title-generation request to the model.
            response = await self._request("POST", "/session", json={"title": f"wardian agent {self.spec.name}"})
        except NotSent as exc:
            raise errors.ProviderUnavailable(f"OpenCode could not be reached for the session ({exc})") from None
        if response.status_code != 200:
            raise errors.ProviderUnavailable(f"OpenCode could not create a session ({response.status_code})")
        return str(response.json()["id"])

    def stop(self) -> None:
        self._stop.set()

    def warn(self, warning: str) -> None:
        log.warning("%s", warning)
        self.warnings.append(warning)

    async def _request(self, method: str, path: str, **kw: Any) -> httpx2.Response:
        """Raises: NotSent (not connected yet, or as `ServeClient.request`), DeliveryUncertain."""
        if self._client is None:
            raise NotSent("not connected")
        return await self._client.request(method, path, **kw)

    # --- events ---------------------------------------------------------------------------------------

    async def _follow_events(self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Read `/event`; a stream that ends while serve runs is opened again and the state read afresh."""
        assert self._client is not None
        first = True
        while not self._stop.is_set():
            try:
                async with self._client.events() as stream:
                    if stream.status_code != 200:
                        raise errors.ProviderUnavailable(f"OpenCode's event stream answered {stream.status_code}")
                    if first:
                        first = False
                        task_status.started()
                    else:
                        self._idle_checks.set()  # events may have been missed: look at the state again
                    async for line in stream.aiter_lines():
                        if line.startswith("data:"):
                            self._on_event(json.loads(line[5:]))
            except (httpx2.HTTPError, ValueError) as exc:
                log.info("%s: the event stream ended (%s)", self.spec.name, type(exc).__name__)
            if first:
                raise errors.ProviderUnavailable("OpenCode's event stream could not be opened")
            await anyio.sleep(0.2)

    def _on_event(self, event: dict[str, Any]) -> None:
        kind = event.get("type")
        props = event.get("properties")
        if kind in (approvals.ASKED, approvals.REPLIED) and isinstance(props, dict) \
                and props.get("sessionID") == self.thread_id:
            self._desk.event(str(kind), props, self._tg)
            return
        signal = self._session.take(event, self.thread_id)
        if signal == "busy" and self.active_turn_id is None:
            # A loop we did not start (someone else's prompt): its root is the latest user message.
            self.activate(self._session.last_user or UNKNOWN_ROOT)
        elif signal == "idle":
            self._idle_checks.set()

    async def _check_idles(self) -> None:
        while True:
            await self._idle_checks.wait()
            self._idle_checks = anyio.Event()
            try:
                await self._settle()
            except (errors.WardianError, NotSent, httpx2.HTTPError, KeyError, ValueError) as exc:
                log.warning("%s: could not read the end of turn %s (%s); it is read again at the next idle",
                            self.spec.name, self.active_turn_id, type(exc).__name__)

    async def _settle(self) -> None:
        """At an idle signal: if the session really is idle and the active loop has answered, its outcome."""
        root = self.active_turn_id
        if root is None or self.thread_id is None:
            return
        status = (await self._request("GET", "/session/status")).json()
        if isinstance(status, dict) and (status.get(self.thread_id) or {}).get("type") not in (None, "idle"):
            return  # a late idle of an earlier loop: this one still runs
        answers = self._session.answers.get(root)
        if not answers:
            # Events may have been missed: read the session's messages.
            messages = (await self._request("GET", f"/session/{self.thread_id}/message")).json()
            answers = self._session.found(root, messages)
        if not answers:
            if root not in self._ours and self.active_turn_id == root:
                # Not a loop of ours, and the session is idle with nothing answering it: whatever ran is over (its
                # user message was never seen). Only our own loops wait for their answers: an idle may precede
                # their first step.
                self._asks.turn_ended(root)
                self.deactivate()
            return
        last = (await self._request("GET", f"/session/{self.thread_id}/message/{answers[-1]}")).json()
        if self.active_turn_id != root:
            return
        if isinstance(last, dict) and isinstance(last.get("info"), dict):
            self._session.took(last["info"])  # its final tokens, should its last update have been missed
        self._asks.turn_ended(root)
        self.deactivate()
        self.emit(outcome_of(root, last, self._session.usage(root)))

    # --- delivery -------------------------------------------------------------------------------------

    def plan_message_id(self) -> str | None:
        return new_message_id()

    async def start_turn(self, task: TaskDelivery, message_id: str | None = None) -> Started:
        """`prompt_async` on the session with the structured task text, under our chosen msg_ id (the turn id).
        `confirmed_by_lookup` says why, when the answer was lost and a lookup found the message.

        Raises:
            ProviderUnavailable: not sent (no connection, not ready, or credentials refused).
            DeliveryUncertain: the answer was lost and a lookup did not find the message (`looked_up`).
        """
        if not self.ready or self.thread_id is None:
            raise errors.ProviderUnavailable(f"the OpenCode runtime of {self.spec.name} is not running; nothing sent")
        mid = message_id or new_message_id()
        self._ours.add(mid)
        self.activate(mid)  # before the request: the loop's busy and idle may come before its 204
        body = {"messageID": mid, "parts": [{"type": "text", "text": task_text(task)}]}
        try:
            lost = await self._post_named(f"/session/{self.thread_id}/prompt_async", body, mid, expect=204)
        except NotSent as exc:
            self._ours.discard(mid)
            self.deactivate()
            raise errors.ProviderUnavailable(f"OpenCode did not take the task ({exc}); nothing was sent") from None
        except errors.DeliveryUncertain:
            self._ours.discard(mid)
            self.deactivate()
            # The message may have started a loop whose busy was already seen (while we counted the loop as ours):
            # ask OpenCode now instead of waiting for an event that has come and gone.
            await self._reread_status(mid)
            raise
        except BaseException:
            self._ours.discard(mid)
            self.deactivate()
            raise
        return Started(mid, confirmed_by_lookup=lost)

    async def _post_named(self, path: str, body: dict[str, Any], mid: str, *, expect: int) -> str | None:
        """`ServeClient.post_named` on the agent's session. Raises: NotSent, DeliveryUncertain."""
        if self._client is None or self.thread_id is None:
            raise NotSent("not connected")
        return await self._client.post_named(path, body, mid, expect=expect, session_id=self.thread_id,
                                             seen=self._session.users_seen)

    async def _reread_status(self, mid: str) -> None:
        """After an uncertain submission: the session's real state. Busy, a loop runs (the message's, or one the
        message joined): the runtime is active until that loop's end is read, so no task is sent into it and the
        next one goes once it ends. Never raises: a failed read leaves the state to the next event."""
        try:
            with anyio.fail_after(REQUEST_TIMEOUT_S):
                status = (await self._request("GET", "/session/status")).json()
        except (errors.WardianError, NotSent, httpx2.HTTPError, ValueError, TimeoutError) as exc:
            log.warning("%s: could not read the session's status after an uncertain delivery (%s)", self.spec.name,
                        type(exc).__name__)
            return
        state = (status.get(self.thread_id) or {}).get("type") if isinstance(status, dict) else None
        if state not in (None, "idle") and self.active_turn_id in (None, UNKNOWN_ROOT):
            # Most likely the loop this message started (a busy seen without its user message is rooted at no one):
            # its end is read from the answers to it.
            self.activate(mid)
            self._idle_checks.set()  # an idle that came between the read and now is not missed

    async def steer(self, task: TaskDelivery, expected_turn_id: str) -> str:
        raise errors.Unsupported("OpenCode has no turn-fenced steer; the task waits for the loop to end")

    async def push(self, records: Sequence[Interaction], *, timeout_s: float) -> None:
        """A `noReply` message per record (no loop starts), only between loops.

        Raises:
            ProviderUnavailable: a loop runs (a `noReply` message would be consumed like a prompt), or not sent.
            DeliveryUncertain: the answer was lost and a lookup did not find the message.
        """
        async with self.submit_lock:  # never beside a submission that may start a loop
            for record in records:
                if not self.ready or self.active_turn_id is not None or self.thread_id is None:
                    raise errors.ProviderUnavailable("a loop runs or the runtime is down; nothing was pushed")
                mid = new_message_id()
                body = {"messageID": mid, "noReply": True, "parts": [{"type": "text", "text": inbox_text(record)}]}
                try:
                    with anyio.fail_after(timeout_s):
                        await self._post_named(f"/session/{self.thread_id}/message", body, mid, expect=200)
                except NotSent as exc:
                    raise errors.ProviderUnavailable(f"OpenCode did not take the record ({exc})") from None
                except TimeoutError:
                    raise errors.DeliveryUncertain(f"OpenCode did not answer the push within {timeout_s:g} s") \
                        from None

    async def interrupt(self, turn_id: str) -> None:
        """`abort` of the running loop, only when it is the exact loop one of our tasks started.

        Raises:
            NotActive: no loop runs, or it is not one we started under `turn_id`.
        """
        if turn_id != self.active_turn_id or turn_id not in self._ours or self.thread_id is None:
            raise errors.NotActive(f"turn {turn_id} is not a loop this app started and sees running; nothing was "
                                   "interrupted", field="target")
        try:
            response = await self._request("POST", f"/session/{self.thread_id}/abort")
        except NotSent as exc:
            raise errors.ProviderUnavailable(f"OpenCode did not take the interrupt ({exc})") from None
        if response.status_code != 200:
            raise errors.ProviderError(f"OpenCode answered the interrupt with {response.status_code}")

    def attach_info(self) -> dict[str, Any]:
        raise errors.NotActive(f"agent {self.spec.name!r} runs on OpenCode, which has no attached mode here",
                               field="agent")
