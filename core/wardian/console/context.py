"""What every page of one console shares: the app's service, the logins, the change feed and the templates, with
the session lookup, rendering, and the checks a form passes before anything may change."""

from __future__ import annotations

from typing import Any

from starlette.datastructures import FormData
from starlette.requests import Request
from starlette.responses import HTMLResponse, PlainTextResponse, Response

from wardian import errors
from wardian.app.service import AppService
from wardian.app.signals import ChangeFeed
from wardian.console import render
from wardian.console.auth import ConsoleAuth, ConsoleSession

# A form carries at most 65,536 bytes of text; percent-encoded, each byte can take three. Larger bodies are refused
# before they are read.
MAX_FORM_BYTES = 512 * 1024
# A request with this header (the page's own script) is answered with the result fragment, not a redirect or page.
FRAGMENT_HEADER = "x-console-fragment"


class ConsoleContext:
    """One console's shared state; `closing` ends every live stream once the app is stopping."""

    def __init__(self, service: AppService, auth: ConsoleAuth, feed: ChangeFeed, *, port: int) -> None:
        self.service = service
        self.auth = auth
        self.feed = feed
        self.cookie = f"wardian_console_{port}"  # cookies are per host, not per port: two homes' consoles differ
        self.closing = False
        self.env = render.environment()
        self.rows: Any = self.env.get_template("_rows.j2").module  # the row macros, as functions

    async def call(self, method: str, **params: Any) -> Any:
        """A call of the app's method table, with the same validation and errors as the CLI and the MCP server."""
        return await self.service.handle(method, params)

    def session(self, request: Request) -> ConsoleSession | None:
        return self.auth.session(request.cookies.get(self.cookie))

    def render(self, name: str, status: int = 200, **context: Any) -> HTMLResponse:
        html = self.env.get_template(name).render(**context)
        return HTMLResponse(html, status, headers={"cache-control": "no-store"})

    async def page(self, name: str, session: ConsoleSession, status: int = 200, **context: Any) -> HTMLResponse:
        app_status = await self.call("app/status")
        return self.render(name, status, session=session, csrf=session.csrf, app=app_status, **context)

    def unauthorized(self, reason: str = "missing") -> HTMLResponse:
        return self.render("login_help.j2", 401, session=None, reason=reason)

    async def form(self, request: Request) -> FormData | Response:
        """The posted form, once its size, Origin and CSRF token are checked; a refusal changes nothing."""
        session = self.session(request)
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


def form_text(form: FormData, key: str) -> str:
    value = form.get(key)
    return value if isinstance(value, str) else ""


def status_of(exc: errors.WardianError) -> int:
    """The HTTP status of a page or action the app refused."""
    if isinstance(exc, errors.UnknownTarget | errors.UnknownAgent | errors.UnknownRequest | errors.UnknownApproval):
        return 404
    if isinstance(exc, errors.NotActive | errors.ApprovalEnded):
        return 409
    if isinstance(exc, errors.RequestError):
        return 400
    if isinstance(exc, errors.StorageError | errors.TransportError):
        return 503
    return 500
