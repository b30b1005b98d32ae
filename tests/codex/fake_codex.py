"""A fake `codex` for faults real Codex will not produce on demand (issue 4). It speaks the app-server's
real JSON-RPC lines (codex-offline.md §3) over stdio and follows a scenario named by FAKE_CODEX_SCENARIO:

- `lost_ack`: the first `turn/start` is read and logged, then the process exits without answering.
- `stale_steer`: the first `turn/start` opens turn T1 and keeps it active; a `turn/steer` is answered with
  Codex's stale-turn error and T1 completes right after; later `turn/start`s complete at once.
- `die_mid_turn`: `turn/start` is accepted (turn started), then the process exits before the turn ends.
- `normal`: every `turn/start` completes at once with the final answer "fake answer".

FAKE_CODEX_VERSION sets what `--version` prints (default 0.171.0).
Every request line is appended to FAKE_CODEX_LOG (JSON lines) so tests can count submissions.
"""

from __future__ import annotations

import itertools
import json
import os
import sys
import time

SCENARIO = os.environ.get("FAKE_CODEX_SCENARIO", "normal")
LOG = os.environ.get("FAKE_CODEX_LOG", "")
_turns = itertools.count(1)


def send(msg: dict) -> None:
    sys.stdout.write(json.dumps(msg) + "\n")
    sys.stdout.flush()


def log(msg: dict) -> None:
    if LOG:
        with open(LOG, "a", encoding="utf-8") as f:
            f.write(json.dumps({**msg, "_received_ns": time.time_ns()}) + "\n")


def complete(thread: str, turn: str, text: str = "fake answer") -> None:
    item = {"type": "agentMessage", "id": f"m-{turn}", "text": text, "phase": "final_answer"}
    send({"method": "item/completed", "params": {"threadId": thread, "turnId": turn, "item": item}})
    send({"method": "turn/completed", "params": {"threadId": thread, "turn": {
        "id": turn, "items": [item], "status": "completed", "error": None}}})


def main() -> int:
    if sys.argv[1:] == ["--version"]:
        print(f"codex-cli {os.environ.get('FAKE_CODEX_VERSION', '0.171.0')}")
        return 0
    thread = "thread-fake-1"
    active: str | None = None
    started = 0
    for line in sys.stdin:
        msg = json.loads(line)
        log(msg)
        method, rid, params = msg.get("method"), msg.get("id"), msg.get("params") or {}
        if rid is None:
            continue
        if method == "initialize":
            send({"id": rid, "result": {"userAgent": "fake/0.171.0", "codexHome": "", "platformFamily": "unix"}})
        elif method in ("thread/start", "thread/resume"):
            thread = params.get("threadId", thread)
            send({"id": rid, "result": {"thread": {"id": thread, "status": {"type": "idle"}}}})
        elif method == "turn/start":
            started += 1
            if SCENARIO == "lost_ack":
                return 0  # read, never answered: the acknowledgement is lost
            turn = f"turn-{next(_turns)}"
            send({"method": "turn/started", "params": {"threadId": thread, "turn": {"id": turn}}})
            send({"id": rid, "result": {"turn": {"id": turn, "status": "inProgress"}}})
            if SCENARIO == "die_mid_turn":
                return 0  # the app-server dies while the accepted turn runs
            if SCENARIO == "stale_steer" and started == 1:
                active = turn
            else:
                complete(thread, turn)
        elif method == "turn/steer":
            send({"id": rid, "error": {"code": -32600, "message": "no active turn to steer"}})
            if active is not None:
                complete(thread, active)
                active = None
        elif method == "thread/inject_items":
            send({"id": rid, "result": {}})
        else:
            send({"id": rid, "error": {"code": -32601, "message": f"fake codex: {method} not supported"}})
    return 0


if __name__ == "__main__":
    sys.exit(main())
