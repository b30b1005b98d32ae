"""The runtime of one OpenCode agent: an app-owned `opencode serve`, its one session, and what the app observes of it
(a `wardian.providers.base.ProviderRuntime`). Facts it relies on were verified against OpenCode 1.18.33 offline
(/work/shared/opencode-offline.md) and are pinned by tests/opencode against the real binary.

```
opencode serve --port 0 --hostname 127.0.0.1   (cwd: the workspace; private XDG dirs; Basic auth password)
   GET  /event                        session.status busy/idle, session.idle, message.updated, session.error
   POST /session                      the agent's one session (ses_...), created once, resumed by later starts
   POST /session/{id}/prompt_async    a task: a new loop, our chosen msg_ id (204 at once)
   POST /session/{id}/message         information: {noReply: true}, our chosen msg_ id (no loop)
   GET  /session/{id}/message/{msg}   looks up a submission whose answer was lost
   POST /session/{id}/abort           interrupts the running loop
```

A turn is one loop: it starts with a user message (a task we sent: its msg_ id is the turn id) and ends at
`session.idle`; its outcome is read from the assistant messages answering that user message (`parentID`): the last
one's text is the final answer, `MessageAbortedError` an interruption, any other error a failure.

Error classification (what the app may do next): a request that could not be sent, or that OpenCode refused with
401, is `ProviderUnavailable` (certainly not admitted); a submission whose answer was lost is looked up by the
msg_ id we chose, found → accepted, else `DeliveryUncertain` (never resent).
"""

from __future__ import annotations

import base64
import itertools
import json
import logging
import secrets
import subprocess
import time
from collections.abc import Mapping, Sequence
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import httpx2
from anyio.streams.memory import MemoryObjectReceiveStream

from wardian import errors
from wardian.model import AgentStatus, Interaction
from wardian.providers.base import (
    Capabilities,
    OutcomeStatus,
    ProviderEvent,
    Started,
    StateChange,
    TaskDelivery,
    TurnOutcome,
)
from wardian.providers.delivery import inbox_text, task_text
from wardian.providers.events import EventStream
from wardian.providers.process import ProviderProcess, StopPolicy

log = logging.getLogger("wardian.opencode")

# serve has been seen ignoring SIGTERM: nothing polite to try, and the group is killed soon after it.
STOP_POLICY = StopPolicy(polite_s=0.0, term_s=5.0, kill_s=3.0)
LISTEN_TIMEOUT_S = 180.0  # serve's start (its first run on a loaded machine took ~12 s here; plugins may install)
REQUEST_TIMEOUT_S = 30.0
# A message whose prompt_async answer was lost is looked up after each of these pauses (seconds, ~4.3 s in all):
# OpenCode may answer before the message is readable, so one 404 right away does not prove it never arrived.
LOOKUP_PAUSES_S = (0.0, 0.25, 1.0, 3.0)
SEEN_USER_MESSAGES = 1024  # user message ids remembered from /event, for lookups
_UNKNOWN_ROOT = "unknown"  # the root of a loop seen busy before any of its user messages
_LISTENING = "listening on "
_ALPHABET = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
_ids = itertools.count(1)


def new_message_id() -> str:
    """A `msg_` id that sorts like OpenCode's own: (Unix ms * 4096 + a counter) as 12 hex digits (modulo 2**48, as
    OpenCode does), then 14 random base-62 characters. Later ids sort after earlier ones, OpenCode's and ours alike."""
    value = (time.time_ns() // 1_000_000 * 0x1000 + next(_ids) % 0x1000) & 0xFFFFFFFFFFFF
    return "msg_" + format(value, "012x") + "".join(secrets.choice(_ALPHABET) for _ in range(14))


@dataclass(frozen=True, slots=True)
class ServeSpec:
    name: str
    opencode: str
    workspace: Path
    env: Mapping[str, str]
    password_path: Path
    session_id: str | None
    capabilities: Capabilities
    stderr_path: Path
    pid_path: Path | None = None


class _NotSent(Exception):
    """The request certainly did not reach OpenCode (no connection, or refused by its auth)."""


class OpenCodeRuntime:
    """Run with `await tg.start(runtime.run)`: returns once the session is ready (created or resumed)."""

    def __init__(self, spec: ServeSpec) -> None:
        self.spec = spec
        self.capabilities = spec.capabilities
        self.thread_id: str | None = spec.session_id
        self.active_turn_id: str | None = None
        self.ready = False
        self.submit_lock = anyio.Lock()
        self._events = EventStream(f"opencode:{spec.name}")
        self.events: MemoryObjectReceiveStream[ProviderEvent] = self._events.receive
        self._idle = anyio.Event()
        self._stop = anyio.Event()
        self._idle_checks = anyio.Event()
        self._url: str | None = None
        self._client: httpx2.AsyncClient | None = None
        self._child: ProviderProcess | None = None
        self._ours: set[str] = set()  # loops we started (our msg_ ids): only these may be interrupted
        self._answers: dict[str, list[str]] = {}  # loop root (user msg id) -> its assistant message ids, in order
        self._last_user: str | None = None
        self._users_seen: dict[str, None] = {}  # the latest SEEN_USER_MESSAGES user message ids on /event, in order
        self._failed_auth = False

    # --- lifecycle ------------------------------------------------------------------------------------

    async def run(self, *, task_status: anyio.abc.TaskStatus[str | None] = anyio.TASK_STATUS_IGNORED) -> None:
        spec = self.spec
        started = False
        try:
            self._child = ProviderProcess([spec.opencode, "serve", "--port", "0", "--hostname", "127.0.0.1"],
                                          name=spec.name, env=spec.env, cwd=spec.workspace, log_path=spec.stderr_path,
                                          pid_path=spec.pid_path, stdin=subprocess.DEVNULL)
            process = await self._child.start()
            async with anyio.create_task_group() as tg:
                self._url = await self._listening(process)
                tg.start_soon(self._drain_stdout, process)
                self._client = httpx2.AsyncClient(base_url=self._url, auth=httpx2.FunctionAuth(self._auth),
                                                   timeout=REQUEST_TIMEOUT_S)
                await tg.start(self._follow_events)  # subscribed before the session is read: no lost idle
                self.thread_id = await self._session()
                tg.start_soon(self._watch_process, process)
                tg.start_soon(self._check_idles)
                self.ready = True
                self._idle.set()
                self._emit(StateChange(AgentStatus.IDLE, None, self.thread_id))
                started = True
                task_status.started(self.thread_id)
                await self._stop.wait()
                tg.cancel_scope.cancel()
        finally:
            self.ready = False
            self.active_turn_id = None
            with anyio.CancelScope(shield=True):
                if self._client is not None:
                    with suppress(Exception):
                        await self._client.aclose()
                await self._terminate()
            self._emit(StateChange(AgentStatus.OFF, None, self.thread_id))
            self._events.close()
            if not started:
                log.error("OpenCode runtime %s failed to start", spec.name)

    def _auth(self, request: httpx2.Request) -> httpx2.Request:
        # Read at each request from its 0600 file (never logged): the password `serve` was started with.
        password = self.spec.password_path.read_text(encoding="utf-8").strip()
        request.headers["Authorization"] = "Basic " + base64.b64encode(f"opencode:{password}".encode()).decode()
        return request

    async def _listening(self, process: anyio.abc.Process) -> str:
        """The URL serve prints on stdout ("opencode server listening on http://127.0.0.1:PORT"); earlier lines
        (warnings) are skipped.

        Raises:
            ProviderUnavailable: serve exited first (a port taken, a broken config), or listens elsewhere.
            TimeoutError: no address within LISTEN_TIMEOUT_S.
        """
        assert process.stdout is not None
        buffer = b""
        with anyio.fail_after(LISTEN_TIMEOUT_S):
            while True:
                while b"\n" not in buffer:
                    try:
                        buffer += await process.stdout.receive(4096)
                    except anyio.EndOfStream:
                        code = await process.wait()
                        raise errors.ProviderUnavailable(
                            f"opencode serve exited ({code}) before it listened; see {self.spec.stderr_path}") \
                            from None
                raw, buffer = buffer.split(b"\n", 1)
                line = raw.decode("utf-8", "replace")
                if _LISTENING in line:
                    break
                log.info("%s: opencode serve said %r", self.spec.name, line[:200])
        url = line.split(_LISTENING, 1)[1].strip()
        if not url.startswith("http://127.0.0.1:"):
            raise errors.ProviderUnavailable(f"opencode serve listens on {url[:80]!r}, not on 127.0.0.1")
        return url

    async def _drain_stdout(self, process: anyio.abc.Process) -> None:
        assert process.stdout is not None
        with suppress(anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
            while True:
                await process.stdout.receive(65536)

    async def _watch_process(self, process: anyio.abc.Process) -> None:
        await process.wait()
        log.warning("opencode serve of %s exited (%s)", self.spec.name, process.returncode)
        self._stop.set()

    async def _session(self) -> str:
        """The agent's one session: the one it had (resumed), else a new one.

        Raises:
            ProviderUnavailable: OpenCode refused or could not be reached.
        """
        try:
            return await self._open_session()
        except _NotSent as exc:
            raise errors.ProviderUnavailable(f"OpenCode could not be reached for the session ({exc})") from None

    async def _open_session(self) -> str:
        if self.thread_id:
            response = await self._request("GET", f"/session/{self.thread_id}")
            if response.status_code == 200:
                return self.thread_id
            log.warning("OpenCode session %s of %s is gone (%s); starting a new one", self.thread_id, self.spec.name,
                        response.status_code)
        # A title avoids OpenCode's title-generation request to the model.
        response = await self._request("POST", "/session", json={"title": f"wardian agent {self.spec.name}"})
        if response.status_code != 200:
            raise errors.ProviderUnavailable(f"OpenCode could not create a session ({response.status_code})")
        return str(response.json()["id"])

    def stop(self) -> None:
        self._stop.set()

    async def wait_idle(self) -> None:
        await self._idle.wait()

    async def _terminate(self) -> None:
        if self._child is not None:
            await self._child.stop(STOP_POLICY)

    # --- HTTP -------------------------------------------------------------------------------------------

    async def _request(self, method: str, path: str, **kw: Any) -> httpx2.Response:
        """One request. Raises: _NotSent (no connection; or 401: OpenCode refused our credentials), DeliveryUncertain
        (it left, its answer did not come)."""
        if self._client is None:
            raise _NotSent("not connected")
        try:
            response = await self._client.request(method, path, **kw)
        except (httpx2.ConnectError, httpx2.ConnectTimeout, httpx2.PoolTimeout) as exc:
            raise _NotSent(type(exc).__name__) from None
        except httpx2.HTTPError as exc:
            raise errors.DeliveryUncertain(f"OpenCode did not answer {method} {path} ({type(exc).__name__}); its "
                                           "outcome is unknown", method=path) from None
        if response.status_code == 401:
            self._failed_auth = True
            log.error("OpenCode of %s refused this app's credentials (401); ending the runtime", self.spec.name)
            self._stop.set()
            raise _NotSent("401")
        return response

    # --- events -----------------------------------------------------------------------------------------

    def _emit(self, event: ProviderEvent) -> None:
        self._events.emit(event)

    async def _follow_events(self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Read `/event`; a stream that ends while serve runs is opened again and the state read afresh."""
        assert self._client is not None
        first = True
        while not self._stop.is_set():
            try:
                async with self._client.stream("GET", "/event", timeout=httpx2.Timeout(None, connect=10)) as stream:
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
        props = event.get("properties") or {}
        if not isinstance(props, dict) or props.get("sessionID") not in (None, self.thread_id):
            return
        if kind == "message.updated":
            info = props.get("info") or {}
            if info.get("sessionID") != self.thread_id:
                return
            if info.get("role") == "user":
                self._last_user = str(info.get("id"))
                self._users_seen[self._last_user] = None
                if len(self._users_seen) > SEEN_USER_MESSAGES:
                    del self._users_seen[next(iter(self._users_seen))]
            elif info.get("role") == "assistant" and info.get("parentID"):
                answers = self._answers.setdefault(str(info["parentID"]), [])
                if info.get("id") not in answers:
                    answers.append(str(info.get("id")))
        elif kind == "session.status" and props.get("sessionID") == self.thread_id:
            state = (props.get("status") or {}).get("type")
            if state == "busy" and self.active_turn_id is None:
                # A loop we did not start (someone else's prompt): its root is the latest user message.
                self._activate(self._last_user or _UNKNOWN_ROOT)
            elif state == "idle":
                self._idle_checks.set()
        elif kind == "session.idle" and props.get("sessionID") == self.thread_id:
            self._idle_checks.set()

    def _activate(self, turn_id: str) -> None:
        self.active_turn_id = turn_id
        self._idle = anyio.Event()
        self._emit(StateChange(AgentStatus.ACTIVE, turn_id, self.thread_id))

    def _deactivate(self) -> None:
        self.active_turn_id = None
        self._idle.set()
        self._emit(StateChange(AgentStatus.IDLE, None, self.thread_id))

    async def _check_idles(self) -> None:
        while True:
            await self._idle_checks.wait()
            self._idle_checks = anyio.Event()
            try:
                await self._settle()
            except (errors.WardianError, _NotSent, httpx2.HTTPError, KeyError, ValueError) as exc:
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
        answers = self._answers.get(root)
        if not answers:
            answers = await self._answers_of(root)
        if not answers:
            if root not in self._ours and self.active_turn_id == root:
                # Not a loop of ours, and the session is idle with nothing answering it: whatever ran is over (its
                # user message was never seen). Only our own loops wait for their answers: an idle may precede
                # their first step.
                self._deactivate()
            return
        last = (await self._request("GET", f"/session/{self.thread_id}/message/{answers[-1]}")).json()
        if self.active_turn_id != root:
            return
        self._deactivate()
        self._emit(outcome_of(root, last))

    async def _answers_of(self, root: str) -> list[str]:
        """The assistant messages answering `root`, from the session's messages (events may have been missed)."""
        messages = (await self._request("GET", f"/session/{self.thread_id}/message")).json()
        found = [str(m["info"]["id"]) for m in messages if isinstance(m, dict)
                 and (m.get("info") or {}).get("role") == "assistant" and m["info"].get("parentID") == root]
        if found:
            self._answers[root] = found
        return found

    # --- delivery ---------------------------------------------------------------------------------------

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
        self._activate(mid)  # before the request: the loop's busy and idle may come before its 204
        body = {"messageID": mid, "parts": [{"type": "text", "text": task_text(task)}]}
        try:
            lost = await self._submit(f"/session/{self.thread_id}/prompt_async", body, mid, expect=204)
        except _NotSent as exc:
            self._ours.discard(mid)
            self._deactivate()
            raise errors.ProviderUnavailable(f"OpenCode did not take the task ({exc}); nothing was sent") from None
        except errors.DeliveryUncertain:
            self._ours.discard(mid)
            self._deactivate()
            # The message may have started a loop whose busy was already seen (while we counted the loop as ours):
            # ask OpenCode now instead of waiting for an event that has come and gone.
            await self._reread_status(mid)
            raise
        except BaseException:
            self._ours.discard(mid)
            self._deactivate()
            raise
        return Started(mid, confirmed_by_lookup=lost)

    async def _reread_status(self, mid: str) -> None:
        """After an uncertain submission: the session's real state. Busy, a loop runs (the message's, or one the
        message joined): the runtime is active until that loop's end is read, so no task is sent into it and the
        next one goes once it ends. Never raises: a failed read leaves the state to the next event."""
        try:
            with anyio.fail_after(REQUEST_TIMEOUT_S):
                status = (await self._request("GET", "/session/status")).json()
        except (errors.WardianError, _NotSent, httpx2.HTTPError, ValueError, TimeoutError) as exc:
            log.warning("%s: could not read the session's status after an uncertain delivery (%s)", self.spec.name,
                        type(exc).__name__)
            return
        state = (status.get(self.thread_id) or {}).get("type") if isinstance(status, dict) else None
        if state not in (None, "idle") and self.active_turn_id in (None, _UNKNOWN_ROOT):
            # Most likely the loop this message started (a busy seen without its user message is rooted at no one):
            # its end is read from the answers to it.
            self._activate(mid)
            self._idle_checks.set()  # an idle that came between the read and now is not missed

    async def _submit(self, path: str, body: dict[str, Any], mid: str, *, expect: int) -> str | None:
        """POST a message we named `mid`, which OpenCode then has. An answer lost or unexpected is settled by looking
        the message up (never by sending it again): found, the return value says why the answer was lost (None: it
        was answered as expected).

        Raises:
            _NotSent, DeliveryUncertain (`looked_up`: the message was not found).
        """
        try:
            response = await self._request("POST", path, json=body)
            if response.status_code == expect:
                return None
            why = f"OpenCode answered {response.status_code}: {response.text[:200]}"
        except errors.DeliveryUncertain as exc:
            why = exc.message
        for pause in LOOKUP_PAUSES_S:
            await anyio.sleep(pause)
            if mid in self._users_seen:
                status = 200  # OpenCode announced it on /event
            else:
                try:
                    status = (await self._request("GET", f"/session/{self.thread_id}/message/{mid}")).status_code
                except (_NotSent, errors.DeliveryUncertain) as exc:
                    # The request may have left: whatever stops the lookup, the delivery stays uncertain.
                    raise errors.DeliveryUncertain(f"{why}; looking message {mid} up failed too ({exc}): never "
                                                   "resent", provider_message_id=mid) from None
            if status == 200:
                log.warning("%s: message %s was found after %s; its delivery is confirmed", self.spec.name, mid, why)
                return why
            if status != 404:
                raise errors.DeliveryUncertain(f"{why}; looking message {mid} up answered {status}: never resent",
                                               provider_message_id=mid)
        raise errors.DeliveryUncertain(f"{why}; message {mid} was not found in {sum(LOOKUP_PAUSES_S):g} s of lookups "
                                       "(it may still arrive): never resent", provider_message_id=mid, looked_up=True)

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
                        await self._submit(f"/session/{self.thread_id}/message", body, mid, expect=200)
                except _NotSent as exc:
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
        except _NotSent as exc:
            raise errors.ProviderUnavailable(f"OpenCode did not take the interrupt ({exc})") from None
        if response.status_code != 200:
            raise errors.ProviderError(f"OpenCode answered the interrupt with {response.status_code}")

    def attach_info(self) -> dict[str, Any]:
        raise errors.NotActive(f"agent {self.spec.name!r} runs on OpenCode, which has no attached mode here",
                               field="agent")


def outcome_of(root: str, message: Any) -> TurnOutcome:
    """The outcome of loop `root` from its last assistant message (`{info, parts}`)."""
    info = message.get("info") or {} if isinstance(message, dict) else {}
    error = info.get("error")
    if isinstance(error, dict):
        name = str(error.get("name") or "")
        detail = (error.get("data") or {}).get("message") if isinstance(error.get("data"), dict) else None
        if name == "MessageAbortedError":
            return TurnOutcome(root, OutcomeStatus.INTERRUPTED)
        return TurnOutcome(root, OutcomeStatus.FAILED, error=f"{name}: {detail}" if detail else name or "error")
    parts = message.get("parts") or [] if isinstance(message, dict) else []
    texts = [str(p.get("text") or "") for p in parts if isinstance(p, dict) and p.get("type") == "text"
             and not p.get("synthetic")]
    return TurnOutcome(root, OutcomeStatus.DONE, final_text="".join(texts))
