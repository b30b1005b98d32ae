"""Codex threads as the runtime meets them at start-up and in attached mode: resuming one, waiting until a TUI's
brand-new thread is readable, and subscribing to it once its first turn has written its rollout."""

from __future__ import annotations

import logging

import anyio

from wardian import errors
from wardian.providers.codex import messages as m
from wardian.providers.codex.app_server import AppServerClient
from wardian.providers.codex.rejections import Verdict, classify
from wardian.providers.codex.turns import read_result

log = logging.getLogger("wardian.codex.threads")


async def resume(client: AppServerClient, thread_id: str) -> m.Thread | str:
    """`thread/resume`, subscribing this connection to the thread's turns: the thread, or Codex's words when it has
    no such thread (it never had a turn, or its rollout is gone). Raises: WardianError (any other failure)."""
    try:
        raw = await client.request("thread/resume", {"threadId": thread_id}, timeout_s=600)
    except errors.AppServerError as exc:
        if classify("thread/resume", exc) is Verdict.THREAD_GONE:
            return exc.message
        raise
    return read_result(m.ThreadResumeResponse, raw, "thread/resume").thread


async def adopt(client: AppServerClient, thread_id: str) -> m.Thread | None:
    """`thread/resume` of a thread the TUI started: the thread, subscribed to its turns; None when it is too new to
    be resumed ("no rollout found": a TUI's brand-new thread has none yet), once Codex can read it. Raises:
    WardianError (any other failure)."""
    try:
        raw = await client.request("thread/resume", {"threadId": thread_id}, timeout_s=600)
    except errors.AppServerError as exc:
        if "no rollout found" not in exc.message:
            raise
        await wait_readable(client, thread_id)  # deliver only once Codex can read the thread
        return None
    return read_result(m.ThreadResumeResponse, raw, "thread/resume").thread


async def wait_readable(client: AppServerClient, thread_id: str) -> None:
    """Right after the TUI creates it, the thread's metadata may not be readable yet, and a turn/start in that window
    fails ("rollout ... is empty"): wait (bounded) until Codex can read the thread."""
    for _ in range(100):
        try:
            await client.request("thread/read", {"threadId": thread_id}, timeout_s=30)
            return
        except errors.AppServerError:
            await anyio.sleep(0.1)


async def resume_after_first_turn(client: AppServerClient, thread_id: str | None) -> m.Thread:
    """Subscribe to a thread that was adopted unsubscribed, once its first turn has set it up. Raises:
    DeliveryUncertain (it never became resumable), WardianError."""
    for _ in range(300):
        try:
            raw = await client.request("thread/resume", {"threadId": thread_id}, timeout_s=60)
        except errors.AppServerError as exc:
            # The new thread is still being set up: its rollout is being written ("no rollout found",
            # "rollout ... is empty") or its turn history is not listable yet ("list_turns is not
            # supported yet", seen on 0.171.0).
            if "rollout" not in exc.message and "not supported yet" not in exc.message:
                raise
            await anyio.sleep(0.1)
            continue
        return read_result(m.ThreadResumeResponse, raw, "thread/resume").thread
    raise errors.DeliveryUncertain(f"could not subscribe to thread {thread_id} after its first turn")


LISTING_CATCH_UP_READS = 50  # at 0.1 s: how long a listed non-completed end may wait to be listed `completed`


async def settled_end(client: AppServerClient, thread_id: str, turn: m.Turn) -> m.Turn:
    """The end of `turn`, which a resume listed as ended other than `completed` after its thread was seen to stop.

    Codex writes a turn's end to the store its listing reads after it tells every connection the thread is idle, so
    a resume right after a completed turn can still list it unterminated, and an unterminated turn is listed
    `interrupted` (seen on 0.171.0: the person's screen showed the answer, the rollout recorded no abort). Re-read the
    thread until the turn is listed `completed`; a turn still listed otherwise after the bounded wait ended so."""
    for _ in range(LISTING_CATCH_UP_READS):
        await anyio.sleep(0.1)
        try:
            raw = await client.request("thread/read", {"threadId": thread_id, "includeTurns": True}, timeout_s=30)
        except errors.AppServerError:
            continue
        listed = next((t for t in read_result(m.ThreadReadResponse, raw, "thread/read").thread.turns
                       if t.id == turn.id), None)
        if listed is not None and listed.status == "completed":
            log.info("turn %s: listed completed once Codex had recorded its end", turn.id)
            return listed
    return turn


def ended_turn(thread: m.Thread, turn_id: str, *, stopped: bool, agent: str = "") -> m.Turn | None:
    """The turn `turn_id` as a resume lists it, if that proves it ended: a `completed` turn, or a turn listed with
    another end (`interrupted`, `failed`) when its thread was seen to run and stop since the turn was sent
    (`stopped`, `attached.TuiThreads`). Codex lists an unterminated turn `interrupted` whenever its live state shows
    none running, which includes the moment before it has taken up a turn it accepted: such a listing is not an end,
    and the turn's own turn/completed (the resume subscribed this connection) decides."""
    log.info("%s: subscribed to thread %s after its first turn %s (thread %s, %s; listed: %s)", agent, thread.id,
             turn_id, thread.status.type if thread.status else "status not given",
             "seen to run and stop" if stopped else "not seen to stop",
             ", ".join(f"{t.id}={t.status}" for t in thread.turns) or "no turns")
    for turn in thread.turns:
        if turn.id == turn_id and (turn.status == "completed" or (stopped and turn.status not in (None, "inProgress"))):
            return turn
    return None
