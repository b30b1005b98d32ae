"""The live views' state, shaped from the app's results: the keyed rows of a table, or one replaced block, and the
pager. A page renders them on load and its live stream sends what changed, so both come from the same functions and
the same row macros (`_rows.j2`): a row sent over Server-Sent Events is exactly the row a reload would show.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

import jinja2

from wardian.console.presenters.diagram import diagram
from wardian.console.presenters.records import explain_uncertain
from wardian.protocol import methods as proto


@dataclass(frozen=True, slots=True)
class Row:
    key: str
    seq: int
    html: str


@dataclass(frozen=True, slots=True)
class View:
    """A live view's current state: its keyed rows, or one replaced block, and extra parts (the pager)."""

    rows: tuple[Row, ...] = ()
    block: str | None = None
    pager: str | None = None


def agents_view(macros: Any, overview: proto.AgentOverviewListResult, csrf: str) -> View:
    """One row per agent (its actions carry the session's CSRF token), or the row saying there is none yet."""
    rows = [Row(o["agent"]["uuid"], i, str(macros.agent_row(o, i, csrf))) for i, o in enumerate(overview["agents"])]
    if not rows:
        rows = [Row("-", 0, str(macros.no_agents()))]
    return View(rows=tuple(rows))


def approvals_view(macros: Any, listing: proto.ApprovalListResult, csrf: str) -> View:
    """One row per pending approval, oldest first (its answers carry the session's CSRF token), or the row saying
    none is pending."""
    rows = tuple(Row(a["approval_id"], i, str(macros.approval_row(a, i, csrf)))
                 for i, a in enumerate(listing["approvals"])) or (Row("-", 0, str(macros.no_approvals())),)
    return View(rows=rows)


def exchange_view(macros: Any, page: proto.ExchangePageResult, params: dict[str, Any]) -> View:
    """One row per record of an exchange page, newest first, and the pager of the filters `params`."""
    rows = tuple(Row(r["id"], r["seq"], str(macros.exchange_row(r))) for r in page["records"]) or (
        Row("-", 0, str(macros.no_records(page["searched_to"]))),)
    pager = str(macros.pager(params, page["older"], page["searched_to"]))
    return View(rows=rows, pager=pager)


def request_view(template: jinja2.Template, trace: proto.RequestTraceResult, conversation: str = "thread") -> View:
    """The request view's body (diagram, explanations, evidence) as one block, replaced whole when it changes;
    `conversation` is the recipient's provider's word for its conversation (`records.conversation_word`)."""
    block = template.render(
        trace=trace, story=trace["story"], diagram=diagram(trace, conversation), conversation=conversation,
        explanations=explain_uncertain(trace["story"]) + (
            explain_uncertain(trace["answer"]) if trace["answer"] else []))
    return View(block=block)


def query(params: dict[str, Any]) -> str:
    """The query string of exchange filters, as a live stream's URL carries them."""
    return urlencode({k: ("1" if v is True else v) for k, v in params.items() if v is not None and v is not False})
