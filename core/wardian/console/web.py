"""The console's pages, live streams and actions: a Starlette application over the app's own service (#16).

Every read and every action is a call of the app's method table (`AppService.handle`), with the same validation and
errors as the CLI and the MCP server; the operator acts through the `operator/*` methods. Pages are rendered on the
server (Jinja2, autoescaped); live views are Server-Sent Events woken by the app's `ChangeFeed` (no polling): each
wake renders the view again and sends only the rows that changed.

Security model (each rule has a test in tests/console/):
- Only loopback `Host` names are served (a DNS-rebinding page gets 400).
- Pages and streams need the session cookie a one-time login URL gave (`wardian console`); without it, 401 and a page
  saying how to get a login URL. The cookie is HttpOnly and SameSite=Strict.
- Every POST needs an `Origin` equal to this console's own origin and the session's CSRF token, else 403; nothing is
  changed.
- Text from agents is data: autoescaped, and a Content-Security-Policy allows only this console's own script and
  style, so markup in a message renders as text and no script in it can run.
- No secret is logged: uvicorn's access log is off and nothing here logs a URL, token or cookie.
"""

from __future__ import annotations

import hashlib
import logging
import re
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import jinja2
import orjson
from starlette.applications import Starlette
from starlette.datastructures import FormData
from starlette.requests import Request
from starlette.responses import HTMLResponse, PlainTextResponse, RedirectResponse, Response, StreamingResponse
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from wardian import __version__, errors
from wardian.app.service import AppService
from wardian.app.signals import ChangeFeed
from wardian.console import views
from wardian.console.auth import SESSION_TTL_MS, ConsoleAuth, ConsoleSession
from wardian.model import OPERATOR_NAME, OPERATOR_UUID
from wardian.protocol import methods as proto

log = logging.getLogger("wardian.console")

HERE = Path(__file__).resolve().parent
TEMPLATES = HERE / "templates"
STATIC = HERE / "static"
# A form carries at most 65,536 bytes of text; percent-encoded, each byte can take three. Larger bodies are refused
# before they are read.
MAX_FORM_BYTES = 512 * 1024
# A live view renders at most this often; the first change after a quiet spell renders at once.
MIN_RENDER_INTERVAL_S = 0.05
EXCHANGE_PAGE = 50
OPERATOR_PANEL = 20
_LOOPBACK_HOST = re.compile(r"^(localhost|127(?:\.\d{1,3}){3}|\[::1\])(?::\d{1,5})?$")
_CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; "
        "form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
# Referrer-Policy same-origin: a login URL never travels to another site in a Referer, and a form post keeps its real
# Origin (under no-referrer, a browser sends `Origin: null` for a form navigation, which the CSRF check refuses).
_HEADERS = [(b"content-security-policy", _CSP.encode()), (b"x-content-type-options", b"nosniff"),
            (b"x-frame-options", b"DENY"), (b"referrer-policy", b"same-origin"),
            (b"cross-origin-opener-policy", b"same-origin"), (b"cross-origin-resource-policy", b"same-origin")]
_FRAGMENT_HEADER = "x-console-fragment"


def asset_version() -> str:
    """A digest of the static files, so a browser never runs a stale script against a newer app."""
    digest = hashlib.sha256()
    for path in sorted(STATIC.iterdir()):
        digest.update(path.name.encode() + path.read_bytes())
    return digest.hexdigest()[:12]


class _Guard:
    """Serve only loopback Host names; add the security headers, and the server's time to the response's start as
    `Server-Timing: app;dur=MS` (what `scripts/bench.py --only console` reports), to every response."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        host = dict(scope["headers"]).get(b"host", b"").decode("latin-1")
        if not _LOOPBACK_HOST.match(host):
            # Another name pointing here (DNS rebinding) must not reach a page that holds the operator's powers.
            response = PlainTextResponse("this console answers only to 127.0.0.1, localhost or [::1]", 400)
            await response(scope, receive, send)
            return

        started = time.perf_counter()

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                took = f"app;dur={(time.perf_counter() - started) * 1000:.3f}".encode()
                message["headers"] = [*message.get("headers", []), *_HEADERS, (b"server-timing", took)]
            await send(message)

        await self.app(scope, receive, send_with_headers)


@dataclass(frozen=True, slots=True)
class _Row:
    key: str
    seq: int
    html: str


@dataclass(frozen=True, slots=True)
class _View:
    """A live view's current state: its keyed rows, or one replaced block, and extra parts (the pager)."""

    rows: tuple[_Row, ...] = ()
    block: str | None = None
    pager: str | None = None


class ConsoleWeb:
    def __init__(self, service: AppService, auth: ConsoleAuth, feed: ChangeFeed, *, port: int) -> None:
        self.service = service
        self.auth = auth
        self.feed = feed
        self.cookie = f"wardian_console_{port}"  # cookies are per host, not per port: two homes' consoles differ
        self.closing = False
        # Templates are package data: never changed while the app runs, so never checked for changes.
        self.env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(TEMPLATES)), autoescape=True,
                                      auto_reload=False, extensions=["jinja2.ext.do"],
                                      undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)
        self.env.globals.update(when=views.when, clock=views.clock, after=views.after, party=views.party,
                                facts=views.facts, task_state=views.task_state, OPERATOR_UUID=OPERATOR_UUID,
                                asset_version=asset_version(), version=__version__)
        self._rows: Any = self.env.get_template("_rows.j2").module  # the row macros, as functions
        self.app = Starlette(routes=[
            Route("/", self.index),
            Route("/login", self.login),
            Route("/logged-out", self.logged_out),
            Route("/logout", self.logout, methods=["POST"]),
            Route("/agents", self.agents),
            Route("/exchange", self.exchange),
            Route("/requests/{id}", self.request_view),
            Route("/act", self.act),
            Route("/act/send", self.act_send, methods=["POST"]),
            Route("/act/interrupt", self.act_interrupt, methods=["POST"]),
            Route("/act/start", self.act_start, methods=["POST"]),
            Route("/act/stop", self.act_stop, methods=["POST"]),
            Route("/events/agents", self.events_agents),
            Route("/events/exchange", self.events_exchange),
            Route("/events/requests/{id}", self.events_request),
            Mount("/static", StaticFiles(directory=str(STATIC)), name="static"),
        ])
        self.app.add_middleware(_Guard)

    def close(self) -> None:
        """End every live stream (the app is stopping)."""
        self.closing = True
        self.feed.wake_all()

    # --- helpers ----------------------------------------------------------------------------------------------

    async def call(self, method: str, **params: Any) -> Any:
        return await self.service.handle(method, params)

    def _session(self, request: Request) -> ConsoleSession | None:
        return self.auth.session(request.cookies.get(self.cookie))

    def render(self, name: str, status: int = 200, **context: Any) -> HTMLResponse:
        html = self.env.get_template(name).render(**context)
        return HTMLResponse(html, status, headers={"cache-control": "no-store"})

    async def page(self, name: str, session: ConsoleSession, status: int = 200, **context: Any) -> HTMLResponse:
        app_status = await self.call("app/status")
        return self.render(name, status, session=session, csrf=session.csrf, app=app_status, **context)

    def unauthorized(self, reason: str = "missing") -> HTMLResponse:
        return self.render("login_help.j2", 401, session=None, reason=reason)

    async def _form(self, request: Request) -> FormData | Response:
        """The posted form, once its size, Origin and CSRF token are checked; a refusal changes nothing."""
        session = self._session(request)
        if session is None:
            return self.unauthorized()
        origin = request.headers.get("origin")
        host = request.headers.get("host", "")
        if origin is None or origin != f"http://{host}" or request.headers.get("sec-fetch-site", "same-origin") \
                != "same-origin":
            return self.render("forbidden.j2", 403, session=None,
                               why="the request did not come from this console's own page (its Origin is "
                                   f"{origin or 'missing'})")
        size = request.headers.get("content-length")
        if size is None or not size.isdigit():
            return PlainTextResponse("a form must say its Content-Length", 411)
        if int(size) > MAX_FORM_BYTES:  # refused before it is read; the server reads no more than the length
            return PlainTextResponse(f"a form of this console is at most {MAX_FORM_BYTES} bytes", 413)
        form = await request.form()
        csrf = form.get("csrf")
        if not isinstance(csrf, str) or not session.csrf_matches(csrf):
            return self.render("forbidden.j2", 403, session=None,
                               why="the form carried no valid CSRF token of your session (reload the page)")
        return form

    # --- login ------------------------------------------------------------------------------------------------

    async def login(self, request: Request) -> Response:
        redeemed = self.auth.redeem(request.query_params.get("token"))
        if redeemed is None:
            return self.unauthorized("spent")
        cookie, _ = redeemed
        log.info("console: a login URL was used")  # never the URL or the cookie
        # A page, not a redirect: a login link opened from another site would not carry the SameSite=Strict cookie
        # through a redirect of that same navigation; a navigation this page starts is same-site.
        response = self.render("logged_in.j2", session=None)
        response.set_cookie(self.cookie, cookie, max_age=SESSION_TTL_MS // 1000, path="/", httponly=True,
                            samesite="strict")
        return response

    async def logout(self, request: Request) -> Response:
        form = await self._form(request)
        if isinstance(form, Response):
            return form
        self.auth.end(request.cookies.get(self.cookie))
        response = RedirectResponse("/logged-out", 303)
        response.delete_cookie(self.cookie, path="/", httponly=True, samesite="strict")
        return response

    async def logged_out(self, request: Request) -> Response:
        return self.render("login_help.j2", 200, session=None, reason="logged_out")

    async def index(self, request: Request) -> Response:
        if self._session(request) is None:
            return self.unauthorized()
        return RedirectResponse("/agents", 303)

    # --- agents -----------------------------------------------------------------------------------------------

    async def _agents_view(self, csrf: str) -> _View:
        overview: proto.AgentOverviewListResult = await self.call("agent/overview")
        rows = [_Row(o["agent"]["uuid"], i, str(self._rows.agent_row(o, i, csrf)))
                for i, o in enumerate(overview["agents"])]
        if not rows:
            rows = [_Row("-", 0, str(self._rows.no_agents()))]
        return _View(rows=tuple(rows))

    async def agents(self, request: Request, *, error: errors.WardianError | None = None,
                     status: int = 200) -> Response:
        session = self._session(request)
        if session is None:
            return self.unauthorized()
        view = await self._agents_view(session.csrf)
        return await self.page("agents.j2", session, status, page="agents", rows=view.rows, error=error,
                               acted=error is not None)

    async def events_agents(self, request: Request) -> Response:
        return self._stream(request, lambda s: self._agents_view(s.csrf))

    # --- exchange ---------------------------------------------------------------------------------------------

    @staticmethod
    def _filters(request: Request) -> dict[str, Any]:
        """The exchange filters of a query string, as `exchange/page` params (the app validates them)."""
        q = request.query_params
        params: dict[str, Any] = {}
        if q.get("agent"):
            params["agent"] = q["agent"]
        if q.get("kind"):
            params["kind"] = q["kind"]
        if q.get("uncertain") in ("1", "on", "true"):
            params["uncertain"] = True
        if q.get("before"):
            before = q["before"]
            params["before"] = int(before) if before.isdigit() and len(before) < 19 else before
        return params

    async def _exchange_view(self, params: dict[str, Any], limit: int = EXCHANGE_PAGE) -> _View:
        page: proto.ExchangePageResult = await self.call("exchange/page", **params, limit=limit)
        rows = tuple(_Row(r["id"], r["seq"], str(self._rows.exchange_row(r))) for r in page["records"]) or (
            _Row("-", 0, str(self._rows.no_records(page["searched_to"]))),)
        pager = str(self._rows.pager(params, page["older"], page["searched_to"]))
        return _View(rows=rows, pager=pager)

    async def exchange(self, request: Request) -> Response:
        session = self._session(request)
        if session is None:
            return self.unauthorized()
        params = self._filters(request)
        agents = (await self.call("agent/list"))["agents"]
        try:
            view = await self._exchange_view(params)
        except errors.WardianError as exc:
            return await self.page("exchange.j2", session, _status_of(exc), page="exchange", params=params,
                                   agents=agents, view=None, error=exc, live="")
        live = "/events/exchange?" + _query(params)
        return await self.page("exchange.j2", session, page="exchange", params=params, agents=agents, view=view,
                               error=None, live=live)

    async def events_exchange(self, request: Request) -> Response:
        params = self._filters(request)
        given = request.query_params.get("limit", "")
        limit = min(int(given), EXCHANGE_PAGE) if given.isdigit() and 0 < int(given) < 1000 else EXCHANGE_PAGE
        return self._stream(request, lambda s: self._exchange_view(params, limit))

    # --- the request view -------------------------------------------------------------------------------------

    async def _request_view(self, record_id: str) -> tuple[proto.RequestTraceResult, _View]:
        trace: proto.RequestTraceResult = await self.call("request/trace", id=record_id)
        block = self.env.get_template("_request.j2").render(
            trace=trace, story=trace["story"], diagram=views.diagram(trace),
            explanations=views.explain_uncertain(trace["story"]) + (
                views.explain_uncertain(trace["answer"]) if trace["answer"] else []))
        return trace, _View(block=block)

    async def request_view(self, request: Request) -> Response:
        session = self._session(request)
        if session is None:
            return self.unauthorized()
        record_id = request.path_params["id"]
        try:
            trace, view = await self._request_view(record_id)
        except errors.WardianError as exc:
            return await self.page("error.j2", session, _status_of(exc), page="exchange", error=exc)
        story = trace["story"]
        return await self.page("request.j2", session, page="exchange", story=story, block=view.block,
                               live=f"/events/requests/{story['id']}")

    async def events_request(self, request: Request) -> Response:
        record_id = request.path_params["id"]

        async def view(_: ConsoleSession) -> _View:
            return (await self._request_view(record_id))[1]

        return self._stream(request, view)

    # --- act --------------------------------------------------------------------------------------------------

    async def act(self, request: Request, *, form: dict[str, str] | None = None,
                  error: errors.WardianError | None = None, status: int = 200) -> Response:
        session = self._session(request)
        if session is None:
            return self.unauthorized()
        agents = (await self.call("agent/list"))["agents"]
        panel = await self._exchange_view({"agent": OPERATOR_NAME}, OPERATOR_PANEL)
        return await self.page("act.j2", session, status, page="act", agents=agents, panel=panel,
                               form=form or {"target": "", "kind": "task", "text": ""}, error=error,
                               acted=error is not None,
                               live="/events/exchange?" + _query({"agent": OPERATOR_NAME}) + f"&limit={OPERATOR_PANEL}")

    async def act_send(self, request: Request) -> Response:
        form = await self._form(request)
        if isinstance(form, Response):
            return form
        fields = {k: _text(form, k) for k in ("target", "kind", "text")}
        # Browsers send a textarea's line breaks as CRLF whatever was typed; store the LF the person typed.
        fields["text"] = fields["text"].replace("\r\n", "\n")
        method = {"information": "operator/send", "task": "operator/followup"}.get(fields["kind"])
        try:
            if method is None:
                raise errors.InvalidArguments(f"kind {fields['kind'][:40]!r} is not a kind you can send",
                                              field="kind", allowed="information, task")
            receipt: proto.SendResult = await self.call(method, target=fields["target"], message=fields["text"])
        except errors.WardianError as exc:
            return await self._failed(request, form, exc, fields)
        what = "task" if receipt["kind"] == "task" else "information"
        return await self._done(request, form, f"{what} {receipt['interaction_id']} admitted for "
                                f"{receipt['target']['name']} ({receipt['target']['uuid']})",
                                record=receipt["interaction_id"])

    async def act_interrupt(self, request: Request) -> Response:
        form = await self._form(request)
        if isinstance(form, Response):
            return form
        target = _text(form, "target")
        try:
            result: proto.InterruptResult = await self.call("operator/interrupt", target=target)
        except errors.WardianError as exc:
            return await self._failed(request, form, exc, {"target": target})
        return await self._done(request, form, f"interrupt requested for {result['target']['name']}, turn "
                                f"{result['turn_id']}")

    async def act_start(self, request: Request) -> Response:
        form = await self._form(request)
        if isinstance(form, Response):
            return form
        agent = _text(form, "agent")
        try:
            # The agent's own saved mode and -c settings, as its last start had them.
            result: proto.AgentStartResult = await self.call("agent/start", agent=agent, keep_settings=True)
        except errors.WardianError as exc:
            return await self._failed(request, form, exc, {"agent": agent})
        return await self._done(request, form, f"started {result['agent']['name']} (generation "
                                f"{result['generation']}, thread {result['thread_id']})")

    async def act_stop(self, request: Request) -> Response:
        form = await self._form(request)
        if isinstance(form, Response):
            return form
        agent = _text(form, "agent")
        try:
            result: proto.AgentStopResult = await self.call("agent/stop", agent=agent)
        except errors.WardianError as exc:
            return await self._failed(request, form, exc, {"agent": agent})
        name = result["agent"]["name"]
        return await self._done(request, form, f"stopped {name}" if result["stopped"] else
                                f"{name} was not running; it stays off")

    async def _done(self, request: Request, form: FormData, message: str, record: str | None = None) -> Response:
        if request.headers.get(_FRAGMENT_HEADER):
            return self.render("_result.j2", session=None, ok=message, record=record, error=None)
        if record is not None:
            return RedirectResponse(f"/requests/{record}", 303)  # what was just sent, live
        return RedirectResponse("/agents" if _text(form, "back") == "agents" else "/act", 303)

    async def _failed(self, request: Request, form: FormData, exc: errors.WardianError,
                      fields: dict[str, str]) -> Response:
        status = _status_of(exc)
        if request.headers.get(_FRAGMENT_HEADER):
            return self.render("_result.j2", status, session=None, ok=None, record=None, error=exc, acted=True)
        if _text(form, "back") == "agents":
            return await self.agents(request, error=exc, status=status)
        return await self.act(request, form={"target": "", "kind": "task", "text": "", **fields}, error=exc,
                              status=status)

    # --- live streams -----------------------------------------------------------------------------------------

    def _stream(self, request: Request, render: Callable[[ConsoleSession], Awaitable[_View]]) -> Response:
        cookie = request.cookies.get(self.cookie)
        session = self.auth.session(cookie)
        if session is None:
            return PlainTextResponse("not logged in: run `wardian console` for a login URL", 401)
        return StreamingResponse(self._events(cookie, render), media_type="text/event-stream",
                                 headers={"cache-control": "no-store"})

    async def _events(self, cookie: str | None,
                      render: Callable[[ConsoleSession], Awaitable[_View]]) -> AsyncIterator[bytes]:
        """One browser's live view: after each change of the store, render the view and send what differs from what
        this browser has (on connect: everything, so a reconnect misses nothing)."""
        yield b"retry: 1000\n\n"
        sent: dict[str, str] = {}
        block: str | None = None
        pager: str | None = None
        last = -1.0
        while not self.closing:
            session = self.auth.session(cookie)
            if session is None:
                yield _event("end", {"reason": "logged_out"})
                return
            version = self.feed.version
            try:
                view = await render(session)
            except errors.WardianError as exc:
                yield _event("end", {"reason": "error", "code": exc.code, "message": exc.message})
                return
            patch: dict[str, Any] = {}
            upsert = [{"key": r.key, "seq": r.seq, "html": r.html} for r in view.rows if sent.get(r.key) != r.html]
            keys = {r.key for r in view.rows}
            remove = [k for k in sent if k not in keys]
            if upsert:
                patch["upsert"] = upsert
            if remove:
                patch["remove"] = remove
            if view.block is not None and view.block != block:
                patch["replace"] = block = view.block
            if view.pager is not None and view.pager != pager:
                patch["pager"] = pager = view.pager
            sent = {r.key: r.html for r in view.rows}
            if patch:
                yield _event("patch", patch)
            last = anyio.current_time()
            await self.feed.next_change(version)
            wait = last + MIN_RENDER_INTERVAL_S - anyio.current_time()
            if wait > 0:
                await anyio.sleep(wait)  # bursts of commits: at most one render per interval
        yield _event("end", {"reason": "stopping"})


def _event(name: str, data: dict[str, Any]) -> bytes:
    return b"event: " + name.encode() + b"\ndata: " + orjson.dumps(data) + b"\n\n"


def _text(form: FormData, key: str) -> str:
    value = form.get(key)
    return value if isinstance(value, str) else ""


def _query(params: dict[str, Any]) -> str:
    from urllib.parse import urlencode

    return urlencode({k: ("1" if v is True else v) for k, v in params.items() if v is not None and v is not False})


def _status_of(exc: errors.WardianError) -> int:
    if isinstance(exc, errors.UnknownTarget | errors.UnknownAgent | errors.UnknownRequest):
        return 404
    if isinstance(exc, errors.NotActive):
        return 409
    if isinstance(exc, errors.RequestError):
        return 400
    if isinstance(exc, errors.StorageError | errors.TransportError):
        return 503
    return 500


__all__ = ["ConsoleWeb", "asset_version"]
