"""Codex dispatch (opt-in: `--only codex`): task admitted -> `turn/start` written, on a fake app-server on stdio
that timestamps each line it reads, and admitted -> reply published for a one-message turn of the real Codex on the
scripted model."""

from __future__ import annotations

import shutil
import sys
import tempfile
import time
from pathlib import Path

import orjson

from benchmarks.apps import add_agents, bench_app, new_home
from benchmarks.config import QUICK, REPO, Config
from benchmarks.figures import emit, latency_fields, ms, pct
from benchmarks.store import fdatasync_p50
from wardian.client import AppClient


def bench_codex_dispatch(cfg: Config) -> None:
    """Task admitted -> turn/start written (a fake app-server on stdio that timestamps each line it reads), and
    admitted -> reply published for a one-message turn of the real Codex on the scripted model."""
    fake = REPO / "tests" / "providers" / "codex" / "fake_codex.py"
    n = 30 if cfg is QUICK else 200
    root = new_home()
    wrapper = root / "codex"
    wrapper.write_text(f"#!/bin/sh\nexec {sys.executable} {fake} \"$@\"\n", encoding="utf-8")
    wrapper.chmod(0o755)
    log_path = root / "fake.jsonl"
    try:
        with bench_app(root, {"WARDIAN_CODEX": str(wrapper), "FAKE_CODEX_LOG": str(log_path)}) as app, \
                AppClient(app.home) as client:
            (_, lead), _ = add_agents(client, "lead", 1)[0], add_agents(client, "worker", 1)
            client.call("agent/start", {"agent": "worker0"}, timeout_s=60)
            from_call, from_receipt = _turn_start_times(client, lead, log_path, n)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    # Admitted = the receipt is back (the task is committed); the call's own commit is reported beside it.
    emit("codex_admitted_to_turn_start_written", **latency_fields([from_receipt]), unit="ms",
         target="p50_ms <= 5, p99_ms <= 20",
         met=pct(from_receipt, 0.5) <= 0.005 and pct(from_receipt, 0.99) <= 0.020,
         how="receipt returned (task committed) -> the app-server read turn/start (fake app-server on stdio)",
         from_call_p50_ms=ms(pct(from_call, 0.5)), from_call_p99_ms=ms(pct(from_call, 0.99)),
         disk_fdatasync_p50_ms=ms(fdatasync_p50(Path(tempfile.gettempdir()))))
    bench_codex_reply(cfg)


def _turn_start_times(client: AppClient, lead: str, log_path: Path, n: int) -> tuple[list[float], list[float]]:
    """`n` followups, each timed to the fake app-server's read of its turn/start: from the call, from the receipt."""
    from_call: list[float] = []
    from_receipt: list[float] = []
    seen = 0
    for i in range(n):
        t0 = time.time_ns()
        receipt = client.call("task/followup", {"session": lead, "target": "worker0", "message": f"t{i}"})
        t1 = time.time_ns()
        rid = receipt["request_id"]
        while True:
            lines = log_path.read_text(encoding="utf-8").splitlines()[seen:]
            hit = [orjson.loads(x) for x in lines if rid in x and '"turn/start"' in x]
            if hit:
                seen += len(lines)
                break
            time.sleep(0.0005)
        from_call.append((hit[0]["_received_ns"] - t0) / 1e9)
        from_receipt.append((hit[0]["_received_ns"] - t1) / 1e9)
    return from_call, from_receipt


def followup(client: AppClient, lead: str, message: str) -> str:
    """`task/followup` from the lead to worker0; returns the request id once the receipt is back."""
    return str(client.call("task/followup", {"session": lead, "target": "worker0", "message": message})["request_id"])


def wait_reply(client: AppClient, lead: str, rid: str) -> None:
    """Receive (and acknowledge) the lead's mailbox until the reply to `rid` arrives."""
    while True:
        page = client.call_wait("mailbox/receive", {"session": lead, "timeout_ms": 30000}, 30000)
        if page["records"]:
            client.call("mailbox/receive", {"session": lead, "ack_cursor": page["cursor"], "limit": 1})
        if any(r["request_id"] == rid and r["kind"] == "reply" for r in page["records"]):
            return


def bench_codex_reply(cfg: Config, **tags: str) -> None:
    """Admitted -> reply published for a one-message turn of the real Codex on the scripted model; `tags` are added
    to the line (`run`: the subject whose run it is part of)."""
    from wardian_harness.models.scripted_model import Message, ScriptedModel
    from wardian_harness.providers.codex_home import ScriptedProvider, codex_overrides
    from wardian_harness.providers.codex_install import find_codex

    n = 5 if cfg is QUICK else 30
    samples: list[float] = []
    root = new_home()
    try:
        with ScriptedModel() as model, bench_app(root, {"WARDIAN_CODEX": str(find_codex()),
                                                       "WARDIAN_SCRIPTED_MODEL_KEY": "bench"}) as app, \
                AppClient(app.home) as client:
            (_, lead), _ = add_agents(client, "lead", 1)[0], add_agents(client, "worker", 1)
            script = model.agent("worker0")
            overrides = codex_overrides(ScriptedProvider(base_url=script.base_url))
            client.call("agent/start", {"agent": "worker0", "config": overrides}, timeout_s=300)
            for i in range(n):
                script.add(Message(f"answer {i}", phase="final_answer"))
                t0 = time.perf_counter()
                wait_reply(client, lead, followup(client, lead, f"q{i}"))
                samples.append(time.perf_counter() - t0)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    emit("codex_admitted_to_reply_published", **latency_fields([samples]), unit="ms",
         how="followup call -> the requester receives reply done, one-message turn of real Codex on the scripted model",
         **tags)
