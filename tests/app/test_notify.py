"""Notifications (docs/guide/approvals.md#notifications): `wardian app run --notify-command CMD` runs the person's
command with one JSON event on its stdin when a task a person sent ends, in the background (a slow command holds up
nothing), bounded in time, its output not shown, its failures logged by the command's name only. The approval event
is tested where a real agent asks (tests/providers/claude/test_notify.py)."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, cast

import psutil
import pytest

from tests.conftest import AppHandle, app_on_a_fresh_home, short_home, wardian_cmd
from wardian.client import AppClient
from wardian.home import Home
from wardian.model import OPERATOR_NAME

RECORDER = Path(__file__).with_name("notify_recorder.py")

pytestmark = pytest.mark.timeout(120)
BOTH_STORES = True  # the ends a person is told of are read from the store: both backends


def recorder(folder: Path, *more: str) -> str:
    """The `--notify-command` of tests/app/notify_recorder.py writing into `folder`."""
    folder.mkdir(parents=True, exist_ok=True)
    return shlex.join([sys.executable, str(RECORDER), str(folder), *more])


@contextmanager
def notifying_app(command: str, store_url: str | None = None) -> Iterator[AppHandle]:
    with app_on_a_fresh_home(prefix="wn", store_url=store_url, extra_args=("--notify-command", command)) as handle:
        yield handle


def settle() -> None:
    """The interval of a bounded poll, not a synchronisation point."""
    threading.Event().wait(0.05)


def until(check: Callable[[], Any], what: str, rounds: int = 1200) -> Any:
    for _ in range(rounds):
        found = check()
        if found:
            return found
        settle()
    raise AssertionError(f"never: {what}")


def events(folder: Path) -> list[dict[str, Any]]:
    return [json.loads(p.read_bytes()) for p in sorted(folder.glob("*.json"))]


def wait_events(folder: Path, count: int) -> list[dict[str, Any]]:
    return until(lambda: (found if len(found := events(folder)) >= count else None), f"{count} events in {folder}")


def person_task(app: AppHandle, token: str, agent: str, status: str = "done") -> str:
    """A task the operator sends `agent`, answered by the agent (`task/reply`) with `status`."""
    task = app.call("operator/followup", {"target": agent, "message": "check the build"})
    app.call("task/reply", {"session": token, "request_id": task["request_id"], "status": status,
                            "message": "the build is green"})
    return str(task["request_id"])


def app_log(app: AppHandle) -> str:
    return "".join(p.read_text(encoding="utf-8") for p in app.home.log_dir.glob("app.log*"))


def test_a_task_a_person_sent_ends_and_the_command_gets_one_json_event(tmp_path: Path, store_url: str | None) -> None:
    """The event names the task, its agent and how it ended; it carries no reply text. A task one agent sent another
    is no person's: no event."""
    folder = tmp_path / "events"
    with notifying_app(recorder(folder), store_url) as app:
        worker, token = app.add_agent("worker", "claude")
        _, lead = app.add_agent("lead", "claude")
        first = person_task(app, token, "worker")
        between = app.call("task/followup", {"session": lead, "target": "worker", "message": "agent to agent"})
        app.call("task/reply", {"session": token, "request_id": between["request_id"], "status": "done",
                                "message": "the build is green"})
        second = person_task(app, token, "worker", "blocked")
        # The commands run side by side (up to four at once): the recorder names its files by when each one read its
        # event, so the two may land in either order.
        got = wait_events(folder, 2)
        assert sorted((e["task"], e["event"], e["status"]) for e in got) == sorted([
            (first, "task_ended", "done"), (second, "task_ended", "blocked")])
        assert {(e["agent"], e["agent_uuid"]) for e in got} == {("worker", worker["uuid"])}
        assert all(e["record"] for e in got)
        assert all("the build is green" not in json.dumps(e) for e in got)
        assert OPERATOR_NAME not in {e["agent"] for e in got}
        log = app_log(app)
    assert "notify-recorder" not in log  # its stdout and stderr are not shown


def test_a_slow_notify_command_holds_up_no_reply_and_no_other_notification(tmp_path: Path) -> None:
    """Each command runs in a task of its own: while the first still sleeps, the next tasks are answered and their
    events are told, each by a command of its own."""
    folder = tmp_path / "events"
    with notifying_app(recorder(folder, "--sleep", "60")) as app:
        _, token = app.add_agent("worker", "claude")
        tasks = [person_task(app, token, "worker") for _ in range(3)]
        replies = app.call("operator/receive", {"limit": 10})["records"]
        assert [r["request_id"] for r in replies] == tasks
        got = wait_events(folder, 3)
        assert sorted(e["task"] for e in got) == sorted(tasks)
        assert not list(folder.glob("*.done"))  # every command still sleeps


def test_a_notify_command_that_outlives_its_time_is_killed(tmp_path: Path) -> None:
    """Bounded: after 10 s the command is killed (with its process group) and that is logged by its name."""
    folder = tmp_path / "events"
    with notifying_app(recorder(folder, "--sleep", "600")) as app:
        _, token = app.add_agent("worker", "claude")
        person_task(app, token, "worker")
        wait_events(folder, 1)
        pid = int(next(folder.glob("*.pid")).read_text(encoding="utf-8"))
        until(lambda: "still ran after 10 s on task_ended: killed" in app_log(app), "the timeout logged",
              rounds=1200)
        until(lambda: not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE,
              "the command ended")
        assert not list(folder.glob("*.done"))


@pytest.mark.parametrize(("argv", "logged"), [
    (["/nonexistent/wardian-notifier", "--token", "tok-canary-notify-args"], "notify command wardian-notifier could "
                                                                             "not start"),
    (["sh", "-c", "exit 3", "tok-canary-notify-args"], "notify command sh exited with status 3 on task_ended"),
])
def test_a_failing_notify_command_is_logged_by_its_name_only_and_delivery_goes_on(argv: list[str],
                                                                                   logged: str) -> None:
    with notifying_app(shlex.join(argv)) as app:
        _, token = app.add_agent("worker", "claude")
        first = person_task(app, token, "worker")
        until(lambda: logged in app_log(app), "the failure logged")
        second = person_task(app, token, "worker")
        replies = app.call("operator/receive", {"limit": 10})["records"]
        assert [r["request_id"] for r in replies] == [first, second]
        assert "tok-canary-notify-args" not in app_log(app)


@pytest.mark.parametrize("command", ["", "   ", "'unclosed"])
def test_a_notify_command_naming_nothing_is_refused_before_the_home_is_touched(tmp_path: Path, command: str) -> None:
    home = tmp_path / "home"
    env = {"PATH": "/usr/bin:/bin", "WARDIAN_HOME": str(home)}
    for verb in ("run", "start"):
        proc = subprocess.run([*wardian_cmd(), "app", verb, "--notify-command", command, "--json"], env=env,
                              capture_output=True, timeout=60, check=False)
        assert proc.returncode == 2, proc.stderr
        error = json.loads(proc.stderr)["error"] if proc.stderr.startswith(b"{") else None
        assert b"notify_command" in proc.stderr, proc.stderr
        if error is not None:
            assert (error["code"], error["field"]) == ("invalid_arguments", "notify_command")
        assert not home.exists()


def test_the_app_wardian_up_starts_runs_the_team_files_notify_command(tmp_path: Path) -> None:
    """`wardian up` starts the app with the team file's `notify` list (`ensure_app`, which `up` calls), each word
    exactly as the file gives it."""
    folder = tmp_path / "events with space"
    folder.mkdir()
    root = short_home("wu")
    home = Home(root)
    try:
        # In a process of its own, as `wardian up` runs it: the app it starts outlives it.
        notify = (sys.executable, str(RECORDER), str(folder))
        snippet = ("import sys, pathlib; from wardian.cli.team_run import ensure_app; from wardian.home import Home; "
                   "assert ensure_app(Home(pathlib.Path(sys.argv[1])), None, tuple(sys.argv[2:])) is not None")
        subprocess.run([sys.executable, "-c", snippet, str(root), *notify], check=True, timeout=90,
                       env={**os.environ, "WARDIAN_HOME": str(root)})
        app = AppHandle(home, cast(subprocess.Popen[bytes], None), AppClient(home))
        _, token = app.add_agent("worker", "claude")
        task = person_task(app, token, "worker")
        (got,) = wait_events(folder, 1)
        assert (got["event"], got["task"]) == ("task_ended", task)
    finally:
        subprocess.run([*wardian_cmd(), "app", "stop"], env={**os.environ, "WARDIAN_HOME": str(root)},
                       capture_output=True, timeout=60, check=False)
        shutil.rmtree(root, ignore_errors=True)
