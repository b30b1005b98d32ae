"""The console's live views: Server-Sent Events woken by the app's `ChangeFeed` (no polling). Each wake renders the
view again and sends only what changed since this browser's last patch."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import anyio
import orjson
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response, StreamingResponse

from wardian import errors
from wardian.console.auth import ConsoleSession
from wardian.console.context import ConsoleContext
from wardian.console.presenters.views import View

# A live view renders at most this often; the first change after a quiet spell renders at once.
MIN_RENDER_INTERVAL_S = 0.05

Render = Callable[[ConsoleSession], Awaitable[View]]


def stream(context: ConsoleContext, request: Request, render: Render) -> Response:
    """The live stream of one view for a logged-in browser; 401 without a session."""
    cookie = request.cookies.get(context.cookie)
    session = context.auth.session(cookie)
    if session is None:
        return PlainTextResponse("not logged in: run `wardian console` for a login URL", 401)
    return StreamingResponse(_events(context, cookie, render), media_type="text/event-stream",
                             headers={"cache-control": "no-store"})


async def _events(context: ConsoleContext, cookie: str | None, render: Render) -> AsyncIterator[bytes]:
    """One browser's live view: after each change of the store, render the view and send what differs from what
    this browser has (on connect: everything, so a reconnect misses nothing)."""
    yield b"retry: 1000\n\n"
    sent = SentView()
    while not context.closing:
        session = context.auth.session(cookie)
        if session is None:
            yield _event("end", {"reason": "logged_out"})
            return
        version = context.feed.version
        try:
            view = await render(session)
        except errors.WardianError as exc:
            yield _event("end", {"reason": "error", "code": exc.code, "message": exc.message})
            return
        patch = sent.patch(view)
        if patch:
            yield _event("patch", patch)
        last = anyio.current_time()
        await context.feed.next_change(version)
        wait = last + MIN_RENDER_INTERVAL_S - anyio.current_time()
        if wait > 0:
            await anyio.sleep(wait)  # bursts of commits: at most one render per interval
    yield _event("end", {"reason": "stopping"})


class SentView:
    """What one browser has been sent: its rows by key, the replaced block and the pager."""

    def __init__(self) -> None:
        self.rows: dict[str, str] = {}
        self.block: str | None = None
        self.pager: str | None = None

    def patch(self, view: View) -> dict[str, Any]:
        """What differs between `view` and what the browser has; from now on it has `view`."""
        patch: dict[str, Any] = {}
        upsert = [{"key": r.key, "seq": r.seq, "html": r.html} for r in view.rows if self.rows.get(r.key) != r.html]
        keys = {r.key for r in view.rows}
        remove = [k for k in self.rows if k not in keys]
        if upsert:
            patch["upsert"] = upsert
        if remove:
            patch["remove"] = remove
        if view.block is not None and view.block != self.block:
            patch["replace"] = self.block = view.block
        if view.pager is not None and view.pager != self.pager:
            patch["pager"] = self.pager = view.pager
        self.rows = {r.key: r.html for r in view.rows}
        return patch


def _event(name: str, data: dict[str, Any]) -> bytes:
    return b"event: " + name.encode() + b"\ndata: " + orjson.dumps(data) + b"\n\n"
