"""ACP dispatch (opt-in: `--only acp`): a real Qwen Code agent of the app on the scripted model, beside two floors of
Qwen Code in the same run, each a minimal ACP client (newline-delimited JSON-RPC over the stdio of a fresh `qwen
--acp` of the same binary, the same flags and the same kind of private home, on its own script of the same model):

- the raw floor: `session/new` with no MCP server (the agent's own floor);
- the MCP floor: `session/new` with wardian's MCP server in `mcpServers` (the entry the app gives its agents, with the
  session of an agent of the same app that the app does not run), and ready only once that server said it listed its
  tools (`session/announce`, seen in the app's log): what any client must wait for before a task may use the tools.

Each floor's turn is the app's turn: it prompts the text the app wrote for the same task (the app's own envelope,
`wardian.providers.delivery.task_text`, of the task's request id, sender and text) and its model answers with the
same text, so at every turn a floor's conversation holds the same earlier turns as the app's agent's. The bench
checks that on the model's side: each floor's first request of a turn carries the same messages after the system
prompt as the app's (the paths in the agent's context aside), else it stops.

Metrics:
- `acp_admitted_to_first_model_request`: task receipt returned -> the scripted model received the turn's first
  request (its `received_at_ns`), agent idle; beside `acp_raw_prompt_to_first_model_request`
  and `acp_raw_mcp_prompt_to_first_model_request`: a floor writes `session/prompt` -> the same. Interleaved, so all
  three meet the same load.
- where the app's turn goes, from its timing record (`WARDIAN_ACP_TIMINGS`, wardian.providers.acp.timings):
  receipt -> `session/prompt` written, written -> the first model request, the first model request -> the
  `stopReason` read, the `stopReason` read -> the requester received the reply.
- `acp_cold_start_to_idle`: `agent/start` called -> answered (the process started, `initialize`, `session/new`
  with wardian's MCP server, its tools listed to the agent: `session/announce`), the median of a few starts of
  fresh agents; beside `acp_raw_cold_start` (spawn -> `initialize` and `session/new` answered) and
  `acp_raw_mcp_cold_start` (the same, then wardian's MCP server announced), each interleaved with the app's, and
  the app's start split into its steps (`acp_cold_start_steps`).
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import time
from pathlib import Path
from typing import Any

from benchmarks.apps import add_agents, bench_app, new_home, plain_env
from benchmarks.codex import followup, wait_reply
from benchmarks.config import QUICK, Config
from benchmarks.figures import emit, latency_fields, ms, pct
from wardian.client import AppClient
from wardian.model import Party
from wardian.providers.base import TaskDelivery
from wardian.providers.delivery import task_text

WARM = 2
"""Turns of each side not counted."""
TIMEOUT_S = 120.0
ANNOUNCED = "announced its MCP server for generation"
"""The app's log line for a `session/announce` of a generation it does not run (the MCP floor's)."""


def bench_acp(cfg: Config) -> None:
    from wardian_harness.models.scripted_model import ScriptedModel
    from wardian_harness.providers.acp_home import find_acp_cli

    n, starts = (8, 1) if cfg is QUICK else (30, 3)
    qwen = str(find_acp_cli("qwen").executable)
    root = new_home()
    timings = root / "acp-timings.jsonl"
    try:
        with ScriptedModel() as model, bench_app(root, {"WARDIAN_QWEN": qwen,
                                                       "WARDIAN_ACP_TIMINGS": str(timings)}) as app, \
                AppClient(app.home) as client:
            (lead_agent, lead), = add_agents(client, "lead", 1)
            (_, floor_token), = add_agents(client, "rawmcp", 1)
            floor: MCPFloor = (app.home, floor_token, app.home.root / "logs" / "app.log")
            colds, floor_steps = _cold_starts(client, model, qwen, root, floor, starts)
            _start(client, model, "worker0")
            raw = RawAcp(qwen, model.agent("raw").base_url, root / "raw")
            raw.script = model.agent("raw")
            raw_mcp = RawAcp(qwen, model.agent("rawmcp").base_url, root / "rawmcp", floor)
            raw_mcp.script = model.agent("rawmcp")
            try:
                sender = Party(str(lead_agent["name"]), str(lead_agent["uuid"]))
                sides, marks = _interleaved(client, (lead, sender), model, raw, raw_mcp, n)
                answers = {"raw": raw.answers[WARM:], "raw_mcp": raw_mcp.answers[WARM:]}
            finally:
                raw.stop()
                raw_mcp.stop()
    finally:
        records = [json.loads(line) for line in timings.read_text(encoding="utf-8").splitlines()] \
            if timings.exists() else []
        shutil.rmtree(root, ignore_errors=True)
    _emit(sides, colds, floor_steps, answers)
    _emit_steps(marks, [r for r in records if r["kind"] == "turn" and r["agent"] == "worker0"][WARM:], sides)
    _emit_start_steps([r for r in records if r["kind"] == "start" and r["agent"].startswith("cold")])


CALLS: dict[str, tuple[int, int]] = {}
"""Each agent's `agent/start` called and answered (Unix ns), beside the app's record of its start."""


def _start(client: AppClient, model: Any, name: str) -> float:
    """Add and start a Qwen Code agent `name` of the app: the seconds `agent/start` took."""
    from wardian_harness.providers.acp_home import acp_launch

    client.call("agent/add", {"name": name, "provider": "qwen"})
    config, env = acp_launch("qwen", model.agent(name).base_url)
    called = time.time_ns()
    client.call("agent/start", {"agent": name, "config": config, "env": env}, timeout_s=300)
    CALLS[name] = (called, time.time_ns())
    return (CALLS[name][1] - called) / 1e9


def _cold_starts(client: AppClient, model: Any, qwen: str, root: Path, floor: MCPFloor,
                 starts: int) -> tuple[dict[str, list[float]], dict[str, list[float]]]:
    """`starts` rounds, each a fresh agent of the app started (then stopped), a raw floor's and an MCP floor's
    spawn to ready, after one start not counted (the first of a run reads the CLI's files from disk): the
    seconds of each, and the MCP floor's steps."""
    RawAcp(qwen, model.agent("coldwarm").base_url, root / "coldwarm").stop()
    out: dict[str, list[float]] = {"app": [], "raw": [], "raw_mcp": []}
    steps: dict[str, list[float]] = {}
    for i in range(starts):
        raw = RawAcp(qwen, model.agent(f"coldraw{i}").base_url, root / f"coldraw{i}")
        raw.stop()
        out["raw"].append(raw.cold)
        out["app"].append(_start(client, model, f"cold{i}"))
        client.call("agent/stop", {"agent": f"cold{i}"}, timeout_s=60)
        raw_mcp = RawAcp(qwen, model.agent(f"coldmcp{i}").base_url, root / f"coldmcp{i}", floor)
        raw_mcp.stop()
        out["raw_mcp"].append(raw_mcp.cold)
        for name, value in raw_mcp.steps.items():
            steps.setdefault(name, []).append(value)
    return out, steps


def _first_request(script: Any, before: int) -> Any:
    """The first turn request (not a side request) after the first `before` (a `RecordedRequest`)."""
    deadline = time.monotonic() + TIMEOUT_S
    while time.monotonic() < deadline:
        turn = [r for r in script.requests[before:] if r.answered_by != "side"]
        if turn:
            return turn[0]
        time.sleep(0.005)
    raise RuntimeError("no model request came")


def _conversation(body: dict[str, Any]) -> list[tuple[str, str]]:
    """A Chat Completions request's turns after the system prompt: each message's role and last text (the first
    user message also carries the agent's context, whose paths differ between homes, before the prompt)."""
    from wardian_harness.models.scripted_model.reading import content_texts

    return [(str(m.get("role")), (content_texts(m) or [""])[-1]) for m in body.get("messages") or []
            if isinstance(m, dict) and m.get("role") != "system"]


Sides = dict[str, list[float]]
LOAD: list[float] = []
"""The host's 1-minute load average when the interleaved turns began and when they ended."""


def _interleaved(client: AppClient, lead: tuple[str, Party], model: Any, raw: RawAcp, raw_mcp: RawAcp,
                 n: int) -> tuple[Sides, list[tuple[int, int, int]]]:
    """`n` counted turns of each side, in turn: the seconds to the first model request of each, and the app's
    marks (receipt returned, first model request, reply received; Unix ns) for its timing record. Each floor then
    prompts the app's envelope of the same task, answered with the same text (module docstring)."""
    from wardian_harness.models.scripted_model import Message

    token, sender = lead
    script = model.agent("worker0")
    sides: Sides = {"app": [], "raw": [], "raw_mcp": []}
    marks: list[tuple[int, int, int]] = []
    LOAD[:] = [round(os.getloadavg()[0], 1)]
    for i in range(n + WARM):
        text, answer = f"q{i}", f"answer {i}"
        script.add(Message(answer))
        before = len(script.requests)
        rid = followup(client, token, text)
        admitted = time.time_ns()
        wait_reply(client, token, rid)
        received = time.time_ns()
        first = _first_request(script, before)
        measured = {"app": (first.received_at_ns - admitted) / 1e9}
        prompt = task_text(TaskDelivery(request_id=rid, sender=sender, text=text))
        for side, floor in (("raw", raw), ("raw_mcp", raw_mcp)):
            floor.script.add(Message(answer))
            before = len(floor.script.requests)
            sent = floor.prompt(prompt)
            request = _first_request(floor.script, before)
            if _conversation(request.body) != _conversation(first.body):
                raise RuntimeError(f"turn {i}: the {side} floor's conversation is not the app's agent's")
            measured[side] = (request.received_at_ns - sent) / 1e9
        if i >= WARM:
            for side, value in measured.items():
                sides[side].append(value)
            marks.append((admitted, first.received_at_ns, received))
    LOAD.append(round(os.getloadavg()[0], 1))
    return sides, marks


MCPFloor = tuple[Any, str, Path]
"""The MCP floor's wardian MCP server: the app's home, the session it runs with, the app's log."""


class RawAcp:
    """A fresh `qwen --acp` spoken to directly: `initialize`, `session/new` (with wardian's MCP server when `mcp`
    is given, then its announcement awaited), then one `session/prompt` per turn."""

    def __init__(self, qwen: str, base_url: str, home: Path, mcp: MCPFloor | None = None) -> None:
        from wardian.providers.acp.permissions import mcp_server

        for sub in ("home", "tmp", "work"):
            (home / sub).mkdir(parents=True, exist_ok=True)
        env = {**plain_env(), "QWEN_HOME": str(home / "home"), "TMPDIR": str(home / "tmp"),
               "QWEN_USAGE_STATISTICS_ENABLED": "false", "OPENAI_BASE_URL": base_url,
               "OPENAI_MODEL": "scripted-model", "OPENAI_API_KEY": "sk-scripted-dummy"}
        env.pop("XDG_RUNTIME_DIR", None)
        self.script: Any = None
        self._ids = 0
        log = LogWatch(mcp[2]) if mcp is not None else None
        t0 = time.perf_counter()
        self._proc = subprocess.Popen([qwen, "--acp", "--approval-mode", "default"], env=env, cwd=home / "work",
                                      stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                      start_new_session=True)
        self.call("initialize", {"protocolVersion": 1, "clientInfo": {"name": "bench", "version": "1"},
                                 "clientCapabilities": {"fs": {"readTextFile": False, "writeTextFile": False},
                                                        "terminal": False}})
        initialized = time.perf_counter()
        servers = [mcp_server(mcp[0], mcp[1])] if mcp is not None else []
        self.session = str(self.call("session/new", {"cwd": str(home / "work"), "mcpServers": servers})["sessionId"])
        session = time.perf_counter()
        if log is not None:
            log.wait_for(ANNOUNCED, TIMEOUT_S)
        self.cold = time.perf_counter() - t0
        self.steps = {"spawn_to_initialized": initialized - t0, "initialized_to_session": session - initialized,
                      "session_to_mcp_announced": t0 + self.cold - session}
        self.answers: list[float] = []
        """Each prompt's write -> its answer (the stopReason) read, in seconds."""

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
        """Write one `session/prompt` and wait for its answer; the Unix ns just before the write."""
        sent = time.time_ns()
        t0 = time.perf_counter()
        self.call("session/prompt", {"sessionId": self.session, "prompt": [{"type": "text", "text": text}]})
        self.answers.append(time.perf_counter() - t0)
        return sent

    def stop(self) -> None:
        if self._proc.stdin is not None:
            self._proc.stdin.close()
        try:
            self._proc.wait(10)
        except subprocess.TimeoutExpired:
            os.killpg(self._proc.pid, 9)
            self._proc.wait(10)
        finally:
            if self._proc.stdout is not None:
                self._proc.stdout.close()


class LogWatch:
    """The app's log from now on: `wait_for` polls what was appended since (a bench aid; 1 ms steps)."""

    def __init__(self, path: Path) -> None:
        self._path = path
        self._offset = path.stat().st_size

    def wait_for(self, needle: str, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        seen = ""
        with open(self._path, encoding="utf-8") as f:
            f.seek(self._offset)
            while needle not in seen:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"no {needle!r} in {self._path} within {timeout_s:g} s")
                seen += f.read() or ""
                time.sleep(0.001)
            self._offset = f.tell()


def _answer(method: str) -> dict[str, Any]:
    if method == "craft/drainMidTurnQueue":
        return {"messages": [], "hasQueuedPrompt": False}
    return {"outcome": {"outcome": "cancelled"}}


def _emit(sides: Sides, colds: dict[str, list[float]], floor_steps: dict[str, list[float]], answers: Sides) -> None:
    ours, raw, raw_mcp = (pct(sides[k], 0.5) for k in ("app", "raw", "raw_mcp"))
    ours90, raw90, raw_mcp90 = (pct(sides[k], 0.9) for k in ("app", "raw", "raw_mcp"))
    paired = statistics.median(a / f for a, f in zip(sides["app"], sides["raw_mcp"], strict=True))
    emit("acp_admitted_to_first_model_request", **latency_fields([sides["app"]]), unit="ms",
         # Judged on the MCP floor: Qwen Code given an MCP server sends its first request later than without one, so
         # the raw floor is below what any client giving the agent wardian's tools can reach (docs/guide/acp.md).
         target="p50 <= 1.2 x acp_raw_mcp_prompt_to_first_model_request p50", met=ours / raw_mcp <= 1.2,
         ratio_to_floor=round(ours / raw, 3), floor_p50_ms=ms(raw),
         ratio_to_mcp_floor=round(ours / raw_mcp, 3), mcp_floor_p50_ms=ms(raw_mcp),
         p90_ms=ms(ours90), p90_ratio_to_floor=round(ours90 / raw90, 3),
         p90_ratio_to_mcp_floor=round(ours90 / raw_mcp90, 3), mcp_floor_p90_ms=ms(raw_mcp90),
         paired_ratio_to_mcp_floor_p50=round(paired, 3), load_1m=list(LOAD),
         how="task receipt returned -> the scripted model received the turn's first request, "
             f"real Qwen Code agent idle (the first {WARM} turns not counted)")
    emit("acp_raw_prompt_to_first_model_request", **latency_fields([sides["raw"]]), unit="ms",
         prompt_to_stop_reason_p50_ms=ms(pct(answers["raw"], 0.5)),
         how="a minimal ACP client writes session/prompt to its own qwen --acp (same binary and flags, no MCP "
             "server) -> the model received the turn's first request; the app's prompt text and answers, so the "
             "same conversation at each turn; interleaved with the app's tasks")
    emit("acp_raw_mcp_prompt_to_first_model_request", **latency_fields([sides["raw_mcp"]]), unit="ms",
         prompt_to_stop_reason_p50_ms=ms(pct(answers["raw_mcp"], 0.5)),
         how="the same minimal client, its qwen --acp given wardian's MCP server in session/new and ready once "
             "the server announced its tools; interleaved with the app's tasks")
    app, floor, mcp_floor = (statistics.median(colds[k]) for k in ("app", "raw", "raw_mcp"))
    emit("acp_cold_start_to_idle", value_ms=ms(app), unit="ms", target="<= 1.2 x acp_raw_mcp_cold_start",
         met=app / mcp_floor <= 1.2, ratio_to_floor=round(app / floor, 3), floor_ms=ms(floor),
         ratio_to_mcp_floor=round(app / mcp_floor, 3), mcp_floor_ms=ms(mcp_floor), n=len(colds["app"]),
         values_ms=[ms(v) for v in colds["app"]],
         how="agent/start called -> answered: qwen --acp started, initialize, session/new with wardian's MCP server, "
             "and that server's tools listed to the agent (session/announce); median of fresh agents' starts")
    emit("acp_raw_cold_start", value_ms=ms(floor), unit="ms", n=len(colds["raw"]),
         values_ms=[ms(v) for v in colds["raw"]],
         how="a minimal ACP client spawns qwen --acp -> initialize and session/new (no MCP server) answered")
    emit("acp_raw_mcp_cold_start", value_ms=ms(mcp_floor), unit="ms", n=len(colds["raw_mcp"]),
         **{f"{name}_ms": ms(statistics.median(values)) for name, values in floor_steps.items()},
         values_ms=[ms(v) for v in colds["raw_mcp"]],
         how="the same with wardian's MCP server in session/new -> the server announced its tools to the app")


STEPS = {
    "admitted_to_prompt_written": "task receipt returned -> the app is about to write session/prompt "
                                  "(WARDIAN_ACP_TIMINGS)",
    "prompt_written_to_first_model_request": "session/prompt written -> the scripted model received the turn's "
                                             "first request",
    "first_model_request_to_stop_reason_read": "the first model request -> the app read the prompt's stopReason",
    "stop_reason_read_to_reply_received": "stopReason read -> the requester's mailbox/receive returned the reply "
                                          "(capture, publish, wake, receive)",
}


def _emit_steps(marks: list[tuple[int, int, int]], records: list[dict[str, Any]], sides: Sides) -> None:
    """Each counted turn's steps, from the bench's readings and the app's record of the same turn (in order)."""
    if len(records) != len(marks):
        raise RuntimeError(f"{len(records)} timing records for {len(marks)} tasks")
    out: dict[str, list[float]] = {name: [] for name in STEPS}
    for (admitted, first, received), record in zip(marks, records, strict=True):
        out["admitted_to_prompt_written"].append((record["written_ns"] - admitted) / 1e9)
        out["prompt_written_to_first_model_request"].append((first - record["written_ns"]) / 1e9)
        out["first_model_request_to_stop_reason_read"].append((record["answered_ns"] - first) / 1e9)
        out["stop_reason_read_to_reply_received"].append((received - record["answered_ns"]) / 1e9)
    raw, raw_mcp = pct(sides["raw"], 0.5), pct(sides["raw_mcp"], 0.5)
    emit("acp_prompt_written_to_stop_reason_read",
         **latency_fields([[(r["answered_ns"] - r["written_ns"]) / 1e9 for r in records]]), unit="ms",
         how="the app writes session/prompt -> it read the stopReason (WARDIAN_ACP_TIMINGS); beside the floors' "
             "prompt_to_stop_reason_p50_ms")
    for name, values in out.items():
        emit(f"acp_{name}", **latency_fields([values]), unit="ms", how=STEPS[name],
             ratio_to_floor=round(pct(values, 0.5) / raw, 3), ratio_to_mcp_floor=round(pct(values, 0.5) / raw_mcp, 3))


def _emit_start_steps(records: list[dict[str, Any]]) -> None:
    """The app's cold starts split: agent/start called -> spawn -> initialize answered -> session answered -> MCP
    server announced -> agent/start answered."""
    if not records:
        return
    records = [{**r, "called_ns": CALLS[r["agent"]][0], "answered_ns": CALLS[r["agent"]][1]} for r in records]
    parts = {"called_to_spawn": ("called_ns", "spawn_ns"), "spawn_to_initialized": ("spawn_ns", "initialized_ns"),
             "initialized_to_session": ("initialized_ns", "session_ns"),
             "session_to_mcp_announced": ("session_ns", "mcp_ns"), "mcp_announced_to_answered": (
                 "mcp_ns", "answered_ns")}
    emit("acp_cold_start_steps", unit="ms", n=len(records),
         **{f"{name}_ms": ms(statistics.median((r[b] - r[a]) / 1e9 for r in records))
            for name, (a, b) in parts.items()},
         how="the app's timing record of its agents' starts (WARDIAN_ACP_TIMINGS): the median of each step")
