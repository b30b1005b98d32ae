"""The fake `codex` of the test suites: faults real Codex will not produce on demand (a lost acknowledgement,
a stale-turn race, an unknown error, an app-server dying mid-turn), spoken in the app-server's real JSON-RPC
lines (docs/providers/codex.md, `wardian.providers.codex.app_server`). Stdlib only; `python -S fake_codex.py` works.

`codex --version` prints `codex-cli $FAKE_CODEX_VERSION` (default 0.171.0, eligible with structured steering).
`codex app-server` serves stdin/stdout until EOF. What it does at each turn request is a policy of two keys:

- `start`: `complete` (answer, then turn/started, the final answer "fake answer" and turn/completed at once),
  `hold` (answer and keep the turn active), `hold_first` (hold the process's first turn, complete later ones),
  `error` (an unknown JSON-RPC error: nothing says whether it was admitted), `lost_ack` (read and log the
  request, then exit without answering), `die` (answer, turn/started, then exit while the turn runs),
  `gone_first` (Codex's "thread not found: ID" for every turn/start on the first thread; a thread/start makes a
  new thread, whose turns complete), or one of `START_ERRORS`: Codex's JSON-RPC error for every turn/start
  (`refused`: "Invalid request: …", -32600; `unsupported`: -32601; `bad_params`: -32602; `parse_error`: -32700), or
  for the process's first turn/start only, later ones completing (`declined_first`: Core's "failed to submit turn
  input: NotIdle", -32603; `overloaded_first`: the transport's "Server overloaded; retry later.", -32001;
  `draining_first`: "Server is draining; retry after reconnecting", -32600; `capacity_first`: "Server is at its root
  turn capacity; retry later.", -32001).
- `steer`: `accept` (only while the expected turn is the active one, else Codex's stale-turn error, as the real
  server does), `stale` (end the active turn, then answer with the stale-turn error) or `error` (an unknown
  error while the expected turn is active).

The policy is the JSON object in the file $RELIABILITY_FAKE_CODEX_CONFIG, read again at every turn request so a
test can change it between phases (tests/reliability), or else the named $FAKE_CODEX_SCENARIO, fixed for the
process (tests/providers/codex): see `SCENARIOS`. A missing key means `complete` / `accept`.

Two logs, outside the app, each optional:
- $FAKE_CODEX_LOG, the transcript: every line read, as JSON plus `_received_ns` (the read's wall clock), written
  before it is handled (`scripts/bench.py` times dispatch with it; tests count submissions in it).
- $RELIABILITY_FAKE_CODEX_LOG, the ledger: one fsynced line per turn request and inject (`ts` in ms, `pid`,
  `method`, `request_ids` found in it, `answer`: ok | stale | error | none, `turn`), the harness's record of
  what was exposed.
"""

from __future__ import annotations

import json
import os
import re
import sys
import time

DEFAULT_VERSION = "0.171.0"
ASK = re.compile(r"ask_[0-9a-f]{27}")
UNKNOWN_FAILURE = {"code": -32603, "message": "fake: internal failure, outcome unknown"}
SCENARIOS: dict[str, dict[str, str]] = {
    "normal": {},  # every turn completes at once
    "lost_ack": {"start": "lost_ack"},  # the first turn/start is read and logged, never answered
    "die_mid_turn": {"start": "die"},  # the first turn/start is accepted, then the app-server dies
    # The first turn stays active; a steer ends it and is answered with the stale-turn error; later turns complete.
    "stale_steer": {"start": "hold_first", "steer": "stale"},
    # The thread the app resumes is not one this Codex has (as for a thread that never had a turn, after a restart).
    "thread_gone": {"start": "gone_first"},
}
# Codex's error answers to turn/start, by `start` policy: (code, message). A `_first` one answers only the process's
# first turn/start; the others answer every one.
START_ERRORS: dict[str, tuple[int, str]] = {
    "refused": (-32600, "Invalid request: unknown variant `bogus`, expected one of `text`, `image`"),
    "unsupported": (-32601, "Method not found"),
    "bad_params": (-32602, "Input exceeds the maximum length of 1048576 characters."),
    "parse_error": (-32700, "Parse error"),
    "declined_first": (-32603, "failed to submit turn input: NotIdle"),
    "overloaded_first": (-32001, "Server overloaded; retry later."),
    "draining_first": (-32600, "Server is draining; retry after reconnecting"),
    "capacity_first": (-32001, "Server is at its root turn capacity; retry later."),
}
SCENARIOS.update({name: {"start": name} for name in START_ERRORS})


def policy() -> dict[str, str]:
    path = os.environ.get("RELIABILITY_FAKE_CODEX_CONFIG", "")
    if not path:
        return SCENARIOS[os.environ.get("FAKE_CODEX_SCENARIO", "normal")]
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError):
        return {}


def send(msg: dict) -> None:
    sys.stdout.write(json.dumps(msg) + "\n")
    sys.stdout.flush()


def transcribe(msg: dict) -> None:
    path = os.environ.get("FAKE_CODEX_LOG", "")
    if path:
        with open(path, "a", encoding="utf-8") as f:
            f.write(json.dumps({**msg, "_received_ns": time.time_ns()}) + "\n")


def ledger(method: str, params: dict, answer: str, turn: str | None) -> None:
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


def exit_now() -> None:
    """The app-server vanishes: no answer, no turn end, no cleanup."""
    sys.stdout.flush()
    os._exit(0)


class Server:
    def __init__(self, version: str) -> None:
        self.version = version
        self.thread = f"thr-{os.getpid()}"
        self.threads = 0
        self.first_thread: str | None = None
        self.declined = False
        self.active: str | None = None
        self.turns = 0

    def complete(self, turn: str, status: str = "completed") -> None:
        item = {"type": "agentMessage", "id": f"m-{turn}", "text": "fake answer", "phase": "final_answer"}
        if status == "completed":
            send({"method": "item/completed", "params": {"threadId": self.thread, "turnId": turn, "item": item}})
        send({"method": "turn/completed", "params": {"threadId": self.thread, "turn": {
            "id": turn, "items": [item] if status == "completed" else [], "status": status, "error": None}}})
        if self.active == turn:
            self.active = None

    def stale(self, id_: int, expected: str | None) -> None:
        """Codex's stale-turn rejection (docs/providers/codex.md#the-app-server-protocol)."""
        message = ("no active turn to steer" if self.active is None
                   else f"expected active turn id `{expected}` but found `{self.active}`")
        send({"id": id_, "error": {"code": -32600, "message": message}})

    def handle(self, msg: dict) -> None:
        method, id_, params = msg.get("method"), msg.get("id"), msg.get("params") or {}
        if id_ is None:
            return  # a notification (initialized)
        if method == "initialize":
            client = (params.get("clientInfo") or {}).get("name", "fake")
            send({"id": id_, "result": {"userAgent": f"{client}/{self.version} (fake)",
                                        "codexHome": os.environ.get("CODEX_HOME", ""), "platformFamily": "unix"}})
        elif method in ("thread/start", "thread/resume"):
            if method == "thread/start":
                self.threads += 1
                self.thread = f"thr-{os.getpid()}-{self.threads}"
            else:
                self.thread = params.get("threadId") or self.thread
            self.first_thread = self.first_thread or self.thread
            send({"id": id_, "result": {"thread": {"id": self.thread, "status": {"type": "idle"}}}})
        elif method == "turn/start":
            self.turn_start(id_, params)
        elif method == "turn/steer":
            self.turn_steer(id_, params)
        elif method == "thread/inject_items":
            ledger(method, params, "ok", None)
            send({"id": id_, "result": {}})
        elif method == "turn/interrupt":
            self.turn_interrupt(id_, params)
        else:
            send({"id": id_, "error": {"code": -32601, "message": f"fake codex does not handle {method}"}})

    def turn_start(self, id_: int, params: dict) -> None:
        mode = policy().get("start", "complete")
        if mode == "lost_ack":
            ledger("turn/start", params, "none", None)
            exit_now()
        if mode == "error":
            ledger("turn/start", params, "error", None)
            send({"id": id_, "error": UNKNOWN_FAILURE})
            return
        if mode == "gone_first" and params.get("threadId") == self.first_thread:
            ledger("turn/start", params, "gone", None)
            send({"id": id_, "error": {"code": -32600, "message": f"thread not found: {params.get('threadId')}"}})
            return
        if mode in START_ERRORS and not (mode.endswith("_first") and self.declined):
            self.declined = True
            code, message = START_ERRORS[mode]
            ledger("turn/start", params, "declined" if mode.endswith("_first") else "refused", None)
            send({"id": id_, "error": {"code": code, "message": message}})
            return
        self.turns += 1
        turn = f"turn-{os.getpid()}-{self.turns}"
        ledger("turn/start", params, "ok", turn)
        self.active = turn
        send({"id": id_, "result": {"turn": {"id": turn, "status": "inProgress", "items": []}}})
        send({"method": "turn/started", "params": {"threadId": self.thread, "turn": {"id": turn}}})
        if mode == "die":
            exit_now()
        completes = mode in ("complete", "gone_first") or (mode in START_ERRORS and mode.endswith("_first"))
        if completes or (mode == "hold_first" and self.turns > 1):
            self.complete(turn)

    def turn_steer(self, id_: int, params: dict) -> None:
        mode = policy().get("steer", "accept")
        expected = params.get("expectedTurnId")
        if mode == "stale" and self.active is not None:
            ledger("turn/steer", params, "stale", expected)
            self.complete(self.active)  # the turn ends just before the steer arrives
            self.stale(id_, expected)
        elif self.active is None or self.active != expected:
            ledger("turn/steer", params, "stale", expected)
            self.stale(id_, expected)
        elif mode == "error":
            ledger("turn/steer", params, "error", expected)
            send({"id": id_, "error": UNKNOWN_FAILURE})
        else:
            ledger("turn/steer", params, "ok", expected)
            send({"id": id_, "result": {"turnId": expected}})

    def turn_interrupt(self, id_: int, params: dict) -> None:
        turn = params.get("turnId")
        if self.active is None:
            send({"id": id_, "error": {"code": -32600, "message": "no active turn to interrupt"}})
        elif self.active != turn:
            send({"id": id_, "error": {"code": -32600,
                                       "message": f"expected active turn id {turn} but found {self.active}"}})
        else:
            send({"id": id_, "result": {}})
            self.complete(self.active, "interrupted")


def main() -> int:
    version = os.environ.get("FAKE_CODEX_VERSION", DEFAULT_VERSION)
    if "--version" in sys.argv[1:]:
        print(f"codex-cli {version}")
        return 0
    if "app-server" not in sys.argv[1:]:
        print("fake codex: only --version and app-server", file=sys.stderr)
        return 2
    scenario = os.environ.get("FAKE_CODEX_SCENARIO", "normal")
    if scenario not in SCENARIOS and not os.environ.get("RELIABILITY_FAKE_CODEX_CONFIG"):
        print(f"fake codex: unknown scenario {scenario!r}; known: {', '.join(SCENARIOS)}", file=sys.stderr)
        return 2
    server = Server(version)
    for line in sys.stdin:
        if line.strip():
            msg = json.loads(line)
            transcribe(msg)
            server.handle(msg)
    return 0


if __name__ == "__main__":
    sys.exit(main())
