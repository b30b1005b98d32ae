"""`tools/call` round trips through the MCP SDK's client over stdio: `wardian mcp serve`'s `send_message` (durable)
and `list_agents` (writes nothing) next to the trivial server's `noop` and the app's own `message/send` without MCP,
call by call over two client sessions on one loop, so all four meet the same load and disk."""

from __future__ import annotations

import statistics
import sys
import time
from typing import Any

from benchmarks.apps import add_agents, console_script, fresh_app, plain_env
from benchmarks.config import TEXT, Config
from benchmarks.figures import emit, latency_fields, log, ms, pct
from benchmarks.mcp import TRIVIAL_MCP_SERVER
from benchmarks.store import fdatasync_p50
from wardian.client import AppClient

NAMES = ("trivial", "send_message", "list_agents", "app_send")


def bench_mcp_roundtrip(cfg: Config) -> None:
    """`tools/call` round trips through the SDK client: send_message next to the trivial tool, call by call."""
    import anyio

    with fresh_app() as app, AppClient(app.home) as client:
        (_, token), (target, _) = add_agents(client, "mcp", 2)
        env = plain_env()
        ours_env = {**env, "WARDIAN_HOME": str(app.home.root), "WARDIAN_SESSION_ID": token}
        send_args = {"target": target["uuid"], "message": TEXT}
        rounds: dict[str, list[list[float]]] = {name: [] for name in NAMES}
        disk = fdatasync_p50(app.home.root)  # the disk's state: it bounds the durable send

        async def run() -> None:
            await _call_rounds(cfg, client, {"session": token, **send_args}, send_args, env, ours_env, rounds)

        anyio.run(run)
    _emit_roundtrips(rounds, disk)


async def _call_rounds(cfg: Config, client: AppClient, direct_params: dict[str, Any], send_args: dict[str, Any],
                       env: dict[str, str], ours_env: dict[str, str], rounds: dict[str, list[list[float]]]) -> None:
    """Warm up, then `cfg.rounds` rounds of `cfg.mcp_calls` calls of each kind in turn, into `rounds`."""
    from mcp.client.session import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    trivial = StdioServerParameters(command=sys.executable, args=[str(TRIVIAL_MCP_SERVER)], env=env)
    ours = StdioServerParameters(command=console_script(), args=["mcp", "serve"], env=ours_env)
    async with stdio_client(trivial) as (tr, tw), ClientSession(tr, tw) as t, \
            stdio_client(ours) as (wr, ww), ClientSession(wr, ww) as w:
        await t.initialize()
        await w.initialize()

        async def one(name: str) -> float:
            t0 = time.perf_counter()
            if name == "trivial":
                result = await t.call_tool("noop", {})
            elif name == "app_send":  # the app's own durable send, no MCP: the floor of send_message
                client.call("message/send", direct_params)
                return time.perf_counter() - t0
            else:
                result = await w.call_tool(name, send_args if name == "send_message" else {})
            elapsed = time.perf_counter() - t0
            if result.is_error:
                raise RuntimeError(f"{name} failed: {result.content}")
            return elapsed

        for _ in range(max(50, cfg.mcp_calls // 10)):  # warm-up: SDK lazy paths, pooled connection
            for name in NAMES:
                await one(name)
        for _ in range(cfg.rounds):
            samples: dict[str, list[float]] = {name: [] for name in NAMES}
            for _ in range(cfg.mcp_calls):
                for name in NAMES:  # call by call, so all four meet the same load and disk
                    samples[name].append(await one(name))
            for name in NAMES:
                rounds[name].append(samples[name])


def _emit_roundtrips(rounds: dict[str, list[list[float]]], disk: float) -> None:
    def ratio(name: str) -> float:
        return statistics.median(pct(r, 0.5) / pct(t, 0.5) for r, t in zip(rounds[name], rounds["trivial"],
                                                                             strict=True))

    send_ratio, list_ratio = ratio("send_message"), ratio("list_agents")
    emit("mcp_roundtrip_trivial_tool", **latency_fields(rounds["trivial"]), unit="ms",
         tool="noop of scripts/trivial_mcp_server.py", client="mcp ClientSession over stdio")
    emit("mcp_roundtrip_send_message", **latency_fields(rounds["send_message"]), unit="ms",
         ratio_to_trivial_p50=round(send_ratio, 3), target="ratio_to_trivial_p50 <= 1.3", met=send_ratio <= 1.3,
         client="mcp ClientSession over stdio", disk_fdatasync_p50_ms=ms(disk),
         note="includes the app's durable commit: see app_roundtrip_message_send")
    emit("mcp_roundtrip_list_agents", **latency_fields(rounds["list_agents"]), unit="ms",
         ratio_to_trivial_p50=round(list_ratio, 3), client="mcp ClientSession over stdio",
         note="a tool that writes nothing: the MCP layer's own cost")
    emit("app_roundtrip_message_send", **latency_fields(rounds["app_send"]), unit="ms",
         client="AppClient, one persistent connection", disk_fdatasync_p50_ms=ms(disk),
         note="the same send without MCP, measured alongside")
    median = {name: statistics.median(pct(r, 0.5) for r in rounds[name]) for name in NAMES}
    log(f"mcp round trip p50: send_message {ms(median['send_message'])} ms, trivial tool "
        f"{ms(median['trivial'])} ms, ratio {send_ratio:.3f} (target <= 1.3); list_agents "
        f"{ms(median['list_agents'])} ms, ratio {list_ratio:.3f}; the app's own message/send "
        f"{ms(median['app_send'])} ms")
