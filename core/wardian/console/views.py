"""What the console's pages show, computed from the app's results (closed TypedDicts of `wardian.protocol.methods`):
the facts of a record as short labelled chips, times, plain-words explanations of uncertainty, and the request
view's sequence diagram laid out for SVG (#16). No I/O, no web framework: the templates draw what these return.
"""

from __future__ import annotations

import datetime
import textwrap
from dataclasses import dataclass, field
from typing import Any, Literal

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


def when(ms: int | None) -> str:
    """A Unix-ms time as UTC with milliseconds (as `wardian message show` prints it)."""
    if ms is None:
        return "-"
    return datetime.datetime.fromtimestamp(ms / 1000, datetime.UTC).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] + "Z"


def clock(ms: int | None) -> str:
    """Only the time of day (UTC), for dense tables."""
    return when(ms)[11:] if ms is not None else "-"


def after(ms: int | None, start: int) -> str:
    if ms is None:
        return ""
    delta = ms - start
    return f"+{delta} ms" if delta < 10_000 else f"+{delta / 1000:.1f} s"


def party(p: proto.PartyResult | None) -> str:
    return "wardian" if p is None else p["name"]


@dataclass(frozen=True, slots=True)
class Fact:
    """One delivery fact of a record: `name` is stable (tests and CSS use it), `label` is for people."""

    name: str
    label: str
    at: int | None = None
    warn: bool = False


def facts(r: proto.ExchangeRecordResult) -> list[Fact]:
    """The separate facts of one exchange record, in the order they happen (DESIGN.md §4 "Records")."""
    out = [Fact("admitted", "admitted", r["created_at"])]
    task = r["task"]
    if r["kind"] == "task" and task is not None:
        if task["state"] == "pending":
            out.append(Fact("pending", "pending: waiting for a claim"))
        if task["claimed_by"] is not None:
            gen = f" (gen {task['claim_generation']})" if task["claim_generation"] is not None else ""
            out.append(Fact("claimed", f"claimed by {task['claimed_by']}{gen}", task["claimed_at"]))
        if task["submitted_at"] is not None:
            out.append(Fact("submitted", f"submitted · thread {task['thread_id']} · turn {task['turn_id']}",
                            task["submitted_at"]))
        if task["lookup"] == "confirmed":
            out.append(Fact("lookup", "answer lost · confirmed by lookup", task["submitted_at"]))
        elif task["lookup"] == "not_found":
            out.append(Fact("lookup", "answer lost · lookup found nothing", task["uncertain_at"], warn=True))
        if task["uncertain_at"] is not None:
            out.append(Fact("uncertain", f"uncertain: {r['uncertain_reason'] or 'no reason recorded'}",
                            task["uncertain_at"], warn=True))
        if task["completed_at"] is not None:
            out.append(Fact("completed", "completed", task["completed_at"]))
        if task["reply_id"] is not None:
            out.append(Fact("replied", f"answered {task['reply_status']} by {task['reply_id']}", task["completed_at"],
                            warn=task["reply_status"] != "done"))
        return out
    return out + delivery_facts(r["delivery"])


def delivery_facts(d: proto.DeliveryResult) -> list[Fact]:
    """How a record reached its recipient: pushed into its live conversation, or returned by a receive."""
    out: list[Fact] = []
    if d["push"] == "sending":
        out.append(Fact("pushing", "being pushed into the live conversation"))
    elif d["push"] == "done":
        out.append(Fact("pushed", "provider-visible (pushed into the live conversation)", d["pushed_at"]))
    elif d["push"] == "uncertain":
        out.append(Fact("uncertain", f"push uncertain: {d['push_note'] or 'no reason recorded'}", d["pushed_at"],
                        warn=True))
    if d["received_at"] is not None:
        out.append(Fact("received", "returned by receive", d["received_at"]))
    elif d["push"] is None:
        out.append(Fact("unread", "in the mailbox, not read yet"))
    if d["acked_at"] is not None:
        out.append(Fact("acked", "acknowledged", d["acked_at"]))
    return out


def task_state(r: proto.ExchangeRecordResult) -> str:
    return r["task"]["state"] if r["kind"] == "task" and r["task"] is not None else ""


# --- uncertainty, in plain words --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Explanation:
    what: str
    may_do: str


def explain_uncertain(story: proto.RecordStoryResult) -> list[Explanation]:
    """What an uncertain delivery means and what the operator may do: check, never resend blindly."""
    out: list[Explanation] = []
    task = story["task"]
    recipient = story["recipient"]["name"]
    if story["kind"] == "task" and task is not None and task["facts"]["uncertain_at"] is not None:
        turn = task["facts"]["turn_id"]
        out.append(Explanation(
            what=(f"Wardian handed this task to {recipient}'s provider, but cannot know whether the provider took "
                  f"it. Why: {task['uncertain_reason'] or 'no reason recorded'}. It may be running or done in "
                  + (f"turn {turn}" if turn else "a turn nobody saw") + ", or it may never have started. Wardian "
                  "never sends an uncertain task again by itself."),
            may_do=(f"Check {recipient}'s conversation (`wardian agent attach {recipient}`, or its provider log) for "
                    "that turn and its answer. If the work did not happen and is still wanted, assign a new task "
                    "yourself. Do not resend it blindly: it may run twice.")))
    if story["delivery"]["push"] == "uncertain":
        out.append(Explanation(
            what=(f"Wardian pushed this {story['kind']} into {recipient}'s live conversation, but the provider's "
                  f"acknowledgement was lost. Why: {story['delivery']['push_note'] or 'no reason recorded'}. It may "
                  "or may not be in the conversation; it stays off the receive path so it is never shown twice."),
            may_do=(f"Check {recipient}'s conversation for it. Send it again only if it is missing; do not resend "
                    "blindly.")))
    return out


# --- the request view's sequence diagram -----------------------------------------------------------------------


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


def diagram(trace: proto.RequestTraceResult) -> Diagram:
    """Lay out one record's story as a sequence diagram: a lane per participant (the sender, Wardian, the recipient,
    and whoever interrupted the turn), one arrow per fact, in time order, each labelled with its ids."""
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
    events = list(_events(trace))
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


def _events(trace: proto.RequestTraceResult) -> list[_Event]:
    s = trace["story"]
    sender, recipient = _lane_key(s["sender"]), s["recipient"]["uuid"]
    events: list[_Event] = []

    def add(at: int | None, src: str, dst: str, style: Style, *lines: str) -> None:
        if at is not None:
            wrapped = tuple(w for line in lines for w in textwrap.wrap(line, LABEL_CHARS, break_on_hyphens=False))
            events.append(_Event(at, len(events), src, dst, wrapped or ("",), style))

    task = s["task"]
    if s["kind"] != "task" or task is None:
        add(s["created_at"], sender, "wardian", "call", f"{s['kind']} {s['id']}", "admitted (committed)")
        _delivery(add, s["delivery"], recipient, s["recipient"]["name"], s["created_at"])
        return events
    f = task["facts"]
    add(s["created_at"], sender, "wardian", "call", f"task {s['id']}", "admitted (committed)")
    if f["state"] == "pending":
        add(s["created_at"], "wardian", "wardian", "note", f"pending: waiting for {s['recipient']['name']}'s",
            "dispatch or receive to claim it")
    if f["claimed_by"] == "dispatch":
        add(f["claimed_at"], "wardian", "wardian", "note", f"claimed for dispatch (generation {f['claim_generation']})")
    elif f["claimed_by"] == "receive":
        add(f["claimed_at"], recipient, "wardian", "answer", "receive returned it as new work",
            f"claimed (generation {f['claim_generation']})")
    if f["submitted_at"] is not None:
        lines = [f"submitted: thread {f['thread_id']}", f"turn {f['turn_id']}"]
        if task["provider_message_id"]:
            lines.append(f"provider message {task['provider_message_id']}")
        if f["lookup"] == "confirmed":
            lines.append("answer lost; a lookup found the message")
        add(f["submitted_at"], "wardian", recipient, "call", *lines)
    for i in trace["interrupts"]:
        add(i["created_at"], i["caller"]["uuid"], "wardian", "call", f"interrupt turn {i['turn_id']}",
            f"requested by {i['caller']['name']} (#{i['interrupt_id']})")
        add(i["created_at"], "wardian", recipient, "call", f"interrupt turn {i['turn_id']}")
    others = [t for t in trace["turn_tasks"] if t != s["id"]]
    if others:
        add(f["submitted_at"], recipient, recipient, "note", "the same turn carries", *others)
    if f["uncertain_at"] is not None:
        add(f["uncertain_at"], "wardian", recipient, "uncertain", "UNCERTAIN: may or may not have been taken",
            _cut(task["uncertain_reason"] or "no reason recorded"))
    if task["outcome_at"] is not None:
        add(task["outcome_at"], recipient, "wardian", "answer",
            f"turn {f['turn_id']} ended: {task['outcome_status']}", "terminal evidence captured")
    answer = trace["answer"]
    if answer is not None:
        requester = task["requester"]["uuid"]
        if answer["sender_kind"] == "wardian":
            add(answer["created_at"], "wardian", "wardian", "notice", f"notice {answer['id']}",
                f"{answer['status']}, from Wardian")
        else:
            add(answer["created_at"], recipient, "wardian", "answer", f"reply {answer['id']}",
                f"{answer['status']}, re {s['id']}")
        _delivery(add, answer["delivery"], requester, task["requester"]["name"], answer["created_at"])
    return events


def _delivery(add: Any, d: proto.DeliveryResult, to: str, name: str, created_at: int) -> None:
    if d["push"] is None and d["received_at"] is None:
        add(created_at, "wardian", to, "answer", f"into {name}'s mailbox", "not read yet")
    if d["push"] == "done":
        add(d["pushed_at"], "wardian", to, "answer", f"pushed into {name}'s conversation", "provider-visible")
    elif d["push"] == "uncertain":
        add(d["pushed_at"], "wardian", to, "uncertain", "push UNCERTAIN", _cut(d["push_note"] or "no reason recorded"))
    if d["received_at"] is not None:
        add(d["received_at"], "wardian", to, "answer", f"returned by {name}'s receive")
    if d["acked_at"] is not None:
        add(d["acked_at"], to, "wardian", "answer", "acknowledged")


def _cut(text: str, limit: int = 3 * LABEL_CHARS) -> str:
    """A reason short enough for three diagram lines; the evidence table below the diagram has all of it."""
    return text if len(text) <= limit else text[:limit - 1] + "…"
