"""The request view of one record: its story as a sequence diagram, what an uncertainty means, and the evidence,
live."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from wardian import errors
from wardian.console import live
from wardian.console.auth import ConsoleSession
from wardian.console.context import ConsoleContext, status_of
from wardian.console.presenters import views
from wardian.console.presenters.records import conversation_word
from wardian.protocol import methods as proto


class RecordPage:
    def __init__(self, context: ConsoleContext) -> None:
        self.context = context

    def routes(self) -> list[BaseRoute]:
        return [Route("/requests/{id}", self.page), Route("/events/requests/{id}", self.events)]

    async def view(self, record_id: str) -> tuple[proto.RequestTraceResult, views.View]:
        trace: proto.RequestTraceResult = await self.context.call("request/trace", id=record_id)
        recipient = trace["story"]["recipient"]["uuid"]
        agents: list[proto.AgentResult] = (await self.context.call("agent/list"))["agents"]
        provider = next((a["provider"] for a in agents if a["uuid"] == recipient), None)
        return trace, views.request_view(self.context.env.get_template("_request.j2"), trace,
                                         conversation_word(provider))

    async def page(self, request: Request) -> Response:
        c = self.context
        session = c.session(request)
        if session is None:
            return c.unauthorized()
        record_id = request.path_params["id"]
        try:
            trace, view = await self.view(record_id)
        except errors.WardianError as exc:
            return await c.page("error.j2", session, status_of(exc), page="exchange", error=exc)
        story = trace["story"]
        return await c.page("request.j2", session, page="exchange", story=story, block=view.block,
                            live=f"/events/requests/{story['id']}")

    async def events(self, request: Request) -> Response:
        record_id = request.path_params["id"]

        async def view(_: ConsoleSession) -> views.View:
            return (await self.view(record_id))[1]

        return live.stream(self.context, request, view)
