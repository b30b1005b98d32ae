"""`wardian approval ...`: a person's view and answers of the approvals agents ask (docs/guide/approvals.md)."""

from __future__ import annotations

import argparse

from wardian.cli.common import Commands, client
from wardian.cli.exits import EXIT_OK
from wardian.cli.output import dump, out
from wardian.cli.records import approval_line, print_approval

ID_HELP = "the approval's apr_ id (`wardian approval list`)"


def register(commands: Commands) -> None:
    approval = commands.group("approval", "see and answer the agents' permission requests")
    p = commands.add(approval, "list", cmd_approval_list, "the pending approvals, oldest first")
    p.add_argument("--all", action="store_true", help="the newest approvals of every end, not only the pending")
    p.add_argument("--limit", type=int, default=None, help="at most this many, 1..100 (default 20)")
    p = commands.add(approval, "show", cmd_approval_show, "everything an approval asks and how it ended")
    p.add_argument("id", help=ID_HELP)
    p = commands.add(approval, "allow", cmd_approval_allow, "allow what a pending approval asks")
    p.add_argument("id", help=ID_HELP)
    p.add_argument("--always", action="store_true",
                   help="allow it always, when the agent offered that (else once)")
    p = commands.add(approval, "deny", cmd_approval_deny, "deny what a pending approval asks")
    p.add_argument("id", help=ID_HELP)
    p.add_argument("--reason", default=None, help="told to the model, when its provider can carry it")


def cmd_approval_list(args: argparse.Namespace) -> int:
    params: dict[str, object] = {"pending": not args.all}
    if args.limit is not None:
        params["limit"] = args.limit
    with client(args) as app:
        result = app.call("approval/list", params)
    if args.json:
        out(dump(result))
    elif not result["approvals"]:
        out("no pending approvals" if not args.all else "no approvals")
    for a in [] if args.json else result["approvals"]:
        out(approval_line(a))
    return EXIT_OK


def cmd_approval_show(args: argparse.Namespace) -> int:
    with client(args) as app:
        approval = app.call("approval/show", {"approval_id": args.id})
    if args.json:
        out(dump(approval))
    else:
        print_approval(approval)
    return EXIT_OK


def _answer(args: argparse.Namespace, params: dict[str, object]) -> int:
    with client(args) as app:
        approval = app.call("approval/answer", {"approval_id": args.id, **params})
    out(dump(approval) if args.json else approval_line(approval))
    return EXIT_OK


def cmd_approval_allow(args: argparse.Namespace) -> int:
    return _answer(args, {"decision": "allow", "always": bool(args.always)})


def cmd_approval_deny(args: argparse.Namespace) -> int:
    return _answer(args, {"decision": "deny"} if args.reason is None else {"decision": "deny", "reason": args.reason})
