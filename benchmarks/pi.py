"""Pi dispatch and tools (opt-in: `--only pi`), real Pi (pinned, from npm) on the scripted model:

- admitted -> reply published for a one-message run, beside Pi's own RPC floor measured in the same run,
  interleaved: a raw client writes the same `prompt` to a `pi --mode rpc` process of the same binary and settings
  (its own agent directory, no extension) and reads its `agent_end`. Goal: p50 <= 1.2 x the floor.
  Beside it, where the app's time goes, from its opt-in timing record (`WARDIAN_PI_TIMINGS`,
  wardian.providers.pi.timings) and the scripted model's log: admitted -> prompt written, admitted -> first model
  request, Pi's part as the app sees it (prompt written -> `agent_end` read), and `agent_end` read -> reply received.
- each wardian tool's p50 through wardian's extension inside Pi (`tool_execution_start` -> `tool_execution_end`
  as Pi reports them, the extension's `wardian mcp serve` child doing the call, the confirmation answered at once
  by the raw client) beside the same call through `wardian mcp serve` from the MCP SDK's client, call by call.
  Goal: p50 <= 1.5 x the SDK's.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import shutil
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

from benchmarks.apps import add_agents, bench_app, console_script, new_home, plain_env
from benchmarks.codex import followup, wait_reply
from benchmarks.config import QUICK, Config
from benchmarks.figures import emit, latency_fields, ms, pct
from wardian.client import AppClient

TURN_S = 60.0
READY_S = 120.0
WARM = 2
MODEL = "scripted-model"
TOOLS: dict[str, dict[str, Any]] = {"list_agents": {}, "wait_agent": {"timeout_ms": 0},
                                    "receive_messages": {"limit": 1}, "send_message": {"target": "lead0",
                                                                                       "message": "bench"}}


def settings(base_url: str) -> list[str]:
    provider = {"baseUrl": base_url, "api": "openai-completions", "apiKey": "bench",
                "compat": {"supportsDeveloperRole": False, "supportsReasoningEffort": False},
                "models": [{"id": MODEL}]}
    return [f"models.providers.scripted={json.dumps(provider)}", 'defaultProvider="scripted"',
            f"defaultModel={json.dumps(MODEL)}"]


def find_pi() -> str:
    pinned = Path(__file__).resolve().parents[1] / "node_modules" / ".bin" / "pi"
    return os.environ.get("WARDIAN_PI") or str(pinned)


def bench_pi(cfg: Config) -> None:
    """Pi's dispatch beside its floor, then each tool through the extension beside the SDK client."""
    from wardian_harness.models.scripted_model import ScriptedModel

    n = 10 if cfg is QUICK else 40
    root = new_home()
    try:
        timings = root / "pi-timings.jsonl"
        with ScriptedModel() as model, bench_app(root, {"WARDIAN_PI": find_pi(),
                                                       "WARDIAN_PI_TIMINGS": str(timings)}) as app, \
                AppClient(app.home) as client:
            (_, lead), = add_agents(client, "lead", 1)
            client.call("agent/add", {"name": "worker0", "provider": "pi"})
            script = model.agent("worker0")
            client.call("agent/start", {"agent": "worker0", "config": settings(script.base_url)}, timeout_s=300)
            replied, floor, marks = _dispatch(client, model, lead, root, n)
            steps = _steps(marks, timings)
            tools = _tools(client, model, root, app.home.root, n)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    ratio = pct(replied, 0.5) / pct(floor, 0.5)
    emit("pi_admitted_to_reply_published", **latency_fields([replied]), unit="ms", ratio_to_floor=round(ratio, 3),
         floor_p50_ms=ms(pct(floor, 0.5)), target="p50 <= 1.2 x pi_raw_prompt_to_agent_end p50", met=ratio <= 1.2,
         how="followup call -> the requester receives reply done, one-message run of real Pi on the scripted model, "
             f"agent idle (the first {WARM} not counted)")
    for name, (values, how) in steps.items():
        emit(f"pi_{name}", **latency_fields([values]), unit="ms", floor_p50_ms=ms(pct(floor, 0.5)),
             ratio_to_floor=round(pct(values, 0.5) / pct(floor, 0.5), 3), how=how)
    emit("pi_raw_prompt_to_agent_end", **latency_fields([floor]), unit="ms",
         how="a raw client writes the same prompt to a pi --mode rpc process of the same binary and settings (its own "
             "agent dir, no extension) -> reads agent_end; interleaved with the app's tasks: Pi's own floor")
    for name, (pi_side, sdk_side) in tools.items():
        tool_ratio = pct(pi_side, 0.5) / pct(sdk_side, 0.5)
        emit(f"pi_tool_{name}", **latency_fields([pi_side]), unit="ms", sdk_p50_ms=ms(pct(sdk_side, 0.5)),
             ratio_to_sdk=round(tool_ratio, 3), target="p50 <= 1.5 x the MCP SDK client's", met=tool_ratio <= 1.5,
             how="Pi's tool_execution_start -> tool_execution_end of wardian's extension (its wardian mcp serve "
                 "child), beside ClientSession.call_tool through wardian mcp serve, call by call")


STEPS = {
    "admitted_to_prompt_written": "followup call -> the app is about to write the prompt (WARDIAN_PI_TIMINGS)",
    "admitted_to_first_model_request": "followup call -> the scripted model received the run's request (its log, "
                                       "ms resolution)",
    "prompt_written_to_agent_end_read": "the app writes the prompt -> the app read the run's agent_end: Pi's part "
                                        "as the app sees it (WARDIAN_PI_TIMINGS)",
    "agent_end_read_to_reply_received": "the app read agent_end -> the requester's mailbox/receive returned the "
                                        "reply (publish, wake, receive)",
}


def _steps(marks: list[tuple[int, int, int]], timings: Path) -> dict[str, tuple[list[float], str]]:
    """Each counted task's steps, from the bench's clock readings (followup called, model request, reply received)
    and the app's timing record of the same turn (the records are in turn order, the warm ones first)."""
    records = [json.loads(line) for line in timings.read_text(encoding="utf-8").splitlines()][WARM:]
    if len(records) != len(marks):
        raise RuntimeError(f"{len(records)} timing records for {len(marks)} tasks in {timings}")
    out: dict[str, list[float]] = {name: [] for name in STEPS}
    for (called, requested_ms, received), record in zip(marks, records, strict=True):
        out["admitted_to_prompt_written"].append((record["written_ns"] - called) / 1e9)
        out["admitted_to_first_model_request"].append((requested_ms * 1_000_000 - called) / 1e9)
        out["prompt_written_to_agent_end_read"].append((record["ended_ns"] - record["written_ns"]) / 1e9)
        out["agent_end_read_to_reply_received"].append((received - record["ended_ns"]) / 1e9)
    return {name: (values, STEPS[name]) for name, values in out.items()}


def _dispatch(client: AppClient, model: Any, lead: str, root: Path,
              n: int) -> tuple[list[float], list[float], list[tuple[int, int, int]]]:
    from wardian_harness.models.scripted_model import Message

    script, raw_script = model.agent("worker0"), model.agent("rawpi")
    agent_dir = root / "rawpi"
    _agent_dir(agent_dir, raw_script.base_url)
    raw = RawPi(agent_dir, {}, root)
    replied: list[float] = []
    floor: list[float] = []
    marks: list[tuple[int, int, int]] = []  # wall clock: followup called, model request (ms), reply received
    delivered: str | None = None
    try:
        for i in range(n + WARM):
            script.add(Message(f"answer {i}"))
            called = time.time_ns()
            t0 = time.perf_counter()
            rid = followup(client, lead, f"q{i}")
            wait_reply(client, lead, rid)
            app_side = time.perf_counter() - t0
            received = time.time_ns()
            delivered = delivered or _delivered(root, client)
            raw_script.add(Message(f"raw answer {i}"))
            raw_side = raw.prompt(delivered)
            if i >= WARM:
                replied.append(app_side)
                floor.append(raw_side)
                marks.append((called, script.requests[-1].received_at_ms, received))
    finally:
        raw.stop()
    return replied, floor, marks


def _delivered(root: Path, client: AppClient) -> str:
    """The prompt text the app wrote to its Pi (read from Pi's session file): the floor writes the same text, so
    both requests to the model have the same size."""
    worker = next(a for a in client.call("agent/list")["agents"] if a["name"] == "worker0")
    sessions = root / "agents" / str(worker["uuid"]) / "pi" / "sessions"
    for path in sessions.glob("*.jsonl"):
        for entry in map(json.loads, path.read_text(encoding="utf-8").splitlines()):
            message = entry.get("message") if isinstance(entry, dict) else None
            if isinstance(message, dict) and message.get("role") == "user":
                return "".join(p.get("text", "") for p in message.get("content") or [] if isinstance(p, dict))
    raise RuntimeError(f"no prompt in the session files of worker0 under {sessions}")


def _agent_dir(agent_dir: Path, base_url: str) -> None:
    provider = json.loads(settings(base_url)[0].split("=", 1)[1])
    agent_dir.mkdir(parents=True, mode=0o700)
    (agent_dir / "models.json").write_text(json.dumps({"providers": {"scripted": provider}}), encoding="utf-8")
    (agent_dir / "settings.json").write_text(json.dumps({"retry": {"enabled": False}, "defaultProvider": "scripted",
                                                         "defaultModel": MODEL}), encoding="utf-8")


def _tools(client: AppClient, model: Any, root: Path, home: Path, n: int) -> dict[str, tuple[list[float], list[float]]]:
    """Each tool through the extension inside a raw Pi acting as agent `tools` (its variables, as `wardian pi
    register` has a person start it), beside the SDK client with the same session, call by call."""
    import anyio

    from wardian.providers.pi import extension
    from wardian_harness.models.scripted_model import Message, ToolCall

    (_, token), = add_agents(client, "tools", 1)
    script = model.agent("rawtools")
    agent_dir = root / "rawtools"
    _agent_dir(agent_dir, script.base_url)
    variables = {"WARDIAN_HOME": str(home), "WARDIAN_SESSION_ID": token,
                 "WARDIAN_PI_MCP_COMMAND": json.dumps([console_script(), "mcp", "serve"])}
    raw = RawPi(agent_dir, variables, root, extension.PATH)
    out: dict[str, tuple[list[float], list[float]]] = {name: ([], []) for name in TOOLS}

    async def sdk_rounds() -> None:
        from mcp.client.session import ClientSession
        from mcp.client.stdio import StdioServerParameters, stdio_client

        params = StdioServerParameters(command=console_script(), args=["mcp", "serve"],
                                       env={**plain_env(), "WARDIAN_HOME": str(home), "WARDIAN_SESSION_ID": token})
        async with stdio_client(params) as (r, w), ClientSession(r, w) as session:
            await session.initialize()
            for i in range(n + WARM):
                for name, args in TOOLS.items():
                    script.add(ToolCall(name, args, namespace=None), Message("ok"))
                    pi_side = await anyio.to_thread.run_sync(raw.tool_turn, name)
                    t0 = time.perf_counter()
                    result = await session.call_tool(name, args)
                    sdk_side = time.perf_counter() - t0
                    if result.is_error:
                        raise RuntimeError(f"{name} failed through the SDK: {result.content}")
                    if i >= WARM:
                        out[name][0].append(pi_side)
                        out[name][1].append(sdk_side)

    try:
        anyio.run(sdk_rounds)
    finally:
        raw.stop()
    return out


class RawPi:
    """A `pi --mode rpc` process of the bench's own, written to and read directly (unbuffered, from the pipe)."""

    def __init__(self, agent_dir: Path, variables: dict[str, str], cwd: Path, ext: Path | None = None) -> None:
        env = {k: v for k, v in plain_env().items() if not k.startswith(("PI_", "WARDIAN_"))}
        env.update(variables, PI_CODING_AGENT_DIR=str(agent_dir), PI_OFFLINE="1", PI_TELEMETRY="0")
        argv = [find_pi(), "--mode", "rpc", "--no-session", *(["-e", str(ext)] if ext else ["--no-extensions"])]
        self._proc = subprocess.Popen(argv, env=env, cwd=cwd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                      stderr=subprocess.DEVNULL, start_new_session=True, bufsize=0)
        assert self._proc.stdin is not None
        assert self._proc.stdout is not None
        self._stdin, self._stdout = self._proc.stdin.fileno(), self._proc.stdout.fileno()
        self._buffer = b""
        self._count = 0
        self._write({"id": "ready", "type": "get_state"})
        self._until(lambda m: m.get("id") == "ready", READY_S)

    def _write(self, message: dict[str, Any]) -> None:
        view = memoryview(json.dumps(message).encode() + b"\n")
        while view:
            view = view[os.write(self._stdin, view):]

    def _until(self, done: Any, timeout_s: float) -> dict[str, Any]:
        """Read lines until one satisfies `done`, answering confirmations at once. Raises: TimeoutError."""
        deadline = time.monotonic() + timeout_s
        while True:
            while b"\n" not in self._buffer:
                left = deadline - time.monotonic()
                if left <= 0 or not select.select([self._stdout], [], [], left)[0]:
                    raise TimeoutError(f"Pi printed nothing awaited in {timeout_s:g} s")
                chunk = os.read(self._stdout, 1 << 16)
                if not chunk:
                    raise RuntimeError(f"the bench's Pi ended (exit {self._proc.poll()})")
                self._buffer += chunk
            raw, _, self._buffer = self._buffer.partition(b"\n")
            with contextlib.suppress(ValueError):
                line = json.loads(raw)
                if line.get("type") == "extension_ui_request" and line.get("method") == "confirm":
                    self._write({"type": "extension_ui_response", "id": line["id"], "confirmed": True})
                if done(line):
                    return dict(line)

    def prompt(self, text: str) -> float:
        """Write one prompt; the time until its run's `agent_end` is read."""
        self._count += 1
        t0 = time.perf_counter()
        self._write({"id": f"p{self._count}", "type": "prompt", "message": text})
        self._until(lambda m: m.get("type") == "agent_end", TURN_S)
        return time.perf_counter() - t0

    def tool_turn(self, name: str) -> float:
        """One run whose model calls `name` once: the time between Pi's start and end of that tool's execution."""
        self._count += 1
        self._write({"id": f"p{self._count}", "type": "prompt", "message": f"call {name}"})
        self._until(lambda m: m.get("type") == "tool_execution_start" and m.get("toolName") == name, TURN_S)
        t0 = time.perf_counter()
        end = self._until(lambda m: m.get("type") == "tool_execution_end" and m.get("toolName") == name, TURN_S)
        elapsed = time.perf_counter() - t0
        if end.get("isError"):
            raise RuntimeError(f"{name} failed inside Pi: {str(end.get('result'))[:300]}")
        self._until(lambda m: m.get("type") == "agent_end", TURN_S)
        return elapsed

    def stop(self) -> None:
        assert self._proc.stdin is not None
        self._proc.stdin.close()
        try:
            self._proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self._proc.pid, signal.SIGKILL)  # a bench child: its group (the MCP server with it)
            self._proc.wait(timeout=30)
        assert self._proc.stdout is not None
        self._proc.stdout.close()
