"""`wardian`: argument parsing and printing only; every operation is a call to the running app.

Exit codes (documented in README):
  0 ok · 1 internal error · 2 bad input (usage, invalid arguments) · 3 app not running or incompatible
  4 not found (unknown target, agent, request or session) · 5 delivery uncertain (do not resend)
  6 storage refused the change · 7 the home cannot host an app (already running, insecure run/ dir) or the console's
  address is in use · 8 nothing to do (interrupt: no active turn; wait: timed out)

Cold start matters (`wardian message wait --timeout-ms 0` is a benchmark figure): this module imports
only the stdlib, orjson and the client at module level; the app, pydantic and anyio load only for
`wardian app run`, and `mcp` only for `wardian mcp serve`.
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
from collections.abc import Callable, Sequence
from typing import Any, NoReturn

import orjson

from wardian import __version__, errors
from wardian.home import ENV_SESSION, ENV_STORE, resolve_home

EXIT_OK = 0
EXIT_INTERNAL = 1
EXIT_USAGE = 2
EXIT_APP = 3
EXIT_NOT_FOUND = 4
EXIT_UNCERTAIN = 5
EXIT_STORAGE = 6
EXIT_HOME = 7
EXIT_NOTHING = 8

_NOT_FOUND = (errors.UnknownTarget, errors.UnknownAgent, errors.UnknownRequest, errors.UnknownSession,
              errors.SessionHomeMismatch, errors.StaleSession)


def exit_code_for(exc: errors.WardianError) -> int:
    if isinstance(exc, _NOT_FOUND):
        return EXIT_NOT_FOUND
    if isinstance(exc, errors.NotActive):
        return EXIT_NOTHING
    if isinstance(exc, errors.RequestError):
        return EXIT_USAGE
    if isinstance(exc, errors.TransportError):
        return EXIT_APP
    if isinstance(exc, errors.DeliveryUncertain):
        return EXIT_UNCERTAIN
    if isinstance(exc, errors.StorageError):
        return EXIT_STORAGE
    if isinstance(exc, errors.HomeError):
        return EXIT_HOME
    return EXIT_INTERNAL


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        self.exit(EXIT_USAGE, f"wardian: error: {message}\n")


def _dump(value: Any) -> str:
    return orjson.dumps(value, option=orjson.OPT_INDENT_2).decode("utf-8")


def _out(text: str) -> None:
    sys.stdout.write(text if text.endswith("\n") else text + "\n")


# --- helpers -----------------------------------------------------------------------------------------------


def _client(args: argparse.Namespace) -> Any:
    from wardian.client import AppClient

    return AppClient(resolve_home(args.home))


def _session() -> str:
    token = os.environ.get(ENV_SESSION, "")
    if not token:
        raise errors.MissingSession(
            f"no managed caller: set {ENV_SESSION} (print it with `wardian agent env NAME`)", field="session")
    return token


def _text(args: argparse.Namespace) -> str:
    if args.stdin and args.text is not None:
        raise errors.InvalidArguments("give the text as an argument or with --stdin, not both", field="text")
    if args.stdin:
        data = sys.stdin.buffer.read()
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise errors.InvalidText(f"standard input is not UTF-8 (byte {exc.start})", field="message",
                                     allowed="UTF-8 text") from None
    if args.text is None:
        raise errors.EmptyMessage("no text: give it as an argument or pass --stdin", field="message")
    return str(args.text)


def _party(p: dict[str, Any] | None) -> str:
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


def _print_records(records: list[dict[str, Any]]) -> None:
    for r in records:
        head = f"[{r['kind']}] {r['id']} from {_party(r['sender'])} to {_party(r['recipient'])}"
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
        _out(head)
        for line in r["text"].splitlines() or [""]:
            _out(f"    {line}")


# --- commands ----------------------------------------------------------------------------------------------


def _store_arg(args: argparse.Namespace) -> str | None:
    """--store, else WARDIAN_STORE, else None (the home's remembered store, or its own SQLite file)."""
    return args.store if args.store is not None else (os.environ.get(ENV_STORE) or None)


def cmd_app_run(args: argparse.Namespace) -> int:
    from wardian.app.run import main_run

    return main_run(
        resolve_home(args.home), args.ready_fd, args.console, host_name=args.host_name, store_url=_store_arg(args)
    )


def cmd_store_migrate(args: argparse.Namespace) -> int:
    from wardian.app.run import migrate_shared_store, redact_url

    url = _store_arg(args)
    if url is None:
        raise errors.InvalidArguments(f"give the shared store: --store URL or ${ENV_STORE}", field="store",
                                      allowed="postgresql://[USER@]HOST[:PORT]/DB[?…] without a password")
    before, after = migrate_shared_store(url)
    if args.json:
        _out(_dump({"store": redact_url(url), "from_version": before, "version": after}))
    elif before == after:
        _out(f"the shared store {redact_url(url)} is at schema version {after}; nothing to do")
    else:
        _out(f"migrated the shared store {redact_url(url)} from schema version {before} to {after}")
    return EXIT_OK


def cmd_app_start(args: argparse.Namespace) -> int:
    from wardian.app.spawn import start_app
    from wardian.home import make_private_dir

    home = resolve_home(args.home)
    if args.console is not None:
        from wardian.console.address import parse_console_address

        parse_console_address(args.console)  # a refused address changes nothing, not even the home (#16)
    store_url = _store_arg(args)
    extra: list[str] = [] if args.console is None else ["--console", args.console]
    if args.host_name is not None:
        from wardian.app.run import check_host_name

        extra += ["--host-name", check_host_name(args.host_name)]
    if store_url is not None:
        from wardian.app.run import check_store_url

        extra += ["--store", check_store_url(store_url)]  # refused here too: nothing of the home changes
    created = not home.root.exists()
    make_private_dir(home.root)  # private whatever the umask (#13); the app itself refuses an open home it did not make
    if created:
        os.chmod(home.root, 0o700)
    log_path = home.app_out_path
    with open(os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600), "ab") as log_file:
        try:
            proc = start_app(home.root, stdout=log_file, stderr=log_file, timeout_s=args.timeout, extra_args=extra)
        except errors.InternalError as exc:
            raise errors.InternalError(f"{exc.message}; see {log_path}") from None
    console = None
    if args.console is not None:
        with _client(args) as client:
            console = client.call("app/status")["console"]
    if args.json:
        _out(_dump({"running": True, "pid": proc.pid, "home": str(home.root), "console": console}))
    else:
        _out(f"app running for {home.root} (pid {proc.pid})")
        if console is not None:
            _out(f"web console at {console}; log in with `wardian console`")
    return EXIT_OK


def cmd_app_stop(args: argparse.Namespace) -> int:
    """Stop the app and return once its process has exited (#13: a script may remove the home right after)."""
    import psutil

    with _client(args) as client:
        try:
            status = client.call("app/status")
        except errors.AppNotRunning:
            _out("app not running")
            return EXIT_OK
        try:
            # Taken before asking it to stop: psutil keeps the start time, so a reused pid is never mistaken for it.
            app_process: psutil.Process | None = psutil.Process(status["pid"])
        except psutil.Error:
            app_process = None
        client.call("app/stop")
    if app_process is not None and not _exited(app_process, args.timeout):
        raise errors.InternalError(
            f"the app (pid {status['pid']}) accepted stop but has not exited within {args.timeout:g} s; it may "
            "still be ending its agents' provider processes: wait, or end it yourself")
    if args.json:
        _out(_dump({"stopped": True, "pid": status["pid"]}))
    else:
        _out(f"app stopped (pid {status['pid']})")
    return EXIT_OK


def _exited(process: Any, timeout_s: float) -> bool:
    """Whether the process ended within `timeout_s`. A zombie has ended: it only waits for whoever inherited it
    (the `app start` that spawned it is gone) to collect its status."""
    import time

    import psutil

    deadline = time.monotonic() + timeout_s
    while True:
        try:
            if not process.is_running() or process.status() == psutil.STATUS_ZOMBIE:
                return True
        except psutil.Error:
            return True  # gone
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.01)


def cmd_app_status(args: argparse.Namespace) -> int:
    with _client(args) as client:
        try:
            status = client.call("app/status")
        except errors.AppNotRunning as exc:
            if args.json:
                _out(_dump({"running": False, "home": str(client.home.root), "message": exc.message}))
            else:
                _out(f"app not running for {client.home.root}")
            return EXIT_APP
    if args.json:
        _out(_dump(status))
    else:
        _out(f"app running for {status['home']} (pid {status['pid']}, version {status['version']}, "
             f"{status['agents']} agents)")
        if status.get("console"):
            _out(f"web console at {status['console']} (log in with `wardian console`)")
    return EXIT_OK


def cmd_console(args: argparse.Namespace) -> int:
    """Print a fresh one-time login URL of the web console and open it in a browser (#16)."""
    with _client(args) as client:
        login = client.call("console/login")
    if args.json:
        _out(_dump(login))
        return EXIT_OK
    _out("Open this URL to log in to the web console (it works once, for 10 minutes):")
    _out(f"  {login['url']}")
    if not args.no_open:
        if _can_open_a_browser():
            import webbrowser

            if not webbrowser.open(login["url"]):
                _out("no browser could be opened here: open the URL yourself")
        else:
            _out("no graphical session here (no DISPLAY or WAYLAND_DISPLAY): open the URL on this machine, or tunnel "
                 "to it (ssh -L PORT:127.0.0.1:PORT HOST) and open it there")
    return EXIT_OK


def _can_open_a_browser() -> bool:
    """Whether `webbrowser` would open a graphical browser, not a text one taking over this terminal (over SSH)."""
    if sys.platform in ("win32", "darwin") or os.environ.get("BROWSER"):
        return True
    return bool(os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"))


def cmd_agent_add(args: argparse.Namespace) -> int:
    params: dict[str, Any] = {"name": args.name, "provider": args.provider}
    if args.workspace is not None:
        params["workspace"] = os.path.abspath(args.workspace)
    with _client(args) as client:
        agent = client.call("agent/add", params)
    _out(_dump(agent) if args.json else f"added {agent['name']} ({agent['uuid']}, {agent['provider']})")
    return EXIT_OK


def cmd_agent_list(args: argparse.Namespace) -> int:
    params: dict[str, Any] = {}
    if os.environ.get(ENV_SESSION):
        params["session"] = os.environ[ENV_SESSION]
    with _client(args) as client:
        result = client.call("agent/list", params)
    if args.json:
        _out(_dump(result))
        return EXIT_OK
    rows = [("NAME", "UUID", "PROVIDER", "HOST", "STATUS")]
    doubts = result.get("deliveries", {})
    hosts = result.get("hosts", {})
    for a in result["agents"]:
        host = a.get("host") or "-"
        if a.get("host") and not hosts.get(a["host"], {}).get("live", True):
            host += " (offline)"
        status = a["status"] + (f" (turn {a['active_turn_id']})" if a.get("active_turn_id") else "")
        if (d := doubts.get(a["uuid"])) is not None:
            said = [f"{d['uncertain']} uncertain" if d["uncertain"] else "",
                    f"{d['confirmed_by_lookup']} confirmed by lookup" if d["confirmed_by_lookup"] else ""]
            status += "; deliveries: " + ", ".join(x for x in said if x)
        rows.append((a["name"], a["uuid"], a["provider"], host, status))
    widths = [max(len(r[i]) for r in rows) for i in range(5)]
    for r in rows:
        _out("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip())
    return EXIT_OK


def cmd_agent_start(args: argparse.Namespace) -> int:
    from wardian.protocol.tools import parse_tool_names

    params: dict[str, Any] = {"agent": args.name, "approve_tools": list(parse_tool_names(args.approve_tools))}
    if args.mode is not None:
        params["mode"] = args.mode
    if args.config is not None:
        params["config"] = list(args.config)
    if args.reset_settings:
        params["reset_settings"] = True
    with _client(args) as client:
        # Codex may index a long history before the conversation is ready: no short deadline here.
        result = client.call("agent/start", params, timeout_s=args.timeout)
    if args.json:
        _out(_dump(result))
    else:
        agent = result["agent"]
        _out(f"started {agent['name']} ({agent['status']}, {agent['provider']} {result['provider_version']}, "
             f"thread {result['thread_id']}, generation {result['generation']})")
    return EXIT_OK


def cmd_agent_attach(args: argparse.Namespace) -> int:
    """Run the agent's Codex TUI in this terminal, attached to the app-owned app-server."""
    from wardian.terminal import run_attached_tui

    with _client(args) as client:
        info = client.call("agent/attach", {"agent": args.name})
    return run_attached_tui(info, extra_args=list(args.codex_args))


def cmd_agent_stop(args: argparse.Namespace) -> int:
    with _client(args) as client:
        result = client.call("agent/stop", {"agent": args.name}, timeout_s=60)
    if args.json:
        _out(_dump(result))
    else:
        _out(f"stopped {result['agent']['name']}" if result["stopped"] else
             f"{result['agent']['name']} was not running; it stays off")
    return EXIT_OK


def cmd_agent_remove(args: argparse.Namespace) -> int:
    with _client(args) as client:
        result = client.call("agent/remove", {"agent": args.name}, timeout_s=120)
    if args.json:
        _out(_dump(result))
        return EXIT_OK
    agent = result["agent"]
    _out(f"removed {agent['name']} ({agent['uuid']}); its records stay as evidence")
    if result["answered"]:
        _out(f"  {len(result['answered'])} open tasks answered with a failed notice: {', '.join(result['answered'])}")
    if result["uncertain"]:
        _out(f"  {len(result['uncertain'])} tasks in a turn nobody saw end are uncertain (do not resend blindly): "
             f"{', '.join(result['uncertain'])}")
    return EXIT_OK


def cmd_agent_revoke(args: argparse.Namespace) -> int:
    with _client(args) as client:
        result = client.call("agent/revoke", {"agent": args.name, "all": args.all})
    if args.json:
        _out(_dump(result))
    else:
        which = "sessions" if args.all else "operator-minted sessions (`wardian agent env`)"
        _out(f"revoked {result['revoked']} {which} of {result['agent']['name']}")
    return EXIT_OK


def cmd_agent_env(args: argparse.Namespace) -> int:
    with _client(args) as client:
        result = client.call("agent/session", {"agent": args.name})
    if args.json:
        _out(_dump({"WARDIAN_HOME": result["home"], "WARDIAN_SESSION_ID": result["session_id"]}))
    else:
        _out(f"export WARDIAN_HOME={shlex.quote(result['home'])}")
        _out(f"export WARDIAN_SESSION_ID={shlex.quote(result['session_id'])}")
    return EXIT_OK


def _send(args: argparse.Namespace, method: str) -> int:
    if args.operator:
        # As the operator (#16): the control socket's owner; no session is involved.
        method = {"message/send": "operator/send", "task/followup": "operator/followup"}[method]
        params = {"target": args.to, "message": _text(args)}
    else:
        params = {"session": _session(), "target": args.to, "message": _text(args)}
    with _client(args) as client:
        receipt = client.call(method, params)
    if args.json:
        _out(_dump(receipt))
    elif receipt["kind"] == "task":
        _out(f"task {receipt['request_id']} admitted for {_party(receipt['target'])}")
    else:
        _out(f"information {receipt['interaction_id']} admitted for {_party(receipt['target'])}")
    return EXIT_OK


def cmd_message_send(args: argparse.Namespace) -> int:
    return _send(args, "message/send")


def cmd_message_task(args: argparse.Namespace) -> int:
    return _send(args, "task/followup")


def cmd_message_receive(args: argparse.Namespace) -> int:
    params: dict[str, Any] = {} if args.operator else {"session": _session()}
    for key in ("cursor", "ack_cursor", "limit", "timeout_ms"):
        value = getattr(args, key)
        if value is not None:
            params[key] = value
    method = "operator/receive" if args.operator else "mailbox/receive"
    with _client(args) as client:
        page = client.call_wait(method, params, args.timeout_ms or 0)
    if args.json:
        _out(_dump(page))
        return EXIT_OK
    _print_records(page["records"])
    if page["acked"]:
        _out(f"acknowledged {page['acked']} records")
    if page["records"]:
        _out(f"cursor: {page['cursor']}")
        if page["more"]:
            _out("more records follow: pass --cursor to continue")
    else:
        _out("no records" + (" (timed out)" if page["timed_out"] else ""))
    return EXIT_OK


def cmd_message_wait(args: argparse.Namespace) -> int:
    params: dict[str, Any] = {"session": _session()}
    if args.timeout_ms is not None:
        params["timeout_ms"] = args.timeout_ms
    timeout = 60_000 if args.timeout_ms is None else args.timeout_ms
    with _client(args) as client:
        result = client.call_wait("mailbox/wait", params, max(0, timeout))
    if args.json:
        _out(_dump(result))
    else:
        _out("mailbox activity" if result["woke"] else "timed out")
    return EXIT_OK if result["woke"] else EXIT_NOTHING


def cmd_message_reply(args: argparse.Namespace) -> int:
    params = {"session": _session(), "request_id": args.request_id, "status": args.status,
              "message": _text(args)}
    with _client(args) as client:
        receipt = client.call("task/reply", params)
    if args.json:
        _out(_dump(receipt))
    else:
        _out(f"reply {receipt['reply_id']} ({receipt['status']}) admitted for {_party(receipt['requester'])}")
    return EXIT_OK


def cmd_message_interrupt(args: argparse.Namespace) -> int:
    with _client(args) as client:
        if args.operator:
            result = client.call("operator/interrupt", {"target": args.target})
        else:
            result = client.call("agent/interrupt", {"session": _session(), "target": args.target})
    _out(_dump(result) if args.json else
         f"interrupt requested for {_party(result['target'])} turn {result['turn_id']}")
    return EXIT_OK


def cmd_message_log(args: argparse.Namespace) -> int:
    with _client(args) as client:
        result = client.call("mailbox/records", {"limit": args.limit})
    if args.json:
        _out(_dump(result))
    else:
        _print_records(result["records"])
    return EXIT_OK


def cmd_message_show(args: argparse.Namespace) -> int:
    with _client(args) as client:
        story = client.call("request/show", {"id": args.id})
    if args.json:
        _out(_dump(story))
    else:
        _print_story(story)
    return EXIT_OK


def _when(ms: int | None) -> str:
    if ms is None:
        return "-"
    import datetime

    return datetime.datetime.fromtimestamp(ms / 1000, datetime.UTC).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] + "Z"


def _print_story(s: dict[str, Any]) -> None:
    """One record's whole story, as facts an operator reads top to bottom."""
    _out(f"{s['kind']} {s['id']}" + (f" (request {s['request_id']})" if s["request_id"] and s["kind"] != "task"
                                       else ""))
    _out(f"  from       {_party(s['sender'])}")
    _out(f"  to         {_party(s['recipient'])}")
    _out(f"  admitted   {_when(s['created_at'])}" + (f"  status {s['status']}" if s["status"] else ""))
    d = s["delivery"]
    if d["push"] is not None:
        _out(f"  pushed     {d['push']} {_when(d['pushed_at'])} into the recipient's live conversation"
             + (f" ({d['push_note']})" if d["push_note"] else ""))
    else:
        _out(f"  received   {_when(d['received_at'])}   acknowledged {_when(d['acked_at'])}")
    task = s["task"]
    if task is not None:
        f = task["facts"]
        _out(f"  task       {f['state']}" + ("" if s["kind"] == "task" else f" (the task {s['request_id']})"))
        _out(f"  requester  {_party(task['requester'])}")
        if f["claimed_by"]:
            _out(f"  claimed    by {f['claimed_by']} at {_when(f['claimed_at'])} (generation {f['claim_generation']})")
        if task.get("rejections"):
            _out(f"  rejected   {task['rejections']} time(s) by the provider, nothing accepted, then offered again "
                 f"(last: {task['rejection_note']})")
        if f["submitted_at"]:
            msg = f", provider message {task['provider_message_id']}" if task["provider_message_id"] else ""
            _out(f"  submitted  {_when(f['submitted_at'])} thread {f['thread_id']} turn {f['turn_id']}{msg}")
        if f["lookup"] == "confirmed":
            _out(f"  LOOKUP     the provider's answer was lost ({task['lookup_note']}); a lookup found the message: "
                 "the delivery is confirmed")
        if f["uncertain_at"]:
            _out(f"  UNCERTAIN  {_when(f['uncertain_at'])}: {task['uncertain_reason'] or 'no reason recorded'}")
            if f["lookup"] == "not_found":
                _out("             a lookup of its message by the id the app chose found nothing")
            _out("             the provider may or may not have taken it: check the agent's conversation; "
                 "never resend it blindly")
        if task["outcome_status"]:
            _out(f"  outcome    {task['outcome_status']} captured {_when(task['outcome_at'])}")
        if f["completed_at"]:
            _out(f"  completed  {_when(f['completed_at'])} reply {f['reply_id']} status {f['reply_status']}")
    answer = s["answer"]
    if answer is not None:
        _out(f"  answer     {answer['kind']} {answer['id']} ({answer['status']}) from "
             f"{'wardian' if answer['sender_kind'] == 'wardian' else 'the recipient'}:")
        for line in answer["text"].splitlines() or [""]:
            _out(f"      {line}")
    _out("  text:")
    for line in s["text"].splitlines() or [""]:
        _out(f"      {line}")


def cmd_retired(args: argparse.Namespace) -> int:
    raise errors.RetiredOperation(
        f"`wardian {args.retired}` is a retired v1 operation and delivers nothing; use `wardian message "
        "send` for information or `wardian message task` for work")


def cmd_mcp_serve(args: argparse.Namespace) -> int:
    from wardian.mcp.server import main as mcp_main  # imports mcp: only this command pays for it

    return int(mcp_main())


def cmd_codex_register(args: argparse.Namespace) -> int:
    from wardian.providers.codex.registration import main_register

    return int(main_register(args))


def cmd_opencode_register(args: argparse.Namespace) -> int:
    from wardian.providers.opencode.registration import main_register

    return int(main_register(args))


def cmd_demo(args: argparse.Namespace) -> int:
    """Run the demo, which ships with the harness: core loads it by entry point and never imports it."""
    from importlib.metadata import entry_points

    found = list(entry_points(group="wardian.plugins", name="demo"))
    if not found:
        sys.stderr.write("wardian: demo_unavailable: no `demo` entry point in group `wardian.plugins` (it ships "
                         "with the wardian_harness package of a source checkout: run scripts/setup.sh)\n")
        return EXIT_INTERNAL
    forwarded = ["--providers", args.providers] + (["--evidence", args.evidence] if args.evidence else [])
    return int(found[0].load()(forwarded))


# --- parser ------------------------------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    common = _Parser(add_help=False)
    common.add_argument("--home", default=argparse.SUPPRESS,
                        help="the Wardian home (default: $WARDIAN_HOME)")
    common.add_argument("--json", action="store_true", default=argparse.SUPPRESS,
                        help="print the app's result as JSON")

    parser = _Parser(prog="wardian", description="Durable messaging between coding agents.",
                     parents=[common])
    parser.add_argument("--version", action="version", version=f"wardian {__version__}")
    groups = parser.add_subparsers(dest="group", required=True, metavar="COMMAND", parser_class=_Parser)

    def sub(group: Any, name: str, func: Callable[[argparse.Namespace], int], help_: str) -> Any:
        p = group.add_parser(name, help=help_, description=help_, parents=[common])
        p.set_defaults(func=func)
        return p

    def text_args(p: Any) -> None:
        p.add_argument("text", nargs="?", help="the text (kept exactly)")
        p.add_argument("--stdin", action="store_true", help="read the text from standard input")

    app = groups.add_parser("app", help="run and control the app").add_subparsers(
        dest="cmd", required=True, metavar="ACTION", parser_class=_Parser)
    console_help = ("also serve the web console on this loopback address (default 127.0.0.1:8765; PORT 0 picks a "
                    "free port); log in with `wardian console`")
    store_help = (
        "serve a shared PostgreSQL store, postgresql://[USER@]HOST[:PORT]/DB[?…] without a password "
        f"(libpq reads it from PGPASSFILE/PGSERVICE/PGPASSWORD; default ${ENV_STORE}, else the store the "
        "home served before, else the home's own SQLite file)"
    )
    host_help = "the host this app serves (default: the machine's hostname); agents added here belong to it"
    p = sub(app, "run", cmd_app_run, "run the app in the foreground")
    p.add_argument("--ready-fd", type=int, default=None, help=argparse.SUPPRESS)
    p.add_argument("--console", nargs="?", const="", default=None, metavar="ADDR", help=console_help)
    p.add_argument("--store", default=None, metavar="URL", help=store_help)
    p.add_argument("--host-name", dest="host_name", default=None, metavar="NAME", help=host_help)
    p = sub(app, "start", cmd_app_start, "start the app in the background; returns once it accepts calls")
    p.add_argument("--timeout", type=float, default=15.0, help="seconds to wait for readiness")
    p.add_argument("--console", nargs="?", const="", default=None, metavar="ADDR", help=console_help)
    p.add_argument("--store", default=None, metavar="URL", help=store_help)
    p.add_argument("--host-name", dest="host_name", default=None, metavar="NAME", help=host_help)
    p = sub(app, "stop", cmd_app_stop, "stop the running app")
    p.add_argument("--timeout", type=float, default=15.0, help="seconds to wait for the app to exit")
    sub(app, "status", cmd_app_status, "show whether the app runs")

    store = groups.add_parser("store", help="the shared PostgreSQL store").add_subparsers(
        dest="cmd", required=True, metavar="ACTION", parser_class=_Parser)
    p = sub(store, "migrate", cmd_store_migrate,
            "create or upgrade the shared store's schema (apps also do it at start, under the same lock)")
    p.add_argument("--store", default=None, metavar="URL", help=f"the shared store (default ${ENV_STORE})")

    agent = groups.add_parser("agent", help="manage agents").add_subparsers(
        dest="cmd", required=True, metavar="ACTION", parser_class=_Parser)
    p = sub(agent, "add", cmd_agent_add, "register a managed agent")
    p.add_argument("name")
    p.add_argument("--provider", required=True, help="the agent's provider (codex or opencode)")
    p.add_argument("--workspace", default=None, help="the agent's workspace directory")
    sub(agent, "list", cmd_agent_list, "list agents (name, UUID, provider, status)")
    p = sub(agent, "start", cmd_agent_start,
            "start the agent's provider runtime (Codex app-server, opencode serve) and its conversation")
    p.add_argument("name", help="agent name or UUID")
    p.add_argument("--mode", choices=("background", "attached"), default=None,
                   help="default: the mode of the agent's last start, else background")
    p.add_argument("-c", "--config", action="append", default=None, metavar="KEY=VALUE",
                   help="a launch setting: for Codex exactly as `codex -c` takes it (TOML value, else a string); for "
                   "OpenCode a key of the agent's opencode.json (dotted path, TOML or JSON value); repeatable. Given, "
                   "they replace the agent's saved settings; left out, the saved ones are used")
    p.add_argument("--reset-settings", dest="reset_settings", action="store_true",
                   help="forget the agent's saved -c settings and start without any")
    p.add_argument("--approve-tools", dest="approve_tools", default=None, metavar="TOOL,...",
                   help="grant approval_mode = \"approve\" to these wardian tools in the agent's private home")
    p.add_argument("--timeout", type=float, default=900.0, help="seconds to wait for the conversation")
    p = sub(agent, "attach", cmd_agent_attach,
            "open the agent's Codex TUI here, attached to the app-owned app-server (mode attached)")
    p.add_argument("name", help="agent name or UUID")
    p.add_argument("codex_args", nargs=argparse.REMAINDER, help="extra arguments for codex (after --)")
    p = sub(agent, "stop", cmd_agent_stop, "stop the agent's provider runtime; new tasks wait for an explicit start")
    p.add_argument("name", help="agent name or UUID")
    p = sub(agent, "env", cmd_agent_env, "print shell exports of WARDIAN_HOME and a new WARDIAN_SESSION_ID")
    p.add_argument("name", help="agent name or UUID")
    p = sub(agent, "remove", cmd_agent_remove,
            "remove an agent: stop it, revoke its sessions, answer its open tasks; its records stay")
    p.add_argument("name", help="agent name or UUID")
    p = sub(agent, "revoke", cmd_agent_revoke, "revoke the sessions `wardian agent env` minted for an agent")
    p.add_argument("name", help="agent name or UUID")
    p.add_argument("--all", action="store_true", help="revoke its managed sessions too (its running MCP servers)")

    message = groups.add_parser("message", help="send, receive and reply").add_subparsers(
        dest="cmd", required=True, metavar="ACTION", parser_class=_Parser)
    operator_help = "act as the operator (the home's owner), not as the agent of WARDIAN_SESSION_ID"
    p = sub(message, "send", cmd_message_send, "send information (starts no work)")
    p.add_argument("--to", required=True, help="exact agent name or UUID")
    p.add_argument("--operator", action="store_true", help=operator_help)
    text_args(p)
    p = sub(message, "task", cmd_message_task, "assign a task; prints its request id")
    p.add_argument("--to", required=True, help="exact agent name or UUID")
    p.add_argument("--operator", action="store_true", help=operator_help)
    text_args(p)
    p = sub(message, "receive", cmd_message_receive, "read (and acknowledge) mailbox records")
    p.add_argument("--operator", action="store_true",
                   help="read the operator's mailbox (replies to the tasks it assigned), not an agent's")
    p.add_argument("--cursor", default=None, help="continue after the batch this cursor names")
    p.add_argument("--ack-cursor", dest="ack_cursor", default=None,
                   help="acknowledge the batch this cursor names")
    p.add_argument("--limit", type=int, default=None, help="records per page, 1..100 (default 20)")
    p.add_argument("--timeout-ms", dest="timeout_ms", type=int, default=None,
                   help="wait up to this long for a record, 0..60000 (default 0)")
    p = sub(message, "wait", cmd_message_wait, "wait for mailbox activity without reading it")
    p.add_argument("--timeout-ms", dest="timeout_ms", type=int, default=None,
                   help="0..60000, default 60000; 0 checks at once")
    p = sub(message, "reply", cmd_message_reply, "reply to a task you were assigned")
    p.add_argument("request_id")
    p.add_argument("--status", required=True, help="done, blocked or failed")
    text_args(p)
    p = sub(message, "interrupt", cmd_message_interrupt, "interrupt an agent's active turn")
    p.add_argument("target", help="exact agent name or UUID")
    p.add_argument("--operator", action="store_true", help=operator_help)
    p = sub(message, "log", cmd_message_log, "print every record of the home (operator view)")
    p.add_argument("--limit", type=int, default=1000)
    p = sub(message, "show", cmd_message_show, "every fact the app holds about one ask_, msg_, rep_ or ntc_ id")
    p.add_argument("id", help="the record's id")

    p = groups.add_parser("console", help="print (and open) a one-time login URL of the web console",
                          description="print a fresh one-time login URL of the running app's web console and open it "
                          "in a browser (the app must run with --console)", parents=[common])
    p.add_argument("--no-open", dest="no_open", action="store_true", help="only print the URL")
    p.set_defaults(func=cmd_console)

    mcp = groups.add_parser("mcp", help="the MCP server").add_subparsers(
        dest="cmd", required=True, metavar="ACTION", parser_class=_Parser)
    sub(mcp, "serve", cmd_mcp_serve, "serve the seven tools over stdio MCP")

    codex = groups.add_parser("codex", help="Codex integration").add_subparsers(
        dest="cmd", required=True, metavar="ACTION", parser_class=_Parser)
    p = sub(codex, "register", cmd_codex_register,
            "register `wardian mcp serve` for one managed agent in a private CODEX_HOME")
    p.add_argument("--codex-home", dest="codex_home", required=True, help="the agent's private CODEX_HOME")
    p.add_argument("--agent", required=True, help="the managed agent's name or UUID")
    p.add_argument("--approve-tools", dest="approve_tools", default=None,
                   help="comma-separated tool names to grant approval_mode = \"approve\"")

    opencode = groups.add_parser("opencode", help="OpenCode integration").add_subparsers(
        dest="cmd", required=True, metavar="ACTION", parser_class=_Parser)
    p = sub(opencode, "register", cmd_opencode_register,
            "register `wardian mcp serve` for one managed agent in an OpenCode config dir (opencode.json)")
    p.add_argument("--config-dir", dest="config_dir", required=True,
                   help="the OpenCode config dir to register in (its opencode.json or opencode.jsonc)")
    p.add_argument("--agent", required=True, help="the managed agent's name or UUID")

    p = groups.add_parser("demo", help="two real agents exchange a task; the exchange is shown live",
                          parents=[common])
    p.add_argument("--providers", default="codex,codex", metavar="LEAD,WORKER",
                   help="the lead's and the worker's provider: codex or opencode (default: codex,codex; "
                        "codex,opencode shows a mixed team)")
    p.add_argument("--evidence", default=None, metavar="DIR",
                   help="where to keep the records, rollouts and bindings (default: a new folder under /tmp)")
    p.set_defaults(func=cmd_demo)

    for retired in ("send", "ask"):
        # No `help`: argparse then lists no line for it (help=SUPPRESS would print "==SUPPRESS==", #11).
        p = groups.add_parser(retired, parents=[common])
        p.add_argument("rest", nargs=argparse.REMAINDER)
        p.set_defaults(func=cmd_retired, retired=retired)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args, extras = parser.parse_known_args(argv)
    if extras and getattr(args, "func", None) is not cmd_retired:
        # argparse fills an optional positional (TEXT) before it sees options placed in between
        # (`reply ID --status done TEXT`); take a single leftover word as that text.
        if getattr(args, "text", "") is None and len(extras) == 1 and not extras[0].startswith("-"):
            args.text = extras[0]
        else:
            parser.error(f"unrecognized arguments: {' '.join(extras)}")
    if not hasattr(args, "home"):
        args.home = None
    if not hasattr(args, "json"):
        args.json = False
    try:
        return args.func(args)
    except errors.WardianError as exc:
        if args.json:
            _out(_dump({"error": exc.to_data()}))
        allowed = f" (allowed: {exc.allowed})" if exc.allowed else ""
        sys.stderr.write(f"wardian: {exc.code}: {exc.message}{allowed}\n")
        candidates = exc.details.get("candidates")
        if candidates:
            sys.stderr.write("candidates: " + ", ".join(candidates) + "\n")
        return exit_code_for(exc)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
