"""Logging in and out: a one-time login URL opens a session (its cookie), and the start page."""

from __future__ import annotations

import logging

import anyio
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import BaseRoute, Route

from wardian.console import login_page
from wardian.console.auth import SESSION_TTL_MS
from wardian.console.context import ConsoleContext

log = logging.getLogger("wardian.console")


class LoginPages:
    def __init__(self, context: ConsoleContext) -> None:
        self.context = context

    def routes(self) -> list[BaseRoute]:
        return [Route("/", self.index), Route("/login", self.login), Route("/logged-out", self.logged_out),
                Route("/logout", self.logout, methods=["POST"])]

    async def login(self, request: Request) -> Response:
        c = self.context
        token = request.query_params.get("token", "")
        redeemed = c.auth.redeem(token)
        if redeemed is None:
            return c.unauthorized("spent")
        cookie, _ = redeemed
        log.info("console: a login URL was used")  # never the URL or the cookie
        await self._remove_page(token)
        # A page, not a redirect: a login link opened from another site would not carry the SameSite=Strict cookie
        # through a redirect of that same navigation; a navigation this page starts is same-site.
        response = c.render("logged_in.j2", session=None)
        response.set_cookie(c.cookie, cookie, max_age=SESSION_TTL_MS // 1000, path="/", httponly=True,
                            samesite="strict")
        return response

    async def _remove_page(self, token: str) -> None:
        """The private page `wardian console` opened the browser on holds a spent token now: it goes
        (docs/guide/console.md#logging-in-and-the-security-model)."""
        run_dir = self.context.service.home.run_dir
        try:
            await anyio.to_thread.run_sync(login_page.remove_page, run_dir, token)
        except OSError as exc:  # the login stands: the page only holds a spent token
            log.warning("console: the used login page could not be removed from %s (%s)", run_dir, exc.strerror)

    async def logout(self, request: Request) -> Response:
        c = self.context
        form = await c.form(request)
        if isinstance(form, Response):
            return form
        c.auth.end(request.cookies.get(c.cookie))
        response = RedirectResponse("/logged-out", 303)
        response.delete_cookie(c.cookie, path="/", httponly=True, samesite="strict")
        return response

    async def logged_out(self, request: Request) -> Response:
        return self.context.render("login_help.j2", 200, session=None, reason="logged_out")

    async def index(self, request: Request) -> Response:
        if self.context.session(request) is None:
            return self.context.unauthorized()
        return RedirectResponse("/agents", 303)
