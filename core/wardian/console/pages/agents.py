"""The agents page: every agent with its state and actions, live."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from wardian import errors
from wardian.console import live
from wardian.console.context import ConsoleContext
from wardian.console.presenters import views
from wardian.protocol import methods as proto


class AgentsPage:
    def __init__(self, context: ConsoleContext) -> None:
        self.context = context

    def routes(self) -> list[BaseRoute]:
        return [Route("/agents", self.page), Route("/events/agents", self.events)]

    async def view(self, csrf: str) -> views.View:
        overview: proto.AgentOverviewListResult = await self.context.call("agent/overview")
        return views.agents_view(self.context.rows, overview, csrf)

    async def page(self, request: Request, *, error: errors.WardianError | None = None,
                   status: int = 200) -> Response:
        """The page; an action posted from it that failed shows here with its `error` (and `status`)."""
        session = self.context.session(request)
        if session is None:
            return self.context.unauthorized()
        view = await self.view(session.csrf)
        return await self.context.page("agents.j2", session, status, page="agents", rows=view.rows, error=error,
                                       acted=error is not None)

    async def events(self, request: Request) -> Response:
        return live.stream(self.context, request, lambda s: self.view(s.csrf))
