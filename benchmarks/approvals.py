"""Approvals (opt-in: `--only approvals`) on the cheapest real agent that asks: real Pi (pinned, from npm) on the
scripted model under `--approvals person`, wardian's extension confirming before Pi's `bash` (docs/guide/approvals.md):

- provider request -> visible: Pi writes its confirmation request (`extension_ui_request`) -> the first
  `approval/list` that returns it, the bench polling back to back as a person's client would.
- answer -> provider receives: the bench calls `approval/answer` (allow) -> the app's `extension_ui_response`
  reaches Pi.
- beside both, in the same run and interleaved with them, the app's own round trips on the same connection: a durable
  write's (`message/send` to an idle agent: one commit) and a read's (`approval/list` while nothing is pending).

Goal (docs/guide/approvals.md#speed): each p99 <= 2 x the app's own round trip, judged on the durable write's: a
request is visible only once its record is committed, and an answer reaches the provider only after its end is
(the exactly-once order), so each figure holds one commit, as `message/send` does; a read commits nothing, and under
load a commit (an fsync) costs several times a read's whole round trip. The ratio to the read is printed for scale.

Pi's side is read by a relay between Pi and the app (the agent's executable, `WARDIAN_PI`, is a small script that
starts Pi and copies its input and output): it stamps each confirmation request it reads from Pi and each answer it
reads from the app on the monotonic clock the bench reads too (CLOCK_MONOTONIC, shared by the processes of a
host). The relay's hop is counted in the first figure (the request reaches the app through it), not in the second.
The stamps reach the bench through a named pipe, not a file: a file's appended block would be flushed by the very
commit that records the request (ext4 orders an fsync after the data written before it), which no real agent's
approval pays.

The scripted model waits `THINK_S` before it answers with the tool call, as any model takes its time: answered at
once, Pi would ask while the app is still committing the turn's own start (the task bound to its turn, the agent
active), and the figure would measure that queue (docs/guide/approvals.md#speed).
"""

from __future__ import annotations

import os
import shutil
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks.apps import add_agents, bench_app, new_home
from benchmarks.codex import followup, wait_reply
from benchmarks.config import QUICK, Config
from benchmarks.figures import emit, latency_fields, ms, pct
from benchmarks.pi import find_pi, settings
from wardian.client import AppClient

WARM = 2
LIST_ROUNDS = 50
"""Round trips of `approval/list` with nothing pending, taken after each approval: the app's own round trip."""
DEADLINE_S = 60.0
THINK_S = 0.02
"""How long the scripted model takes before it answers with the tool call (a real model: seconds)."""

RELAY = '''#!{python}
"""Pi between the app and a tap: stamps the confirmation requests Pi writes and the answers it is given."""
import os, subprocess, sys, threading, time
PI, TAP = {pi!r}, {tap!r}
if sys.argv[1:] == ["--version"]:
    os.execv(PI, [PI, "--version"])
# The app hands Pi its session on a descriptor it names in a `*_FD` variable: Pi gets it as it would.
fds = tuple(int(v) for k, v in os.environ.items() if k.endswith("_FD") and v.isdigit())
proc = subprocess.Popen([PI, *sys.argv[1:]], stdin=subprocess.PIPE, stdout=subprocess.PIPE, bufsize=0,
                        pass_fds=fds)
for fd in fds:
    os.close(fd)
lock = threading.Lock()
tap = open(TAP, "a", buffering=1, encoding="utf-8")

def pump(src, dst, marker, kind):
    pending = b""
    while chunk := os.read(src, 1 << 16):
        now = time.monotonic_ns()
        view = memoryview(chunk)
        while view:
            view = view[os.write(dst, view):]
        pending += chunk
        *lines, pending = pending.split(b"\\n")
        for line in lines:
            if marker in line and (kind == "answer" or b'"confirm"' in line):
                with lock:
                    tap.write(f"{{kind}} {{now}}\\n")
    os.close(dst)

threading.Thread(target=pump, args=(0, proc.stdin.fileno(), b"extension_ui_response", "answer"), daemon=True).start()
pump(proc.stdout.fileno(), 1, b"extension_ui_request", "request")
sys.exit(proc.wait())
'''


def bench_approvals(cfg: Config) -> None:
    """Pi's approvals through the app beside the app's own round trip, interleaved."""
    from wardian_harness.models.scripted_model import ScriptedModel

    n = 10 if cfg is QUICK else 200  # a p99 of 200: the third largest, not the second of 60
    root = new_home()
    try:
        tap = Tap(root / "pi-tap")
        relay = root / "pi-relay"
        relay.write_text(RELAY.format(python=sys.executable, pi=find_pi(), tap=str(tap.path)), encoding="utf-8")
        relay.chmod(0o755)
        with ScriptedModel() as model, bench_app(root, {"WARDIAN_PI": str(relay)}) as app, \
                AppClient(app.home) as client:
            (_, lead), = add_agents(client, "lead", 1)
            client.call("agent/add", {"name": "worker0", "provider": "pi"})
            script = model.agent("worker0")
            client.call("agent/start", {"agent": "worker0", "approvals": "person",
                                        "config": settings(script.base_url)}, timeout_s=300)
            (_, sink), = add_agents(client, "sink", 1)
            visible, received, listed, sent = _rounds(client, script, (lead, sink), tap, n)
        tap.close()
    finally:
        shutil.rmtree(root, ignore_errors=True)
    list_p99, send_p99 = pct(listed, 0.99), pct(sent, 0.99)
    emit("approvals_app_roundtrip", **latency_fields([listed]), unit="ms", method="approval/list",
         how=f"approval/list with nothing pending on the bench's connection, {LIST_ROUNDS} after each approval: a "
             "read's round trip (no commit), for scale")
    emit("approvals_send_roundtrip", **latency_fields([sent]), unit="ms", method="message/send",
         how=f"message/send to an idle agent, {LIST_ROUNDS} after each approval: a durable write's round trip (one "
             "commit, as recording an approval and ending it each are): the app's own round trip the goal is judged on")
    for name, values, how in (
            ("approvals_request_to_visible", visible,
             "Pi writes its confirmation request (stamped by a relay between Pi and the app) -> the first "
             "approval/list that returns it (polled back to back)"),
            ("approvals_answer_to_provider", received,
             "approval/answer called (allow) -> the app's extension_ui_response read by the relay, on its way to "
             "Pi")):
        ratio = pct(values, 0.99) / send_p99
        emit(name, **latency_fields([values]), unit="ms", send_roundtrip_p99_ms=ms(send_p99),
             ratio_to_send_roundtrip=round(ratio, 2), roundtrip_p99_ms=ms(list_p99),
             ratio_to_roundtrip=round(pct(values, 0.99) / list_p99, 2),
             target="p99 <= 2 x approvals_send_roundtrip p99 (the app's durable write, one commit as here)",
             met=ratio <= 2, how=how,
             agent=f"real Pi on the scripted model (answering after {THINK_S * 1000:g} ms), --approvals person, one "
                   f"bash call a task (the first {WARM} not counted)")


def _rounds(client: AppClient, script: Any, tokens: tuple[str, str], tap: Tap,
            n: int) -> tuple[list[float], list[float], list[float], list[float]]:
    from wardian_harness.models.scripted_model import Message, ToolCall

    call = ToolCall("bash", {"command": "true"}, namespace=None)

    def thinking(_body: object) -> ToolCall:
        time.sleep(THINK_S)  # on the scripted model's handler thread: this request's answer only
        return call

    lead, sink = tokens
    visible: list[float] = []
    received: list[float] = []
    listed: list[float] = []
    sent: list[float] = []
    for i in range(n + WARM):
        script.add(thinking, Message(f"ran {i}"))
        rid = followup(client, lead, f"run true {i}")
        approval_id, seen = _first_visible(client)
        asked = tap.stamp("request", i)
        answered = time.monotonic_ns()
        client.call("approval/answer", {"approval_id": approval_id, "decision": "allow"})
        reached = tap.stamp("answer", i)
        wait_reply(client, lead, rid)
        for _ in range(LIST_ROUNDS):
            t0 = time.monotonic_ns()
            if client.call("approval/list", {})["approvals"]:
                raise RuntimeError("an approval is pending after its task ended")
            if i >= WARM:
                listed.append((time.monotonic_ns() - t0) / 1e9)
            t0 = time.monotonic_ns()
            client.call("message/send", {"session": sink, "target": "lead0", "message": "bench"})
            if i >= WARM:
                sent.append((time.monotonic_ns() - t0) / 1e9)
        if i >= WARM:
            visible.append((seen - asked) / 1e9)
            received.append((reached - answered) / 1e9)
    return visible, received, listed, sent


def _first_visible(client: AppClient) -> tuple[str, int]:
    """The pending approval's id and when the call that first returned it did (bounded)."""
    deadline = time.monotonic() + DEADLINE_S
    while time.monotonic() < deadline:
        found = client.call("approval/list", {})["approvals"]
        if found:
            return str(found[0]["approval_id"]), time.monotonic_ns()
    raise RuntimeError(f"no approval appeared within {DEADLINE_S} s")


class Tap:
    """The relay's stamps, read from a named pipe at `path` only when the bench asks for one: never while it waits
    for an approval to show, where a thread of its own woken by each stamp would take the interpreter from the
    poller at the very moment measured."""

    def __init__(self, path: Path) -> None:
        os.mkfifo(path, 0o600)
        self.path = path
        # Non-blocking: opened before the relay opens it to write, and read only what is there.
        self._fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
        self._pending = b""
        self._stamps: dict[str, list[int]] = {"request": [], "answer": []}

    def stamp(self, kind: str, index: int) -> int:
        """The relay's stamp of the `index`-th line of `kind` (bounded wait: it writes it as the line passes)."""
        deadline = time.monotonic() + DEADLINE_S
        while len(self._stamps[kind]) <= index:
            if time.monotonic() > deadline:
                raise RuntimeError(f"the relay stamped no {kind} #{index} within {DEADLINE_S} s")
            try:
                chunk = os.read(self._fd, 1 << 16)
            except BlockingIOError:
                chunk = b""
            if not chunk:  # nothing yet (or the relay has not opened it yet)
                time.sleep(0.001)  # a bounded poll of a pipe another process writes to, not a synchronisation point
                continue
            self._pending += chunk
            *lines, self._pending = self._pending.split(b"\n")
            for line in lines:
                name, ns = line.decode().split()
                self._stamps[name].append(int(ns))
        return self._stamps[kind][index]

    def close(self) -> None:
        os.close(self._fd)
