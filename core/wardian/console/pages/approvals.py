"""The approvals page: the pending approvals of every agent, live, each with Allow, Allow always (where the agent
offered it) and Deny with an optional reason, posted to `/act/approval`, which answers as a person through the app's
`approval/answer` (docs/guide/approvals.md): the same path as `wardian approval allow|deny`.

The post passes the same checks as every console action (session, Origin, CSRF token: `ConsoleContext.form`). The
page's own script posts with the fragment header and shows the result in place; a plain form post gets a redirect on
success and the page showing the error on failure (an approval that ended meanwhile: `approval_ended`)."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import BaseRoute, Route

from wardian import errors
from wardian.console import live
from wardian.console.context import FRAGMENT_HEADER, ConsoleContext, form_text, status_of
from wardian.console.presenters import views
from wardian.protocol import methods as proto

# The button a person pressed: its `decision` value, and what `approval/answer` is asked.
DECISIONS = {"allow": ("allow", False), "always": ("allow", True), "deny": ("deny", False)}


class ApprovalsPage:
    def __init__(self, context: ConsoleContext) -> None:
        self.context = context

    def routes(self) -> list[BaseRoute]:
        return [Route("/approvals", self.page), Route("/events/approvals", self.events),
                Route("/act/approval", self.answer, methods=["POST"])]

    async def view(self, csrf: str) -> views.View:
        listing: proto.ApprovalListResult = await self.context.call("approval/list", pending=True)
        return views.approvals_view(self.context.rows, listing, csrf)

    async def page(self, request: Request, *, error: errors.WardianError | None = None,
                   status: int = 200) -> Response:
        session = self.context.session(request)
        if session is None:
            return self.context.unauthorized()
        view = await self.view(session.csrf)
        return await self.context.page("approvals.j2", session, status, page="approvals", rows=view.rows,
                                       error=error, acted=error is not None)

    async def events(self, request: Request) -> Response:
        return live.stream(self.context, request, lambda s: self.view(s.csrf))

    async def answer(self, request: Request) -> Response:
        form = await self.context.form(request)
        if isinstance(form, Response):
            return form
        approval_id = form_text(form, "approval_id")
        pressed = form_text(form, "decision")
        reason = form_text(form, "reason").replace("\r\n", "\n").strip()
        try:
            if pressed not in DECISIONS:
                raise errors.InvalidArguments(f"decision {pressed[:40]!r} is not an answer to an approval",
                                              field="decision", allowed=", ".join(DECISIONS))
            decision, always = DECISIONS[pressed]
            params = {"approval_id": approval_id, "decision": decision, "always": always}
            if decision == "deny" and reason:
                params["reason"] = reason
            result: proto.ApprovalResult = await self.context.call("approval/answer", **params)
        except errors.WardianError as exc:
            if request.headers.get(FRAGMENT_HEADER):
                return self.context.render("_result.j2", status_of(exc), session=None, ok=None, record=None,
                                           error=exc, acted=True)
            return await self.page(request, error=exc, status=status_of(exc))
        if request.headers.get(FRAGMENT_HEADER):
            done = f"{result['approval_id']} {result['status']}" + (" (always)" if result["always"] else "") + (
                f": {result['summary']}")
            return self.context.render("_result.j2", session=None, ok=done, record=result["request_id"], error=None)
        return RedirectResponse("/approvals", 303)
