"""A fake `codex` for the reliability suites: faults real Codex will not produce on demand (a lost
acknowledgement, a stale-turn race, an unknown error), spoken in the app-server's real JSON-RPC lines
(codex-offline.md §3, `wardian.providers.codex.app_server`). Stdlib only; run as `python -S fake_codex.py`.

`codex --version` prints an eligible version with structured steering. `codex app-server` serves stdin/stdout
until EOF. Its policy is the JSON object in $RELIABILITY_FAKE_CODEX_CONFIG, read again at every turn request
so a test can change it between phases:

- `start`: `complete` (answer, then turn/started, the final answer and turn/completed at once), `hold` (answer
  and keep the turn active), `error` (an unknown JSON-RPC error: nothing says whether it was admitted) or
  `lost_ack` (read and log the request, then exit without answering).
- `steer`: `accept` (only while the expected turn is the active one, else Codex's stale-turn error, as the
  real server does) or `stale` (end the active turn, then answer with the stale-turn error).

Every turn request is appended to $RELIABILITY_FAKE_CODEX_LOG as one JSON line (`ts` in ms, `pid`, `method`,
`request_ids` found in it, `answer`: ok | stale | error | none), the harness's record of what was exposed.
"""

from __future__ import annotations

import json
import os
import re
import sys
import time

VERSION = "codex-cli 0.200.0"
ASK = re.compile(r"ask_[0-9a-f]{27}")


def policy() -> dict:
    path = os.environ.get("RELIABILITY_FAKE_CODEX_CONFIG", "")
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError):
        return {}


def send(msg: dict) -> None:
    sys.stdout.write(json.dumps(msg) + "\n")
    sys.stdout.flush()


def log(method: str, params: dict, answer: str, turn: str | None) -> None:
    path = os.environ.get("RELIABILITY_FAKE_CODEX_LOG", "")
    if not path:
        return
    entry = {"ts": time.time_ns() // 1_000_000, "pid": os.getpid(), "method": method,
             "request_ids": sorted(set(ASK.findall(json.dumps(params)))), "answer": answer, "turn": turn}
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(fd, (json.dumps(entry) + "\n").encode("utf-8"))
        os.fsync(fd)
    finally:
        os.close(fd)


class Server:
    def __init__(self) -> None:
        self.thread = f"thr-{os.getpid()}"
        self.active: str | None = None
        self.turns = 0

    def complete(self, turn: str, status: str = "completed") -> None:
        item = {"type": "agentMessage", "id": f"m-{turn}", "text": f"fake answer of {turn}", "phase": "final_answer"}
        if status == "completed":
            send({"method": "item/completed", "params": {"threadId": self.thread, "turnId": turn, "item": item}})
        send({"method": "turn/completed", "params": {"threadId": self.thread, "turn": {
            "id": turn, "items": [item] if status == "completed" else [], "status": status, "error": None}}})
        if self.active == turn:
            self.active = None

    def stale(self, id_: int, expected: str) -> None:
        send({"id": id_, "error": {"code": -32600,
                                   "message": f"expected active turn id {expected} but found {self.active}"}})

    def handle(self, msg: dict) -> None:
        method, id_, params = msg.get("method"), msg.get("id"), msg.get("params") or {}
        if id_ is None:
            return  # a notification (initialized)
        if method == "initialize":
            send({"id": id_, "result": {"userAgent": "fake-codex/0.200.0"}})
        elif method in ("thread/start", "thread/resume"):
            self.thread = params.get("threadId") or self.thread
            send({"id": id_, "result": {"thread": {"id": self.thread}}})
        elif method == "turn/start":
            self.turn_start(id_, params)
        elif method == "turn/steer":
            self.turn_steer(id_, params)
        elif method == "thread/inject_items":
            log(method, params, "ok", None)
            send({"id": id_, "result": {}})
        elif method == "turn/interrupt":
            send({"id": id_, "result": {}})
            if self.active == params.get("turnId"):
                self.complete(self.active, "interrupted")
        else:
            send({"id": id_, "error": {"code": -32601, "message": f"fake codex does not handle {method}"}})

    def turn_start(self, id_: int, params: dict) -> None:
        mode = policy().get("start", "complete")
        if mode == "lost_ack":
            log("turn/start", params, "none", None)
            os._exit(0)
        if mode == "error":
            log("turn/start", params, "error", None)
            send({"id": id_, "error": {"code": -32603, "message": "fake: internal failure, outcome unknown"}})
            return
        self.turns += 1
        turn = f"turn-{os.getpid()}-{self.turns}"
        log("turn/start", params, "ok", turn)
        self.active = turn
        send({"id": id_, "result": {"turn": {"id": turn, "status": "inProgress", "items": []}}})
        send({"method": "turn/started", "params": {"threadId": self.thread, "turn": {"id": turn}}})
        if mode == "complete":
            self.complete(turn)

    def turn_steer(self, id_: int, params: dict) -> None:
        mode = policy().get("steer", "accept")
        expected = params.get("expectedTurnId")
        if mode == "stale" and self.active is not None:
            log("turn/steer", params, "stale", expected)
            self.complete(self.active)
            self.stale(id_, expected)
        elif self.active is None or self.active != expected:
            log("turn/steer", params, "stale", expected)
            self.stale(id_, expected)
        elif mode == "error":
            log("turn/steer", params, "error", expected)
            send({"id": id_, "error": {"code": -32603, "message": "fake: internal failure, outcome unknown"}})
        else:
            log("turn/steer", params, "ok", expected)
            send({"id": id_, "result": {"turnId": expected}})


def main() -> int:
    if "--version" in sys.argv[1:]:
        print(VERSION)
        return 0
    if "app-server" not in sys.argv[1:]:
        print("fake codex: only --version and app-server", file=sys.stderr)
        return 2
    server = Server()
    for line in sys.stdin:
        if line.strip():
            server.handle(json.loads(line))
    return 0


if __name__ == "__main__":
    sys.exit(main())
