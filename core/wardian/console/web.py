"""The console's Starlette application over the app's own service: its pages, live streams and actions, assembled.

Every read and every action is a call of the app's method table (`AppService.handle`), with the same validation and
errors as the CLI and the MCP server; the operator acts through the `operator/*` methods. Pages are rendered on the
server (Jinja2, autoescaped); live views are Server-Sent Events woken by the app's `ChangeFeed` (no polling): each
wake renders the view again and sends only the rows that changed.

Where each part lives: `pages/` (one module per page, holding its routes and handlers), `presenters/` (what the
templates render, shaped from the app's results), `context` (what the pages share, and the form checks), `live` (the
event streams), `guard` (the Host check and security headers), `render` (the templates and static files).

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

from starlette.applications import Starlette
from starlette.routing import Mount
from starlette.staticfiles import StaticFiles

from wardian.app.service import AppService
from wardian.app.signals import ChangeFeed
from wardian.console.auth import ConsoleAuth
from wardian.console.context import ConsoleContext
from wardian.console.guard import Guard
from wardian.console.pages.act import ActPage
from wardian.console.pages.agents import AgentsPage
from wardian.console.pages.approvals import ApprovalsPage
from wardian.console.pages.exchange import ExchangePage
from wardian.console.pages.login import LoginPages
from wardian.console.pages.record import RecordPage
from wardian.console.render import STATIC


class ConsoleWeb:
    """The ASGI application of one console (`app`), and the switch that ends its live streams (`close`)."""

    def __init__(self, service: AppService, auth: ConsoleAuth, feed: ChangeFeed, *, port: int) -> None:
        self.context = ConsoleContext(service, auth, feed, port=port)
        agents = AgentsPage(self.context)
        exchange = ExchangePage(self.context)
        self.app = Starlette(routes=[
            *LoginPages(self.context).routes(),
            *agents.routes(),
            *exchange.routes(),
            *RecordPage(self.context).routes(),
            *ActPage(self.context, agents, exchange).routes(),
            *ApprovalsPage(self.context).routes(),
            Mount("/static", StaticFiles(directory=str(STATIC)), name="static"),
        ])
        self.app.add_middleware(Guard)

    def close(self) -> None:
        """End every live stream (the app is stopping)."""
        self.context.closing = True
        self.context.feed.wake_all()


__all__ = ["ConsoleWeb"]
