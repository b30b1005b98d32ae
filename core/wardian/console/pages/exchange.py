"""The exchange page: every record, newest first, filtered and paged, live."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from wardian import errors
from wardian.console import live
from wardian.console.context import ConsoleContext, status_of
from wardian.console.presenters import views
from wardian.protocol import methods as proto

EXCHANGE_PAGE = 50


def filters(request: Request) -> dict[str, Any]:
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


class ExchangePage:
    def __init__(self, context: ConsoleContext) -> None:
        self.context = context

    def routes(self) -> list[BaseRoute]:
        return [Route("/exchange", self.page), Route("/events/exchange", self.events)]

    async def view(self, params: dict[str, Any], limit: int = EXCHANGE_PAGE) -> views.View:
        page: proto.ExchangePageResult = await self.context.call("exchange/page", **params, limit=limit)
        return views.exchange_view(self.context.rows, page, params)

    async def page(self, request: Request) -> Response:
        c = self.context
        session = c.session(request)
        if session is None:
            return c.unauthorized()
        params = filters(request)
        agents = (await c.call("agent/list"))["agents"]
        try:
            view = await self.view(params)
        except errors.WardianError as exc:
            return await c.page("exchange.j2", session, status_of(exc), page="exchange", params=params,
                                agents=agents, view=None, error=exc, live="")
        live_url = "/events/exchange?" + views.query(params)
        return await c.page("exchange.j2", session, page="exchange", params=params, agents=agents, view=view,
                            error=None, live=live_url)

    async def events(self, request: Request) -> Response:
        params = filters(request)
        given = request.query_params.get("limit", "")
        limit = min(int(given), EXCHANGE_PAGE) if given.isdigit() and 0 < int(given) < 1000 else EXCHANGE_PAGE
        return live.stream(self.context, request, lambda s: self.view(params, limit))
