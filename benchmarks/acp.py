"""ACP dispatch (opt-in: `--only acp`): a real Qwen Code agent of the app on the scripted model, beside Qwen Code's own
floor in the same run: a minimal ACP client (newline-delimited JSON-RPC over the stdio of a fresh `qwen --acp` of the
same binary, the same flags and the same kind of private home, on its own script of the same model).

- `acp_admitted_to_first_model_request`: task receipt returned -> the scripted model received the turn's first
  request (its `received_at_ms`, whole milliseconds), agent idle; beside `acp_raw_prompt_to_first_model_request`:
  the raw client writes `session/prompt` -> the same. Interleaved, so both meet the same load.
- `acp_cold_start_to_idle`: `agent/start` called -> answered (the process started, `initialize`, `session/new`
  with wardian's MCP server, and that server's tools listed to the agent: `session/announce`); beside
  `acp_raw_cold_start`: the raw client's spawn -> `initialize` and `session/new` answered (no MCP server: the
  agent's own floor; the app's figure also holds its MCP server's start, which Qwen Code connects after
  `session/new`).

Not measured: receipt -> `session/prompt` written (the app keeps no timing record of ACP writes).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

from benchmarks.apps import add_agents, bench_app, new_home, plain_env
from benchmarks.codex import followup, wait_reply
from benchmarks.config import QUICK, Config
from benchmarks.figures import emit, latency_fields, ms, pct
from wardian.client import AppClient

WARM = 2
"""Turns of each side not counted."""
TIMEOUT_S = 120.0


def bench_acp(cfg: Config) -> None:
    from wardian_harness.models.scripted_model import ScriptedModel
    from wardian_harness.providers.acp_home import acp_launch, find_acp_cli

    n = 8 if cfg is QUICK else 30
    qwen = find_acp_cli("qwen").executable
    root = new_home()
    try:
        with ScriptedModel() as model, bench_app(root, {"WARDIAN_QWEN": str(qwen)}) as app, \
                AppClient(app.home) as client:
            (_, lead), = add_agents(client, "lead", 1)
            client.call("agent/add", {"name": "worker0", "provider": "qwen"})
            script, floor = model.agent("worker0"), model.agent("floor")
            config, env = acp_launch("qwen", script.base_url)
            t0 = time.perf_counter()
            client.call("agent/start", {"agent": "worker0", "config": config, "env": env}, timeout_s=300)
            cold = time.perf_counter() - t0
            raw = RawAcp(str(qwen), floor.base_url, root / "raw")
            try:
                ours, theirs = _interleaved(client, lead, script, floor, raw, n)
            finally:
                raw.stop()
    finally:
        shutil.rmtree(root, ignore_errors=True)
    _emit(ours, theirs, cold, raw.cold)


def _first_request_s(script: Any, before: int, start_ms: int) -> float:
    """Seconds from `start_ms` (Unix ms) to the first turn request (not a side request) after the first `before`."""
    deadline = time.monotonic() + TIMEOUT_S
    while time.monotonic() < deadline:
        turn = [r for r in script.requests[before:] if r.answered_by != "side"]
        if turn:
            return (turn[0].received_at_ms - start_ms) / 1000
        time.sleep(0.005)
    raise RuntimeError("no model request came")


def _interleaved(client: AppClient, lead: str, script: Any, floor: Any, raw: RawAcp,
                 n: int) -> tuple[list[float], list[float]]:
    from wardian_harness.models.scripted_model import Message

    ours: list[float] = []
    theirs: list[float] = []
    for i in range(n + WARM):
        script.add(Message(f"answer {i}"))
        before = len(script.requests)
        rid = followup(client, lead, f"q{i}")
        admitted_ms = time.time_ns() // 1_000_000
        wait_reply(client, lead, rid)
        app_side = _first_request_s(script, before, admitted_ms)
        floor.add(Message(f"raw answer {i}"))
        before = len(floor.requests)
        sent_ms = raw.prompt(f"raw q{i}")
        raw_side = _first_request_s(floor, before, sent_ms)
        if i >= WARM:
            ours.append(app_side)
            theirs.append(raw_side)
    return ours, theirs


class RawAcp:
    """A fresh `qwen --acp` spoken to directly: `initialize`, `session/new`, then one `session/prompt` per turn."""

    def __init__(self, qwen: str, base_url: str, home: Path) -> None:
        for sub in ("home", "tmp"):
            (home / sub).mkdir(parents=True, exist_ok=True)
        env = {**plain_env(), "QWEN_HOME": str(home / "home"), "TMPDIR": str(home / "tmp"),
               "QWEN_USAGE_STATISTICS_ENABLED": "false", "OPENAI_BASE_URL": base_url,
               "OPENAI_MODEL": "scripted-model", "OPENAI_API_KEY": "sk-scripted-dummy"}
        env.pop("XDG_RUNTIME_DIR", None)
        (home / "work").mkdir(exist_ok=True)
        self._ids = 0
        t0 = time.perf_counter()
        self._proc = subprocess.Popen([qwen, "--acp", "--approval-mode", "default"], env=env, cwd=home / "work",
                                      stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                      start_new_session=True)
        self.call("initialize", {"protocolVersion": 1, "clientInfo": {"name": "bench", "version": "1"},
                                 "clientCapabilities": {"fs": {"readTextFile": False, "writeTextFile": False},
                                                        "terminal": False}})
        self.session = str(self.call("session/new", {"cwd": str(home / "work"), "mcpServers": []})["sessionId"])
        self.cold = time.perf_counter() - t0

    def _send(self, message: dict[str, Any]) -> None:
        assert self._proc.stdin is not None
        self._proc.stdin.write(json.dumps(message).encode() + b"\n")
        self._proc.stdin.flush()

    def call(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """One request, answered; the agent's own requests meanwhile are answered as the app would (nothing
        queued, permissions rejected)."""
        self._ids += 1
        ident = self._ids
        self._send({"jsonrpc": "2.0", "id": ident, "method": method, "params": params})
        assert self._proc.stdout is not None
        while True:
            line = self._proc.stdout.readline()
            if not line:
                raise RuntimeError(f"qwen --acp ended during {method}")
            message = json.loads(line)
            if message.get("id") == ident and "method" not in message:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return dict(message.get("result") or {})
            if "method" in message and "id" in message:
                self._send({"jsonrpc": "2.0", "id": message["id"], "result": _answer(message["method"])})

    def prompt(self, text: str) -> int:
        """Write one `session/prompt` and wait for its answer; the Unix ms just before the write."""
        sent_ms = time.time_ns() // 1_000_000
        self.call("session/prompt", {"sessionId": self.session, "prompt": [{"type": "text", "text": text}]})
        return sent_ms

    def stop(self) -> None:
        if self._proc.stdin is not None:
            self._proc.stdin.close()
        try:
            self._proc.wait(10)
        except subprocess.TimeoutExpired:
            os.killpg(self._proc.pid, 9)
            self._proc.wait(10)


def _answer(method: str) -> dict[str, Any]:
    if method == "craft/drainMidTurnQueue":
        return {"messages": [], "hasQueuedPrompt": False}
    return {"outcome": {"outcome": "cancelled"}}


def _emit(ours: list[float], theirs: list[float], cold: float, raw_cold: float) -> None:
    ratio = pct(ours, 0.5) / pct(theirs, 0.5)
    emit("acp_admitted_to_first_model_request", **latency_fields([ours]), unit="ms",
         target="p50 <= 1.2 x acp_raw_prompt_to_first_model_request p50", met=ratio <= 1.2,
         ratio_to_floor=round(ratio, 3), floor_p50_ms=ms(pct(theirs, 0.5)),
         how="task receipt returned -> the scripted model received the turn's first request (ms resolution), "
             f"real Qwen Code agent idle (the first {WARM} turns not counted)")
    emit("acp_raw_prompt_to_first_model_request", **latency_fields([theirs]), unit="ms",
         how="a minimal ACP client writes session/prompt to its own qwen --acp (same binary and flags) -> the "
             "model received the turn's first request; interleaved with the app's tasks")
    cold_ratio = cold / raw_cold
    emit("acp_cold_start_to_idle", value_ms=ms(cold), unit="ms", target="<= 1.2 x acp_raw_cold_start",
         met=cold_ratio <= 1.2, ratio_to_floor=round(cold_ratio, 3), floor_ms=ms(raw_cold), n=1,
         how="agent/start called -> answered: qwen --acp started, initialize, session/new with wardian's MCP server, "
             "and that server's tools listed to the agent (session/announce)")
    emit("acp_raw_cold_start", value_ms=ms(raw_cold), unit="ms", n=1,
         how="a minimal ACP client spawns qwen --acp -> initialize and session/new (no MCP server) answered")
