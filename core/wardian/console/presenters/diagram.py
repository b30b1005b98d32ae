"""The request view's sequence diagram, laid out for SVG: a lane per participant and one arrow (or note) per fact
of a record's story, in time order. No I/O, no web framework: `_request.j2` draws what `diagram` returns.
"""

from __future__ import annotations

import textwrap
from dataclasses import dataclass, field
from typing import Literal

from wardian.console.presenters.records import after, party, when
from wardian.protocol import methods as proto

Style = Literal["call", "answer", "note", "uncertain", "notice"]

# Layout of the sequence diagram, in SVG user units (px at 100%).
LANE_GAP = 300
MARGIN_X = 200  # the lane heads are 240 wide; the times (+12 ms) sit left of the first one
LABEL_CHARS = 46  # a label line wider than this wraps
HEAD_Y = 16
HEAD_H = 54
FIRST_STEP_Y = HEAD_H + HEAD_Y + 40
LINE_H = 16
STEP_GAP = 30


@dataclass(frozen=True, slots=True)
class Lane:
    key: str
    title: str
    subtitle: str
    x: int


@dataclass(frozen=True, slots=True)
class Step:
    """One arrow (or, from a lane to itself, a note) of the diagram, with its label lines and time."""

    x1: int
    x2: int
    y: int
    lines: tuple[str, ...]
    style: Style
    at: str  # "+12 ms" from the record's admission
    when: str  # the absolute time

    @property
    def is_note(self) -> bool:
        return self.x1 == self.x2

    @property
    def note_width(self) -> int:
        return max(200, 7 * max(len(line) for line in self.lines) + 24)  # ~7 px per character at 11.5 px mono

    @property
    def mid(self) -> int:
        return (self.x1 + self.x2) // 2

    @property
    def label_y(self) -> int:
        return self.y - 6 - LINE_H * (len(self.lines) - 1)


@dataclass
class Diagram:
    lanes: list[Lane]
    steps: list[Step] = field(default_factory=list)
    width: int = 0
    height: int = 0


@dataclass(frozen=True, slots=True)
class _Event:
    at: int
    order: int
    src: str
    dst: str
    lines: tuple[str, ...]
    style: Style


def _lane_key(p: proto.PartyResult | None) -> str:
    return "wardian" if p is None else p["uuid"]


def diagram(trace: proto.RequestTraceResult, conversation: str = "thread") -> Diagram:
    """Lay out one record's story as a sequence diagram: a lane per participant (the sender, Wardian, the recipient,
    and whoever interrupted the turn), one arrow per fact, in time order, each labelled with its ids (the
    recipient's conversation named by `conversation`, its provider's word for it)."""
    s = trace["story"]
    start = s["created_at"]
    sender, recipient = s["sender"], s["recipient"]
    lanes: list[tuple[str, str, str]] = [(_lane_key(sender), party(sender), _subtitle(sender, s["sender_kind"]))]
    for i in trace["interrupts"]:
        if i["caller"]["uuid"] not in {_lane_key(sender), recipient["uuid"]} and \
                i["caller"]["uuid"] not in {k for k, _, _ in lanes}:
            lanes.append((i["caller"]["uuid"], i["caller"]["name"], _subtitle(i["caller"], i["caller_kind"])))
    lanes.append(("wardian", "wardian", "the app: store and runtime"))
    lanes.append((recipient["uuid"], recipient["name"], _subtitle(recipient, "agent")))
    events = list(_events(trace, conversation))
    events.sort(key=lambda e: (e.at, e.order))
    placed = [Lane(key, title, sub, MARGIN_X + i * LANE_GAP) for i, (key, title, sub) in enumerate(lanes)]
    x = {lane.key: lane.x for lane in placed}
    out = Diagram(placed)
    y = FIRST_STEP_Y
    for e in events:
        y += LINE_H * (len(e.lines) - 1)
        out.steps.append(Step(x[e.src], x[e.dst], y, e.lines, e.style, after(e.at, start), when(e.at)))
        y += STEP_GAP + LINE_H
    out.width = 2 * MARGIN_X + LANE_GAP * (len(placed) - 1)
    out.height = y + 10
    return out


def _subtitle(p: proto.PartyResult | None, kind: str) -> str:
    if p is None:
        return "the app"
    return "the operator (you)" if kind == "operator" else p["uuid"]


class _Timeline:
    """The diagram's events in the order they are found; that order breaks ties between events of the same time."""

    def __init__(self) -> None:
        self.events: list[_Event] = []

    def add(self, at: int | None, src: str, dst: str, style: Style, *lines: str) -> None:
        if at is not None:
            wrapped = tuple(w for line in lines for w in textwrap.wrap(line, LABEL_CHARS, break_on_hyphens=False))
            self.events.append(_Event(at, len(self.events), src, dst, wrapped or ("",), style))


def _events(trace: proto.RequestTraceResult, conversation: str) -> list[_Event]:
    s = trace["story"]
    sender, recipient = _lane_key(s["sender"]), s["recipient"]["uuid"]
    line = _Timeline()
    task = s["task"]
    if s["kind"] != "task" or task is None:
        line.add(s["created_at"], sender, "wardian", "call", f"{s['kind']} {s['id']}", "admitted (committed)")
        _delivery(line, s["delivery"], recipient, s["recipient"]["name"], s["created_at"])
        return line.events
    line.add(s["created_at"], sender, "wardian", "call", f"task {s['id']}", "admitted (committed)")
    _claim_and_submission(line, s, task, conversation)
    _turn(line, trace, task)
    _answer(line, trace, task)
    return line.events


def _claim_and_submission(line: _Timeline, s: proto.RecordStoryResult, task: proto.TaskStoryResult,
                          conversation: str) -> None:
    """A task waiting, claimed (by dispatch or a receive), and submitted to its recipient's turn."""
    f = task["facts"]
    recipient = s["recipient"]["uuid"]
    if f["state"] == "pending":
        line.add(s["created_at"], "wardian", "wardian", "note", f"pending: waiting for {s['recipient']['name']}'s",
                 "dispatch or receive to claim it")
    if f["claimed_by"] == "dispatch":
        line.add(f["claimed_at"], "wardian", "wardian", "note",
                 f"claimed for dispatch (generation {f['claim_generation']})")
    elif f["claimed_by"] == "receive":
        line.add(f["claimed_at"], recipient, "wardian", "answer", "receive returned it as new work",
                 f"claimed (generation {f['claim_generation']})")
    if f["submitted_at"] is not None:
        lines = [f"submitted: {conversation} {f['thread_id']}", f"turn {f['turn_id']}"]
        if task["provider_message_id"]:
            lines.append(f"provider message {task['provider_message_id']}")
        if f["lookup"] == "confirmed":
            lines.append("answer lost; a lookup found the message")
        line.add(f["submitted_at"], "wardian", recipient, "call", *lines)


def _turn(line: _Timeline, trace: proto.RequestTraceResult, task: proto.TaskStoryResult) -> None:
    """What happened to the turn carrying the task: interrupts, the other tasks in it, uncertainty, its end."""
    s = trace["story"]
    f = task["facts"]
    recipient = s["recipient"]["uuid"]
    for i in trace["interrupts"]:
        line.add(i["created_at"], i["caller"]["uuid"], "wardian", "call", f"interrupt turn {i['turn_id']}",
                 f"requested by {i['caller']['name']} (#{i['interrupt_id']})")
        line.add(i["created_at"], "wardian", recipient, "call", f"interrupt turn {i['turn_id']}")
    others = [t for t in trace["turn_tasks"] if t != s["id"]]
    if others:
        line.add(f["submitted_at"], recipient, recipient, "note", "the same turn carries", *others)
    if f["uncertain_at"] is not None:
        line.add(f["uncertain_at"], "wardian", recipient, "uncertain", "UNCERTAIN: may or may not have been taken",
                 _cut(task["uncertain_reason"] or "no reason recorded"))
    if task["outcome_at"] is not None:
        line.add(task["outcome_at"], recipient, "wardian", "answer",
                 f"turn {f['turn_id']} ended: {task['outcome_status']}", "terminal evidence captured")


def _answer(line: _Timeline, trace: proto.RequestTraceResult, task: proto.TaskStoryResult) -> None:
    """The task's reply (or Wardian's notice in its place), and how it reached the requester."""
    answer = trace["answer"]
    if answer is None:
        return
    s = trace["story"]
    recipient = s["recipient"]["uuid"]
    requester = task["requester"]["uuid"]
    if answer["sender_kind"] == "wardian":
        line.add(answer["created_at"], "wardian", "wardian", "notice", f"notice {answer['id']}",
                 f"{answer['status']}, from Wardian")
    else:
        line.add(answer["created_at"], recipient, "wardian", "answer", f"reply {answer['id']}",
                 f"{answer['status']}, re {s['id']}")
    _delivery(line, answer["delivery"], requester, task["requester"]["name"], answer["created_at"])


def _delivery(line: _Timeline, d: proto.DeliveryResult, to: str, name: str, created_at: int) -> None:
    if d["push"] is None and d["received_at"] is None:
        line.add(created_at, "wardian", to, "answer", f"into {name}'s mailbox", "not read yet")
    if d["push"] == "done":
        line.add(d["pushed_at"], "wardian", to, "answer", f"pushed into {name}'s conversation", "provider-visible")
    elif d["push"] == "uncertain":
        line.add(d["pushed_at"], "wardian", to, "uncertain", "push UNCERTAIN",
                 _cut(d["push_note"] or "no reason recorded"))
    if d["received_at"] is not None:
        line.add(d["received_at"], "wardian", to, "answer", f"returned by {name}'s receive")
    if d["acked_at"] is not None:
        line.add(d["acked_at"], to, "wardian", "answer", "acknowledged")


def _cut(text: str, limit: int = 3 * LABEL_CHARS) -> str:
    """A reason short enough for three diagram lines; the evidence table below the diagram has all of it."""
    return text if len(text) <= limit else text[:limit - 1] + "…"
