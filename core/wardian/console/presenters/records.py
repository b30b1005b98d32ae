"""A record's facts as the console shows them, computed from the app's results (the protocol's closed TypedDicts):
times, the separate delivery facts as short labelled chips, and plain-words explanations of uncertainty. No I/O, no
web framework: the templates draw what these return.
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass

from wardian.protocol import methods as proto


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


CONVERSATION_WORDS = {"codex": "thread", "opencode": "session", "claude": "session", "qwen": "session",
                      "gemini": "session", "pi": "session"}
"""Each provider's own word for the conversation the app delivers into: a Codex thread, an OpenCode session, a
Claude Code session."""


def conversation_word(provider: str | None) -> str:
    """The word for an agent's conversation on `provider` ("conversation" for one the console does not know)."""
    return CONVERSATION_WORDS.get(provider or "", "conversation")


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
    """The separate facts of one exchange record, in the order they happen."""
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
