"""The MCP server's start (docs/guide/mcp-server.md): `wardian mcp serve` (the console script, as Codex launches it)
from spawn to its `initialize` answer, and to the answer of its first `tools/call`, each next to a trivial server on the
SDK's own stdio transport (`scripts/trivial_mcp_server.py`), spawns alternating so both meet the same background
load."""

from __future__ import annotations

import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import orjson

from benchmarks.apps import add_agents, console_script, fresh_app, plain_env
from benchmarks.config import REPO, Config
from benchmarks.figures import emit, latency_fields, log, ms, pct
from wardian.client import AppClient

TRIVIAL_MCP_SERVER = REPO / "scripts" / "trivial_mcp_server.py"
# What the SDK's own client sends first (mcp 2.3.0 `ClientSession.initialize`, LATEST_HANDSHAKE_VERSION).
MCP_INITIALIZE = orjson.dumps({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
    "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "bench", "version": "0"}}}) + b"\n"


@contextmanager
def _session(argv: list[str], env: dict[str, str], last: str) -> Iterator[tuple[subprocess.Popen[bytes], float, bytes]]:
    """One host's session with `argv`: spawned and sent `initialize`; yields the process, when it was spawned and its
    first answer line. On leaving, stdin is closed and the server must exit 0 (`last` names the final request)."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(argv, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    assert proc.stdin is not None
    assert proc.stdout is not None
    try:
        proc.stdin.write(MCP_INITIALIZE)
        proc.stdin.flush()
        yield proc, t0, proc.stdout.readline()
        proc.stdin.close()
        if proc.wait(timeout=30) != 0:
            raise RuntimeError(f"{argv} exited {proc.returncode} after {last}")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
        proc.stdout.close()


def _spawn_to_initialize(argv: list[str], env: dict[str, str]) -> float:
    """Seconds from spawning `argv` to reading its answer to `initialize` (then it is told to exit)."""
    with _session(argv, env, "initialize") as (_, t0, line):
        elapsed = time.perf_counter() - t0
        answer = orjson.loads(line)
        if "result" not in answer or answer.get("id") != 0:
            raise RuntimeError(f"{argv} answered initialize with {line[:300]!r}")
    return elapsed


def bench_mcp_startup(cfg: Config) -> None:
    """spawn -> `initialize` result: `wardian mcp serve` next to the trivial SDK server, alternating."""
    env = plain_env()
    wardian = [console_script(), "mcp", "serve"]
    trivial = [sys.executable, str(TRIVIAL_MCP_SERVER)]
    for argv in (wardian, trivial):
        _spawn_to_initialize(argv, env)  # warm the page cache
    ours: list[float] = []
    theirs: list[float] = []
    for _ in range(cfg.mcp_spawns):
        ours.append(_spawn_to_initialize(wardian, env))
        theirs.append(_spawn_to_initialize(trivial, env))
    ratio = statistics.median(ours) / statistics.median(theirs)
    emit("mcp_startup_trivial_sdk_server", value=ms(statistics.median(theirs)),
         range=[ms(min(theirs)), ms(max(theirs))], n=len(theirs), unit="ms",
         command=f"python {TRIVIAL_MCP_SERVER.relative_to(TRIVIAL_MCP_SERVER.parents[1])}")
    emit("mcp_startup", value=ms(statistics.median(ours)), range=[ms(min(ours)), ms(max(ours))], n=len(ours),
         unit="ms", command="wardian mcp serve", ratio_to_trivial=round(ratio, 3), target="ratio <= 0.5",
         met=ratio <= 0.5)
    log(f"mcp startup: wardian {ms(statistics.median(ours))} ms, trivial SDK server "
        f"{ms(statistics.median(theirs))} ms, ratio {ratio:.3f} (target <= 0.5)")


_INITIALIZED = orjson.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}) + b"\n"


def _first_call(argv: list[str], env: dict[str, str], tool: str, arguments: dict[str, Any]) -> float:
    """One host's session: spawn, `initialize`, its answer, `notifications/initialized` and the call, timed from the
    spawn to the call's answer; then stdin is closed and the server must exit 0."""
    call = orjson.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                         "params": {"name": tool, "arguments": arguments}}) + b"\n"
    with _session(argv, env, tool) as (proc, t0, first):
        assert proc.stdin is not None
        assert proc.stdout is not None
        if orjson.loads(first).get("id") != 0:
            raise RuntimeError(f"{argv} did not answer initialize first")
        proc.stdin.write(_INITIALIZED + call)
        proc.stdin.flush()
        line = proc.stdout.readline()
        elapsed = time.perf_counter() - t0
        answer = orjson.loads(line)
        if answer.get("id") != 1 or "result" not in answer or answer["result"].get("isError"):
            raise RuntimeError(f"{argv} answered {tool} with {line[:300]!r}")
    return elapsed


def bench_mcp_first_wait(cfg: Config) -> None:
    """spawn -> answer of the first `tools/call`: `wardian mcp serve`'s first `wait_agent(timeout_ms=0)` and first
    `receive_messages(timeout_ms=0)` next to the trivial SDK server's first `noop` and, for reference, its own first
    `list_agents` (a call that never waited for the SDK), spawns alternating (`_first_call`)."""
    with fresh_app() as app, AppClient(app.home) as client:
        (_, token), = add_agents(client, "first", 1)
        env = plain_env()
        ours_env = {**env, "WARDIAN_HOME": str(app.home.root), "WARDIAN_SESSION_ID": token}
        wardian = [console_script(), "mcp", "serve"]
        kinds: dict[str, tuple[list[str], dict[str, str], str, dict[str, Any]]] = {
            "trivial": ([sys.executable, str(TRIVIAL_MCP_SERVER)], env, "noop", {}),
            "wait_agent": (wardian, ours_env, "wait_agent", {"timeout_ms": 0}),
            "receive_messages": (wardian, ours_env, "receive_messages", {"timeout_ms": 0}),
            "list_agents": (wardian, ours_env, "list_agents", {}),
        }
        for kind in kinds.values():
            _first_call(*kind)  # warm the page cache
        samples: dict[str, list[float]] = {name: [] for name in kinds}
        for _ in range(cfg.mcp_spawns):
            for name, kind in kinds.items():  # alternating, so all of them meet the same background load
                samples[name].append(_first_call(*kind))
    _emit_first_calls(samples)


def _emit_first_calls(samples: dict[str, list[float]]) -> None:
    trivial_p50 = pct(samples["trivial"], 0.5)
    emit("mcp_first_call_trivial_sdk_server", **latency_fields([samples["trivial"]]), unit="ms",
         how="spawn -> answer of the first tools/call noop",
         command=f"python {TRIVIAL_MCP_SERVER.relative_to(TRIVIAL_MCP_SERVER.parents[1])}")
    for name in ("wait_agent", "receive_messages"):
        p50 = pct(samples[name], 0.5)
        emit(f"mcp_first_{name}", **latency_fields([samples[name]]), unit="ms",
             how=f"spawn -> answer of the first tools/call {name} (timeout_ms 0)", command="wardian mcp serve",
             ratio_to_trivial_p50=round(p50 / trivial_p50, 3), target="p50_ms <= 300", met=p50 * 1000 <= 300)
    emit("mcp_first_list_agents", **latency_fields([samples["list_agents"]]), unit="ms",
         how="spawn -> answer of the first tools/call list_agents", command="wardian mcp serve",
         ratio_to_trivial_p50=round(pct(samples["list_agents"], 0.5) / trivial_p50, 3),
         note="reference: the first call of a tool that never waits")
    log("mcp first call p50: " + ", ".join(f"{name} {ms(pct(times, 0.5))} ms" for name, times in samples.items()))
