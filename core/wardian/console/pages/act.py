"""The operator's actions: the act page (send information or a task, with the operator's own exchange beside it)
and the posted actions (send, interrupt, start, stop), each a call of an `operator/*` or `agent/*` method.

A page's own script posts with the fragment header and gets the result fragment; a plain form post gets a redirect
on success, and on failure the page it came from (the act page, or the agents page) showing the error.
"""

from __future__ import annotations

from starlette.datastructures import FormData
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import BaseRoute, Route

from wardian import errors
from wardian.console.context import FRAGMENT_HEADER, ConsoleContext, form_text, status_of
from wardian.console.pages.agents import AgentsPage
from wardian.console.pages.exchange import ExchangePage
from wardian.console.presenters import views
from wardian.model import OPERATOR_NAME
from wardian.protocol import methods as proto

OPERATOR_PANEL = 20


class ActPage:
    def __init__(self, context: ConsoleContext, agents: AgentsPage, exchange: ExchangePage) -> None:
        self.context = context
        self.agents = agents
        self.exchange = exchange

    def routes(self) -> list[BaseRoute]:
        return [Route("/act", self.page), Route("/act/send", self.send, methods=["POST"]),
                Route("/act/interrupt", self.interrupt, methods=["POST"]),
                Route("/act/start", self.start, methods=["POST"]), Route("/act/stop", self.stop, methods=["POST"])]

    async def page(self, request: Request, *, form: dict[str, str] | None = None,
                   error: errors.WardianError | None = None, status: int = 200) -> Response:
        c = self.context
        session = c.session(request)
        if session is None:
            return c.unauthorized()
        agents = (await c.call("agent/list"))["agents"]
        panel = await self.exchange.view({"agent": OPERATOR_NAME}, OPERATOR_PANEL)
        live_url = "/events/exchange?" + views.query({"agent": OPERATOR_NAME}) + f"&limit={OPERATOR_PANEL}"
        return await c.page("act.j2", session, status, page="act", agents=agents, panel=panel,
                            form=form or {"target": "", "kind": "task", "text": ""}, error=error,
                            acted=error is not None, live=live_url)

    async def send(self, request: Request) -> Response:
        form = await self.context.form(request)
        if isinstance(form, Response):
            return form
        fields = {k: form_text(form, k) for k in ("target", "kind", "text")}
        # Browsers send a textarea's line breaks as CRLF whatever was typed; store the LF the person typed.
        fields["text"] = fields["text"].replace("\r\n", "\n")
        method = {"information": "operator/send", "task": "operator/followup"}.get(fields["kind"])
        try:
            if method is None:
                raise errors.InvalidArguments(f"kind {fields['kind'][:40]!r} is not a kind you can send",
                                              field="kind", allowed="information, task")
            receipt: proto.SendResult = await self.context.call(method, target=fields["target"],
                                                                message=fields["text"])
        except errors.WardianError as exc:
            return await self._failed(request, form, exc, fields)
        what = "task" if receipt["kind"] == "task" else "information"
        return await self._done(request, form, f"{what} {receipt['interaction_id']} admitted for "
                                f"{receipt['target']['name']} ({receipt['target']['uuid']})",
                                record=receipt["interaction_id"])

    async def interrupt(self, request: Request) -> Response:
        form = await self.context.form(request)
        if isinstance(form, Response):
            return form
        target = form_text(form, "target")
        try:
            result: proto.InterruptResult = await self.context.call("operator/interrupt", target=target)
        except errors.WardianError as exc:
            return await self._failed(request, form, exc, {"target": target})
        return await self._done(request, form, f"interrupt requested for {result['target']['name']}, turn "
                                f"{result['turn_id']}")

    async def start(self, request: Request) -> Response:
        form = await self.context.form(request)
        if isinstance(form, Response):
            return form
        agent = form_text(form, "agent")
        try:
            # The agent's own saved mode and -c settings, as its last start had them.
            result: proto.AgentStartResult = await self.context.call("agent/start", agent=agent, keep_settings=True)
        except errors.WardianError as exc:
            return await self._failed(request, form, exc, {"agent": agent})
        return await self._done(request, form, f"started {result['agent']['name']} (generation "
                                f"{result['generation']}, thread {result['thread_id']})")

    async def stop(self, request: Request) -> Response:
        form = await self.context.form(request)
        if isinstance(form, Response):
            return form
        agent = form_text(form, "agent")
        try:
            result: proto.AgentStopResult = await self.context.call("agent/stop", agent=agent)
        except errors.WardianError as exc:
            return await self._failed(request, form, exc, {"agent": agent})
        name = result["agent"]["name"]
        return await self._done(request, form, f"stopped {name}" if result["stopped"] else
                                f"{name} was not running; it stays off")

    async def _done(self, request: Request, form: FormData, message: str, record: str | None = None) -> Response:
        if request.headers.get(FRAGMENT_HEADER):
            return self.context.render("_result.j2", session=None, ok=message, record=record, error=None)
        if record is not None:
            return RedirectResponse(f"/requests/{record}", 303)  # what was just sent, live
        return RedirectResponse("/agents" if form_text(form, "back") == "agents" else "/act", 303)

    async def _failed(self, request: Request, form: FormData, exc: errors.WardianError,
                      fields: dict[str, str]) -> Response:
        status = status_of(exc)
        if request.headers.get(FRAGMENT_HEADER):
            return self.context.render("_result.j2", status, session=None, ok=None, record=None, error=exc,
                                       acted=True)
        if form_text(form, "back") == "agents":
            return await self.agents.page(request, error=exc, status=status)
        return await self.page(request, form={"target": "", "kind": "task", "text": "", **fields}, error=exc,
                               status=status)
