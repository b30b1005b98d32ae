"""How mailbox records and a record's story read as text (`message receive`, `message log`, `message show`)."""

from __future__ import annotations

import time

from wardian.cli.output import out

# `typing` is not imported at run time: it is a sizeable part of the CLI's cold start (docs/benchmarks.md).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


def party(p: dict[str, Any] | None) -> str:
    return "wardian" if p is None else f"{p['name']} ({p['uuid']})"


def _task_line(f: dict[str, Any]) -> str:
    """A task's delivery facts in a few words (the operator log; `message show` tells all)."""
    parts = [f"task {f['state']}"]
    if f["claimed_by"]:
        parts.append(f"claimed by {f['claimed_by']}")
    if f["turn_id"]:
        parts.append(f"turn {f['turn_id']}")
    if f.get("lookup") == "confirmed":
        parts.append("confirmed by lookup")
    elif f.get("lookup") == "not_found":
        parts.append("lookup found nothing")
    if f["reply_id"]:
        parts.append(f"answered {f['reply_status']} by {f['reply_id']}")
    return ", ".join(parts)


def print_records(records: list[dict[str, Any]]) -> None:
    for r in records:
        head = f"[{r['kind']}] {r['id']} from {party(r['sender'])} to {party(r['recipient'])}"
        if r.get("request_id") and r["kind"] != "task":
            head += f" re {r['request_id']}"
        if r.get("status"):
            head += f" status={r['status']}"
        if r["kind"] == "task" and r.get("new_work"):
            head += " NEW WORK"
        elif r.get("task"):
            head += f" ({_task_line(r['task'])})"
        if r.get("acked") is not None:
            head += " acked" if r["acked"] else " unacked"
        out(head)
        _indented(r["text"], "    ")


def print_log(records: list[dict[str, Any]], approvals: list[dict[str, Any]]) -> None:
    """`message log`: the records in the store's order, each approval among them by its time."""
    asked = list(approvals)
    for r in records:
        while asked and asked[0]["created_at"] < r["created_at"]:
            print_approval(asked.pop(0))
        print_records([r])
    for a in asked:
        print_approval(a)


def approval_line(a: dict[str, Any]) -> str:
    """One approval as a line (`message log`, `approval list`, `wardian status`)."""
    head = f"[approval] {a['approval_id']} {a['agent']['name']} asks to {a['summary'].splitlines()[0][:200]}"
    if a.get("request_id"):
        head += f" re {a['request_id']}"
    if a["status"] == "pending":
        who = "a person" if a.get("answerer") is None else a["answerer"]["name"]
        return f"{head}: pending, for {who} to answer"
    by = f" by {a['decided_by']}" if a.get("decided_by") else ""
    return f"{head}: {a['status']}{' always' if a.get('always') else ''}{by}"


def print_approval(a: dict[str, Any]) -> None:
    """An approval: its line, then what was asked and offered."""
    out(approval_line(a))
    if a.get("tool"):
        out(f"    tool: {a['tool']}")
    for key in ("command", "cwd", "files", "diff_summary"):
        if a["detail"].get(key):
            out(f"    {key}: {a['detail'][key]}")
    offered = ", ".join(f"{o['name'] or o['option_id']} ({o['kind']})" for o in a["options"]) or "none"
    out(f"    offered: {offered}; policy: {a['policy']}")
    if a.get("reason"):
        out(f"    reason: {a['reason']}")


def tokens_text(t: dict[str, Any] | None) -> str:
    """A token usage (`TokenUsageResult`) as a person reads it; None is unknown, never 0 (docs/guide/teams.md#usage)."""
    if t is None:
        return "unknown"
    cached = "cached unknown" if t["cached"] is None else f"{t['cached']} cached"
    return f"input {t['input']} ({cached}), output {t['output']}"


def agent_tokens_text(u: dict[str, Any] | None) -> str:
    """An agent's usage totals (`AgentUsageResult`): the known sum, and how many turns reported none."""
    if u is None:
        return "unknown"
    unknown = f"; {u['unknown_turns']} of {u['turns']} turns unknown" if u["unknown_turns"] else ""
    return tokens_text(u["tokens"]) + unknown if u["tokens"] is not None else f"unknown ({u['turns']} turns)"


def _indented(text: str, indent: str) -> None:
    for line in text.splitlines() or [""]:
        out(f"{indent}{line}")


def _when(ms: int | None) -> str:
    """A time in ms as UTC to the millisecond; with `time`, which the client has loaded already (not `datetime`)."""
    if ms is None:
        return "-"
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(ms // 1000)) + f".{ms % 1000:03d}Z"


def print_story(s: dict[str, Any], provider: str | None = None) -> None:
    """One record's whole story, as facts an operator reads top to bottom; `provider` is the one the task was
    submitted to, whose names its ids are shown by."""
    out(f"{s['kind']} {s['id']}" + (f" (request {s['request_id']})" if s["request_id"] and s["kind"] != "task"
                                      else ""))
    out(f"  from       {party(s['sender'])}")
    out(f"  to         {party(s['recipient'])}")
    out(f"  admitted   {_when(s['created_at'])}" + (f"  status {s['status']}" if s["status"] else ""))
    d = s["delivery"]
    if d["push"] is not None:
        out(f"  pushed     {d['push']} {_when(d['pushed_at'])} into the recipient's live conversation"
            + (f" ({d['push_note']})" if d["push_note"] else ""))
    else:
        out(f"  received   {_when(d['received_at'])}   acknowledged {_when(d['acked_at'])}")
    if s["task"] is not None:
        _print_task(s, s["task"], provider)
    answer = s["answer"]
    if answer is not None:
        out(f"  answer     {answer['kind']} {answer['id']} ({answer['status']}) from "
            f"{'wardian' if answer['sender_kind'] == 'wardian' else 'the recipient'}:")
        _indented(answer["text"], "      ")
    out("  text:")
    _indented(s["text"], "      ")


def _print_task(s: dict[str, Any], task: dict[str, Any], provider: str | None = None) -> None:
    """The delivery of the task a story's record is, or belongs to."""
    f = task["facts"]
    out(f"  task       {f['state']}" + ("" if s["kind"] == "task" else f" (the task {s['request_id']})"))
    out(f"  requester  {party(task['requester'])}")
    if f["claimed_by"]:
        out(f"  claimed    by {f['claimed_by']} at {_when(f['claimed_at'])} (generation {f['claim_generation']})")
    if task.get("rejections"):
        out(f"  rejected   {task['rejections']} time(s) by the provider, nothing accepted, then offered again "
            f"(last: {task['rejection_note']})")
    if f["submitted_at"] and provider == "claude":
        msg = f", message uuid {task['provider_message_id']}" if task["provider_message_id"] else ""
        out(f"  submitted  {_when(f['submitted_at'])} Claude Code session {f['thread_id']} turn {f['turn_id']}{msg}")
    elif f["submitted_at"]:
        msg = f", provider message {task['provider_message_id']}" if task["provider_message_id"] else ""
        out(f"  submitted  {_when(f['submitted_at'])} thread {f['thread_id']} turn {f['turn_id']}{msg}")
    if f["lookup"] == "confirmed":
        out(f"  LOOKUP     the provider's answer was lost ({task['lookup_note']}); a lookup found the message: "
            "the delivery is confirmed")
    if f["uncertain_at"]:
        out(f"  UNCERTAIN  {_when(f['uncertain_at'])}: {task['uncertain_reason'] or 'no reason recorded'}")
        if f["lookup"] == "not_found":
            out("             a lookup of its message by the id the app chose found nothing")
        out("             the provider may or may not have taken it: check the agent's conversation; "
            "never resend it blindly")
    if task["outcome_status"]:
        out(f"  outcome    {task['outcome_status']} captured {_when(task['outcome_at'])}")
    out(f"  tokens     {tokens_text(task.get('usage'))}")
    if f["completed_at"]:
        out(f"  completed  {_when(f['completed_at'])} reply {f['reply_id']} status {f['reply_status']}")
