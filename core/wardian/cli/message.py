"""`wardian message ...`: send information, assign tasks, receive, wait, reply and interrupt, as the agent of
WARDIAN_SESSION_ID or as the operator; and the operator's views of the home's records."""

from __future__ import annotations

import argparse
import time

from wardian.cli.common import Commands, client, session, text, text_args
from wardian.cli.exits import EXIT_NOTHING, EXIT_OK
from wardian.cli.output import dump, out
from wardian.cli.records import party, print_log, print_records, print_story
from wardian.durations import parse_duration

# `typing` is not imported at run time: it is a sizeable part of the CLI's cold start (docs/benchmarks.md).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

OPERATOR_HELP = "act as the operator (the home's owner), not as the agent of WARDIAN_SESSION_ID"
TARGET_HELP = "exact agent name or UUID"


def register(commands: Commands) -> None:
    message = commands.group("message", "send, receive and reply")
    for name, func, help_ in (("send", cmd_message_send, "send information (starts no work)"),
                              ("task", cmd_message_task, "assign a task; prints its request id")):
        p = commands.add(message, name, func, help_)
        p.add_argument("--to", required=True, help=TARGET_HELP)
        p.add_argument("--operator", action="store_true", help=OPERATOR_HELP)
        if name == "task":
            p.add_argument("--deadline", default=None,
                           help="fail the task (deadline_exceeded) unless it is answered within this long: 90s, "
                                "10m, 1h30m (1s..7d); default: the team's task_deadline, if any")
        text_args(p)
    p = commands.add(message, "receive", cmd_message_receive, "read (and acknowledge) mailbox records")
    p.add_argument("--operator", action="store_true",
                   help="read the operator's mailbox (replies to the tasks it assigned), not an agent's")
    p.add_argument("--cursor", default=None, help="continue after the batch this cursor names")
    p.add_argument("--ack-cursor", dest="ack_cursor", default=None,
                   help="acknowledge the batch this cursor names")
    p.add_argument("--limit", type=int, default=None, help="records per page, 1..100 (default 20)")
    p.add_argument("--timeout-ms", dest="timeout_ms", type=int, default=None,
                   help="wait up to this long for a record, 0..60000 (default 0)")
    p = commands.add(message, "wait", cmd_message_wait, "wait for mailbox activity without reading it")
    p.add_argument("--timeout-ms", dest="timeout_ms", type=int, default=None,
                   help="0..60000, default 60000; 0 checks at once")
    p = commands.add(message, "reply", cmd_message_reply, "reply to a task you were assigned")
    p.add_argument("request_id")
    p.add_argument("--status", required=True, help="done, blocked or failed")
    text_args(p)
    p = commands.add(message, "interrupt", cmd_message_interrupt, "interrupt an agent's active turn")
    p.add_argument("target", help=TARGET_HELP)
    p.add_argument("--operator", action="store_true", help=OPERATOR_HELP)
    p = commands.add(message, "log", cmd_message_log, "print every record of the home (operator view)")
    p.add_argument("--limit", type=int, default=1000)
    p = commands.add(message, "show", cmd_message_show,
                     "every fact the app holds about one ask_, msg_, rep_ or ntc_ id")
    p.add_argument("id", help="the record's id")


def _send(args: argparse.Namespace, method: str) -> int:
    params: dict[str, Any]
    if args.operator:
        # As the operator: the control socket's owner; no session is involved.
        method = {"message/send": "operator/send", "task/followup": "operator/followup"}[method]
        params = {"target": args.to, "message": text(args)}
    else:
        params = {"session": session(), "target": args.to, "message": text(args)}
    if getattr(args, "deadline", None) is not None:
        params["deadline_ms"] = parse_duration(args.deadline)
    with client(args) as app:
        receipt = app.call(method, params)
    if args.json:
        out(dump(receipt))
    elif receipt["kind"] == "task":
        due = f", due by {_when(receipt['deadline_at'])}" if receipt.get("deadline_at") else ""
        out(f"task {receipt['request_id']} admitted for {party(receipt['target'])}{due}")
    else:
        out(f"information {receipt['interaction_id']} admitted for {party(receipt['target'])}")
    return EXIT_OK


def _when(unix_ms: int) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S %Z", time.localtime(unix_ms / 1000))


def cmd_message_send(args: argparse.Namespace) -> int:
    return _send(args, "message/send")


def cmd_message_task(args: argparse.Namespace) -> int:
    return _send(args, "task/followup")


def cmd_message_receive(args: argparse.Namespace) -> int:
    params: dict[str, Any] = {} if args.operator else {"session": session()}
    for key in ("cursor", "ack_cursor", "limit", "timeout_ms"):
        value = getattr(args, key)
        if value is not None:
            params[key] = value
    method = "operator/receive" if args.operator else "mailbox/receive"
    with client(args) as app:
        page = app.call_wait(method, params, args.timeout_ms or 0)
    if args.json:
        out(dump(page))
        return EXIT_OK
    print_records(page["records"])
    if page["acked"]:
        out(f"acknowledged {page['acked']} records")
    if page["records"]:
        out(f"cursor: {page['cursor']}")
        if page["more"]:
            out("more records follow: pass --cursor to continue")
    else:
        out("no records" + (" (timed out)" if page["timed_out"] else ""))
    return EXIT_OK


def cmd_message_wait(args: argparse.Namespace) -> int:
    params: dict[str, Any] = {"session": session()}
    if args.timeout_ms is not None:
        params["timeout_ms"] = args.timeout_ms
    timeout = 60_000 if args.timeout_ms is None else args.timeout_ms
    with client(args) as app:
        result = app.call_wait("mailbox/wait", params, max(0, timeout))
    deadlock = result.get("deadlock")
    if args.json:
        out(dump(result))
    elif deadlock is not None:
        # The deadlock guard ended the wait (docs/guide/teams.md): say who holds what, so the caller can answer.
        out(f"deadlock: {', '.join(deadlock['agents'])} wait for each other's replies; you hold "
            f"{', '.join(deadlock['holding']) or 'none'}, you wait for {', '.join(deadlock['waiting_for'])}")
    else:
        out("mailbox activity" if result["woke"] else "timed out")
    return EXIT_OK if result["woke"] else EXIT_NOTHING


def cmd_message_reply(args: argparse.Namespace) -> int:
    params = {"session": session(), "request_id": args.request_id, "status": args.status,
              "message": text(args)}
    with client(args) as app:
        receipt = app.call("task/reply", params)
    if args.json:
        out(dump(receipt))
    else:
        out(f"reply {receipt['reply_id']} ({receipt['status']}) admitted for {party(receipt['requester'])}")
    return EXIT_OK


def cmd_message_interrupt(args: argparse.Namespace) -> int:
    with client(args) as app:
        if args.operator:
            result = app.call("operator/interrupt", {"target": args.target})
        else:
            result = app.call("agent/interrupt", {"session": session(), "target": args.target})
    out(dump(result) if args.json else
        f"interrupt requested for {party(result['target'])} turn {result['turn_id']}")
    return EXIT_OK


def cmd_message_log(args: argparse.Namespace) -> int:
    with client(args) as app:
        result = app.call("mailbox/records", {"limit": args.limit})
    if args.json:
        out(dump(result))
    else:
        print_log(result["records"], result.get("approvals", []))
    return EXIT_OK


def cmd_message_show(args: argparse.Namespace) -> int:
    with client(args) as app:
        story = app.call("request/show", {"id": args.id})
        # The text names a delivery's ids as its provider does (a Claude Code session and message uuid).
        delivered_to = _delivered_to(story)
        provider = None if delivered_to is None else next(
            (a["provider"] for a in app.call("agent/list", {})["agents"] if a["uuid"] == delivered_to), None)
    if args.json:
        out(dump(story))
    else:
        print_story(story, provider)
    return EXIT_OK


def _delivered_to(story: dict[str, Any]) -> str | None:
    """The uuid of the agent a story's task was submitted to (the task's recipient: a reply's sender), if it was."""
    task = story.get("task")
    if task is None or not task["facts"]["submitted_at"]:
        return None
    agent = story["recipient"] if story["kind"] == "task" else story["sender"]
    return None if agent is None else str(agent["uuid"])
